"""Acceptance: ``tooltrain train recipe=mt_llama_tiny`` runs build -> train -> Meta-Bench eval on a CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_mt_llama_tiny_builds_trains_and_scores_metabench(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "TOOLTRAIN_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    command = [
        sys.executable,
        "-m",
        "train",
        "train",
        "recipe=mt_llama_tiny",
        f"output_dir={out}",
        "train.max_steps=2",
        "eval.benchmarks.0.limit=8",
        "eval.benchmarks.0.max_new_tokens=8",
    ]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]

    summary = json.loads((out / "summary.json").read_text())
    assert (summary["status"], summary["steps"]) == ("completed", 2)
    data = summary["data"]
    # 84 dialogues read: 13 held out for the shipped Meta-Bench, 1 glaive dialogue whose call breaks its schema
    assert (data["read"], data["dropped_by_builder"], data["invalid"]) == (84, 14, 0)
    assert data["reasons"]["dropped_by_builder: held out for Meta-Bench"] == 13
    assert data["reasons"]["dropped_by_builder: invalid dialogue (arguments-schema)"] == 1
    assert data["train_rows"] + data["dropped_overlong"] + data["dropped_untrained"] + data["unrenderable"] == 70

    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [row for row in rows if "eval/metabench/t_acc" in row]
    assert len(evals) == 1
    logged = evals[0]
    for metric in ("t_acc", "p_acc", "irr", "fmd", "hr@1", "call_turns", "irrelevance_turns", "fmd_turns"):
        assert f"eval/metabench/{metric}" in logged, metric
    # the first eight bench rows: two dialogues' chat rows (closed, open), then glaive_sample-26's single_call,
    # function_existing and function_missing (retrieve, call)
    counted = tuple(logged[f"eval/metabench/{k}"] for k in ("call_turns", "irrelevance_turns", "fmd_turns"))
    assert counted == (3, 4, 1)
    assert (out / "report.png").is_file()
    # the run ends with Meta-Tool's Table 2: the paper's rows, then the run's (8 rows: simple groups only)
    table = summary["paper_tables"]["metatool"]
    assert [row["row"] for row in table["measured"]] == ["simple  this run, trained", "hard    this run, trained"]
    assert table["measured"][1]["FM T-Acc"] == {"unrun": "no call turn of this group in the evaluated rows"}
    last = done.stdout.rstrip().splitlines()[-1]
    assert last == "  the base model's row needs eval.at_start=true (the step-0 evaluation)"
