"""ToolGT's Table 2 at the end of a run (``PaperSpec.table``): the paper's fine-tuning rows beside the run's.

Columns: BFCL-v2 W and BFCL (Table 2), its non-live / live / relevance groups (Table 6's "Finetuning Strategies"
rows, the same runs) and Nexus W / U (Table 2). Paper rows: the three arms of the paper's model the run trains
(``paper_tables.paper_model``), else the run's arm for each of the paper's four models.

Measured rows: the trained model, and the base model when ``eval.at_start`` evaluated it at step 0. ToolGT's numbers
need each BFCL category's accuracy and item count and each Nexus task's accuracy: the sections of the evaluations the
engine hands a paper's table (``summary["eval"]`` with every section, ``train.engine.run.paper_tables``), read by
``measured_points``:

* W and BFCL need all 13 BFCL-v2 categories ToolGT scores, Nexus W / U all 8 ToolGT Nexus tasks; a run without
  them gets ``Unrun`` naming what was not run (never a mean over a subset presented as the paper's number);
* a group column (non-live, live, relevance) is the accuracy over the group's categories the run scored; a notes
  line says which, with their item counts against the paper's, and gives Nexus W / U over the tasks scored.
"""

from __future__ import annotations

import re
from typing import Any

from train.engine.paper_table import PaperTable, Unrun
from train.papers.toolgt.paper_tables import ARM_LABELS, TABLE_2, PaperModel, PaperRow, paper_model

COLUMNS = ["W", "BFCL", "non-live", "live", "relevance", "Nexus W", "Nexus U"]
TITLE = "ToolGT Table 2 (fine-tuning; BFCL-v2 groups from Table 6), %"
GROUP_COLUMNS = {"non_live": "non-live", "live": "live", "relevance": "relevance"}
_CATEGORY = re.compile(r"^by_category/([^/]+)/(accuracy|total)$")  # a BFCL bench's section (bfcl, bfcl_1, ...)
_NEXUS_TASK = re.compile(r"^toolgt/tasks/([^/]+)/accuracy$")  # the nexus bench's ToolGT tasks


# ---------------------------------------------------------------- what the run measured (its evaluations' sections)


def measured_points(evals: dict[str, Any]) -> dict[str, Any]:
    """``{"before": point | None, "after": point | None}`` from the run's evaluations with every section
    (``{bench: {"before": {...}, "after": {...}}}``): the evaluation at step 0 (the base model, when
    ``eval.at_start`` ran) and the last one past step 0. A point: ``{"step", "bfcl": {category: {"accuracy",
    "total"}}, "nexus": {ToolGT task: accuracy}}``; None when no bench logged a number the table reads."""
    found: dict[str, Any] = {}
    for when in ("before", "after"):
        point: dict[str, Any] = {"step": 0, "bfcl": {}, "nexus": {}}
        for bench, moments in evals.items():
            logged = (moments or {}).get(when) or {}
            for key, value in logged.items():
                category, task = _CATEGORY.match(key), _NEXUS_TASK.match(key)
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    continue
                if category and bench.startswith("bfcl"):
                    point["bfcl"].setdefault(category.group(1), {})[category.group(2)] = value
                elif task:
                    point["nexus"][task.group(1)] = value
                else:
                    continue
                point["step"] = max(point["step"], int(logged.get("step") or 0))
        found[when] = point if point["bfcl"] or point["nexus"] else None
    return found


# ---------------------------------------------------------------- the table


def _bfcl_cells(point: dict[str, Any]) -> tuple[dict[str, float | Unrun], dict[str, Any] | None]:
    from train.evaluation.bfcl.summary import summarize_bfcl

    scored = {name: score for name, score in point["bfcl"].items() if "accuracy" in score and "total" in score}
    if not scored:
        why = Unrun("no BFCL category was evaluated")
        return {column: why for column in ("W", "BFCL", *GROUP_COLUMNS.values())}, None
    summary = summarize_bfcl(scored, "toolgt")
    cells: dict[str, float | Unrun] = {}
    if summary["missing"]:
        why = Unrun(f"W and BFCL need all 13 ToolGT BFCL-v2 categories; not run: {', '.join(summary['missing'])}")
        cells["W"] = cells["BFCL"] = why
    else:
        cells["W"], cells["BFCL"] = 100 * summary["W"], 100 * summary["bfcl"]
    for group, column in GROUP_COLUMNS.items():
        value = summary[group]
        cells[column] = Unrun(f"no BFCL {column} category in this run's eval") if value is None else 100 * value
    return cells, summary


def _nexus_cells(point: dict[str, Any]) -> dict[str, float | Unrun]:
    from train.evaluation.nexus import TOOLGT_NEXUS_TASKS, toolgt_nexus_averages

    tasks = {task: accuracy for task, accuracy in point["nexus"].items() if task in TOOLGT_NEXUS_TASKS}
    missing = [task for task in TOOLGT_NEXUS_TASKS if task not in tasks]
    if missing:
        why = Unrun(f"Nexus W / U are over ToolGT's 8 Nexus tasks; not run: {', '.join(missing)}")
        return {"Nexus W": why, "Nexus U": why}
    weighted, unweighted = toolgt_nexus_averages(tasks)
    return {"Nexus W": 100 * weighted, "Nexus U": 100 * unweighted}


def measured_row(point: dict[str, Any] | None, moment: str) -> dict[str, float | Unrun]:
    """One measured row's cells from a point of ``measured_points`` (None: not evaluated at that moment)."""
    if point is None:
        why = Unrun(f"not evaluated {moment}")
        return {column: why for column in COLUMNS}
    return {**_bfcl_cells(point)[0], **_nexus_cells(point)}


def _subset_notes(point: dict[str, Any], label: str) -> list[str]:
    """What a group column and the Nexus columns were measured on, when less than the paper's set."""
    from train.evaluation.bfcl.summary import TOOLGT_GROUP_SIZES, TOOLGT_GROUPS
    from train.evaluation.nexus import TOOLGT_NEXUS_ITEMS, TOOLGT_NEXUS_TASKS, toolgt_nexus_averages

    notes = []
    _, summary = _bfcl_cells(point)
    if summary is not None and summary["missing"]:
        for group, members in TOOLGT_GROUPS.items():
            scored = [m for m in members if m in summary["categories"]]
            if scored:
                items = sum(int(point["bfcl"][m]["total"]) for m in scored)
                notes.append(
                    f"{GROUP_COLUMNS[group]} measured on {', '.join(scored)}: {items} items "
                    f"(the paper's: {len(members)} categories, {TOOLGT_GROUP_SIZES[group]:,} items)"
                )
    tasks = {task: accuracy for task, accuracy in point["nexus"].items() if task in TOOLGT_NEXUS_TASKS}
    if tasks and len(tasks) < len(TOOLGT_NEXUS_TASKS):
        weighted, unweighted = toolgt_nexus_averages(tasks)
        notes.append(
            f"Nexus over the ToolGT tasks scored ({', '.join(tasks)}; the paper's: 8 tasks, "
            f"{TOOLGT_NEXUS_ITEMS} items), {label}: W / U {100 * weighted:.2f} / {100 * unweighted:.2f}"
        )
    return notes


def _paper_rows(model: PaperModel | None, arm: str) -> list[tuple[str, dict[str, float | None]]]:
    def cells(row: PaperRow) -> dict[str, float | None]:
        values = (row.w, row.bfcl, row.non_live, row.live, row.relevance, row.nexus_w, row.nexus_u)
        return dict(zip(COLUMNS, values, strict=True))

    if model is not None:
        return [(f"{model.label}, {ARM_LABELS[name]}", cells(row)) for name, row in model.arms.items()]
    return [(f"{each.label}, {ARM_LABELS[arm]}", cells(each.arms[arm])) for each in TABLE_2]


def table(cfg: Any, summary: dict[str, Any]) -> PaperTable:
    """``PaperSpec.table``: Table 2 with the run's rows (the module docstring)."""
    toolgt = cfg.toolgt
    arm, template, arm_data = str(toolgt.arm), str(toolgt.template), str(toolgt.get("arm_data", "paper"))
    model_cfg = cfg.get("model") or {}
    names = [str(model_cfg.get("path") or ""), str(model_cfg.get("name") or ""), str(cfg.get("run_name") or "")]
    model = paper_model(*[name for name in names if name])
    points = measured_points(summary.get("eval") or {})
    measured = []
    if points["before"] is not None:
        measured.append(("this run: base model (step 0)", measured_row(points["before"], "at step 0")))
    trained = f"this run: {ARM_LABELS[arm]} ({template}, arm_data={arm_data})"
    measured.append((trained, measured_row(points["after"], "after training")))
    notes = []
    if model is None:
        notes.append(f"paper rows: {ARM_LABELS[arm]} of the paper's four models (Table 2 has none for this model)")
    for point, label in ((points["before"], "base"), (points["after"], "trained")):
        if point is not None:
            notes += [note for note in _subset_notes(point, label) if note not in notes]
    return PaperTable(TITLE, list(COLUMNS), _paper_rows(model, arm), measured, notes)


__all__ = ["COLUMNS", "TITLE", "measured_points", "measured_row", "table"]
