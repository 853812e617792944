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
TABLE_10_LANGUAGES = (  # Table 10: the 29 task languages, most tasks first
    "en", "zh", "hi", "fr", "vi", "pt", "de", "ja", "es", "ar", "id", "th", "ko", "nl", "sw",
    "sl", "xh", "ur", "cs", "la", "tl", "ms", "it", "rw", "fi", "hr", "gl", "kn", "zu",
)  # fmt: skip


@dataclass(frozen=True)
class PaperModel:
    label: str  # as the paper names it
    keys: tuple[str, ...]  # what a model name contains once lowercased with everything but letters and digits removed
    table_3: tuple[float, ...] | None  # COLUMNS; None: not in Table 3
    table_5: tuple[float, ...]
    table_5_gain: tuple[float, ...]
    table_7_all: tuple[float, ...] | None = None
    table_7_en: tuple[float, ...] | None = None


# Table 3 (zero-shot on the ITC test set, %), every row as printed, in COLUMNS order: the paper's main table.
TABLE_3: tuple[tuple[str, tuple[float, ...]], ...] = (
    ("Qwen2.5-7B-Instruct", (90.51, 96.65, 54.08, 53.06, 53.18, 42.76, 43.37, 42.71)),
    ("Qwen2.5-Coder-7B", (94.93, 98.38, 69.76, 66.01, 67.23, 54.17, 54.11, 53.75)),
    ("Qwen2.5-3B-Instruct", (87.40, 93.00, 49.34, 45.84, 47.52, 40.90, 41.77, 41.33)),
    ("Qwen2.5-Coder-3B", (84.26, 89.25, 48.92, 49.01, 48.76, 38.49, 38.83, 38.43)),
    ("watt-tool-8B", (74.48, 5.53, 88.90, 88.03, 88.30, 76.33, 73.46, 74.31)),
    ("ToolACE-8B", (81.31, 4.56, 70.30, 69.82, 69.93, 59.39, 56.22, 57.17)),
    ("Hammer2.1-7b", (86.82, 20.71, 64.64, 64.68, 64.44, 33.14, 32.68, 32.75)),
    ("Hammer2.0-7b", (78.21, 95.42, 61.22, 57.48, 58.68, 45.00, 45.25, 44.85)),
    ("Functionary-v3.1", (76.75, 54.15, 40.63, 37.15, 38.30, 35.25, 35.64, 35.02)),
    ("Yi-1.5-9B-Chat-16K", (82.37, 91.9, 45.28, 45.71, 45.32, 35.67, 35.66, 35.33)),
    ("glm-4-9b-chat", (76.00, 97.55, 43.45, 41.44, 42.09, 32.77, 32.85, 32.57)),
    ("Phi-4", (96.73, 96.29, 80.90, 82.68, 81.49, 70.15, 70.25, 69.84)),
    ("Qwen2.5-Coder-32B", (91.05, 99.14, 84.82, 81.44, 82.54, 71.13, 71.04, 70.69)),
    ("Qwen2.5-72B-Instruct", (89.47, 98.16, 52.78, 51.44, 51.83, 43.11, 43.35, 42.89)),
    ("Deepseek-V3", (86.09, 99.89, 83.10, 83.73, 83.28, 75.94, 75.77, 75.49)),
    ("Deepseek-R1", (77.05, 100.0, 86.89, 85.25, 85.79, 73.47, 73.15, 72.79)),
    ("o1-mini", (95.89, 93.68, 64.41, 66.61, 64.72, 60.58, 62.53, 61.06)),
    ("o3-mini", (86.19, 71.37, 61.06, 61.13, 60.93, 54.01, 53.56, 53.54)),
    ("GPT4o-mini", (96.24, 99.83, 76.47, 75.21, 75.55, 71.69, 70.38, 70.71)),
    ("GPT4o", (97.95, 99.83, 88.95, 89.48, 89.01, 82.18, 81.57, 81.57)),
    ("GLM-Zero", (88.37, 98.45, 51.24, 50.31, 50.51, 42.64, 43.64, 42.78)),
    ("gemini-2.0-flash", (95.04, 99.77, 77.25, 77.76, 77.32, 69.08, 68.14, 68.18)),
    ("gemini-2.0-pro", (96.17, 94.13, 84.57, 83.50, 83.86, 73.22, 71.65, 71.95)),
    ("Claude-3.5-sonnet", (94.75, 97.06, 82.08, 81.00, 81.19, 72.05, 72.29, 71.77)),
)
# Table 6 (fine-tuned Qwen2.5 on external benchmarks, %): tool selection P and tool invocation P per benchmark,
# each (fine-tuned, gain over the base model), in TABLE_6_COLUMNS order.
TABLE_6_COLUMNS = ("nexus_tool_p", "nexus_ti_p", "seal_tool_p", "seal_ti_p", "alpaca_tool_p", "alpaca_ti_p")
TABLE_6: tuple[tuple[str, tuple[tuple[float, float], ...]], ...] = (
    ("Qwen2.5-7B-Instruct", ((90.57, 25.75), (59.97, 10.23), (89.91, 24.00), (76.16, 17.76), (77.05, 18.10),
                             (49.96, 9.85))),
    ("Qwen2.5-Coder-7B-Instruct", ((90.99, 20.44), (68.04, 17.76), (89.57, 22.22), (78.04, 18.92), (77.34, 14.91),
                                   (50.87, 8.23))),
    ("Qwen2.5-3B-Instruct", ((81.03, 6.50), (57.14, 2.78), (90.32, 23.26), (76.76, 20.02), (75.00, 8.92),
                             (47.54, 8.57))),
    ("Qwen2.5-Coder-3B-Instruct", ((84.17, 2.09), (64.22, 4.90), (89.34, 8.50), (76.18, 7.97), (73.10, 4.53),
                                   (48.69, 7.06))),
)  # fmt: skip


def table_3_row(label: str) -> tuple[float, ...]:
    return dict(TABLE_3)[label]


# Coder models first: "qwen257b" must not claim a Qwen2.5-Coder-7B name (it does not contain it, but stay explicit).
MODELS: tuple[PaperModel, ...] = (
    PaperModel(
        "Qwen2.5-Coder-7B", ("qwen25coder7b",),
        table_3=table_3_row("Qwen2.5-Coder-7B"),
        table_5=(97.4, 99.6, 97.7, 98.0, 97.7, 90.6, 90.4, 90.2),
        table_5_gain=(2.5, 1.3, 27.9, 32.0, 30.5, 36.4, 36.3, 36.5),
        table_7_all=(96.47, 98.91, 93.29, 93.55, 93.42, 88.37, 89.19, 88.77),
        table_7_en=(92.57, 98.28, 88.24, 88.32, 88.28, 79.47, 79.63, 79.55),
    ),
    PaperModel(
        "Qwen2.5-Coder-3B", ("qwen25coder3b",),
        table_3=table_3_row("Qwen2.5-Coder-3B"),
        table_5=(97.3, 99.8, 97.6, 97.9, 97.6, 90.3, 90.3, 90.0),
        table_5_gain=(13.0, 10.5, 48.7, 48.9, 48.9, 51.8, 51.4, 51.5),
        table_7_all=(94.21, 98.91, 87.44, 86.91, 87.17, 80.20, 80.42, 80.31),
        table_7_en=(85.67, 96.45, 78.85, 79.47, 79.16, 69.85, 69.99, 69.92),
    ),
    PaperModel(
        "Qwen2.5-7B-Instruct", ("qwen257b",),
        table_3=table_3_row("Qwen2.5-7B-Instruct"),
        table_5=(96.9, 99.8, 97.7, 98.1, 97.8, 90.6, 90.6, 90.3),
        table_5_gain=(6.4, 3.1, 43.6, 45.0, 44.6, 47.9, 47.2, 47.6),
        table_7_all=(96.30, 99.27, 91.57, 98.57, 94.94, 87.78, 86.36, 87.06),
        table_7_en=(91.33, 97.09, 79.55, 79.12, 79.33, 70.82, 71.17, 70.99),
    ),
    PaperModel(
        "Qwen2.5-3B-Instruct", ("qwen253b",),
        table_3=table_3_row("Qwen2.5-3B-Instruct"),
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


__all__ = [
    "ANCHOR",
    "COLUMNS",
    "HEADERS",
    "MODELS",
    "TABLE_3",
    "TABLE_6",
    "TABLE_6_COLUMNS",
    "TABLE_10_LANGUAGES",
    "PaperModel",
    "measured_rows",
    "paper_model",
    "summary",
]
