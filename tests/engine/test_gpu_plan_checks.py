"""Combinations the GPU path cannot run, refused before any data or model work (issue 26): Liger under ZeRO-3 or on
a model type it has no kernels for, and LoRA + ZeRO-3 + gradient checkpointing on a DeepSpeed that breaks it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from train.base.errors import ConfigError
from train.engine.config import compose


def _problems(*overrides: str) -> str:
    with pytest.raises(ConfigError) as err:
        compose(["recipe=tiny", *overrides])
    return str(err.value)


@pytest.mark.parametrize("strategy", ["zero3", "zero3_offload"])
def test_liger_under_zero3_is_refused_at_compose_time_with_the_fix(strategy):
    message = _problems("kernels=liger", f"distributed={strategy}")
    assert f"kernels=liger with distributed={strategy} (ZeRO stage 3)" in message
    assert "lm_head.weight" in message and "use distributed=zero2, ddp or fsdp2, or kernels=none" in message


def test_liger_under_zero2_raised_to_stage_3_is_refused_too():
    assert "(ZeRO stage 3)" in _problems("kernels=liger", "distributed=zero2", "distributed.zero_stage=3")


@pytest.mark.parametrize("strategy", ["single", "ddp", "zero2", "fsdp2"])
def test_liger_composes_with_strategies_that_keep_lm_head_whole(strategy):
    cfg = compose(["recipe=tiny", "kernels=liger", f"distributed={strategy}"])  # tiny is a llama: liger patches it
    assert cfg.kernels == "liger"


def test_liger_on_a_model_type_it_does_not_patch_is_refused_at_compose_time():
    message = _problems("kernels=liger", "model.arch_type=gpt2")
    assert "kernels=liger has no kernels for model type 'gpt2' (model.arch_type of model=" in message
    assert "use kernels=none" in message


def test_liger_on_a_loaded_model_of_an_unsupported_type_is_refused_not_silently_skipped():
    from train.engine.run import _apply_liger

    model = SimpleNamespace(config=SimpleNamespace(model_type="gpt2"))
    with pytest.raises(ConfigError, match="no kernels for model type 'gpt2' \\(the loaded model's config\\)"):
        _apply_liger(model)  # before liger_kernel is imported: it is not installed here


# slow tier: test_config's test_every_recipe_composes_and_passes_check composes every recipe with the same check
@pytest.mark.slow
def test_every_shipped_recipe_composes_with_its_kernels():
    from train.engine.config import REPO_ROOT

    for recipe in sorted((REPO_ROOT / "recipes").glob("*.yaml")):
        compose([f"recipe={recipe.stem}"])  # a recipe combining liger with ZeRO-3 would fail here


ZERO3_CHECKPOINTED = ("distributed=zero3", "distributed.gradient_checkpointing=true")


@pytest.mark.parametrize("installed", ["0.19.2", "0.16.9"])
def test_lora_zero3_checkpointing_on_an_old_deepspeed_is_refused_at_setup(tmp_path, engine, monkeypatch, installed):
    from train.engine import distributed

    monkeypatch.setattr(distributed, "installed_deepspeed", lambda: installed)
    out = tmp_path / "run"
    with pytest.raises(distributed.StrategyError) as err:
        engine.run(out, *ZERO3_CHECKPOINTED)
    assert str(err.value) == (
        f"LoRA with ZeRO-3 and gradient checkpointing crashes on deepspeed {installed} (fixed in 0.19.3); run "
        "pip install 'deepspeed>=0.19.3', or set distributed.gradient_checkpointing=false or distributed=zero2"
    )
    assert not out.exists()  # before any data or model work


@pytest.mark.parametrize(
    ("installed", "overrides"),
    [
        ("0.19.3", ZERO3_CHECKPOINTED),  # fixed
        ("0.19.2", ("distributed=zero3",)),  # no checkpointing
        ("0.19.2", ("distributed=zero2", "distributed.gradient_checkpointing=true")),  # no ZeRO-3
        ("0.19.2", (*ZERO3_CHECKPOINTED, "peft.kind=none")),  # no LoRA
        (None, ZERO3_CHECKPOINTED),  # no DeepSpeed: the strategy's own import says so
    ],
)
def test_the_deepspeed_check_leaves_other_plans_alone(monkeypatch, installed, overrides):
    from train.engine import distributed

    monkeypatch.setattr(distributed, "installed_deepspeed", lambda: installed)
    cfg = compose(["recipe=tiny", *overrides])
    distributed.check_deepspeed(cfg.distributed, cfg.peft.kind == "lora")


def test_the_dependency_floor_is_the_fixed_deepspeed():
    import re

    from train.engine.config import REPO_ROOT
    from train.engine.distributed import DEEPSPEED_LORA_ZERO3_CHECKPOINTING

    floors = re.findall(r'"deepspeed>=([0-9.]+)"', (REPO_ROOT / "pyproject.toml").read_text())
    assert floors == [DEEPSPEED_LORA_ZERO3_CHECKPOINTING]
