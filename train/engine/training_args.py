"""The one mapping from a run's config to the HF Trainer's arguments, and the compose-time checks of the knobs that
reach the Trainer and peft (eval loss, early stopping, NEFTune, QLoRA, ``train.extra_args`` / ``peft.extra_args``).

``run(cfg)`` builds ``transformers.TrainingArguments`` from it and ``tooltrain bench train`` builds
trl's ``SFTConfig`` (a subclass) from the same fields, so the optimizer, schedule, batch and seed a
benchmark measures are the ones a run trains with.
"""

from __future__ import annotations

import difflib
import inspect
from pathlib import Path
from typing import Any

from train.base.errors import choice

# TrainingArguments fields tooltrain sets itself, with the key that sets them: an extra_args entry naming one would
# silently fight the config (or be overwritten by it), so it is refused with the key to use instead.
TRAINER_OWNED = {
    "output_dir": "output_dir",
    "per_device_train_batch_size": "train.micro_batch_size",
    "per_device_eval_batch_size": "train.micro_batch_size",
    "gradient_accumulation_steps": "train.global_batch_size",
    "num_train_epochs": "train.epochs",
    "max_steps": "train.max_steps",
    "learning_rate": "optim.lr",
    "weight_decay": "optim.weight_decay",
    "adam_beta1": "optim.betas",
    "adam_beta2": "optim.betas",
    "adam_epsilon": "optim.eps",
    "optim": "optim.name",
    "lr_scheduler_type": "optim.scheduler",
    "warmup_steps": "optim.warmup_ratio",
    "max_grad_norm": "optim.max_grad_norm",
    "logging_steps": "train.logging_steps",
    "seed": "seed",
    "data_seed": "seed",
    "bf16": "model.dtype",
    "fp16": "model.dtype",
    "dataloader_num_workers": "train.dataloader_workers",
    "torch_compile": "train.torch_compile",
    "ddp_find_unused_parameters": "peft.kind",
    "eval_strategy": "train.eval_strategy",
    "eval_steps": "train.eval_steps",
    "neftune_noise_alpha": "train.neftune_noise_alpha",
    "save_strategy": "train.save_steps",
    "save_steps": "train.save_steps",
    "save_total_limit": "train.save_total_limit",
    "report_to": "tracking",
    "run_name": "tracking.run_name",
    "deepspeed": "distributed.strategy",
    "fsdp": "distributed.strategy",
    "fsdp_config": "distributed.strategy",
    "gradient_checkpointing": "distributed.gradient_checkpointing",
    "metric_for_best_model": "train.early_stopping.metric",
    "greater_is_better": "train.early_stopping.greater_is_better",
    "remove_unused_columns": "(tooltrain's rows need their own columns)",
    "prediction_loss_only": "train.eval_strategy",
}
# LoraConfig fields tooltrain sets itself.
LORA_OWNED = {
    "r": "peft.r",
    "lora_alpha": "peft.alpha",
    "lora_dropout": "peft.dropout",
    "target_modules": "peft.target_modules",
    "use_dora": "peft.use_dora",
    "task_type": "(tooltrain trains causal LMs: CAUSAL_LM)",
}
QUANTIZE = ("4bit", "8bit")
SHARDED = ("zero3", "zero3_offload", "fsdp2")


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
        **eval_arguments(cfg),
        **dict(cfg.train.get("extra_args") or {}),  # checked when composed (extra_args_problems)
    }
    alpha = cfg.train.get("neftune_noise_alpha")
    if alpha is not None:
        fields["neftune_noise_alpha"] = float(alpha)
    return {**fields, **overrides}


def eval_arguments(cfg: Any) -> dict[str, Any]:
    """The eval loss on the held-out split (``train.eval_strategy``): only the loss is kept (``prediction_loss_only``:
    never the logits of a whole eval set), batched as training is."""
    strategy = choice(cfg.train.get("eval_strategy") or "no")
    if strategy == "no":
        return {}
    fields = {
        "eval_strategy": strategy,
        "per_device_eval_batch_size": cfg.train.micro_batch_size,
        "prediction_loss_only": True,
    }
    if strategy == "steps":
        fields["eval_steps"] = cfg.train.eval_steps
    return fields


def lora_arguments(peft_cfg: Any, targets: list[str]) -> dict[str, Any]:
    """Keyword arguments for peft's ``LoraConfig``: what ``peft`` decides, then ``peft.extra_args`` (checked when
    composed)."""
    return {
        "r": peft_cfg.r,
        "lora_alpha": peft_cfg.alpha,
        "lora_dropout": peft_cfg.dropout,
        "target_modules": targets,
        "task_type": "CAUSAL_LM",
        "use_dora": bool(peft_cfg.get("use_dora", False)),
        **dict(peft_cfg.get("extra_args") or {}),
    }


def knob_problems(cfg: Any) -> list[str]:
    """Compose-time problems of the knobs that reach the Trainer and peft."""
    train, peft = cfg.train, cfg.peft
    problems = []
    if choice(train.eval_strategy) != "no" and cfg.data.eval_fraction <= 0:
        problems.append(
            f"train.eval_strategy={choice(train.eval_strategy)} computes the eval loss on the held-out split, but "
            "data.eval_fraction is 0; set data.eval_fraction > 0"
        )
    stop = train.early_stopping
    if stop.metric is not None:
        if str(stop.greater_is_better).lower() not in ("auto", "true", "false"):
            problems.append(
                f"train.early_stopping.greater_is_better={stop.greater_is_better}; valid: auto, true, false"
            )
        if stop.metric == "eval_loss" and choice(train.eval_strategy) == "no":
            problems.append("train.early_stopping.metric=eval_loss needs train.eval_strategy=steps or epoch")
    if peft.quantize is not None:
        problems += quantize_problems(cfg)
    if train.extra_args:  # transformers and peft are imported only when there is something to check
        problems += extra_args_problems("train.extra_args", dict(train.extra_args), trainer_fields(), TRAINER_OWNED)
    if peft.extra_args:
        problems += extra_args_problems("peft.extra_args", dict(peft.extra_args), lora_fields(), LORA_OWNED)
    return problems


def quantize_problems(cfg: Any) -> list[str]:
    """QLoRA's compose-time rules (a machine without CUDA is refused where the model loads: model.quantization)."""
    where = f"peft.quantize={cfg.peft.quantize}"
    if cfg.peft.quantize not in QUANTIZE:
        return [f"{where}; valid: {', '.join(QUANTIZE)} or null"]
    problems = []
    if choice(cfg.peft.kind) != "lora":
        problems.append(f"{where} quantizes a frozen base under an adapter: it needs peft=lora")
    if choice(cfg.model.source) != "pretrained":
        problems.append(f"{where} quantizes pretrained weights as they load: it needs model.source=pretrained")
    if choice(cfg.distributed.strategy) in SHARDED:
        problems.append(
            f"{where} with distributed.strategy={choice(cfg.distributed.strategy)}: tooltrain does not shard "
            "quantized weights (ZeRO-3/FSDP2); use single, ddp or zero2"
        )
    return problems


def extra_args_problems(where: str, extra: dict[str, Any], known: set[str], owned: dict[str, str]) -> list[str]:
    """Each ``extra`` key must be a field of the target (``known``) that tooltrain does not set itself (``owned``)."""
    problems = []
    for key in extra:
        if key in owned:
            problems.append(f"{where}.{key}: tooltrain sets {key} itself; use {owned[key]}")
        elif key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            target = "LoraConfig" if where.startswith("peft") else "TrainingArguments"
            problems.append(f"{where}.{key} is not a field of {target}{hint}")
    return problems


def trainer_fields() -> set[str]:
    """The keyword arguments ``TrainingArguments`` takes (imported only when an extra_args needs checking)."""
    from transformers import TrainingArguments

    return set(inspect.signature(TrainingArguments.__init__).parameters) - {"self"}


def lora_fields() -> set[str]:
    import dataclasses

    from peft import LoraConfig

    return {f.name for f in dataclasses.fields(LoraConfig) if f.init}


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
