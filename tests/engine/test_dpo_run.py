"""``tooltrain train recipe=dpo_tiny`` end to end (TRL's DPOTrainer on the tiny model and the shipped glaive data):
the DPO numbers logged every step to the console and metrics.jsonl, the pair counts in summary.json, checkpoints,
the final adapter without TRL's reference copy; and an interrupted run resumes to the uninterrupted run's state,
loss for loss and tensor for tensor. Slow tier: each run trains for ~20 s."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

STEPS = 6  # recipes/dpo_tiny.yaml: 6 steps, a checkpoint every 2
DPO_KEYS = ("rewards/margins", "rewards/accuracies", "rewards/chosen", "logps/chosen", "logps/rejected")


def command(out: Path) -> list[str]:
    return [sys.executable, "-m", "train", "train", "recipe=dpo_tiny", f"output_dir={out}"]


def launch(engine, out: Path) -> str:
    result = subprocess.run(  # noqa: PLW1510 (the return code is asserted with the output)
        command(out), cwd=engine.repo, env=engine.env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


@pytest.fixture(scope="module")
def cli_run(engine, tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("dpo") / "run"
    return out, launch(engine, out)


def test_dpo_tiny_trains_logs_the_dpo_numbers_and_counts_its_pairs(engine, cli_run):
    out, stdout = cli_run
    rows = [row for row in engine.metrics(out) if "loss" in row]
    assert [row["step"] for row in rows] == list(range(1, STEPS + 1))
    assert all(key in row for row in rows for key in DPO_KEYS)
    # the reference is the policy with its new adapter disabled: the same model at step 1, so no reward yet
    assert rows[0]["rewards/chosen"] == rows[0]["rewards/rejected"] == rows[0]["rewards/margins"] == 0.0
    assert rows[0]["loss"] == pytest.approx(0.6931, abs=1e-4)  # -log sigmoid(0)
    assert stdout.count("  dpo  margin ") == STEPS and "(dpo, beta 0.1, sigmoid; " in stdout

    summary = engine.summary(out)
    assert (summary["status"], summary["objective"], summary["steps"]) == ("completed", "dpo", STEPS)
    pairs = summary["pairs"]
    skipped = sum(count for key, count in pairs.items() if key.startswith("skipped"))
    assert pairs["read"] == 60 == pairs["paired"] + skipped  # the 60 shipped glaive conversations
    assert pairs["rows"] > 100 and set(summary["dpo"]) >= {"beta", "loss_type", "rewards/margins"}
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4", "checkpoint-6"]
    assert (out / "report.png").is_file()
    adapter = engine.adapter(out / "final")
    assert adapter and not any(".ref." in key for key in adapter)  # TRL's reference copy is dropped


def test_an_interrupted_dpo_run_resumes_to_the_same_final_state(engine, cli_run, tmp_path, capsys):
    reference, _ = cli_run
    run_dir = engine.copy_run(reference, tmp_path / "run", keep_through_step=4)  # killed after checkpoint-4
    from train.engine.config import compose
    from train.engine.run import run

    with engine.in_process():
        result = run(compose(["recipe=dpo_tiny", f"output_dir={run_dir}"]))
    assert "resuming from checkpoint-4" in capsys.readouterr().out
    assert (result.status, result.global_step) == ("completed", STEPS)
    assert engine.losses(run_dir) == engine.losses(reference)
    engine.assert_same_tensors(engine.adapter(run_dir / "final"), engine.adapter(reference / "final"))
    resumed = {row["step"]: row["rewards/margins"] for row in engine.metrics(run_dir) if "loss" in row}
    assert resumed == {row["step"]: row["rewards/margins"] for row in engine.metrics(reference) if "loss" in row}
    assert json.loads((run_dir / "summary.json").read_text())["pairs"] == engine.summary(reference)["pairs"]


def test_full_fine_tuning_trains_against_the_base_model_built_again(engine, tmp_path):
    from train.engine.config import compose
    from train.engine.run import run

    with engine.in_process():
        result = run(compose(["recipe=dpo_tiny", "peft=none", "train.max_steps=2", f"output_dir={tmp_path / 'run'}"]))
    first, second = [row for row in engine.metrics(tmp_path / "run") if "loss" in row]
    # the reference is the policy's initial weights (the same config and seed): no reward before the first update
    assert first["rewards/chosen"] == first["rewards/rejected"] == 0.0 and second["rewards/margins"] != 0.0
    assert result.status == "completed" and (tmp_path / "run" / "final" / "model.safetensors").is_file()


def test_a_preempted_dpo_run_saves_exits_75_and_the_rerun_completes_the_same_run(engine, cli_run, tmp_path):
    reference, _ = cli_run
    run_dir = tmp_path / "run"
    stopped = engine.preempt(command(run_dir), run_dir, after_step=2, steps=STEPS)
    assert f"resuming from checkpoint-{stopped}" in launch(engine, run_dir)
    assert engine.summary(run_dir)["status"] == "completed"
    assert engine.losses(run_dir) == engine.losses(reference)
    engine.assert_same_tensors(engine.adapter(run_dir / "final"), engine.adapter(reference / "final"))
