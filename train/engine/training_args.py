"""The one mapping from a run's config to the HF Trainer's arguments.

``run(cfg)`` builds ``transformers.TrainingArguments`` from it and ``tooltrain bench train`` builds
trl's ``SFTConfig`` (a subclass) from the same fields, so the optimizer, schedule, batch and seed a
benchmark measures are the ones a run trains with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from train.base.errors import choice


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
        "torch_compile": bool(cfg.train.torch_compile),
        **ddp_arguments(cfg),
    }
    return {**fields, **overrides}


def ddp_arguments(cfg: Any) -> dict[str, Any]:
    """What DDP needs to know of the model (no effect under single, ZeRO or FSDP).

    Left unset, the Trainer asks DDP to find unused parameters for any model that is not a bare ``PreTrainedModel``,
    a peft model included: DDP then walks the whole autograd graph after every forward pass to mark what it will not
    reach (torch's DDP notes: "this traversal has overhead"). A LoRA model uses every adapter it trains on every
    step (the targets are attention and dense MLP projections; an MoE's routed experts are fused parameters LoRA does
    not target), so there is nothing to find. Full fine-tuning keeps the Trainer's choice: an MoE's unrouted experts do
    go unused."""
    if choice(cfg.peft.kind) != "lora":
        return {}
    return {"ddp_find_unused_parameters": False}
