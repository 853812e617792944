"""Real Slurm (one node on loopback, started by .ci/slurm): a run submitted with `tooltrain launch`
completes; a run warned of its time limit checkpoints, is requeued and finishes from its checkpoint.

Without an accounting database, job states come from `scontrol show job` (kept 10 minutes by
.ci/slurm's MinJobAge). Every run is 2 ranks (DDP) on the node's 2 CPUs.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from train.engine.callbacks import COMPLETE_MARKER


def loopback_cluster_answers() -> bool:
    """.ci/slurm's cluster, not whatever cluster this machine may belong to: its node is `localhost`."""
    if shutil.which("sinfo") is None:
        return False
    try:
        result = subprocess.run(
            ["sinfo", "-h", "-n", "localhost", "-o", "%T"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and result.stdout.strip() != ""


pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture(autouse=True, scope="module")
def loopback_cluster():
    # Asked when a test here runs, not at import: every worker collects this file, and a `sinfo` that finds no
    # controller waits seconds before it answers, even in the default tier, which deselects these tests.
    if not loopback_cluster_answers():
        pytest.skip("no loopback Slurm cluster answers `sinfo -n localhost` (run .ci/slurm as root to start one)")


def job(job_id: str) -> dict[str, str]:
    line = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, check=True).stdout
    return dict(field.split("=", 1) for field in line.split() if "=" in field)


def wait_for(job_id: str, done, what: str, timeout: float) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = job(job_id)
        if done(state):
            return state
        if state["JobState"] in ("FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"):
            raise AssertionError(f"job {job_id} ended {state['JobState']} while waiting for {what}: {state}")
        time.sleep(1)
    subprocess.run(["scancel", job_id], check=False)
    raise AssertionError(f"job {job_id}: no {what} within {timeout} s: {job(job_id)}")


def seconds(slurm_duration: str) -> int:
    """[D-][HH:]MM:SS -> seconds."""
    days, _, clock = slurm_duration.rpartition("-")
    parts = [int(part) for part in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return int(days or 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


def logged_steps(run_dir: Path) -> list[int]:
    from train.engine.report import read_metrics

    return (
        [row["step"] for row in read_metrics(run_dir / "metrics.jsonl") if "loss" in row]
        if (run_dir / "metrics.jsonl").exists()
        else []
    )


@pytest.fixture(scope="module")
def completed_job(repo, run_env, small, tmp_path_factory):
    """A 4-step run submitted through `tooltrain launch` (rendered script -> train.sbatch -> srun -> torchrun)."""
    run_dir = tmp_path_factory.mktemp("slurm") / "run"
    submitted = subprocess.run(
        [
            sys.executable,
            "-m",
            "train",
            "launch",
            "recipe=tiny",
            "--gpus-per-node",
            "2",
            "distributed=ddp",
            "launcher.request_gpus=false",
            "launcher.cpus_per_task=2",
            "launcher.time_min=10",
            *small,
            "train.max_steps=4",
            f"output_dir={run_dir}",
        ],
        cwd=repo,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert submitted.returncode == 0, submitted.stderr
    job_id = re.fullmatch(
        rf"submitted job (\d+): {run_dir}/tiny.sbatch; logs in {run_dir}/logs\n", submitted.stdout
    ).group(1)
    state = wait_for(job_id, lambda s: s["JobState"] == "COMPLETED", "completion", timeout=400)
    return job_id, state, run_dir


def test_a_submitted_run_completes_with_its_checkpoint_and_metrics(completed_job):
    job_id, state, run_dir = completed_job
    assert (state["ExitCode"], state["Restarts"], state["NumTasks"]) == ("0:0", "0", "1")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["steps"]) == ("completed", 4)
    assert logged_steps(run_dir) == [1, 2, 3, 4]
    assert (run_dir / "checkpoint-4" / COMPLETE_MARKER).is_file()
    assert (run_dir / "final" / "adapter_model.safetensors").is_file()
    batch_log = (run_dir / "logs" / f"tiny-{job_id}.out").read_text()
    assert (
        f"train.sbatch: job {job_id} attempt 1 on 1 node(s) x 2, rendezvous localhost:{20000 + int(job_id) % 20000}\n"
        in batch_log
    )
    assert batch_log.endswith("train.sbatch: exit 0\n")
    (node_log,) = (run_dir / "logs").glob(f"tiny-{job_id}-*.out")  # one per node
    assert "tooltrain: tiny on 2 rank(s), ddp; 12 rows from 12 samples" in node_log.read_text()


def test_the_time_limit_warning_checkpoints_requeues_and_the_run_finishes(
    completed_job, repo, run_env, small, tmp_path
):
    _, _, timed = completed_job
    # About 80 s of steps at the rate the first job trained (the Trainer's train_runtime): the
    # warning, due at most ~30 s after the limit is brought close, must find the run still training.
    from train.engine.report import read_metrics

    runtime = next(row["train_runtime"] for row in read_metrics(timed / "metrics.jsonl") if "train_runtime" in row)
    steps = min(5000, max(60, math.ceil(80 / max(runtime / 4, 1e-3))))
    run_dir = tmp_path / "run"
    logs = tmp_path / "logs"
    logs.mkdir()
    submitted = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--job-name=limit",
            "--time=10",
            "--signal=B:USR1@90",
            "--cpus-per-task=2",
            f"--output={logs}/%x-%j.out",
            f"--export=ALL,NPROC_PER_NODE=2,LOG_DIR={logs}",
            str(repo / "launch/slurm/train.sbatch"),
            "recipe=tiny",
            "distributed=ddp",
            *small,
            f"train.max_steps={steps}",
            "train.save_steps=100000",
            f"output_dir={run_dir}",
        ],
        cwd=repo,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]

    deadline = time.monotonic() + 300
    while len(logged_steps(run_dir)) < 2:  # training under way: the workers' Preemption handlers are installed
        assert time.monotonic() < deadline, f"job {job_id} never trained: {job(job_id)}"
        assert job(job_id)["JobState"] in ("PENDING", "RUNNING"), job(job_id)
        time.sleep(0.5)
    # Bring the limit to 1-2 minutes from now: the warning (90 s ahead) is then due, and Slurm's own
    # time-limit check sends it within its 30 s period, long before the job could finish.
    elapsed = seconds(job(job_id)["RunTime"])
    subprocess.run(["scontrol", "update", f"JobId={job_id}", f"TimeLimit={math.ceil((elapsed + 60) / 60)}"], check=True)

    wait_for(job_id, lambda s: s["Restarts"] == "1", "requeue", timeout=240)
    # Each attempt on a real cluster gets the full limit again; give this one room instead of a new warning.
    subprocess.run(["scontrol", "update", f"JobId={job_id}", "TimeLimit=10"], check=True)
    state = wait_for(job_id, lambda s: s["JobState"] == "COMPLETED", "completion", timeout=600)
    assert (state["ExitCode"], state["Restarts"]) == ("0:0", "1")

    batch_log = (logs / f"limit-{job_id}.out").read_text()
    assert f"train.sbatch: job {job_id} attempt 1 on 1 node(s) x 2" in batch_log
    assert "train.sbatch: SIGUSR1 (time limit near): asking the training step to checkpoint and stop\n" in batch_log
    assert f"train.sbatch: the run stopped at a checkpoint (exit 1); requeueing job {job_id}\n" in batch_log
    assert f"train.sbatch: job {job_id} attempt 2 on 1 node(s) x 2" in batch_log
    assert batch_log.endswith("train.sbatch: exit 0\n")

    node_log = next(logs.glob(f"limit-{job_id}-*.out")).read_text()  # both attempts, appended
    stopped_at = int(re.search(r"resuming from checkpoint-(\d+)", node_log).group(1))
    assert 2 <= stopped_at < steps
    assert (run_dir / f"checkpoint-{stopped_at}" / COMPLETE_MARKER).is_file()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["steps"]) == ("completed", steps)
    assert logged_steps(run_dir) == list(range(1, steps + 1))  # every step once: none lost, none trained twice
