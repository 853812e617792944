"""The one mapping from a run's config to the HF Trainer's arguments.

``run(cfg)`` builds ``transformers.TrainingArguments`` from it and ``tooltrain bench train`` builds
trl's ``SFTConfig`` (a subclass) from the same fields, so the optimizer, schedule, batch and seed a
benchmark measures are the ones a run trains with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def training_arguments(cfg: Any, out: Path, grad_accum: int, bf16: bool, **overrides: Any) -> dict[str, Any]:
    """Keyword arguments for ``TrainingArguments``/``SFTConfig``: what ``cfg.train`` and ``cfg.optim``
    decide, then ``overrides`` (a caller's own fields: saving, logging targets, the strategy's)."""
    fields = {
        "output_dir": str(out),
        "per_device_train_batch_size": cfg.train.micro_batch_size,
        "gradient_accumulation_steps": grad_accum,
        "num_train_epochs": cfg.train.epochs,
        "max_steps": cfg.train.max_steps,
        "learning_rate": cfg.optim.lr,
        "weight_decay": cfg.optim.weight_decay,
        "adam_beta1": cfg.optim.betas[0],
        "adam_beta2": cfg.optim.betas[1],
        "adam_epsilon": cfg.optim.eps,
        "optim": cfg.optim.name,
        "lr_scheduler_type": cfg.optim.scheduler,
        "warmup_steps": float(cfg.optim.warmup_ratio),  # a float in [0, 1) is a ratio of total steps
        "max_grad_norm": cfg.optim.max_grad_norm,
        "logging_steps": cfg.train.logging_steps,
        "seed": cfg.seed,
        "data_seed": cfg.seed,
        "bf16": bf16,
        "dataloader_num_workers": cfg.train.dataloader_workers,
    }
    return {**fields, **overrides}
