"""gpt-oss model configs: built on the meta device from conf/model, they have the published sizes; their vocabulary is
o200k_harmony's, so the memory plan (train/engine/memory_plan.py) has their shapes and gives a figure for them."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

CONF = Path(__file__).resolve().parents[1] / "conf" / "model"


@pytest.mark.parametrize("name, billions", [("gpt_oss_20b", 20.91), ("gpt_oss_120b", 116.83)])
def test_gpt_oss_configs_build_to_the_published_parameter_counts(name, billions):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from train.tokenizers.harmony import VOCAB_SIZE

    cfg = OmegaConf.load(CONF / f"{name}.yaml")
    assert (cfg.chat_format, cfg.tokenizer) == ("harmony", "o200k_harmony")
    assert cfg.arch.vocab_size == VOCAB_SIZE == 201088  # config.json's, and the tokenizer the project builds
    config = AutoConfig.for_model(cfg.arch_type, **OmegaConf.to_container(cfg.arch))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert round(sum(p.numel() for p in model.parameters()) / 1e9, 2) == billions
    modules = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    assert set(cfg.lora_target_modules) <= modules  # the attention projections; experts are fused tensors


@pytest.mark.parametrize("name, billions, fits", [("gpt_oss_20b", 20.91, True), ("gpt_oss_120b", 116.83, False)])
def test_the_memory_plan_gives_a_figure_for_gpt_oss(name, billions, fits):
    from train.engine import memory_plan
    from train.engine.config import compose

    plan = memory_plan.plan(compose([f"model={name}"]))  # one GPU of 80 GiB, LoRA on the attention projections
    assert plan is not None and plan.logits > 0 and plan.total > plan.weights > 0
    assert memory_plan.parameters(plan.shape) / 1e9 == pytest.approx(billions, rel=1e-3)  # biases and sinks left out
    assert plan.fits is fits
    assert (memory_plan.refusal(plan) is None) is fits  # 120B on one GPU is refused, naming the knob
