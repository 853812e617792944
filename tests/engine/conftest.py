"""Training-engine fixtures: one small config, reference runs shared by the session, launchers.

Every run here trains the tiny recipe on 12 packed rows (16 conversations at 384 tokens; global
batch 4 -> 3 steps per epoch) for 6 steps with a checkpoint every 2, LoRA dropout 0. Runs that must
be separate processes (torchrun, kills, signals) go through ``python -m train train``, which is the
``tooltrain train`` entry point; the others call ``run(cfg)`` in this process with the same config.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from session_cache import build_once, session_folder

REPO = Path(__file__).resolve().parents[2]
STEPS = 6
OVERRIDES = [
    "recipe=tiny",
    "data.sources.0.limit=16",
    "data.max_seq_len=384",
    "peft.dropout=0",
    f"train.max_steps={STEPS}",
    "train.save_steps=2",
]


class Engine:
    """Launches runs of the engine config and reads what they leave in RUN_DIR."""

    steps = STEPS
    repo = REPO

    def __init__(self, cache: Path, extensions: Path):
        self.cache = cache
        self.extensions = extensions  # TORCH_EXTENSIONS_DIR: stays empty unless something JIT-compiles
        self.env = {
            **os.environ,
            "TOOLTRAIN_CACHE": str(cache),
            "TORCH_EXTENSIONS_DIR": str(extensions),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "OMP_NUM_THREADS": "1",  # 2 ranks on 2 cores; and the same kernels as in-process runs
            "PYTHONUNBUFFERED": "1",
        }

    def command(self, out: Path, *extra: str, ranks: int = 1, launcher: list[str] | None = None) -> list[str]:
        args = ["train", *OVERRIDES, f"output_dir={out}", *extra]
        if ranks > 1:
            return [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                f"--nproc_per_node={ranks}",
                "-m",
                "train",
                *args,
            ]
        return [*(launcher or [sys.executable, "-m", "train"]), *args]

    def launch(self, out: Path, *extra: str, ranks: int = 1, timeout: float = 300) -> subprocess.CompletedProcess:
        result = subprocess.run(
            self.command(out, *extra, ranks=ranks),
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
        return result

    def start(self, out: Path, *extra: str, launcher: list[str] | None = None) -> subprocess.Popen:
        log = (out.parent / f"{out.name}.log").open("w")
        return subprocess.Popen(
            self.command(out, *extra, launcher=launcher),
            cwd=REPO,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )

    @contextmanager
    def in_process(self):
        """This process set up like the launched ones: the session cache and one thread."""
        import torch

        saved_env, saved_threads = os.environ.get("TOOLTRAIN_CACHE"), torch.get_num_threads()
        os.environ["TOOLTRAIN_CACHE"] = str(self.cache)
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(saved_threads)
            if saved_env is None:
                os.environ.pop("TOOLTRAIN_CACHE", None)
            else:
                os.environ["TOOLTRAIN_CACHE"] = saved_env

    def run(self, out: Path, *extra: str, callbacks: list | None = None):
        from train.engine.config import compose
        from train.engine.run import run

        with self.in_process():
            return run(compose([*OVERRIDES, f"output_dir={out}", *extra]), extra_callbacks=callbacks)

    @staticmethod
    def metrics(run_dir: Path) -> list[dict]:
        from train.engine.report import read_metrics

        return read_metrics(run_dir / "metrics.jsonl")

    @staticmethod
    def losses(run_dir: Path) -> dict[int, float]:
        """Step -> loss from RUN_DIR/metrics.jsonl; fails when a step was logged twice."""
        rows = [row for row in Engine.metrics(run_dir) if "loss" in row]
        steps = [row["step"] for row in rows]
        assert len(steps) == len(set(steps)), f"steps logged more than once: {steps}"
        return {row["step"]: row["loss"] for row in rows}

    @staticmethod
    def adapter(path: Path) -> dict:
        from safetensors.torch import load_file

        return load_file(str(path / "adapter_model.safetensors"))

    @staticmethod
    def assert_same_tensors(actual: dict, expected: dict) -> None:
        import torch

        assert sorted(actual) == sorted(expected)
        different = [key for key in expected if not torch.equal(actual[key], expected[key])]
        assert different == [], f"{len(different)} tensors differ, e.g. {different[:2]}"

    @staticmethod
    def wait_for_step(run_dir: Path, process: subprocess.Popen, step: int, timeout: float = 240) -> int:
        """Polls metrics.jsonl until a logged step >= ``step``; returns that step."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            logged = [row["step"] for row in Engine.metrics(run_dir) if "loss" in row]
            if logged and max(logged) >= step:
                return max(logged)
            assert process.poll() is None, f"the run exited with {process.returncode} before step {step}"
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        raise AssertionError(f"no step {step} within {timeout} s")

    def preempt(self, command: list[str], run_dir: Path, after_step: int, steps: int) -> int:
        """Starts ``command``, sends SIGTERM once step ``after_step`` is logged, and checks the preemption: exit 75
        (requeue), summary.json says preempted before ``steps``, and the checkpoint it saved is complete. Returns the
        step it stopped at."""
        from train.engine.callbacks import COMPLETE_MARKER, REQUEUE_EXIT_CODE

        process = subprocess.Popen(
            command, cwd=self.repo, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.wait_for_step(run_dir, process, after_step)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=120) == REQUEUE_EXIT_CODE
        stopped = self.summary(run_dir)["steps"]
        assert self.summary(run_dir)["status"] == "preempted" and after_step <= stopped < steps
        assert (run_dir / f"checkpoint-{stopped}" / COMPLETE_MARKER).is_file()
        return stopped

    @staticmethod
    def copy_run(source: Path, target: Path, keep_through_step: int) -> Path:
        """A copy of a finished run as a kill after ``keep_through_step`` would leave it."""
        shutil.copytree(source, target)
        for folder in target.glob("checkpoint-*"):
            if int(folder.name.split("-")[1]) > keep_through_step:
                shutil.rmtree(folder)
        for name in ("final", "summary.json", "report.png"):
            path = target / name
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
        return target

    @staticmethod
    def summary(run_dir: Path) -> dict:
        return json.loads((run_dir / "summary.json").read_text())


@pytest.fixture(scope="session")
def engine(tooltrain_cache, tmp_path_factory) -> Engine:
    return Engine(tooltrain_cache, session_folder(tmp_path_factory) / "torch_extensions")


# The reference runs below are built once per pytest run and shared by every xdist worker (build_once).


@pytest.fixture(scope="session")
def single_run(engine, tmp_path_factory) -> Path:
    """The uninterrupted single-process run every other run is compared with."""

    def train(folder: Path) -> None:
        result = engine.run(folder / "run")
        assert result.status == "completed" and result.global_step == STEPS

    return build_once(tmp_path_factory, "engine-single", train) / "run"


@pytest.fixture(scope="session")
def ddp_run(engine, tmp_path_factory) -> Path:
    return (
        build_once(
            tmp_path_factory, "engine-ddp", lambda folder: engine.launch(folder / "run", "distributed=ddp", ranks=2)
        )
        / "run"
    )


@pytest.fixture(scope="session")
def zero3_run(engine, tmp_path_factory) -> tuple[Path, str]:
    """(RUN_DIR, the launcher's combined output) of THE golden 2-rank ZeRO-3 run: the one 2-rank run that the
    strategy, export, report and resume tests all read (slow tier: only slow tests ask for it)."""

    def train(folder: Path) -> None:
        result = engine.launch(folder / "run", "distributed=zero3", ranks=2)
        (folder / "output.txt").write_text(result.stdout + result.stderr)

    folder = build_once(tmp_path_factory, "engine-zero3", train)
    return folder / "run", (folder / "output.txt").read_text()
