"""A tooltrain run as PTR's backbone (``tooltrain eval recommend ... --llm RUN_DIR``, ``ptr.llm=RUN_DIR``): the
run's trained weights (``final/`` or its newest complete checkpoint, an adapter merged into the base model the run
names), its tokenizer and its chat format, loaded as ``tooltrain eval run`` loads a run directory, then wrapped in
``train.teacher.backends.HFBackend`` (which takes an already-loaded model and tokenizer), so stage 2 asks it D.1 and
D.2 greedily like any HF teacher.

It lives here, in the run layer, because a run folder is a training run's artefact (``train.engine.export``);
``train.papers.ptr.evaluate`` (below it) takes it as its ``load_run`` argument.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def load_run_backend(run_dir: Path) -> Any:
    """RUN_DIR -> an ``HFBackend`` over the run's merged model; ValueError when RUN_DIR is not a usable run."""
    import torch

    from train.engine.export import ExportError, find_trained_weights, load_run_config, merged_model, run_tokenizer
    from train.engine.model import resolve_dtype
    from train.teacher.backends import HFBackend

    try:
        cfg = load_run_config(run_dir)
        weights = find_trained_weights(run_dir)
    except ExportError as err:
        raise ValueError(f"--llm {run_dir}: {err}") from None
    tokenizer = run_tokenizer(cfg, weights)
    dtype = resolve_dtype(str(cfg.model.dtype), torch.cuda.is_available())
    model, _ = merged_model(cfg, weights, len(tokenizer), dtype)
    return HFBackend(f"{run_dir} ({weights.name})", str(cfg.model.chat_format), model=model, tokenizer_object=tokenizer)


__all__ = ["load_run_backend"]
