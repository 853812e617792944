"""Trackers and run files: tensorboard events and an offline wandb run under RUN_DIR, metrics.jsonl
with one line per logged step, report.png. Two-step runs of the tiny recipe."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from train.engine.config import REPO_ROOT

STEPS = ["train.max_steps=2", "train.save_steps=2"]
SMALL = ["recipe=tiny", "data.sources.0.limit=16", "data.max_seq_len=384"]  # as the engine fixture's runs


@pytest.fixture(scope="module")
def tensorboard_run(engine, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tracking") / "tensorboard"
    mp = pytest.MonkeyPatch()
    mp.setenv("TENSORBOARD_LOGGING_DIR", "unset")  # report_to sets it for the run; restored afterwards
    try:
        result = engine.run(out, "tracking=tensorboard", *STEPS)
    finally:
        mp.undo()
    assert result.status == "completed" and result.global_step == 2
    return out


def metrics_rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_tensorboard_writes_the_logged_losses_under_run_dir(tensorboard_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = list((tensorboard_run / "tensorboard").rglob("events.out.tfevents.*"))
    assert len(events) == 1
    accumulator = EventAccumulator(str(events[0].parent))
    accumulator.Reload()
    logged = [(e.step, round(e.value, 5)) for e in accumulator.Scalars("train/loss")]
    expected = [(row["step"], round(row["loss"], 5)) for row in metrics_rows(tensorboard_run) if "loss" in row]
    assert [step for step, _ in logged] == [1, 2]
    assert logged == expected


def test_metrics_jsonl_has_one_object_per_logged_step_with_step_and_loss(tensorboard_run):
    rows = metrics_rows(tensorboard_run)
    per_step = [row for row in rows if "loss" in row]
    assert [row["step"] for row in per_step] == [1, 2]
    assert all(isinstance(row["loss"], float) and row["loss"] > 0 for row in per_step)
    assert all(
        {"learning_rate", "grad_norm", "tokens_per_s_per_device", "padding_efficiency"} <= set(row) for row in per_step
    )
    # the only other line is the Trainer's end-of-training record, at the last step
    assert [sorted(set(row) & {"step", "train_runtime"}) for row in rows if "loss" not in row] == [
        ["step", "train_runtime"]
    ]
    assert [row["step"] for row in rows if "loss" not in row] == [2]


def test_report_png_is_written(tensorboard_run):
    assert (tensorboard_run / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_wandb_offline_writes_its_run_under_run_dir(engine, tmp_path):
    out = tmp_path / "wandb_run"
    env = {key: value for key, value in engine.env.items() if not key.startswith("WANDB_")}
    env.update(WANDB_MODE="offline", WANDB_SILENT="true")
    command = [sys.executable, "-m", "train", "train", *SMALL, *STEPS, "tracking=wandb", f"output_dir={out}"]
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    runs = sorted((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    assert len(list(runs[0].glob("run-*.wandb"))) == 1
    assert b"train/loss" in next(runs[0].glob("run-*.wandb")).read_bytes()  # the losses went to wandb
    assert [row["step"] for row in metrics_rows(out) if "loss" in row] == [1, 2]


def test_summary_json_paths_are_relative_to_the_run_folder(tensorboard_run):
    summary = json.loads((tensorboard_run / "summary.json").read_text())
    assert summary["final"] == "final" and (tensorboard_run / summary["final"] / "adapter_config.json").is_file()
    assert summary["run"] == {"name": "tiny", "model": "tiny_llama", "chat_format": "chatml", "recipe": None}


def test_the_report_of_a_run_holds_loss_lr_and_tokens_per_s(tensorboard_run):
    from train.engine.report import read_metrics, report_panels

    panels = {panel.title: panel for panel in report_panels(read_metrics(tensorboard_run / "metrics.jsonl"))}
    assert list(panels) == ["training loss", "learning rate", "real tokens/s (per device, padding excluded)"]
    assert [(s.label, s.steps) for s in panels["training loss"].series] == [
        ("loss (raw)", [1, 2]),
        ("loss (EMA, smoothing 0.8)", [1, 2]),
    ]
    assert all(value > 0 for value in panels["real tokens/s (per device, padding excluded)"].series[0].values)
