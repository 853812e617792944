"""`-m launcher=slurm` sweeps: what submitit is asked to submit, and what happens on its preemption signal.

submitit has Slurm send SIGUSR2 before the time limit and, left alone, requeues the job at once from
its signal handler, mid-step, with nothing saved. tooltrain's Preemption holds that signal during
training, checkpoints, then hands it back to submitit's own handler, which requeues.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from submitit.core.job_environment import JobEnvironment, SignalHandler
from submitit.core.utils import DelayedSubmission, JobPaths

from train.engine.callbacks import PREEMPTION_SIGNALS, Preemption
from train.engine.config import CONF_DIR, ConfigError, register
from train.engine.config import compose as compose_checked
from train.engine.distributed import requeue_submitit_job


def _sweep_config(tmp_path, *overrides):
    register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(
            "train",
            overrides=["recipe=tiny", "launcher=slurm", f"output_dir={tmp_path / 'run'}", *overrides],
            return_hydra_config=True,
        )


class _Submitted(Exception):
    pass


def _sbatch_of_sweep(cfg, monkeypatch) -> tuple[str, object]:
    """The sbatch script and executor hydra-submitit-launcher would submit for one sweep job (sbatch not run)."""
    import submitit.slurm.slurm as submitit_slurm

    def submit(executor, command):
        raise _Submitted(executor._make_submission_file_text(command, "uid"), executor)

    monkeypatch.setattr(submitit_slurm.SlurmExecutor, "_submit_command", submit)
    launcher = instantiate(cfg.hydra.launcher)
    launcher.setup(hydra_context=None, task_function=print, config=cfg)
    with pytest.raises(_Submitted) as submitted:
        launcher.launch([["optim.lr=1e-3"]], initial_job_idx=0)
    return submitted.value.args


@pytest.mark.slurm
@pytest.mark.skipif(shutil.which("srun") is None, reason="submitit's SlurmExecutor needs `srun` on PATH")
def test_a_slurm_sweep_job_gets_one_task_per_gpu_and_submitits_signal_before_the_limit(tmp_path, monkeypatch):
    cfg = _sweep_config(tmp_path, "launcher.gpus_per_node=4", "launcher.signal_lead_s=300")
    assert cfg.launcher.tasks_per_node == 4  # follows gpus_per_node
    sbatch, executor = _sbatch_of_sweep(cfg, monkeypatch)
    lines = sbatch.splitlines()
    assert {"#SBATCH --gpus-per-node=4", "#SBATCH --ntasks-per-node=4", "#SBATCH --signal=USR2@300"} <= set(lines)
    assert executor.max_num_timeout == 10  # launcher.timeout_requeues: requeues at the time limit
    # the signal Slurm will send is one Preemption checkpoints on, and the one handed back to submitit
    assert getattr(signal, "SIG" + JobEnvironment.USR_SIG) == signal.SIGUSR2 and signal.SIGUSR2 in PREEMPTION_SIGNALS


def test_more_gpus_than_tasks_per_node_is_a_compose_error():
    with pytest.raises(ConfigError) as err:
        compose_checked(["recipe=tiny", "launcher=slurm", "launcher.gpus_per_node=8", "launcher.tasks_per_node=1"])
    assert str(err.value) == (
        "invalid configuration:\n  - launcher=slurm starts launcher.tasks_per_node=1 process(es) per node, one rank "
        "on one GPU each, but launcher.gpus_per_node=8; leave tasks_per_node unset (it follows gpus_per_node) "
        "or make them equal"
    )
    local = compose_checked(["recipe=tiny", "launcher=submitit_local", "launcher.tasks_per_node=2"])
    assert local.launcher.tasks_per_node == 2  # submitit_local: tasks are CPU processes, no GPUs to match


def test_a_bad_sweep_fails_before_any_job_is_queued(repo, run_env, tmp_path):
    out = tmp_path / "run"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "train",
            "train",
            "-m",
            "recipe=tiny",
            "launcher=slurm",
            "launcher.gpus_per_node=2",
            "launcher.tasks_per_node=1",
            "optim.lr=1e-3,2e-3",
            f"output_dir={out}",
        ],
        cwd=repo,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert "error: invalid configuration:\n  - launcher=slurm starts launcher.tasks_per_node=1" in result.stderr
    assert not (tmp_path / "run-sweep").exists()


class _Job:
    """A sweep job as submitit pickles it: callable, with the ``checkpoint`` hydra's launcher has."""

    def __call__(self):
        return None

    def checkpoint(self):
        return DelayedSubmission(self)


class _SlurmJob:
    """What submitit's SignalHandler asks of the Slurm job environment; records the requeue."""

    def __init__(self, global_rank: int):
        self.global_rank = global_rank
        self.requeued: list[int] = []

    def _requeue(self, countdown: int) -> None:
        self.requeued.append(countdown)


@pytest.mark.parametrize("rank", [0, 1])
def test_submitits_signal_checkpoints_first_then_submitit_requeues_the_job(tmp_path, monkeypatch, rank):
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "slurm")
    delayed = DelayedSubmission(_Job())
    delayed.set_timeout(60, 10)
    job, paths = _SlurmJob(rank), JobPaths(tmp_path, job_id="7")
    submitit_handler = SignalHandler(job, paths, delayed).checkpoint_and_try_requeue
    previous = signal.signal(signal.SIGUSR2, submitit_handler)  # as submitit's process_job installs it
    try:
        preemption = Preemption(lambda flag: flag)
        control = type("Control", (), {"should_save": False, "should_training_stop": False})()
        os.kill(os.getpid(), signal.SIGUSR2)  # mid-step
        assert job.requeued == [] and not paths.submitted_pickle.exists()  # submitit did not act mid-step
        preemption.on_step_end(None, None, control)
        assert (control.should_save, control.should_training_stop) == (True, True)  # the Trainer saves, then stops
        preemption.on_train_end(None, None, control)
        assert signal.getsignal(signal.SIGUSR2) == submitit_handler

        assert requeue_submitit_job(signal.SIGTERM) is False  # scancel / preemption: no requeue of ours
        assert job.requeued == []
        if rank == 0:
            with pytest.raises(SystemExit):  # submitit ends the process once it has requeued
                requeue_submitit_job(preemption.received)
            assert job.requeued == [10] and paths.submitted_pickle.exists()  # no timeout counted: not at the limit
        else:
            assert requeue_submitit_job(preemption.received) is True
            assert job.requeued == []  # only global rank 0 requeues; the others end with the job
    finally:
        signal.signal(signal.SIGUSR2, previous)


def test_outside_submitit_nothing_is_handed_over(monkeypatch):
    monkeypatch.delenv("SUBMITIT_EXECUTOR", raising=False)
    assert requeue_submitit_job(signal.SIGUSR2) is False
