"""gpt-oss model configs: built on the meta device from conf/model, they have the published sizes."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

CONF = Path(__file__).resolve().parents[1] / "conf" / "model"


@pytest.mark.parametrize("name, billions", [("gpt_oss_20b", 20.91), ("gpt_oss_120b", 116.83)])
def test_gpt_oss_configs_build_to_the_published_parameter_counts(name, billions):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = OmegaConf.load(CONF / f"{name}.yaml")
    assert (cfg.chat_format, cfg.tokenizer) == ("harmony", "o200k_harmony")
    config = AutoConfig.for_model(cfg.arch_type, vocab_size=201088, **OmegaConf.to_container(cfg.arch))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert round(sum(p.numel() for p in model.parameters()) / 1e9, 2) == billions
    modules = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    assert set(cfg.lora_target_modules) <= modules  # the attention projections; experts are fused tensors
