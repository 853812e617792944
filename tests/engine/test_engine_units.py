"""Engine parts that need no training: strategy refusals, the saved-adapter check, metrics on resume,
preemption signals, the completed-run test and export errors."""

from __future__ import annotations

import json
import os
import signal
from types import SimpleNamespace

import pytest
import torch

from train.engine import distributed
from train.engine.callbacks import COMPLETE_MARKER, MetricsFile, Preemption, completed_run
from train.engine.config import compose
from train.engine.model import (
    AdapterSaveError,
    apply_lora,
    build_model,
    expected_adapter_shapes,
    saved_adapter_problems,
)

WORLD_1 = distributed.World(rank=0, local_rank=0, world_size=1, local_world_size=1, node_rank=0)
WORLD_2 = distributed.World(rank=0, local_rank=0, world_size=2, local_world_size=2, node_rank=0)


def strategy(name: str):
    return compose(["recipe=tiny", f"distributed={name}"]).distributed


# -- strategies ---------------------------------------------------------------------------------


def test_fsdp2_on_cpu_is_refused_with_the_alternatives():
    with pytest.raises(distributed.StrategyError) as err:
        distributed.training_arguments_for(strategy("fsdp2"), WORLD_2, 2, 1, 1.0, False)
    assert str(err.value) == (
        "distributed=fsdp2 needs GPUs: on CPU accelerate silently falls back to DDP; use distributed=zero3 or ddp"
    )


def test_fsdp2_is_refused_before_any_data_or_model_work(tmp_path, engine):
    out = tmp_path / "run"
    with pytest.raises(distributed.StrategyError, match="distributed=fsdp2 needs GPUs"):
        engine.run(out, "distributed=fsdp2")
    assert not out.exists()


def test_liger_kernels_on_cpu_are_refused_before_any_data_or_model_work(tmp_path, engine):
    out = tmp_path / "run"
    with pytest.raises(distributed.StrategyError) as err:
        engine.run(out, "kernels=liger")
    assert str(err.value) == "kernels=liger needs a GPU (Triton); run with kernels=none on CPU"
    assert not out.exists()


def test_single_strategy_in_a_bigger_world_is_refused():
    with pytest.raises(distributed.StrategyError) as err:
        distributed.training_arguments_for(strategy("single"), WORLD_2, 2, 1, 1.0, False)
    assert str(err.value) == "distributed=single but WORLD_SIZE=2; use distributed=ddp, zero2 or zero3"


def test_zero3_on_cpu_joins_ranks_with_gloo_and_skips_the_shared_memory_op_build():
    import deepspeed.ops

    args = distributed.training_arguments_for(strategy("zero3"), WORLD_2, 2, 1, 1.0, False)
    assert args["use_cpu"] is True and args["ddp_backend"] == "gloo"
    assert args["deepspeed"]["train_batch_size"] == 4
    assert args["deepspeed"]["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] is True
    assert deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] is False


# -- the saved adapter ----------------------------------------------------------------------------


@pytest.fixture
def lora_model():
    cfg = compose(["recipe=tiny"])
    model = build_model(cfg.model, 1024, torch.float32, "sdpa", seed=0)
    return apply_lora(model, cfg.peft, list(cfg.model.lora_target_modules))


def test_expected_adapter_shapes_name_what_peft_saves(lora_model):
    shapes = expected_adapter_shapes(lora_model)
    assert len(shapes) == 16  # 2 layers x 4 projections x (A, B)
    assert shapes["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"] == (16, 64)
    assert shapes["base_model.model.model.layers.1.self_attn.k_proj.lora_B.weight"] == (32, 16)  # 2 kv heads x 16


def _trained(model):
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.fill_(0.5)
    return model


def test_a_trained_adapter_passes(lora_model, tmp_path):
    expected = expected_adapter_shapes(lora_model)
    _trained(lora_model).save_pretrained(str(tmp_path))
    assert saved_adapter_problems(tmp_path, expected) == []


def test_an_untrained_adapter_is_reported(lora_model, tmp_path):
    expected = expected_adapter_shapes(lora_model)
    lora_model.save_pretrained(str(tmp_path))  # lora_B starts at zero
    assert saved_adapter_problems(tmp_path, expected) == [
        "every lora_B tensor in adapter_model.safetensors is zero: the trained weights were not saved"
    ]


def test_an_adapter_of_ungathered_partitions_is_reported(lora_model, tmp_path):
    from safetensors.torch import save_file

    expected = expected_adapter_shapes(lora_model)
    # what ZeRO-3 writes when the partitioned weights are not gathered: empty tensors
    save_file({key: torch.empty(0) for key in expected}, str(tmp_path / "adapter_model.safetensors"))
    problems = saved_adapter_problems(tmp_path, expected)
    assert len(problems) == 16
    assert (
        problems[0]
        == "base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight has shape (0,), the model's is (16, 64)"
    )


def test_a_missing_or_partial_adapter_is_reported(lora_model, tmp_path):
    from safetensors.torch import save_file

    expected = expected_adapter_shapes(lora_model)
    assert saved_adapter_problems(tmp_path, expected) == [f"{tmp_path / 'adapter_model.safetensors'} was not written"]
    save_file({}, str(tmp_path / "adapter_model.safetensors"))
    assert saved_adapter_problems(tmp_path, expected) == [
        (
            "adapter_model.safetensors lacks 16 of 16 tensors, e.g. "
            "base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight"
        )
    ]


def test_the_engine_raises_on_an_unusable_adapter(lora_model, tmp_path):
    from train.engine.run import check_saved_adapter

    expected = expected_adapter_shapes(lora_model)
    lora_model.save_pretrained(str(tmp_path))
    with pytest.raises(AdapterSaveError) as err:
        check_saved_adapter(tmp_path, expected, WORLD_1)
    assert str(err.value) == (
        f"the adapter saved in {tmp_path} is unusable: every lora_B tensor in adapter_model.safetensors is zero: "
        "the trained weights were not saved"
    )


# -- callbacks ------------------------------------------------------------------------------------


def _state(step: int, main: bool = True):
    return SimpleNamespace(global_step=step, is_world_process_zero=main)


def test_metrics_file_drops_the_steps_a_resumed_run_trains_again(tmp_path):
    path = tmp_path / "metrics.jsonl"
    lines = [json.dumps({"step": s, "loss": 7.0 - s}) for s in (1, 2, 3, 4)]
    path.write_text("\n".join(lines) + '\n{"step": 5, "lo')  # the last line cut by a kill
    MetricsFile(path).on_train_begin(None, _state(2), None)
    assert path.read_text() == lines[0] + "\n" + lines[1] + "\n"


def test_metrics_file_of_a_fresh_run_starts_empty_and_other_ranks_leave_it(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 1, "loss": 6.0}) + "\n")
    MetricsFile(path).on_train_begin(None, _state(0, main=False), None)
    assert path.read_text() == json.dumps({"step": 1, "loss": 6.0}) + "\n"
    MetricsFile(path).on_train_begin(None, _state(0), None)
    assert path.read_text() == ""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2], ids=["TERM", "USR1", "USR2"])
def test_preemption_signal_stops_after_the_step_with_a_save_and_handlers_come_back(sig):
    before = {other: signal.getsignal(other) for other in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)}
    preemption = Preemption(lambda flag: flag)
    control = SimpleNamespace(should_save=False, should_training_stop=False)
    preemption.on_step_end(None, None, control)
    assert (control.should_save, control.should_training_stop, preemption.stopped_by_signal) == (False, False, False)
    os.kill(os.getpid(), sig)
    preemption.on_step_end(None, None, control)
    assert (control.should_save, control.should_training_stop, preemption.stopped_by_signal) == (True, True, True)
    assert preemption.received == sig
    preemption.on_train_end(None, None, control)
    assert {other: signal.getsignal(other) for other in before} == before


def test_completed_run_needs_a_completed_summary_and_the_final_folder(tmp_path):
    assert completed_run(tmp_path) is None
    (tmp_path / "summary.json").write_text(json.dumps({"status": "preempted", "steps": 3}))
    (tmp_path / "final").mkdir()
    assert completed_run(tmp_path) is None
    (tmp_path / "summary.json").write_text(json.dumps({"status": "completed", "steps": 6}))
    assert completed_run(tmp_path) == {"status": "completed", "steps": 6}
    (tmp_path / "final").rmdir()
    assert completed_run(tmp_path) is None


# -- export errors ----------------------------------------------------------------------------------


def test_export_of_a_folder_without_weights_is_a_clear_error(tmp_path, capsys):
    from train.cli import main

    (tmp_path / "checkpoint-2").mkdir()  # written but never marked complete
    assert main(["export", str(tmp_path)]) == 2
    assert (
        capsys.readouterr().err
        == f"error: {tmp_path} holds no trained weights: neither final/ nor a complete checkpoint-N/\n"
    )


def test_export_without_the_run_config_is_a_clear_error(tmp_path, capsys):
    from train.cli import main

    run, out = tmp_path / "run", tmp_path / "out"  # the export outside the run it reads (issue #24 item 7)
    (run / "checkpoint-2").mkdir(parents=True)
    (run / "checkpoint-2" / COMPLETE_MARKER).write_text("{}")
    assert main(["export", str(run), "--out-dir", str(out)]) == 2
    assert capsys.readouterr().err == f"error: {run} has no config.yaml: is it a tooltrain run directory?\n"
    assert not out.exists()
