"""Trackers and rank-0 printing, decided in one place.

The Trainer's own integrations do the logging (``report_to``); this module picks them from the
``tracking`` config group and points them at the run directory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from train.base.errors import choice


def report_to(tracking_cfg: Any, run_dir: Path) -> list[str]:
    backend = choice(tracking_cfg.backend)
    if backend == "none":
        return []
    if backend == "tensorboard":
        # transformers 5 removed TrainingArguments(logging_dir=...); the integration reads this variable.
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(run_dir / "tensorboard")
        return ["tensorboard"]
    if backend == "wandb":
        os.environ.setdefault("WANDB_PROJECT", tracking_cfg.project)
        os.environ.setdefault("WANDB_DIR", str(run_dir))
        return ["wandb"]
    raise ValueError(f"unknown tracking backend {backend!r}; valid: none, tensorboard, wandb")


def rank_zero_print(world: Any, message: str) -> None:
    if world.is_main:
        print(message, flush=True)
