"""``training_arguments(cfg, ...)``: the one mapping from a run's config to the HF Trainer's arguments,
read by ``run(cfg)`` (TrainingArguments) and by ``tooltrain bench train``'s trl path (SFTConfig)."""

from __future__ import annotations

from pathlib import Path

from train.engine.config import compose
from train.engine.training_args import training_arguments


def test_every_field_comes_from_the_config():
    cfg = compose(["recipe=tiny", "seed=11", "optim.lr=0.003", "optim.warmup_ratio=0.25", "train.max_steps=9"])
    args = training_arguments(cfg, Path("out"), grad_accum=4, bf16=False)
    assert args == {
        "output_dir": "out",
        "per_device_train_batch_size": cfg.train.micro_batch_size,
        "gradient_accumulation_steps": 4,
        "num_train_epochs": cfg.train.epochs,
        "max_steps": 9,
        "learning_rate": 0.003,
        "weight_decay": cfg.optim.weight_decay,
        "adam_beta1": cfg.optim.betas[0],
        "adam_beta2": cfg.optim.betas[1],
        "adam_epsilon": cfg.optim.eps,
        "optim": cfg.optim.name,
        "lr_scheduler_type": cfg.optim.scheduler,
        "warmup_steps": 0.25,
        "max_grad_norm": cfg.optim.max_grad_norm,
        "logging_steps": cfg.train.logging_steps,
        "seed": 11,
        "data_seed": 11,
        "bf16": False,
        "dataloader_num_workers": cfg.train.dataloader_workers,
        "torch_compile": False,
        "ddp_find_unused_parameters": False,  # LoRA: every adapter is used every step
    }


def test_a_caller_adds_and_replaces_fields_and_the_trainer_takes_them():
    from transformers import TrainingArguments

    cfg = compose(["recipe=tiny"])
    args = training_arguments(cfg, Path("out"), 1, False, logging_steps=1, save_strategy="no", use_cpu=True)
    assert (args["logging_steps"], args["save_strategy"]) == (1, "no")
    built = TrainingArguments(**args, report_to=[])
    assert (built.learning_rate, built.max_steps, built.seed) == (cfg.optim.lr, cfg.train.max_steps, cfg.seed)
