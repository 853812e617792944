"""BFCL v4 from the installed bfcl-eval package (train/evaluation/bfcl/v4.py), its v3/v4 leaderboard numbers
(summary.py, leaderboard.py), ``eval run bfcl_v4`` (commands/eval/run_bfcl_v4.py) and ``conf/eval/bfcl_v4.yaml``."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

pytest.importorskip("bfcl_eval")

from train.commands.eval.run import generate_items
from train.commands.eval.run_bfcl_v4 import NO_TASK, plan
from train.commands.eval.run_bfcl_v4 import run as run_suite
from train.data.inputs import resolve_input
from train.engine.config import CONF_DIR
from train.evaluation import SCORERS, ScorerSpec
from train.evaluation.bfcl import v4
from train.evaluation.bfcl.leaderboard import REFERENCE_MODELS, leaderboard, leaderboard_lines
from train.evaluation.bfcl.summary import V4_CATEGORIES, V4_DATASET_SIZES, summarize_bfcl
from train.evaluation.generate import Generation
from train.evaluation.task_base import Task


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# ---- the package's own files -------------------------------------------------------------------------------


def test_every_category_of_the_package_is_listed_with_its_task_or_why_it_is_skipped():
    from bfcl_eval.constants.category_mapping import ALL_CATEGORIES

    assert [c.name for c in v4.CATEGORIES] == list(V4_CATEGORIES) + ["format_sensitivity"]
    assert sorted(c.name for c in v4.CATEGORIES) == sorted(ALL_CATEGORIES)
    tasks = {c.name: c.task for c in v4.CATEGORIES}
    assert [n for n, t in tasks.items() if t == "bfcl"] == list(V4_CATEGORIES[:13])
    assert [n for n, t in tasks.items() if t == "bfcl_multi_turn"] == list(V4_CATEGORIES[13:17])
    skipped = {c.name: c.skip for c in v4.CATEGORIES if c.task is None}
    assert set(skipped) == {*V4_CATEGORIES[17:], "format_sensitivity"} and all(skipped.values())
    for entry in v4.CATEGORIES:
        assert all(path.is_file() for path in v4.files(entry)), entry.name


def test_data_comes_from_the_installed_package_and_sizes_match_the_summary():
    import bfcl_eval

    assert v4.data_dir() == Path(bfcl_eval.__file__).parent / "data"
    for name, size in V4_DATASET_SIZES.items():
        assert len(_rows(v4.files(v4.category(name))[0])) == size, name
    questions, answers = v4.files(v4.category("live_simple"))
    assert [row["id"] for row in _rows(questions)] == [row["id"] for row in _rows(answers)]
    assert v4.files(v4.category("irrelevance"))[1:] == []  # no possible answers: "no call" is right


def test_a_missing_package_is_one_line_naming_the_install(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(v4.BfclNotInstalled, match=r"pip install --no-deps bfcl-eval==2026\.3\.23"):
        v4.data_dir()


def test_unknown_category_lists_the_valid_ones():
    with pytest.raises(ValueError, match="unknown BFCL v4 category 'simple'.*simple_python"):
        v4.chosen(["simple"])
    assert [c.name for c in v4.chosen(["live_simple", "irrelevance"])] == ["irrelevance", "live_simple"]


def test_the_eval_config_is_the_offline_suite_from_the_package():
    cfg = OmegaConf.load(CONF_DIR / "eval" / "bfcl_v4.yaml")
    ordered = [c for c in v4.OFFLINE if not c.multi_turn] + [c for c in v4.OFFLINE if c.multi_turn]
    assert [b.name for b in cfg.benchmarks] == ["bfcl"] * 13 + ["bfcl_multi_turn"] * 4
    for bench, entry in zip(cfg.benchmarks, ordered, strict=True):
        assert bench.name == entry.task and bench.get("source", "bfcl") == "bfcl", entry.name
        assert [resolve_input(path) for path in bench.data] == v4.files(entry), entry.name


# ---- v3 and v4 overall -----------------------------------------------------------------------------------


def test_v3_overall_is_the_unweighted_mean_of_live_non_live_and_multi_turn():
    # gorilla cd9429cc eval_runner_helper.py: non-live overall includes irrelevance, live overall is count-weighted
    # over the six live categories, multi-turn the mean of four; a missing category counts 0 over its full size.
    scores = {name: {"accuracy": 0.5, "total": 10} for name in V4_CATEGORIES[:17]}
    scores["irrelevance"] = {"accuracy": 1.0, "total": 240}
    scores["live_simple"] = {"accuracy": 1.0, "total": 30}
    summary = summarize_bfcl(scores, "v3")
    non_live = (0.5 + 0.5 + 0.5 + 0.5 + 1.0) / 5
    live = (1.0 * 30 + 0.5 * 50) / 80
    assert summary["non_live_overall"] == pytest.approx(non_live)
    assert summary["live_overall"] == pytest.approx(live)
    assert summary["overall"] == pytest.approx((non_live + live + 0.5) / 3)
    assert summary["missing"] == []
    partial = summarize_bfcl({"live_simple": {"accuracy": 1.0, "total": 258}}, "v3")
    assert partial["live_overall"] == pytest.approx(258 / (258 + 1053 + 16 + 24 + 884 + 16))
    assert len(partial["missing"]) == 16


def test_leaderboard_table_shows_na_for_unscored_rows_and_the_published_references():
    board = leaderboard(
        {"simple_python": {"accuracy": 0.9, "total": 400}, "live_simple": {"accuracy": 0.5, "total": 258}}
    )
    rows = {row["label"].strip(): row for row in board["rows"]}
    assert rows["live_simple"]["ours"] == pytest.approx(50.0)
    assert rows["Non-live AST"]["ours"] is None  # java/javascript/... not scored: N/A, as the leaderboard shows
    assert rows["Overall (v4)"]["ours"] == pytest.approx(100 * board["v4"]["overall"])
    assert rows["Overall (v4)"]["reference"]["Qwen3-8B (FC)"] == 42.57
    assert rows["Overall (v3)"]["reference"] == {}  # not published
    text = "\n".join(leaderboard_lines(board, ours="run"))
    assert "xLAM-2-8b-fc-r" in text and "ToolACE-2-8B" in text and "ea03bc8" in text


def test_reference_numbers_agree_with_bfcls_own_formulas():
    # The published sections recombine into the published v4 overall (a check on the copy, not on the source).
    for model, n in REFERENCE_MODELS.items():
        agentic = (n["web_search_summary"] + n["memory_summary"]) / 2
        overall = 0.1 * (n["non_live_ast_summary"] + n["live_overall"] + n["irrelevance"])
        overall += 0.3 * n["multi_turn_overall"] + 0.4 * agentic
        assert overall == pytest.approx(n["overall"], abs=0.02), model
        turns = [n[k] for k in ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param")]
        assert sum([*turns, n["multi_turn_long_context"]]) / 4 == pytest.approx(n["multi_turn_overall"], abs=0.01)


# ---- eval run bfcl_v4 ------------------------------------------------------------------------------------


class NoAnswer:
    """An episode that is over before the model is asked: its record is an empty answer."""

    def prompt(self):
        return None

    def take(self, generation):
        raise AssertionError("a finished episode is never handed a generation")

    def record(self):
        return Generation(text="", stopped=True)


class FakeMultiTurn(Task):
    """Stands in for the multi-turn task under its name: the suite drives it as the real one, episode by episode."""

    native_source = "bfcl"
    episodic = True

    def target(self, conv):
        return len(conv.messages)

    def episode(self, item):
        return NoAnswer()

    def score(self, items, predictions):
        total = len(items)
        return {"overall": {"accuracy": 0.0, "correct": 0, "total": total}}


@pytest.fixture
def multi_turn_registered(monkeypatch):
    others = {name: spec for name, spec in SCORERS._entries.items() if name != "bfcl_multi_turn"}
    monkeypatch.setattr(SCORERS, "_entries", others)  # undone after the test
    SCORERS.register("bfcl_multi_turn", ScorerSpec(score=lambda *a, **k: {}, task=FakeMultiTurn, layout=""))


def test_multi_turn_categories_run_through_their_task_and_a_missing_task_is_said(monkeypatch):
    runnable, skipped = plan(["multi_turn_base", "simple_python", "memory_kv"])
    assert [c.name for c in runnable] == ["simple_python", "multi_turn_base"]  # bfcl_multi_turn is registered
    assert [entry["category"] for entry in skipped] == ["memory_kv"] and "memory backends" in skipped[0]["reason"]
    monkeypatch.setattr(SCORERS, "_entries", {k: v for k, v in SCORERS._entries.items() if k != "bfcl_multi_turn"})
    runnable, skipped = plan(["multi_turn_base"])
    assert runnable == [] and skipped == [
        {"category": "multi_turn_base", "reason": NO_TASK.format(task="bfcl_multi_turn")}
    ]


def test_the_multi_turn_task_is_dispatched_episode_by_episode(multi_turn_registered, tmp_path):
    runnable, skipped = plan(["multi_turn_base"])
    assert [c.name for c in runnable] == ["multi_turn_base"] and skipped == []
    assert generate_items(FakeMultiTurn(), [1, 2], None, None, None, 8) == [Generation(text="", stopped=True)] * 2
    args = _suite_args(tmp_path, category=["multi_turn_base"], limit=2)
    model = (SimpleNamespace(description="fake model", tokenizer=None), "fake_format", None, None)
    assert run_suite(args, lambda: model, generate_items, lambda generations: {}) == 0
    report = json.loads(args.output.read_text(encoding="utf-8"))
    assert report["metrics"]["by_category"] == {"multi_turn_base": {"accuracy": 0.0, "correct": 0, "total": 2}}


def _gold_generations(task, items, fmt, tokenizer, backend, max_new_tokens):
    # the reader appends the first possible answer as the gold turn; irrelevance items have none (no call)
    out = []
    for item in items:
        messages = item.conversation.messages
        calls = messages[item.target].tool_calls if item.target < len(messages) else []
        out.append(Generation(text="gold", tool_calls=list(calls), stopped=True))
    return out


def _suite_args(tmp_path, **extra) -> argparse.Namespace:
    values = {
        "model": "fake", "limit": 3, "category": None, "max_new_tokens": 8, "backend": "hf",
        "predictions": None, "output": tmp_path / "metrics.json",
    }  # fmt: skip
    return argparse.Namespace(**{**values, **extra})


def test_the_suite_scores_gold_answers_and_prints_the_table(tmp_path, capsys):
    args = _suite_args(tmp_path, category=["simple_python", "live_irrelevance", "web_search_base"])
    model = (SimpleNamespace(description="fake model", tokenizer=None), "fake_format", None, None)
    rc = run_suite(args, lambda: model, _gold_generations, lambda generations: {"prompts": len(generations)})
    assert rc == 0
    out = capsys.readouterr().out
    assert "web_search_base" in out and "paid search API" in out
    assert "Overall (v4)" in out and "--limit 3" in out
    report = json.loads(args.output.read_text(encoding="utf-8"))
    assert report["metrics"]["by_category"] == {
        "simple_python": {"accuracy": 1.0, "correct": 3, "total": 3},
        "live_irrelevance": {"accuracy": 1.0, "correct": 3, "total": 3},
    }
    assert report["skipped_categories"][0]["category"] == "web_search_base"


def test_the_suite_refuses_when_nothing_runs(tmp_path, capsys):
    args = _suite_args(tmp_path, category=["memory_kv", "format_sensitivity"])
    assert run_suite(args, lambda: pytest.fail("no model is loaded"), None, None) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: none of the chosen categories runs here") and err.count("\n") == 1


# ---- eval score bfcl --summary bfcl_v4 / v3 --------------------------------------------------------------

FOLDERS = Path(__file__).resolve().parents[1] / "fixtures" / "evaluation" / "bfcl" / "folders"


def _score(capsys, *extra: str) -> tuple[int, str, str]:
    from train.cli import main as cli_main

    argv = ["eval", "score", "bfcl", "--predictions", str(FOLDERS / "result"), "--references", str(FOLDERS / "data")]
    code = cli_main([*argv, *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_score_prints_the_leaderboard_table(capsys, tmp_path):
    # the fixture: simple_python 1/3, irrelevance 1/2, live_simple 2/2 (tests/evaluation/test_eval_score_bfcl.py)
    code, out, err = _score(capsys, "--summary", "bfcl_v4", "-o", str(tmp_path / "m.json"))
    assert (code, err) == (0, "")
    table = out.split("as the leaderboard reports it")[1].splitlines()
    lines = {line.strip().split("  ")[0]: line.split() for line in table if "  " in line.strip()}
    assert lines["live_simple"] == ["live_simple", "100.00", "75.58", "84.50", "71.32"]
    assert lines["Irrelevance"][1] == "N/A"  # live_irrelevance not scored
    assert lines["Overall (v4)"][2] == "2.80"  # 0.0280, as the v4 summary of that test
    summary = json.loads((tmp_path / "m.json").read_text(encoding="utf-8"))["metrics"]["summary"]
    assert summary["v4"]["overall"] == pytest.approx(0.1 * (1 / 9 / 4) + 0.1 * 2 / 1095 + 0.1 / 4)


def test_score_v3_summary(capsys):
    code, out, err = _score(capsys, "--summary", "v3")
    assert (code, err) == (0, "")
    non_live = (1 / 9 + 0 + 0 + 0 + 1 / 2) / 5
    live = 2 / (2 + 1053 + 16 + 24 + 884 + 16)  # unscored live categories count 0 over their full sizes
    assert f"overall               {(non_live + live) / 3:.4f}" in out
    assert "counted as 0 by the v3 summary: 14" in out


def test_a_question_the_reader_refuses_counts_wrong_as_bfcl_counts_it(tmp_path):
    # live_simple_106-63-0 and _112-68-0 expect a value from an empty list: wrong for every model on the leaderboard
    # (xLAM-2-8b's 75.58% is 195/258), so the suite's total is the file's 258 questions, not the 256 it can prompt.
    args = _suite_args(tmp_path, category=["live_simple"], limit=None)
    model = (SimpleNamespace(description="fake model", tokenizer=None), "fake_format", None, None)
    assert run_suite(args, lambda: model, _gold_generations, lambda generations: {}) == 0
    report = json.loads(args.output.read_text(encoding="utf-8"))
    assert report["metrics"]["by_category"]["live_simple"] == {"accuracy": 256 / 258, "correct": 256, "total": 258}


def test_eval_run_arguments_for_the_suite():
    from train.commands.eval.run import add_arguments, arguments_problem

    parser = argparse.ArgumentParser()
    add_arguments(parser)

    def problem(*argv: str) -> str | None:
        return arguments_problem(parser.parse_args(list(argv)))

    assert problem("bfcl_v4", "tiny", "--category", "live_simple") is None
    assert problem("bfcl", "tiny", "--summary", "bfcl_v4") is None
    assert problem("bfcl", "tiny", "--category", "live_simple") == (
        "--category goes with bfcl_v4 (bfcl reads the category from its question file)"
    )
    assert problem("nexus", "tiny", "--summary", "bfcl_v4") == "--summary bfcl_v4 goes with bfcl or bfcl_v4"


def test_the_generation_counts_of_episodes_count_their_answers():
    from train.commands.eval.run import generation_summary
    from train.evaluation.bfcl.multi_turn.episode import EpisodeRecord

    steps = [{"turn": 0, "text": "x", "error": "parse: not a call"}, {"turn": 1, "text": "ok", "error": None}]
    records = [EpisodeRecord(result=[], steps=steps, force_terminated=True), EpisodeRecord(result=[], steps=steps[1:])]
    assert generation_summary(records) == {
        "episodes": 2, "answers": 3, "prompt_errors": 0, "parse_errors": 1, "force_terminated": 1,
    }  # fmt: skip
