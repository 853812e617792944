"""ToolVerifier's paper table at the end of a run (issue 27 item 10): Table 1's paper rows with the measured rows of
``summary["toolbench_verify"]`` beside them, unrun cells with their reasons (``train.papers.toolverifier.table``)."""

from __future__ import annotations

from train.engine.paper_table import Unrun, table_lines
from train.papers import PAPERS
from train.papers.toolverifier.table import COLUMNS, TITLE, paper_rows, toolbench_table


def task(correct: int, total: int) -> dict:
    return {"total": total, "correct": correct, "rate": correct / total}


SUMMARY = {
    "toolbench_verify": {
        "verify": "tool",
        "teacher": "offline",
        "selector": "trained",
        "metrics": {
            "items": 8,
            "items_per_task": {"booking": 2, "cat": 2, "home": 2, "weather": 2},
            "rows": {
                "none": {
                    "tasks": {"booking": task(1, 2), "cat": task(0, 2), "home": task(2, 2), "weather": task(0, 2)},
                    "average": 3 / 8,
                },
                "tool": {
                    "tasks": {"booking": task(1, 2), "cat": task(1, 2), "home": task(2, 2), "weather": task(0, 2)},
                    "average": 4 / 8,
                },
            },
            "selection": {"without": {"average": 5 / 8}, "with": {"average": 6 / 8}},
        },
    }
}
NOT_RUN = "--verify tool does not run this row"


def test_the_table_is_table_1_with_the_measured_rows_beside_the_papers():
    table = toolbench_table(SUMMARY)
    assert table.title == TITLE and table.columns == COLUMNS
    assert table.paper_rows == paper_rows()
    assert [label for label, _ in table.paper_rows] == [
        "ToolLLM 7B",
        "NexusRaven-V2 13B",
        "Qwen1.5-Chat-72B",
        "Single-Step Llama-2 70B (1-shot)",
        "Two-Step Llama-2 70B (1-shot tool selection)",
        "Two-Step Llama-2-Chat-70B (0-shot tool selection)",
        "TOOLVERIFIER (without verification)",
        "TOOLVERIFIER (tool selection verification only)",
        "TOOLVERIFIER (param selection verification only)",
        "TOOLVERIFIER (tool verification+param verification)",
    ]
    assert table.paper_rows[-1][1] == {"Weather": 90, "Booking": 84.17, "Home": 88, "Cat": 97, "Average": 89.52}
    assert table.measured == [
        (
            "this run (without verification)",
            {"Weather": 0.0, "Booking": 50.0, "Home": 100.0, "Cat": 0.0, "Average": 37.5},
        ),
        (
            "this run (tool selection verification only)",
            {"Weather": 0.0, "Booking": 50.0, "Home": 100.0, "Cat": 50.0, "Average": 50.0},
        ),
        ("this run (param selection verification only)", dict.fromkeys(COLUMNS, Unrun(NOT_RUN))),
        ("this run (tool verification+param verification)", dict.fromkeys(COLUMNS, Unrun(NOT_RUN))),
    ]
    assert table.notes == [
        (
            "measured: 8 cases (booking 2, cat 2, home 2, weather 2; the paper: all 420), selector trained, teacher "
            "offline; Average pooled over the cases"
        ),
        (
            "Table 2, tool selection accuracy, Average: without tool verification 62.50 (paper 94.28); with tool "
            "verification 75.00 (paper 96.67)"
        ),
    ]
    lines = table_lines(table.to_dict())
    assert lines[0] == TITLE
    assert (
        lines[-4] == "  this run (tool verification+param verification)       n/a[1]   n/a[1]  n/a[1]  n/a[1]   n/a[1]"
    )
    assert lines[-3] == f"  [1] {NOT_RUN}"


def test_a_run_that_did_not_verify_says_why_in_every_measured_cell():
    for summary, why in [
        ({}, "eval.toolbench_verify is off in this run"),
        ({"toolbench_verify": {"skipped": "not run on 16 ranks"}}, "self-verification not run in-process: not run on"),
        ({"toolbench_verify": {"error": "no task folder"}}, "self-verification failed: no task folder"),
    ]:
        table = toolbench_table(summary)
        cells = [cell for _, row in table.measured for cell in row.values()]
        assert len(cells) == 20 and all(isinstance(c, Unrun) and c.why.startswith(why) for c in cells)
        assert table.notes == ["the paper: all 420 cases (tuned Llama-2 70B, Llama-2 70B, Llama-2-Chat-70B)"]


def test_the_spec_registers_the_table_for_its_recipes_and_the_selectors_training():
    spec = PAPERS.get("toolverifier")
    assert spec.table is not None and spec.table(None, SUMMARY).measured == toolbench_table(SUMMARY).measured
    assert "toolselect" in spec.builders  # the full recipe (no verification in-process) ends with the table too
    assert spec.in_run({"data": {"builder": "toolselect"}, "eval": {"toolbench_verify": {}}})


def test_table_5_puts_a_gold_selector_runs_rows_under_the_papers():
    from train.papers.toolverifier.bench import format_table_5

    metrics = {**SUMMARY["toolbench_verify"]["metrics"]}
    metrics["rows"] = {"none": metrics["rows"]["none"], "params": metrics["rows"]["tool"]}
    lines = format_table_5(metrics).splitlines()
    assert lines[0] == "Table 5: parameter generation, the gold tool given (A.2), success rate, %"
    assert lines[6] == f"{'paper: TOOLVERIFIER':<60}99.00     85.80     88.00     100.00    92.85"
    assert (
        lines[7] == f"{'this run: without verification (Llama-2 70B)':<60}0.00      50.00     100.00    0.00      37.50"
    )
    assert lines[8].startswith("this run: param selection verification only (TOOLVERIFIER)")
    assert lines[8].endswith("0.00      50.00     100.00    50.00     50.00")
