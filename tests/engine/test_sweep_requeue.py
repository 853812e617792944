"""A `-m` sweep job that gets submitit's preemption signal (SIGUSR2: on Slurm, `signal_delay_s` before the
time limit) checkpoints, is requeued by submitit and resumes: the same losses as an uninterrupted run.
submitit's local executor requeues the way its Slurm executor does (same signal handler), so this runs
the whole path without Slurm."""

from __future__ import annotations

import re
import signal
import subprocess

import pytest

pytestmark = pytest.mark.slow


def test_a_sweep_job_checkpoints_on_submitits_signal_and_submitit_requeues_it(engine, single_run, tmp_path):
    import psutil

    out = tmp_path / "run"
    command = engine.command(out, "launcher=submitit_local")
    command.insert(command.index("train", command.index("train") + 1) + 1, "-m")  # python -m train train -m ...
    with (tmp_path / "sweep.log").open("w") as log:
        sweep = subprocess.Popen(command, cwd=engine.repo, env=engine.env, stdout=log, stderr=subprocess.STDOUT)
    job_dir = tmp_path / "run-sweep" / "0"
    engine.wait_for_step(job_dir, sweep, 2)
    tasks = [p for p in psutil.Process(sweep.pid).children(recursive=True) if "submitit.core._submit" in p.cmdline()]
    assert len(tasks) == 1
    tasks[0].send_signal(signal.SIGUSR2)
    assert sweep.wait(timeout=300) == 0, (tmp_path / "sweep.log").read_text()[-3000:]

    (job_log,) = (tmp_path / "run-sweep" / ".submitit").glob("*/*_0_log.out")
    text = job_log.read_text() + job_log.with_suffix(".err").read_text()
    assert "Caught signal SIGUSR2" in text and "Requeued job" in text  # submitit's handler, after our save
    resumed = [int(step) for step in re.findall(r"resuming from checkpoint-(\d+)", text)]
    assert len(resumed) == 1 and 2 <= resumed[0] < engine.steps  # saved at the step the signal landed in
    assert engine.summary(job_dir)["status"] == "completed"
    assert engine.losses(job_dir) == engine.losses(single_run)
    engine.assert_same_tensors(engine.adapter(job_dir / "final"), engine.adapter(single_run / "final"))
