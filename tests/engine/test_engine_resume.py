"""Interrupted runs resume exactly: rerunning the same command continues from the newest complete
checkpoint with the same weights, optimizer, scheduler, RNG and data position, so every later step
has the loss of the uninterrupted run and the final adapter is the same tensor for tensor."""

from __future__ import annotations

import random
import shutil
import signal
import sys
from pathlib import Path

import pytest

from train.engine.callbacks import COMPLETE_MARKER, REQUEUE_EXIT_CODE, latest_complete_checkpoint


@pytest.mark.slow
def test_zero3_resumes_bit_identically(engine, zero3_run, tmp_path):
    reference, _ = zero3_run
    run_dir = engine.copy_run(reference, tmp_path / "run", keep_through_step=4)  # mid-epoch: step 4 of 3-step epochs
    result = engine.launch(run_dir, "distributed=zero3", ranks=2)
    assert "resuming from checkpoint-4" in result.stdout
    assert engine.losses(run_dir) == engine.losses(reference)
    engine.assert_same_tensors(engine.adapter(run_dir / "final"), engine.adapter(reference / "final"))


@pytest.mark.slow
def test_sigkill_at_a_random_step_then_the_same_command_finishes_the_same_run(engine, single_run, tmp_path, capsys):
    run_dir = tmp_path / "run"
    process = engine.start(run_dir)
    # step 3 is logged after checkpoint-2 is complete; the kill lands in step 3, 4 or 5, maybe mid-save
    killed_after = engine.wait_for_step(run_dir, process, random.randint(3, 4))
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=60) == -signal.SIGKILL
    assert killed_after < engine.steps and not (run_dir / "final").exists()
    resume = latest_complete_checkpoint(run_dir)
    assert resume is not None  # a restart from scratch would reproduce the losses too, so insist on a resume

    result = engine.run(run_dir)
    assert f"resuming from {resume.name}" in capsys.readouterr().out
    assert (result.status, result.global_step) == ("completed", engine.steps)
    # one loss per step, each the uninterrupted run's: no batch skipped or trained twice
    assert engine.losses(run_dir) == engine.losses(single_run)
    engine.assert_same_tensors(engine.adapter(run_dir / "final"), engine.adapter(single_run / "final"))


def test_a_checkpoint_cut_mid_write_is_ignored_and_removed(engine, single_run, tmp_path, capsys):
    run_dir = engine.copy_run(single_run, tmp_path / "run", keep_through_step=4)
    partial = run_dir / "checkpoint-6"  # a save killed half way: some files, no completion marker
    shutil.copytree(single_run / "checkpoint-6", partial)
    (partial / COMPLETE_MARKER).unlink()
    (partial / "optimizer.pt").unlink()
    weights = partial / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])

    result = engine.run(run_dir)
    assert "resuming from checkpoint-4" in capsys.readouterr().out
    assert (result.status, result.global_step) == ("completed", engine.steps)
    assert engine.losses(run_dir) == engine.losses(single_run)
    engine.assert_same_tensors(engine.adapter(run_dir / "final"), engine.adapter(single_run / "final"))
    # the step-6 checkpoint was written again, completely
    assert (partial / COMPLETE_MARKER).is_file() and (partial / "optimizer.pt").is_file()
    engine.assert_same_tensors(engine.adapter(partial), engine.adapter(single_run / "checkpoint-6"))


def test_rerunning_a_completed_run_trains_nothing(engine, single_run, tmp_path, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(single_run, run_dir)
    before = {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()}

    result = engine.run(run_dir)
    assert capsys.readouterr().out == (
        f"tooltrain: {run_dir} already holds a completed run ({engine.steps} steps, final model in "
        f"{run_dir / 'final'}); "
        "nothing to do. Use another output_dir to train again.\n"
    )
    assert (result.status, result.global_step, result.adapter_dir) == ("completed", engine.steps, run_dir / "final")
    assert result.losses == [engine.losses(single_run)[step] for step in range(1, engine.steps + 1)]
    assert {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()} == before


def _tooltrain() -> list[str]:
    """The installed ``tooltrain`` script, or its module form where the package is not installed."""
    script = Path(sys.executable).parent / "tooltrain"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "train"]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGUSR1, signal.SIGTERM], ids=["SIGUSR1", "SIGTERM"])
def test_a_preemption_signal_saves_exits_75_and_the_rerun_completes_the_same_run(engine, single_run, tmp_path, sig):
    run_dir = tmp_path / "run"
    process = engine.start(run_dir, launcher=_tooltrain())
    engine.wait_for_step(run_dir, process, 2)
    process.send_signal(sig)  # SIGUSR1: the sbatch script's time-limit warning; SIGTERM: preemption, scancel
    assert process.wait(timeout=120) == REQUEUE_EXIT_CODE
    summary = engine.summary(run_dir)
    stopped = summary["steps"]
    assert summary["status"] == "preempted" and 2 <= stopped < engine.steps
    # the step it stopped after is saved and marked complete, whether or not it was a save step
    assert (run_dir / f"checkpoint-{stopped}" / COMPLETE_MARKER).is_file()
    assert max(engine.losses(run_dir)) == stopped
    assert not (run_dir / "final").exists()

    rerun = engine.launch(run_dir)  # exit code 0 checked there
    assert f"resuming from checkpoint-{stopped}" in rerun.stdout
    assert engine.summary(run_dir)["status"] == "completed"
    assert engine.losses(run_dir) == engine.losses(single_run)
    engine.assert_same_tensors(engine.adapter(run_dir / "final"), engine.adapter(single_run / "final"))
