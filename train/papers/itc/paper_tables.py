"""The ITC paper's results (seed 002), as data: what ``eval score itc`` / ``eval run itc`` ``--summary itc`` print
beside the measured numbers.

Percentages exactly as printed. Table 3: zero-shot (the base models), all test languages. Table 5: fine-tuned on
the ITC training set, with the gain over the base model in brackets (Table 5 minus its gain is Table 3's number to
the rounding of one decimal: a test checks it). Table 7: fine-tuned on all languages (``all``) or on English only
(``en``), evaluated on the non-English test queries, gains in brackets.

Which average. Tables 3 and 5 average per sample (``macro``): their F1 can fall below both P and R (Table 3,
Qwen2.5-7B-Instruct invocation 42.76 / 43.37 / 42.71; Table 5, 90.6 / 90.6 / 90.3), which no micro F1 can.
Table 7's F1 is, in every cell, the harmonic mean of its printed P and R (91.57 / 98.57 -> 94.94): the micro
formula of Appendix B (or an F1 of averaged P and R), so its rows are printed beside the measured micro numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

COLUMNS = ("lm", "fm", "tool_p", "tool_r", "tool_f1", "ti_p", "ti_r", "ti_f1")
HEADERS = ("LM", "FM", "tool P", "tool R", "tool F1", "TI P", "TI R", "TI F1")


@dataclass(frozen=True)
class PaperModel:
    label: str  # as the paper names it
    keys: tuple[str, ...]  # what a model name contains once lowercased with everything but letters and digits removed
    table_3: tuple[float, ...] | None  # COLUMNS; None: not in Table 3
    table_5: tuple[float, ...]
    table_5_gain: tuple[float, ...]
    table_7_all: tuple[float, ...] | None = None
    table_7_en: tuple[float, ...] | None = None


# Coder models first: "qwen257b" must not claim a Qwen2.5-Coder-7B name (it does not contain it, but stay explicit).
MODELS: tuple[PaperModel, ...] = (
    PaperModel(
        "Qwen2.5-Coder-7B", ("qwen25coder7b",),
        table_3=(94.93, 98.38, 69.76, 66.01, 67.23, 54.17, 54.11, 53.75),
        table_5=(97.4, 99.6, 97.7, 98.0, 97.7, 90.6, 90.4, 90.2),
        table_5_gain=(2.5, 1.3, 27.9, 32.0, 30.5, 36.4, 36.3, 36.5),
        table_7_all=(96.47, 98.91, 93.29, 93.55, 93.42, 88.37, 89.19, 88.77),
        table_7_en=(92.57, 98.28, 88.24, 88.32, 88.28, 79.47, 79.63, 79.55),
    ),
    PaperModel(
        "Qwen2.5-Coder-3B", ("qwen25coder3b",),
        table_3=(84.26, 89.25, 48.92, 49.01, 48.76, 38.49, 38.83, 38.43),
        table_5=(97.3, 99.8, 97.6, 97.9, 97.6, 90.3, 90.3, 90.0),
        table_5_gain=(13.0, 10.5, 48.7, 48.9, 48.9, 51.8, 51.4, 51.5),
        table_7_all=(94.21, 98.91, 87.44, 86.91, 87.17, 80.20, 80.42, 80.31),
        table_7_en=(85.67, 96.45, 78.85, 79.47, 79.16, 69.85, 69.99, 69.92),
    ),
    PaperModel(
        "Qwen2.5-7B-Instruct", ("qwen257b",),
        table_3=(90.51, 96.65, 54.08, 53.06, 53.18, 42.76, 43.37, 42.71),
        table_5=(96.9, 99.8, 97.7, 98.1, 97.8, 90.6, 90.6, 90.3),
        table_5_gain=(6.4, 3.1, 43.6, 45.0, 44.6, 47.9, 47.2, 47.6),
        table_7_all=(96.30, 99.27, 91.57, 98.57, 94.94, 87.78, 86.36, 87.06),
        table_7_en=(91.33, 97.09, 79.55, 79.12, 79.33, 70.82, 71.17, 70.99),
    ),
    PaperModel(
        "Qwen2.5-3B-Instruct", ("qwen253b",),
        table_3=(87.40, 93.00, 49.34, 45.84, 47.52, 40.90, 41.77, 41.33),
        table_5=(97.3, 99.5, 97.4, 97.9, 97.5, 89.8, 89.5, 89.4),
        table_5_gain=(9.9, 6.5, 48.0, 52.1, 50.0, 48.9, 47.7, 48.0),
        table_7_all=(91.62, 95.91, 87.03, 89.76, 88.37, 76.17, 74.23, 75.19),
        table_7_en=(83.64, 86.51, 77.96, 77.70, 77.83, 69.7, 69.97, 69.83),
    ),
    PaperModel(
        "DeepSeek-Coder-7B-v1.5", ("deepseekcoder7b",),
        table_3=None,
        table_5=(77.4, 78.7, 76.5, 76.9, 76.5, 68.4, 68.2, 68.0),
        table_5_gain=(3.6, 32.5, 51.2, 51.0, 51.2, 48.6, 48.2, 48.4),
    ),
    PaperModel(
        "DeepSeek-Coder-1.3B", ("deepseekcoder13b",),
        table_3=None,
        table_5=(77.9, 79.3, 56.4, 56.9, 56.4, 46.4, 46.1, 45.9),
        table_5_gain=(7.9, 59.9, 53.1, 53.6, 53.1, 44.2, 43.9, 43.7),
    ),
)  # fmt: skip
ANCHOR = "Qwen2.5-7B-Instruct"  # the anchor, shown when no name says which model was measured


def paper_model(*names: str) -> PaperModel | None:
    """The paper's model that one of ``names`` (a model id, a run directory, a recipe name) is, or None."""
    for name in names:
        squashed = re.sub(r"[^a-z0-9]", "", str(name).lower())
        for model in MODELS:
            if any(key in squashed for key in model.keys):
                return model
    return None


def _row(values: dict[str, Any] | tuple[float, ...] | None) -> list[str]:
    if values is None:
        return ["-"] * len(COLUMNS)
    if isinstance(values, tuple):
        return [f"{value:.2f}" for value in values]
    return ["-" if values.get(key) is None else f"{100 * values[key]:.2f}" for key in COLUMNS]


def measured_rows(metrics: dict[str, Any], block: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """``{"macro": {...}, "micro": {...}}``: LM and FM beside each average's P/R/F1 (fractions)."""
    if block is None:
        block = {**metrics["overall"], "micro": metrics["micro"], "macro": metrics["macro"]}
    rates = {"lm": block["lm"], "fm": block["fm"]}
    return {average: {**rates, **block[average]} for average in ("macro", "micro")}


def summary(metrics: dict[str, Any], names: list[str]) -> tuple[list[str], dict[str, Any]]:
    """(lines to print, what they say as data) for ``--summary itc``: the measured macro and micro rows, then the
    paper's rows for the model ``names`` point at (else the anchor model)."""
    model = paper_model(*names)
    shown = model or next(m for m in MODELS if m.label == ANCHOR)
    measured = measured_rows(metrics)
    items = metrics["overall"]["items"]
    rows: list[tuple[str, list[str]]] = [
        (f"measured, macro ({items} items)", _row(measured["macro"])),
        ("measured, micro", _row(measured["micro"])),
        (f"paper Table 3, {shown.label} (zero-shot)", _row(shown.table_3)),
        (f"paper Table 5, {shown.label} (fine-tuned)", _row(shown.table_5)),
    ]
    data: dict[str, Any] = {
        "model": shown.label,
        "matched": model is not None,
        "measured": measured,
        "paper": {"table_3": _as_dict(shown.table_3), "table_5": _as_dict(shown.table_5)},
    }
    non_english = metrics.get("non_english")
    if non_english is not None and shown.table_7_all is not None:
        foreign = measured_rows(metrics, non_english)
        rows += [
            (f"non-English queries, micro ({non_english['items']} items)", _row(foreign["micro"])),
            (f"paper Table 7, {shown.label}, trained on ALL", _row(shown.table_7_all)),
            (f"paper Table 7, {shown.label}, trained on EN", _row(shown.table_7_en)),
        ]
        data["measured_non_english"] = foreign
        data["paper"].update(table_7_all=_as_dict(shown.table_7_all), table_7_en=_as_dict(shown.table_7_en))
    width = max(len(label) for label, _ in rows)
    title = (
        f"ITC summary (seed 002), percent; Tables 3 and 5 average per sample (compare macro), Table 7's F1 is the "
        f"micro formula; matching {metrics['overall'].get('matching', 'multiset')}"
        + ("" if model else f"; no paper model in {', '.join(map(str, names)) or 'the names given'}: {ANCHOR} shown")
    )
    lines = [title, " " * width + "".join(header.rjust(9) for header in HEADERS)]
    lines += [label.ljust(width) + "".join(cell.rjust(9) for cell in cells) for label, cells in rows]
    return lines, data


def _as_dict(values: tuple[float, ...] | None) -> dict[str, float] | None:
    return None if values is None else dict(zip(COLUMNS, values))


__all__ = ["ANCHOR", "COLUMNS", "MODELS", "PaperModel", "measured_rows", "paper_model", "summary"]
