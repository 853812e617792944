"""ToolVerifier's main table at the end of a training run: Table 1 (seed 003, §3.4), tool call success rate on
SambaNova ToolBench, the paper's rows (§3.2's baselines, then ToolVerifier's four) with the run's measured rows from
``summary["toolbench_verify"]`` (what ``after_training`` returned) beside them.

The paper's numbers come from ``bench`` (``PAPER_TABLE_1_BASELINES``, ``PAPER_TABLE_1``), the one place that holds
them. A measured row the run did not produce is ``Unrun`` with the reason: a row ``verify`` switched off, a task
with no case, verification that did not run (off, several ranks, unreadable data). Table 2's averages and what was
measured on what (cases, selector, teacher) are the notes.
"""

from __future__ import annotations

from typing import Any

from train.engine.paper_table import PaperTable, Unrun
from train.papers.toolverifier.bench import (
    PAPER_TABLE_1,
    PAPER_TABLE_1_BASELINES,
    PAPER_TABLE_2,
    SELECTION_NAMES,
    TASK_CASES,
    TASK_ORDER,
)
from train.papers.toolverifier.verify import ROW_NAMES, ROWS

TITLE = "ToolVerifier Table 1: tool call success rate, % (SambaNova ToolBench, all 17 tools offered)"
COLUMNS = ["Weather", "Booking", "Home", "Cat", "Average"]


def _row(values: tuple[float, ...]) -> dict[str, float]:
    return dict(zip(COLUMNS, values))


def paper_rows() -> list[tuple[str, dict[str, float]]]:
    baselines = [(label, _row(values)) for label, values in PAPER_TABLE_1_BASELINES.items()]
    return baselines + [(f"TOOLVERIFIER ({ROW_NAMES[key]})", _row(PAPER_TABLE_1[key])) for key in ROWS]


def _percent(rate: Any) -> float | Unrun:
    return round(100 * rate, 2) if isinstance(rate, (int, float)) and not isinstance(rate, bool) else Unrun("no rate")


def _measured_row(row: dict[str, Any]) -> dict[str, float | Unrun]:
    cells: dict[str, float | Unrun] = {}
    for task, column in zip(TASK_ORDER, COLUMNS):
        cell = row["tasks"].get(task)
        cells[column] = _percent(cell["rate"]) if cell else Unrun(f"no {task} case was scored")
    cells["Average"] = _percent(row["average"])
    return cells


def measured_rows(verified: dict[str, Any] | None) -> list[tuple[str, dict[str, float | Unrun]]]:
    """The four rows of this run (``summary["toolbench_verify"]``; None: it did not verify)."""
    if not verified:
        why: str | None = "eval.toolbench_verify is off in this run"
    elif "skipped" in verified:
        why = f"self-verification not run in-process: {verified['skipped']}"
    elif "error" in verified:
        why = f"self-verification failed: {verified['error']}"
    else:
        why = None
    rows = (verified or {}).get("metrics", {}).get("rows", {}) if why is None else {}
    measured = []
    for key in ROWS:
        label = f"this run ({ROW_NAMES[key]})"
        if key in rows:
            measured.append((label, _measured_row(rows[key])))
        else:
            reason = why or f"--verify {verified['verify']} does not run this row"  # type: ignore[index]
            measured.append((label, {column: Unrun(reason) for column in COLUMNS}))
    return measured


def notes(verified: dict[str, Any] | None) -> list[str]:
    """What the measured rows are (cases, selector, teacher) and Table 2's averages beside the paper's."""
    metrics = (verified or {}).get("metrics")
    if not metrics:
        return [f"the paper: all {sum(TASK_CASES.values())} cases (tuned Llama-2 70B, Llama-2 70B, Llama-2-Chat-70B)"]
    per_task = ", ".join(f"{task} {n}" for task, n in metrics["items_per_task"].items())
    who = f"selector {verified.get('selector', 'trained')}, teacher {verified.get('teacher')}"
    cases = f"{metrics['items']} cases ({per_task}; the paper: all {sum(TASK_CASES.values())})"
    lines = [f"measured: {cases}, {who}; Average pooled over the cases"]
    selection = metrics.get("selection") or {}
    cells = [
        f"{SELECTION_NAMES[key]} {100 * selection[key]['average']:.2f} (paper {PAPER_TABLE_2[key][4]:.2f})"
        for key in SELECTION_NAMES
        if key in selection
    ]
    if cells:
        lines.append("Table 2, tool selection accuracy, Average: " + "; ".join(cells))
    return lines


def toolbench_table(summary: dict[str, Any]) -> PaperTable:
    verified = summary.get("toolbench_verify")
    return PaperTable(TITLE, list(COLUMNS), paper_rows(), measured_rows(verified), notes(verified))


__all__ = ["COLUMNS", "TITLE", "measured_rows", "notes", "paper_rows", "toolbench_table"]
