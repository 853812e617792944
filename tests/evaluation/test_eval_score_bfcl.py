"""``tooltrain eval score bfcl`` over folders: every category of a BFCL result folder and BFCL's leaderboard
summaries (tests/fixtures/evaluation/bfcl/folders/README.md says what each file holds).

Hand computation (v4, evaluation/bfcl/scorer.py): simple_python 1/3, irrelevance 1/2, live_simple 2/2; simple AST =
(1/3 + 0 + 0) / 3; non-live = simple AST / 4; live = 1.0 * 2 / (2 + 1053 + 16 + 24) (the unscored live AST
categories count with their full sizes); irrelevance = (1/2 + 0) / 2; overall = 10 % of each of those three.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from train.cli import main as cli_main

FOLDERS = Path(__file__).resolve().parents[1] / "fixtures" / "evaluation" / "bfcl" / "folders"
RESULT, DATA = FOLDERS / "result", FOLDERS / "data"
SIMPLE_AST, LIVE, IRRELEVANCE = 1 / 9, 2 / 1095, 1 / 4


def score(capsys, *extra: str, predictions: Path = RESULT, data: Path = DATA) -> tuple[int, str, str]:
    code = cli_main(["eval", "score", "bfcl", "--predictions", str(predictions), "--references", str(data), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_category_and_the_v4_summary(capsys):
    code, out, err = score(capsys)
    assert (code, err) == (0, "")
    assert (
        out
        == f"""\
bfcl: 7 items in 3 categories from {RESULT} against {DATA}
by_category    accuracy  correct  total
irrelevance      0.5000        1      2
live_simple      1.0000        2      2
simple_python    0.3333        1      3

summary                value
version                   v4
overall               0.0280
non_live_overall      0.0278
non_live_ast_summary  0.0278
non_live_simple_ast   0.1111
live_overall          0.0018
live_ast_summary      0.0018
irrelevance           0.2500
relevance             0.0000
multi_turn_overall    0.0000
web_search_summary    0.0000
memory_summary        0.0000
agentic_overall       0.0000

categories not scored, counted as 0 by the v4 summary: 19
  simple_java, simple_javascript, multiple, parallel, parallel_multiple, live_multiple,
  live_parallel, live_parallel_multiple, live_irrelevance, live_relevance, multi_turn_base,
  multi_turn_miss_func, multi_turn_miss_param, multi_turn_long_context, web_search_base,
  web_search_no_snippet, memory_kv, memory_vector, memory_rec_sum
prediction file not scored: {RESULT}/BFCL_v3_multi_turn_base_result.json: multi_turn_base: not scorable here \
(exec, REST, multi-turn and agentic categories need BFCL's executors)
simple_python: references without a prediction (scored wrong): 1
  {DATA}/BFCL_v3_simple_python.json:3: id 'simple_2'
simple_python: predictions without a reference (not scored): 1
  {RESULT}/BFCL_v3_simple_python_result.json:3: id 'simple_9'
"""
    )


def test_metrics_json_and_per_item_lines(capsys, tmp_path):
    code, _, _ = score(capsys, "-o", str(tmp_path / "m.json"), "--per-item", str(tmp_path / "items.jsonl"))
    assert code == 0
    report = json.loads((tmp_path / "m.json").read_text())
    assert report["metrics"]["by_category"] == {
        "irrelevance": {"accuracy": 0.5, "correct": 1, "total": 2},
        "live_simple": {"accuracy": 1.0, "correct": 2, "total": 2},
        "simple_python": {"accuracy": 1 / 3, "correct": 1, "total": 3},
    }
    summary = report["metrics"]["summary"]
    assert summary["non_live_simple_ast"] == pytest.approx(SIMPLE_AST, abs=1e-15)
    assert summary["live_ast_summary"] == pytest.approx(LIVE, abs=1e-15)
    assert summary["irrelevance"] == IRRELEVANCE
    assert summary["overall"] == pytest.approx(0.1 * (SIMPLE_AST / 4 + LIVE + IRRELEVANCE), abs=1e-15)
    assert len(summary["missing"]) == 19 and summary["categories"]["live_simple"] == 1.0
    assert report["counts"] == {"items": 7, "categories": 3, "files_not_scored": 1}
    assert report["issues"]["simple_python"]["missing_prediction_ids"] == ["simple_2"]
    items = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert [(i["category"], i["id"], i["valid"]) for i in items] == [
        ("irrelevance", "irrelevance_0", True),
        ("irrelevance", "irrelevance_1", False),
        ("live_simple", "live_simple_0", True),
        ("live_simple", "live_simple_1", True),
        ("simple_python", "simple_0", True),
        ("simple_python", "simple_1", False),
        ("simple_python", "simple_2", False),
    ]


def test_chosen_categories_and_the_v2_summary(capsys, tmp_path):
    code, out, _ = score(
        capsys, "--category", "simple", "--category", "live_simple", "--summary", "v2", "-o", str(tmp_path / "m.json")
    )
    assert code == 0 and out.startswith(f"bfcl: 5 items in 2 categories from {RESULT}")
    summary = json.loads((tmp_path / "m.json").read_text())["metrics"]["summary"]
    # v2: simple = unweighted(non-live simple AST 1/9, live_simple 1.0) = 5/9; nine more groups at 0 (a missing
    # category counts 0 with count 0); the live AST summary is weighted: 1.0 over live_simple's 2 items
    assert summary["simple_ast"] == pytest.approx(5 / 9, abs=1e-15)
    assert summary["overall"] == pytest.approx(5 / 9 / 10, abs=1e-15)
    assert (summary["version"], summary["live_ast_summary"], summary["irrelevance"]) == ("v2", 1.0, 0.0)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--category", "multiple"], f"error: no prediction file for multiple in {RESULT}\n"),
        (["--category", "nope"], "error: --category: unknown or unsupported BFCL category 'nope'"),
        (["--references", str(DATA)], "error: with a folder of predictions, give the BFCL data folder once"),
    ],
)
def test_unusable_arguments_exit_2(capsys, extra, message):
    code, out, err = score(capsys, *extra)
    assert (code, out) == (2, "") and err.startswith(message)


def test_a_category_without_its_questions_or_answers_exits_2(capsys, tmp_path):
    data = tmp_path / "data"
    (data / "possible_answer").mkdir(parents=True)
    (data / "BFCL_v3_irrelevance.json").write_text((DATA / "BFCL_v3_irrelevance.json").read_text())
    code, _, err = score(capsys, data=data)
    assert (code, err) == (2, f"error: no questions file for live_simple in {data}\n")
    (data / "BFCL_v3_live_simple.json").write_text((DATA / "BFCL_v3_live_simple.json").read_text())
    code, _, err = score(capsys, "--category", "live_simple", data=data)
    missing = data / "possible_answer" / "BFCL_v3_live_simple.json"
    assert (code, err) == (
        2,
        (f"error: BFCL category live_simple needs its possible-answer rows ({missing} not found)\n"),
    )
