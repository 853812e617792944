"""mt_llama's runs end with Meta-Tool's Table 2 (seed 000 §4.1): the paper's rows as printed, and the run's Meta-Bench
rows from its ``by_group/<difficulty>/<world>/<category>`` sections, the closed world's single- and multi-call
groups pooled by their call turns, groups the evaluated rows lack marked unrun."""

from __future__ import annotations

from types import SimpleNamespace

from train.engine.paper_table import Unrun, table_lines
from train.papers.metatool.paper_tables import TABLE_2, measured_cell, table

AFTER = {
    "step": 4,
    "call_turns": 5,
    "irrelevance_turns": 2,
    "fmd_turns": 1,
    "by_group/simple/open/function_missing/t_acc": 0.5,
    "by_group/simple/open/function_missing/p_acc": 0.0,
    "by_group/simple/open/function_missing/call_turns": 2,
    "by_group/simple/open/chat/irr": 1.0,
    "by_group/simple/open/chat/irrelevance_turns": 2,
    "by_group/simple/closed/single_call/t_acc": 1.0,
    "by_group/simple/closed/single_call/p_acc": 0.5,
    "by_group/simple/closed/single_call/call_turns": 2,
    "by_group/simple/closed/multi_call/t_acc": 0.0,
    "by_group/simple/closed/multi_call/p_acc": 0.0,
    "by_group/simple/closed/multi_call/call_turns": 1,
}


def test_single_and_multi_call_groups_pool_by_their_call_turns_and_missing_groups_are_unrun():
    assert measured_cell(AFTER, "simple", "S/M T-Acc") == 100.0 * 2 / 3  # (1.0 * 2 + 0.0 * 1) / 3 turns
    assert measured_cell(AFTER, "simple", "S/M P-Acc") == 100.0 * 1 / 3
    assert measured_cell(AFTER, "simple", "FM T-Acc") == 50.0
    assert measured_cell(AFTER, "simple", "Open IRR") == 100.0
    assert measured_cell(AFTER, "simple", "FE T-Acc") == Unrun("no call turn of this group in the evaluated rows")
    assert measured_cell(AFTER, "hard", "Closed IRR") == Unrun("no chat turn of this group in the evaluated rows")


def test_the_table_has_the_papers_sixteen_rows_and_the_runs_rows_per_difficulty():
    done = table(SimpleNamespace(run_name="mt_llama_tiny"), {"eval": {"metabench": {"before": None, "after": AFTER}}})
    assert [label for label, _ in done.paper_rows][::8] == ["simple  GPT-4o", "hard    GPT-4o"]
    assert dict(done.paper_rows)["hard    MT-LLaMA-8B"] == dict(zip(done.columns, TABLE_2["hard"][-1][1]))
    assert dict(done.paper_rows)["simple  MT-LLaMA-8B"]["Open IRR"] == 95.07
    assert [label for label, _ in done.measured] == ["simple  this run, trained", "hard    this run, trained"]
    lines = table_lines(done.to_dict())
    assert lines[-7:] == [
        "  " + "-" * 109,
        (
            "  simple  this run, trained     50.00      0.00    n/a[1]    n/a[1]    100.00      66.67      33.33"
            "      n/a[2]"
        ),
        (
            "  hard    this run, trained    n/a[1]    n/a[1]    n/a[1]    n/a[1]    n/a[2]     n/a[1]     n/a[1]"
            "      n/a[2]"
        ),
        "  [1] no call turn of this group in the evaluated rows",
        "  [2] no chat turn of this group in the evaluated rows",
        "  measured on 8 Meta-Bench turns at step 4: mt_llama_tiny",
        "  the base model's row needs eval.at_start=true (the step-0 evaluation)",
    ]


def test_a_run_that_evaluated_the_base_model_gets_its_rows_and_one_without_meta_bench_says_so():
    cfg = SimpleNamespace(run_name="r")
    both = table(cfg, {"eval": {"metabench": {"before": {**AFTER, "step": 0}, "after": AFTER}}})
    assert [label for label, _ in both.measured][:2] == [
        "simple  this run, base model (step 0)",
        "simple  this run, trained",
    ]
    none = table(cfg, {"eval": {}})
    assert {cell for _, row in none.measured for cell in row.values()} == {
        Unrun("Meta-Bench was not evaluated after training (eval.benchmarks)")
    }
