"""Which attention kernel a run gets (#26 item 6): flash only for fp16/bf16 weights, since flash refuses fp32; an
explicit flash kernel with fp32 weights is refused before anything runs, in one line naming the fix. No GPU: a fake
``flash_attn`` module stands for the installed package."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from train.base.errors import ConfigError
from train.engine.model import resolve_attn_implementation


@pytest.fixture
def flash_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "flash_attn", types.ModuleType("flash_attn"))


def test_auto_takes_flash_on_a_gpu_for_half_precision_only(flash_installed):
    assert resolve_attn_implementation("auto", True, torch.bfloat16) == "flash_attention_2"
    assert resolve_attn_implementation("auto", True, torch.float16) == "flash_attention_2"
    # the fp32 recipes (tiny, demo, itc_tiny, toolverifier_tiny) would crash in flash's first forward
    assert resolve_attn_implementation("auto", True, torch.float32) == "sdpa"
    assert resolve_attn_implementation("auto", False, torch.bfloat16) == "sdpa"


def test_auto_takes_sdpa_without_flash_attn(monkeypatch):
    monkeypatch.setitem(sys.modules, "flash_attn", None)  # import flash_attn raises ImportError
    assert resolve_attn_implementation("auto", True, torch.bfloat16) == "sdpa"


def test_an_explicit_flash_kernel_with_fp32_weights_is_refused_naming_the_fix(flash_installed):
    for name in ("flash_attention_2", "kernels-community/flash-attn2"):
        with pytest.raises(ConfigError) as refused:
            resolve_attn_implementation(name, True, torch.float32)
        message = str(refused.value)
        assert "\n" not in message and f"model.attn_implementation={name}" in message
        assert "model.dtype=bf16" in message and "model.attn_implementation=sdpa" in message
    assert resolve_attn_implementation("flash_attention_2", True, torch.bfloat16) == "flash_attention_2"
    assert resolve_attn_implementation("sdpa", True, torch.float32) == "sdpa"
    assert resolve_attn_implementation("eager", False, torch.float32) == "eager"


def test_the_config_check_refuses_flash_for_an_fp32_recipe():
    from train.engine.config import compose

    with pytest.raises(ConfigError, match=r"flash_attention_2 computes in fp16/bf16 only.*model.dtype=bf16"):
        compose(["recipe=tiny", "model.attn_implementation=flash_attention_2"])  # tiny trains in float32
    assert compose(["recipe=tiny", "model.attn_implementation=flash_attention_2", "model.dtype=bf16"])
    assert compose(["recipe=tiny", "model.attn_implementation=flash_attention_2", "model.dtype=auto"])
