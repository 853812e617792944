"""A tooltrain run as PTR's backbone (``tooltrain eval recommend ... --llm RUN_DIR``, ``ptr.llm=RUN_DIR``): the
run's merged model, tokenizer and chat format, read by ``train.engine.run_folder.RunFolder`` as ``tooltrain eval
run`` and ``tooltrain export`` read a run folder, then wrapped in ``train.teacher.backends.HFBackend`` (which takes an
already-loaded model and tokenizer), so stage 2 asks it D.1 and D.2 greedily like any HF teacher.

``train.papers.ptr.evaluate`` takes it as its ``load_run`` argument: the evaluation itself never imports the engine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def load_run_backend(run_dir: Path) -> Any:
    """RUN_DIR -> an ``HFBackend`` over the run's merged model; ValueError when RUN_DIR is not a usable run."""
    from train.engine.run_folder import RunFolder, RunFolderError
    from train.teacher.backends import HFBackend

    run = RunFolder(run_dir)
    try:
        run.check()
    except RunFolderError as err:
        raise ValueError(f"--llm {run_dir}: {err}") from None
    model, tokenizer = run.load(run.dtype())
    return HFBackend(run.label, run.chat_format_name, model=model, tokenizer_object=tokenizer)


__all__ = ["load_run_backend"]
