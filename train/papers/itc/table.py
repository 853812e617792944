"""ITC's main table at the end of a run (``PaperSpec.table``): Table 3 (zero-shot, every row as printed), the
fine-tuned row of Table 5 for the run's model, and the run's measured rows: the base model (the evaluation at step
0, ``eval.at_start``) and the trained model (the last evaluation). The numbers are ``paper_tables``'s, the one
place for them. Measured cells are the scorer's per-sample (``macro``) averages, which the paper's tables are
(``paper_tables``'s docstring); LM and FM are rates over the items."""

from __future__ import annotations

from typing import Any

from train.engine.paper_table import PaperTable, Unrun, measured_value
from train.papers.itc.paper_tables import ANCHOR, COLUMNS, HEADERS, MODELS, TABLE_3, TABLE_10_LANGUAGES, paper_model

BENCH = "itc"
# a column's metric in summary["eval"]["itc"]: LM and FM are top-level rates, P/R/F1 the per-sample averages
METRICS = {"lm": "lm", "fm": "fm", **{key: f"macro/{key}" for key in COLUMNS[2:]}}


def _names(cfg: Any) -> list[str]:
    model = cfg.get("model") or {}
    return [str(value) for value in (model.get("name"), model.get("path"), cfg.get("run_name")) if value]


def _measured(evals: dict[str, Any], when: str, why: str | None) -> dict[str, Any]:
    if why is not None:
        return {header: Unrun(why) for header in HEADERS}
    return {header: measured_value(evals, BENCH, METRICS[key], when) for header, key in zip(HEADERS, COLUMNS)}


def languages_note(point: dict[str, Any] | None) -> str | None:
    """Which of Table 10's 29 languages the measured test items had (the paper's test set has all 29)."""
    if not point:
        return None
    seen = sorted({key.split("/")[1] for key in point if key.startswith("by_language/")})
    absent = [code for code in TABLE_10_LANGUAGES if code not in seen]
    return f"test languages measured: {', '.join(seen) or 'none'}; absent of Table 10's 29: {len(absent)}"


def table(cfg: Any, summary: dict[str, Any]) -> PaperTable:
    evals = summary.get("eval") or {}
    names = _names(cfg)
    model = paper_model(*names)
    shown = model or next(m for m in MODELS if m.label == ANCHOR)
    paper_rows = [(label, dict(zip(HEADERS, values))) for label, values in TABLE_3]
    paper_rows.append((f"{shown.label}, fine-tuned (Table 5)", dict(zip(HEADERS, shown.table_5))))
    missing = None if BENCH in evals else "the run evaluated no itc benchmark (eval=itc or itc_tiny)"
    points = evals.get(BENCH) or {}
    after = points.get("after")
    who = model.label if model else (names[0] if names else "the run's model")
    measured = [
        (f"{who}, step 0 (base)", _measured(evals, "before", missing)),
        (f"{who}, step {after['step'] if after else '?'} (trained)", _measured(evals, "after", missing)),
    ]
    shown_point = after or points.get("before")
    items = (shown_point or {}).get("items")
    notes = [
        f"measured: per-sample (macro) P/R/F1 over {items if items is not None else '?'} test items "
        + "(the paper's test set: 1,750 tasks)",
        "paper rows: Table 3 (zero-shot) and the Table 5 row of "
        + (shown.label if model else f"{ANCHOR} (no paper model in {', '.join(names) or 'the run'})"),
    ]
    note = languages_note(shown_point)
    if note:
        notes.append(note)
    return PaperTable(
        title="ITC Table 3: zero-shot on the ITC test set (%), and this run (Seal-Tools matching per eval config)",
        columns=list(HEADERS),
        paper_rows=paper_rows,
        measured=measured,
        notes=notes,
    )


__all__ = ["BENCH", "METRICS", "languages_note", "table"]
