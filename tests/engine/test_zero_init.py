"""Where each rank builds the model (issue 26, item 7), decided in ``distributed.model_placement``: under ZeRO-3 inside
DeepSpeed's zero.Init (the run's TrainingArguments are made first: transformers applies zero.Init only while their
ZeRO-3 config is registered), a random init for full fine-tuning directly on the rank's GPU, and LoRA's random-init
base on the CPU outside zero.Init, drawn as ``tooltrain export`` draws it again. transformers' model constructors are
replaced by recorders: they note what transformers would have seen and return a tiny model built beforehand."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf
from transformers import AutoModelForCausalLM
from transformers.integrations import is_deepspeed_zero3_enabled, unset_hf_deepspeed_config

from train.engine import distributed
from train.engine import run as run_module
from train.engine.callbacks import TokenMeter
from train.engine.config import compose
from train.engine.distributed import ON_CPU, ON_DEVICE, ZERO_INIT, World, model_placement
from train.engine.model import build_model
from train.engine.run import prepare_model, set_up, training_args

WORLD = World(rank=0, local_rank=0, world_size=1, local_world_size=1, node_rank=0)
VOCAB = 1024  # the tiny ChatML tokenizer's size: what the data stage hands the model stage


class Built(Exception):
    """Stops ``run(cfg)`` once the model is built: what was recorded is all the test needs."""


@pytest.fixture(scope="module")
def tiny_model():
    return build_model(compose(["recipe=tiny"]).model, VOCAB, torch.float32, "sdpa", seed=0)


@pytest.fixture
def builds(monkeypatch, tiny_model):
    """Each from_config/from_pretrained call records (ZeRO-3 registered?, default device) and returns ``tiny_model``."""
    seen: list[tuple[bool, torch.device]] = []

    def record(*args, **kwargs):
        seen.append((is_deepspeed_zero3_enabled(), torch.get_default_device()))
        return copy.deepcopy(tiny_model)  # LoRA is applied in place: each build gets its own

    monkeypatch.setattr(AutoModelForCausalLM, "from_config", record)
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", record)
    yield seen
    unset_hf_deepspeed_config()  # nothing registered leaks into the next test, whatever happened in this one


def _data() -> SimpleNamespace:
    return SimpleNamespace(tokenizer=range(VOCAB), meter=TokenMeter())


def _pretrained(tmp_path, tiny_model) -> list[str]:
    folder = tmp_path / "model"
    tiny_model.config.save_pretrained(folder)
    return [f"model.path={folder}", "model.tokenizer=tiny_chatml", "model.chat_format=chatml"]


@pytest.mark.parametrize(
    ("overrides", "under_zero_init"),
    [
        (("distributed=zero3", "pretrained"), True),  # toolverifier's case: weights from files, one partition a rank
        (("distributed=zero3_offload", "pretrained"), True),
        (("distributed=zero3", "peft.kind=none"), True),  # a random init nothing draws again
        (("distributed=zero3",), False),  # LoRA's random base: export draws it again, outside zero.Init
        (("distributed=single", "pretrained"), False),
        (("distributed=ddp", "pretrained"), False),
        (("distributed=zero2", "peft.kind=none"), False),
    ],
)
def test_run_builds_under_zero3_init_exactly_where_placed(
    tmp_path, monkeypatch, builds, tiny_model, overrides, under_zero_init
):
    extra = [o for o in overrides if o != "pretrained"]
    if "pretrained" in overrides:
        extra += _pretrained(tmp_path, tiny_model)
    cfg = compose(["recipe=tiny", f"output_dir={tmp_path / 'run'}", *extra])

    def built(*args, **kwargs):
        raise Built

    monkeypatch.setattr(run_module, "prepare_data", lambda cfg, env: _data())
    monkeypatch.setattr(run_module, "apply_lora", built)  # the first step after the base model: enough seen
    with pytest.raises(Built):
        run_module.run(cfg)
    assert builds == [(under_zero_init, torch.device("cpu"))]


def test_the_zero3_config_is_registered_again_after_a_lora_random_base_is_built(tmp_path, builds):
    cfg = compose(["recipe=tiny", "distributed=zero3", f"output_dir={tmp_path / 'run'}"])
    env = set_up(cfg, WORLD, tmp_path / "run")
    args = training_args(cfg, env)
    assert is_deepspeed_zero3_enabled()
    model = prepare_model(cfg, env, _data(), args)
    assert builds == [(False, torch.device("cpu"))]
    assert is_deepspeed_zero3_enabled()  # the Trainer's DeepSpeed engine still reads it
    assert model.lora and model.adapter_shapes
    del args
    assert not is_deepspeed_zero3_enabled()  # a weak reference: it lives as long as the run's TrainingArguments


@pytest.mark.parametrize(("peft", "device"), [("none", torch.device("cuda", 1)), ("lora", torch.device("cpu"))])
def test_a_random_init_on_a_gpu_rank_is_drawn_on_its_gpu_unless_lora_draws_it_again(tmp_path, builds, peft, device):
    cfg = compose(["recipe=tiny", f"peft.kind={peft}", f"output_dir={tmp_path / 'run'}"])
    env = set_up(cfg, WORLD, tmp_path / "run")
    env.gpu = True  # a GPU rank, as far as the placement is concerned; its TrainingArguments name its device
    prepare_model(cfg, env, _data(), SimpleNamespace(device=torch.device("cuda", 1)))
    assert builds == [(False, device)]


@pytest.mark.parametrize(
    ("strategy", "gpu", "source", "peft", "placement"),
    [
        ("zero3", False, "pretrained", "lora", ZERO_INIT),
        ("zero3_offload", True, "pretrained", "none", ZERO_INIT),
        ("zero3", True, "config", "none", ZERO_INIT),
        ("zero3", True, "config", "lora", ON_CPU),  # drawn again by export, eval and resume
        ("single", True, "config", "none", ON_DEVICE),
        ("ddp", True, "config", "none", ON_DEVICE),
        ("zero2", True, "config", "none", ON_DEVICE),
        ("fsdp2", True, "config", "none", ON_CPU),  # FSDP2 shards because the whole model may not fit one GPU
        ("ddp", True, "config", "lora", ON_CPU),
        ("ddp", True, "pretrained", "none", ON_CPU),  # weights from files: loaded on the CPU as before
        ("single", False, "config", "none", ON_CPU),  # on a CPU nothing changes
    ],
)
def test_model_placement(strategy, gpu, source, peft, placement):
    cfg = compose([f"distributed={strategy}"])
    assert model_placement(cfg.distributed, gpu, source == "config", peft == "lora") == placement


def test_zero_stage_3_under_the_zero2_strategy_is_placed_under_zero_init():
    dist_cfg = OmegaConf.create({"strategy": "zero2", "zero_stage": 3})
    assert model_placement(dist_cfg, True, False, True) == ZERO_INIT


def test_build_context_on_the_device_is_the_trainer_s_device():
    context = distributed.build_context(ON_DEVICE, SimpleNamespace(device=torch.device("cuda", 3)))
    with context:
        assert torch.get_default_device() == torch.device("cuda", 3)
    assert torch.get_default_device() == torch.device("cpu")


@pytest.mark.slow
def test_a_pretrained_model_built_under_zero_init_trains_two_ranks_to_the_single_process_losses(engine, tmp_path):
    """The whole path: each ZeRO-3 rank loads only its partitions (zero.Init), LoRA is applied over them, DeepSpeed
    trains and saves the adapter; the losses are the single-process run's, which loaded the whole model."""
    folder = tmp_path / "model"
    build_model(compose(["recipe=tiny"]).model, VOCAB, torch.float32, "sdpa", seed=0).save_pretrained(folder)
    model = [f"model.path={folder}", "model.tokenizer=tiny_chatml", "model.chat_format=chatml", "train.max_steps=2"]
    single = engine.run(tmp_path / "single", *model)
    engine.launch(tmp_path / "zero3", *model, "distributed=zero3", ranks=2)
    zero3 = engine.losses(tmp_path / "zero3")
    assert [zero3[1], zero3[2]] == pytest.approx(single.losses, rel=1e-6)
    summary = engine.summary(tmp_path / "zero3")
    assert summary["status"] == "completed" and summary["parameters"] == single.summary["parameters"]
    adapter, expected = engine.adapter(tmp_path / "zero3" / "final"), engine.adapter(single.adapter_dir)
    assert sorted(adapter) == sorted(expected)  # saved whole from the partitions, and trained the same
    assert max(float((adapter[key] - expected[key]).abs().max()) for key in expected) < 1e-6
