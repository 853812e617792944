"""The ITC paper's rows (seed 002, Tables 3, 5, 7) as ``--summary itc`` prints them beside the measured numbers,
the transcription checked against the paper's own arithmetic, and ``eval score itc --matching``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from train.cli import main as cli_main
from train.papers.itc.paper_tables import COLUMNS, MODELS, paper_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "evaluation" / "itc"
SCORE = ["eval", "score", "itc", "--predictions", str(FIXTURES / "predictions.jsonl")]
SCORE += ["--references", str(FIXTURES / "references.jsonl")]


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli_main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_table_5_minus_its_gain_is_table_3():
    """Each Table 5 cell is printed to one decimal with its gain over the base model: the difference is Table 3's
    number to that rounding (a mistyped cell would miss by more)."""
    checked = 0
    for model in MODELS:
        if model.table_3 is None:
            continue
        for column, tuned, gain, base in zip(COLUMNS, model.table_5, model.table_5_gain, model.table_3):
            assert abs(tuned - gain - base) <= 0.1 + 1e-9, (model.label, column)
            checked += 1
    assert checked == 4 * 8


def test_tables_3_and_5_average_per_sample_and_table_7_does_not():
    """An F1 below both P and R is impossible for micro amounts (a harmonic mean lies between P and R); Table 7's F1
    is the harmonic mean of its P and R in every cell."""
    qwen = paper_model("Qwen/Qwen2.5-7B-Instruct")
    assert qwen.label == "Qwen2.5-7B-Instruct"
    assert qwen.table_3[5:] == (42.76, 43.37, 42.71) and qwen.table_3[7] < min(qwen.table_3[5:7])
    assert qwen.table_5 == (96.9, 99.8, 97.7, 98.1, 97.8, 90.6, 90.6, 90.3) and qwen.table_5[7] < 90.6
    for model in MODELS:
        for row in (model.table_7_all, model.table_7_en):
            if row is None:
                continue
            for p, r, f1 in (row[2:5], row[5:8]):
                assert abs(2 * p * r / (p + r) - f1) <= 0.011, (model.label, p, r, f1)


def test_paper_models_are_found_by_name():
    found = {
        name: getattr(paper_model(name), "label", None)
        for name in ("itc_qwen2_5_7b", "Qwen/Qwen2.5-Coder-7B-Instruct", "qwen2_5_3b", "deepseek-coder-1.3b", "tiny")
    }
    assert found == {
        "itc_qwen2_5_7b": "Qwen2.5-7B-Instruct",
        "Qwen/Qwen2.5-Coder-7B-Instruct": "Qwen2.5-Coder-7B",
        "qwen2_5_3b": "Qwen2.5-3B-Instruct",
        "deepseek-coder-1.3b": "DeepSeek-Coder-1.3B",
        "tiny": None,
    }


def test_eval_score_itc_prints_the_paper_beside_macro_and_micro(capsys, tmp_path):
    code, out, err = cli(capsys, *SCORE, "--summary", "itc", "-o", str(tmp_path / "m.json"))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("ITC summary")))
    assert lines[start].endswith(f"no paper model in {FIXTURES / 'predictions.jsonl'}: Qwen2.5-7B-Instruct shown")
    rows = [line.rsplit(maxsplit=8) for line in lines[start + 2 : start + 9]]
    assert [(row[0].strip(), row[1:]) for row in rows] == [
        ("measured, macro (3 items)", ["66.67", "66.67", "50.00", "50.00", "50.00", "44.44", "50.00", "46.67"]),
        ("measured, micro", ["66.67", "66.67", "66.67", "66.67", "66.67", "60.00", "75.00", "66.67"]),
        (
            "paper Table 3, Qwen2.5-7B-Instruct (zero-shot)",
            ["90.51", "96.65", "54.08", "53.06", "53.18", "42.76", "43.37", "42.71"],
        ),
        (
            "paper Table 5, Qwen2.5-7B-Instruct (fine-tuned)",
            ["96.90", "99.80", "97.70", "98.10", "97.80", "90.60", "90.60", "90.30"],
        ),
        (
            "non-English queries, micro (2 items)",
            ["50.00", "50.00", "50.00", "50.00", "50.00", "33.33", "50.00", "40.00"],
        ),
        (
            "paper Table 7, Qwen2.5-7B-Instruct, trained on ALL",
            ["96.30", "99.27", "91.57", "98.57", "94.94", "87.78", "86.36", "87.06"],
        ),
        (
            "paper Table 7, Qwen2.5-7B-Instruct, trained on EN",
            ["91.33", "97.09", "79.55", "79.12", "79.33", "70.82", "71.17", "70.99"],
        ),
    ]
    summary = json.loads((tmp_path / "m.json").read_text())["itc_summary"]
    assert (summary["model"], summary["matched"]) == ("Qwen2.5-7B-Instruct", False)
    assert summary["measured"]["macro"]["ti_f1"] == pytest.approx(7 / 15)
    assert summary["paper"]["table_5"]["ti_f1"] == 90.3


def test_eval_score_itc_matching_option(capsys, tmp_path):
    code, _, err = cli(capsys, *SCORE, "--matching", "seal", "-o", str(tmp_path / "m.json"))
    assert (code, err) == (0, "")
    assert json.loads((tmp_path / "m.json").read_text())["metrics"]["overall"]["matching"] == "seal"
    nexus = FIXTURES.parent / "nexus"
    for option in (["--summary", "itc"], ["--matching", "seal"]):
        code, out, err = cli(
            capsys,
            *["eval", "score", "nexus", "--predictions", str(nexus / "predictions.jsonl")],
            *["--references", str(nexus / "references.jsonl"), *option],
        )
        assert (code, out, err) == (2, "", f"error: {option[0]}{' itc' * (option[1] == 'itc')} is for itc, not nexus\n")


def test_eval_run_itc_scores_the_text_and_prints_the_summary(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path / "cache"))
    argv = ["eval", "run", "itc", "tiny", "--data", str(FIXTURES / "references.jsonl"), "--max-new-tokens", "4"]
    code, out, err = cli(capsys, *argv, "--summary", "itc", "-o", str(tmp_path / "m.json"))
    assert code == 0, err
    assert "paper Table 5, Qwen2.5-7B-Instruct (fine-tuned)" in out
    report = json.loads((tmp_path / "m.json").read_text())
    assert report["metrics"]["overall"]["fm"] == 0.0  # 4 tokens of an untrained model: never the ITC answer
    assert report["itc_summary"]["measured"]["macro"]["tool_f1"] == 0.0
    code, _, err = cli(capsys, "eval", "run", "toolbench", "tiny", "--summary", "itc")
    assert (code, err) == (2, "error: --summary itc is for itc, not toolbench\n")
