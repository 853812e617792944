"""PTR's evaluation-only job (``PAPERS["ptr"].job``): what ``tooltrain train recipe=ptr*`` runs instead of training.

``tooltrain eval recommend`` from the composed ``ptr`` node: Table 1's layout printed, ``OUTPUT_DIR/metrics.json``
written; the result says status "evaluated" (no step, no model), so the entry prints no training summary.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from train.base.errors import ConfigError


def evaluate_recommendation(cfg: Any) -> Any:
    """The ptr recipes' run: the recommendation evaluation of ``cfg.ptr`` (a ``train.engine.run.RunResult``)."""
    from train.data.dataset import resolve_input
    from train.engine import distributed
    from train.engine.run import RunResult
    from train.engine.tracking import rank_zero_print
    from train.papers.ptr.backbone import load_run_backend
    from train.papers.ptr.data import DataError
    from train.papers.ptr.evaluate import Settings, evaluate, format_table

    world = distributed.World.from_env()
    out = Path(cfg.output_dir)
    ptr = OmegaConf.to_container(cfg.ptr, resolve=True)
    llm = str(ptr["llm"])
    settings = Settings(
        datasets=list(ptr["datasets"]), root=resolve_input(ptr["data"]), retriever=ptr["retriever"],
        embedder=ptr["embedder"], stages=tuple(ptr["stages"]), protocol=ptr["protocol"], seeds=ptr["seeds"],
        llm=llm if llm in ("offline", "http", "hf") else str(resolve_input(llm)),
        llm_settings=dict(ptr.get("llm_settings") or {}), clean_queries=bool(ptr.get("clean_queries", False)),
        limit=ptr.get("limit"),
    )  # fmt: skip
    try:
        results = evaluate(settings, load_run=load_run_backend)
    except (DataError, ValueError) as err:
        raise ConfigError(f"ptr: {err}") from None
    summary: dict[str, Any] = {"status": "evaluated", "recommend": [result.to_dict() for result in results]}
    if world.is_main:
        out.mkdir(parents=True, exist_ok=True)
        temporary = out / "metrics.json.tmp"
        temporary.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        temporary.replace(out / "metrics.json")
        rank_zero_print(world, format_table(settings, results))
    return RunResult(output_dir=out, status="evaluated", global_step=0, losses=[], adapter_dir=None, summary=summary)
