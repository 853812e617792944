"""Slow tier for BFCL multi-turn: per-entry agreement with bfcl-eval's multi_turn_checker on every entry of
multi_turn_base, miss_func, miss_param and long_context (the gold, the gold one call per answer and up to six
perturbations each: 5,853 cases, about a minute), and ``tooltrain train recipe=tiny eval=bfcl_v4_mini`` as a
subprocess: the episodes run in the callback at steps 0, 4 and 8 and reach metrics.jsonl, the summary and the
report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("bfcl_eval")
HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import bfcl_multi_turn_perturb as perturb

from train.evaluation.bfcl.multi_turn.check import check_entry

REPO_ROOT = Path(__file__).resolve().parents[2]
# (category, entries x perturbations checked): a perturbation that stopped firing shows here
CASES = {"base": 1364, "miss_func": 1562, "miss_param": 1562, "long_context": 1365}


def verdict(result: dict) -> tuple[bool, str | None]:
    return result["valid"], None if result["valid"] else result["error_type"]


@pytest.mark.slow
@pytest.mark.parametrize("category", list(CASES))
def test_every_entry_agrees_with_the_official_checker_on_gold_and_perturbations(category):
    counts: Counter = Counter()
    disagreements = []
    for entry, gold, functions in perturb.load_category(category):
        meta = {"category": f"multi_turn_{category}", "bfcl_functions": functions, **entry}
        number = int(entry["id"].rsplit("_", 1)[1])
        for kind, result in perturb.perturbations(gold, functions, seed=number).items():
            ours = verdict(check_entry(result, gold, meta, entry["id"]))
            official = verdict(perturb.official_verdict(result, gold, entry))
            counts[kind, official[0]] += 1
            if ours != official:
                disagreements.append((entry["id"], kind, ours, official))
    assert disagreements == []
    assert sum(counts.values()) == CASES[category], dict(counts)
    assert counts["gold", True] == 200 and counts["clarification", False] == 200


@pytest.mark.slow
def test_tiny_recipe_with_bfcl_v4_mini_plays_episodes_in_the_callback(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "TOOLTRAIN_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    result = subprocess.run(
        [sys.executable, "-m", "train", "train", "recipe=tiny", "eval=bfcl_v4_mini", f"output_dir={out}"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=1200,
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [row["step"] for row in rows if "eval/bfcl_multi_turn/accuracy" in row]
    assert steps == [0, 4, 8]
    assert all(row["eval/bfcl_multi_turn/total"] == 2 for row in rows if "eval/bfcl_multi_turn/total" in row)
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["eval"]) == {"bfcl_multi_turn", "bfcl", "bfcl_2"}
    played = [json.loads(line) for line in (out / "eval_predictions" / "bfcl_multi_turn-step8.jsonl").open()]
    assert [row["id"] for row in played] == ["multi_turn_base_105", "multi_turn_base_132"]
    assert all(len(row["result"]) == 2 and row["generation"]["steps"] for row in played)  # two turns answered
    assert (out / "report.png").stat().st_size > 0
