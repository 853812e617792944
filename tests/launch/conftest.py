"""Launch fixtures: the repository, an environment for launched runs, free ports, fake Slurm tools.

Runs launched here train the tiny recipe on 16 conversations at 384 tokens (12 packed rows,
global batch 4), LoRA dropout 0, one thread per rank: a few seconds of training after ~10 s of
imports per process. They share one session cache (tokenizer and dataset builds).
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SMALL = ["data.sources.0.limit=16", "data.max_seq_len=384", "peft.dropout=0"]


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slurm: needs a running Slurm cluster (`sinfo` answers); .ci/slurm starts one on loopback"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def free_port():
    """A function returning a port nobody listens on (other engineers' runs share this machine)."""
    return _free_port


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def small() -> list[str]:
    return list(SMALL)


@pytest.fixture(scope="session")
def launch_cache(tooltrain_cache) -> Path:
    return tooltrain_cache  # the session's one cache: each tokenizer is built once for every launched run


@pytest.fixture(scope="session")
def run_env(launch_cache) -> dict[str, str]:
    """The environment a launched run gets: this interpreter, the shared cache, offline, one thread."""
    return {
        **os.environ,
        "PYTHON": sys.executable,
        "TOOLTRAIN_CACHE": str(launch_cache),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
    }


def _losses(run_dir: Path) -> dict[int, float]:
    from train.engine.report import read_metrics

    rows = [row for row in read_metrics(run_dir / "metrics.jsonl") if "loss" in row]
    steps = [row["step"] for row in rows]
    assert len(steps) == len(set(steps)), f"steps logged more than once: {steps}"
    return {row["step"]: row["loss"] for row in rows}


@pytest.fixture(scope="session")
def losses():
    """A function: step -> loss from RUN_DIR/metrics.jsonl; fails when a step was logged twice."""
    return _losses
