"""Meta-Tool's Table 2 (seed 000, §4.1: common function calling on Meta-Bench), as data, and the table a run
of its recipes ends with (``table``): the paper's rows with the run's Meta-Bench rows beside them.

Numbers are percentages exactly as printed. The columns, in the paper's order: Open-World Function Missing T-Acc /
P-Acc, Function Existing T-Acc / P-Acc, Chat IRR; Closed-World Single/Multi Tool Call T-Acc / P-Acc, Chat IRR. The
rows come in two blocks, Simple and Hard (Meta-Bench's ``meta.difficulty``).

The measured cells are Meta-Bench's ``by_group/<difficulty>/<world>/<category>`` sections
(``train.papers.metatool.metabench``). The closed world's Single/Multi column pools the ``single_call`` and
``multi_call`` groups by their call turns, as one column over both kinds of turn is.
"""

from __future__ import annotations

from typing import Any

from train.engine.paper_table import PaperTable, Unrun

COLUMNS = ("FM T-Acc", "FM P-Acc", "FE T-Acc", "FE P-Acc", "Open IRR", "S/M T-Acc", "S/M P-Acc", "Closed IRR")
# column -> (world, categories, metric, the count that weighs it)
CELLS: dict[str, tuple[str, tuple[str, ...], str, str]] = {
    "FM T-Acc": ("open", ("function_missing",), "t_acc", "call_turns"),
    "FM P-Acc": ("open", ("function_missing",), "p_acc", "call_turns"),
    "FE T-Acc": ("open", ("function_existing",), "t_acc", "call_turns"),
    "FE P-Acc": ("open", ("function_existing",), "p_acc", "call_turns"),
    "Open IRR": ("open", ("chat",), "irr", "irrelevance_turns"),
    "S/M T-Acc": ("closed", ("single_call", "multi_call"), "t_acc", "call_turns"),
    "S/M P-Acc": ("closed", ("single_call", "multi_call"), "p_acc", "call_turns"),
    "Closed IRR": ("closed", ("chat",), "irr", "irrelevance_turns"),
}

TABLE_2: dict[str, tuple[tuple[str, tuple[float, ...]], ...]] = {
    "simple": (
        ("GPT-4o", (91.50, 72.00, 97.75, 77.25, 11.30, 100.00, 79.50, 24.54)),
        ("GPT-3.5", (92.75, 70.00, 99.00, 79.75, 13.33, 99.75, 79.75, 13.50)),
        ("LLaMA-3.3-70B", (22.00, 8.00, 99.25, 65.25, 0.29, 99.75, 73.75, 1.53)),
        ("Qwen2.5-72B", (97.50, 76.25, 99.21, 75.92, 49.28, 99.75, 79.25, 22.39)),
        ("LLaMA-3.1-8B", (4.50, 4.00, 98.00, 68.25, 20.58, 99.00, 72.00, 23.31)),
        ("Qwen2.5-7B", (70.50, 58.25, 99.50, 74.75, 26.96, 99.75, 77.25, 27.61)),
        ("Hammer2.1-7B", (89.17, 68.19, 95.76, 73.82, 68.12, 96.90, 74.08, 73.31)),
        ("MT-LLaMA-8B", (96.75, 69.50, 94.00, 69.25, 95.07, 96.50, 71.25, 99.39)),
    ),
    "hard": (
        ("GPT-4o", (78.81, 49.85, 74.09, 29.54, 2.00, 73.43, 29.24, 6.00)),
        ("GPT-3.5", (52.88, 25.73, 59.07, 22.08, 3.00, 63.43, 22.67, 0.00)),
        ("LLaMA-3.3-70B", (11.10, 6.16, 45.26, 18.55, 9.00, 42.67, 18.00, 23.00)),
        ("Qwen2.5-72B", (67.81, 44.60, 56.45, 22.98, 9.00, 49.14, 21.33, 33.00)),
        ("LLaMA-3.1-8B", (14.23, 12.41, 40.42, 19.15, 17.00, 37.33, 17.81, 36.00)),
        ("Qwen2.5-7B", (59.33, 36.02, 50.81, 19.86, 11.00, 46.57, 19.43, 30.00)),
        ("Hammer2.1-7B", (63.66, 39.62, 68.57, 37.27, 10.00, 67.96, 36.33, 15.00)),
        ("MT-LLaMA-8B", (81.49, 46.32, 84.26, 45.52, 28.00, 87.35, 44.12, 56.00)),
    ),
}
BENCH = "metabench"  # the eval callback's name for Meta-Bench (conf/eval/metabench*.yaml)


def measured_cell(point: dict[str, Any], difficulty: str, column: str) -> float | Unrun:
    """One measured cell, in percent, from an evaluation's flat metrics (``by_group/simple/open/chat/irr``): the
    groups' metric pooled by their turns, or ``Unrun`` when the evaluated rows hold no such turn."""
    world, categories, metric, count = CELLS[column]
    groups = [f"by_group/{difficulty}/{world}/{category}" for category in categories]
    weighed = [
        (point[f"{group}/{metric}"], point[f"{group}/{count}"])
        for group in groups
        if isinstance(point.get(f"{group}/{metric}"), (int, float)) and point.get(f"{group}/{count}")
    ]
    if not weighed:
        turns = "chat" if metric == "irr" else "call"
        return Unrun(f"no {turns} turn of this group in the evaluated rows")
    return 100.0 * sum(value * n for value, n in weighed) / sum(n for _, n in weighed)


def table(cfg: Any, summary: dict[str, Any]) -> PaperTable:
    """Table 2 with the run's Meta-Bench rows: the trained model, and the base model when the run evaluated it at
    step 0 (``eval.at_start``); each per difficulty block. A run without Meta-Bench in its eval leaves every
    measured cell unrun, with the reason."""
    points = (summary.get("eval") or {}).get(BENCH) or {}
    paper_rows = [
        (f"{difficulty:<6}  {model}", dict(zip(COLUMNS, values)))
        for difficulty, rows in TABLE_2.items()
        for model, values in rows
    ]
    moments = [("before", "base model (step 0)")] if points.get("before") else []
    moments.append(("after", "trained"))
    measured = []
    for difficulty in TABLE_2:
        for when, label in moments:
            point = points.get(when)
            cells = {
                column: measured_cell(point, difficulty, column)
                if point
                else Unrun("Meta-Bench was not evaluated after training (eval.benchmarks)")
                for column in COLUMNS
            }
            measured.append((f"{difficulty:<6}  this run, {label}", cells))
    notes = []
    after = points.get("after") or {}
    if after.get("call_turns") is not None:
        turns = after["call_turns"] + after.get("irrelevance_turns", 0) + after.get("fmd_turns", 0)
        notes.append(f"measured on {turns:,} Meta-Bench turns at step {after['step']:,}: {cfg.run_name}")
    if not points.get("before"):
        notes.append("the base model's row needs eval.at_start=true (the step-0 evaluation)")
    return PaperTable(
        title="Meta-Tool Table 2: common function calling on Meta-Bench (%; FM/FE: function missing/existing, "
        "S/M: single/multi tool call)",
        columns=list(COLUMNS),
        paper_rows=paper_rows,
        measured=measured,
        notes=notes,
    )


__all__ = ["CELLS", "COLUMNS", "TABLE_2", "measured_cell", "table"]
