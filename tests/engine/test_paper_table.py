"""Every recipe ends with its paper's table: the paper's rows, the run's measured rows, and cells the run could not
measure marked with their reason (``train.engine.paper_table``), printed last by the summary and drawn in report.png."""

from __future__ import annotations

import json
from pathlib import Path

from train.engine.paper_table import PaperTable, Unrun, measured_value, table_lines
from train.engine.report import table_text, write_report
from train.engine.summary import format_summary

TABLE = PaperTable(
    title="Paper Table 2 (%)",
    columns=["Acc", "F1", "Live"],
    paper_rows=[("Model A", {"Acc": 61.5, "F1": 70.0}), ("Model B", {"Acc": 55.25, "F1": 66.0, "Live": 40.0})],
    measured=[
        ("this run, step 0", {"Acc": 12.0, "F1": Unrun("the tiny eval scores Acc only"), "Live": Unrun("no live")}),
        ("this run, trained", {"Acc": 50.0, "F1": Unrun("the tiny eval scores Acc only"), "Live": Unrun("no live")}),
    ],
    notes=["measured on 8 rows"],
)


def test_a_table_prints_the_papers_rows_then_the_measured_rows_with_reasons_for_unrun_cells():
    assert table_lines(TABLE.to_dict()) == [
        "Paper Table 2 (%)",
        "                       Acc      F1    Live",
        "  Model A            61.50   70.00       -",
        "  Model B            55.25   66.00   40.00",
        "  ----------------------------------------",
        "  this run, step 0   12.00  n/a[1]  n/a[2]",
        "  this run, trained  50.00  n/a[1]  n/a[2]",
        "  [1] the tiny eval scores Acc only",
        "  [2] no live",
        "  measured on 8 rows",
    ]


def test_a_measured_value_is_the_last_or_step_0_evaluation_in_percent_or_says_why_it_is_missing():
    evals = {"bfcl": {"before": {"step": 0, "accuracy": 0.25}, "after": {"step": 4, "accuracy": 0.5}}}
    assert measured_value(evals, "bfcl", "accuracy") == 50.0
    assert measured_value(evals, "bfcl", "accuracy", when="before") == 25.0
    assert measured_value(evals, "bfcl", "f1") == Unrun("bfcl logged no f1")
    assert measured_value(evals, "nexus", "accuracy") == Unrun("nexus was not evaluated after training")
    assert measured_value({"bfcl": {"before": None, "after": {"step": 4}}}, "bfcl", "accuracy", when="before") == Unrun(
        "bfcl was not evaluated at step 0 (eval.at_start)"
    )


def test_the_run_summary_ends_with_the_papers_table_read_back_from_summary_json(tmp_path):
    summary = json.loads(json.dumps({"status": "completed", "steps": 4, "paper_tables": {"toy": TABLE.to_dict()}}))
    printed = format_summary(summary, [1.0, 0.5], tmp_path).splitlines()
    assert printed[-len(table_lines(TABLE.to_dict())) :] == table_lines(TABLE.to_dict())
    assert printed[-len(table_lines(TABLE.to_dict())) - 1] == ""
    assert "Paper Table" not in format_summary({"status": "completed", "steps": 4}, [1.0], tmp_path)


def test_the_report_draws_the_table_under_the_panels(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("\n".join(json.dumps({"step": s, "loss": 2.0 / s, "learning_rate": 1e-3}) for s in (1, 2, 3)))
    plain, with_table = tmp_path / "plain.png", tmp_path / "table.png"
    assert write_report(metrics, plain) == plain
    assert write_report(metrics, with_table, None, {"toy": TABLE.to_dict()}) == with_table
    assert _png_height(with_table) > _png_height(plain)  # the table's lines sit under the panels
    assert table_text({"toy": TABLE.to_dict()}) == "\n".join(table_lines(TABLE.to_dict()))


def _png_height(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[20:24], "big")  # IHDR: width at 16..20, height at 20..24


def test_a_papers_table_sees_every_section_of_the_evaluations_summary_json_keeps_only_the_rates():
    from train.engine.summary import eval_before_after

    history = [
        {"step": 0, "eval/metabench/t_acc": 0.5, "eval/metabench/by_group/simple/open/chat/irr": 0.25},
        {"step": 4, "eval/metabench/t_acc": 0.75, "eval/metabench/by_group/simple/open/chat/irr": 1.0},
    ]
    assert eval_before_after(history)["metabench"]["after"] == {"step": 4, "t_acc": 0.75}
    assert eval_before_after(history, sections=True)["metabench"] == {
        "before": {"step": 0, "t_acc": 0.5, "by_group/simple/open/chat/irr": 0.25},
        "after": {"step": 4, "t_acc": 0.75, "by_group/simple/open/chat/irr": 1.0},
    }
