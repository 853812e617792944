"""Full fine-tuning without ZeRO/FSDP keeps fp32 master weights (issue 26, item 8): a bf16 model loads in fp32 and
trains under the Trainer's bf16 autocast, so an update smaller than bf16's resolution is not rounded away. LoRA
keeps its frozen base weights in bf16. Decided in ``set_up`` (the load dtype) and ``trainer_arguments``."""

from __future__ import annotations

import pytest
import torch

from train.engine.config import compose
from train.engine.distributed import World
from train.engine.model import build_model, precision_flags, weight_dtype
from train.engine.run import set_up, trainer_arguments

WORLD = World(rank=0, local_rank=0, world_size=1, local_world_size=1, node_rank=0)


def _plan(tmp_path, *overrides: str):
    cfg = compose(["recipe=tiny", "model.dtype=bf16", f"output_dir={tmp_path / 'run'}", *overrides])
    env = set_up(cfg, WORLD, tmp_path / "run")
    return cfg, env, trainer_arguments(cfg, env)


def test_full_finetuning_under_single_loads_fp32_and_trains_under_bf16_autocast(tmp_path):
    cfg, env, args = _plan(tmp_path, "peft.kind=none", "distributed=single")
    assert (env.dtype, env.compute_dtype) == (torch.float32, torch.bfloat16)
    assert (args["bf16"], args["fp16"]) == (True, False)  # the Trainer autocasts the forward to bf16
    model = build_model(cfg.model, 512, env.dtype, env.attn, seed=0)
    assert {p.dtype for p in model.parameters()} == {torch.float32}  # what the optimizer updates


def test_lora_keeps_its_frozen_base_weights_in_bf16(tmp_path):
    _, env, args = _plan(tmp_path, "distributed=single")
    assert (env.dtype, env.compute_dtype) == (torch.bfloat16, torch.bfloat16)
    assert (args["bf16"], args["fp16"]) == (True, False)


@pytest.mark.parametrize(
    ("full", "strategy", "expected"),
    [
        (True, "single", torch.float32),
        (True, "ddp", torch.float32),
        (True, "zero2", torch.bfloat16),  # DeepSpeed keeps fp32 master weights itself
        (True, "zero3", torch.bfloat16),
        (True, "fsdp2", torch.bfloat16),
        (False, "single", torch.bfloat16),  # LoRA
        (False, "ddp", torch.bfloat16),
    ],
)
def test_the_weights_dtype_by_strategy_and_peft(full, strategy, expected):
    assert weight_dtype(torch.bfloat16, full, strategy) == expected
    assert weight_dtype(torch.float32, full, strategy) == torch.float32


def test_fp16_full_finetuning_is_fp16_autocast_over_fp32_weights():
    weights = weight_dtype(torch.float16, True, "single")
    assert weights == torch.float32
    assert precision_flags(torch.float16, weights) == {"bf16": False, "fp16": True}
    assert precision_flags(torch.float16, torch.float16) == {"bf16": False, "fp16": False}  # LoRA: as before


def test_a_small_update_survives_in_fp32_and_rounds_away_in_bf16():
    # why: lr 1e-5 x a unit gradient on a weight of 1.0 is below bf16's resolution there (2^-7)
    for dtype, moved in ((torch.float32, True), (torch.bfloat16, False)):
        weight = torch.ones(1, dtype=dtype)
        assert bool((weight - 1e-5) != 1.0) is moved
