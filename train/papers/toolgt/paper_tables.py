"""The ToolGT paper's fine-tuning results (seed 004), as data, and ``--summary toolgt``: what ``eval run bfcl|nexus``
and ``eval score bfcl`` (folders) print beside the measured numbers (``summary``).

Numbers are percentages exactly as printed. W / BFCL and the Nexus W / U are Table 2 ("Performance on BFCL-v2 and
Nexus using finetuned models"); the non-live / live / relevance columns are Table 6's "Finetuning Strategies" rows
of the same models and arms (Table 6's W / BFCL equal Table 2's). Arms: ``none`` = No Thought-Training (ToolACE),
``cot`` = CoT-Training, ``template`` = Template-Training (ToolGT, the Detail template).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PaperRow:
    non_live: float  # Table 6
    live: float  # Table 6
    relevance: float  # Table 6
    w: float  # Table 2 (= Table 6)
    bfcl: float  # Table 2 (= Table 6)
    nexus_w: float  # Table 2
    nexus_u: float  # Table 2


@dataclass(frozen=True)
class PaperModel:
    label: str  # as the paper names it
    keys: tuple[str, ...]  # what a model name contains once lowercased with everything but letters and digits removed
    arms: dict[str, PaperRow]


TABLE_2: tuple[PaperModel, ...] = (
    PaperModel("LLaMA-3.1-8B-Instruct", ("llama318b", "llama31_8b"), {
        "none": PaperRow(87.22, 63.22, 59.86, 69.73, 72.16, 35.98, 29.82),
        "cot": PaperRow(82.70, 63.14, 75.78, 73.33, 74.74, 36.85, 30.19),
        "template": PaperRow(84.61, 63.68, 75.61, 74.10, 75.28, 36.27, 30.23),
    }),
    PaperModel("Mistral-7B-Instruct-v0.3", ("mistral7b",), {
        "none": PaperRow(83.39, 64.27, 46.45, 64.65, 66.51, 26.59, 21.78),
        "cot": PaperRow(79.39, 59.02, 64.10, 67.06, 69.16, 24.85, 20.55),
        "template": PaperRow(81.22, 59.92, 70.07, 69.87, 71.40, 27.02, 23.17),
    }),
    PaperModel("Mistral-Nemo-12B-Instruct", ("nemo",), {
        "none": PaperRow(85.04, 63.82, 77.51, 74.87, 76.44, 32.66, 26.46),
        "cot": PaperRow(84.52, 68.92, 77.60, 76.60, 77.72, 35.69, 31.00),
        "template": PaperRow(86.78, 68.54, 78.31, 77.40, 78.63, 37.28, 32.46),
    }),
    PaperModel("Qwen-2.5-14B-Instruct", ("qwen2514b",), {
        "none": PaperRow(88.09, 67.19, 77.51, 77.06, 78.61, 40.74, 35.72),
        "cot": PaperRow(87.04, 68.83, 79.32, 77.92, 79.46, 40.75, 35.85),
        "template": PaperRow(88.70, 69.22, 79.24, 78.55, 79.83, 42.20, 37.05),
    }),
)  # fmt: skip
ARM_LABELS = {"none": "No Thought-Training", "cot": "CoT-Training", "template": "Template-Training"}


def paper_model(*names: str) -> PaperModel | None:
    """The paper's model that one of ``names`` (a model id, a run directory, a recipe name) is, or None."""
    for name in names:
        squashed = re.sub(r"[^a-z0-9]", "", str(name).lower())
        for model in TABLE_2:
            if any(re.sub(r"[^a-z0-9]", "", key) in squashed for key in model.keys):
                return model
    return None


def summary(bench: str, metrics: dict[str, Any], names: list[str]) -> tuple[list[str], dict[str, Any]]:
    """``--summary toolgt`` (``train.papers.spec.Summary``): (lines, data) for bfcl (``metrics["by_category"]``:
    each category's score) or nexus (``metrics["toolgt"]``: the nexus scorer's ToolGT tasks), beside the paper's
    Table 2 row of the model ``names`` point at."""
    if bench == "bfcl":
        from train.evaluation.bfcl.summary import summarize_bfcl

        scores = summarize_bfcl(metrics["by_category"], "toolgt")
        return bfcl_lines(scores, names), scores
    nexus = metrics["toolgt"]
    return nexus_lines(nexus, names), nexus


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def bfcl_lines(summary: dict[str, Any], model_names: list[str]) -> list[str]:
    """ToolGT's BFCL-v2 numbers (``summarize_bfcl(version="toolgt")``), in percent, beside the paper's Table 2
    row of the model one of ``model_names`` names (all three training arms), when the paper has one."""
    columns = ("W", "non-live", "live", "relevance", "BFCL")
    width = 24
    lines = [
        (
            f"ToolGT summary (seed 004, §3.3: BFCL-v2 without exec, REST, sql, chatable): {summary['items']:,} of "
            f"{summary['paper_items']:,} items; BFCL is the v2 overall without its exec groups"
        ),
        "".ljust(width) + "".join(c.rjust(10) for c in columns),
        "this model".ljust(width)
        + "".join(_percent(summary[k]).rjust(10) for k in ("W", "non_live", "live", "relevance", "bfcl")),
    ]
    if summary["missing"]:
        lines.append(
            f"  not scored (left out of every mean; the paper's numbers need all 13): {', '.join(summary['missing'])}"
        )
    model = paper_model(*model_names)
    if model is None:
        lines.append(
            "paper: no Table 2 row for this model (Table 2 has LLaMA-3.1-8B, Mistral-7B-v0.3, Mistral-Nemo-12B, "
            "Qwen-2.5-14B)"
        )
        return lines
    lines.append(f"paper, Table 2 (W / BFCL) and Table 6 (groups), {model.label}:")
    for arm, row in model.arms.items():
        values = (row.w, row.non_live, row.live, row.relevance, row.bfcl)
        lines.append(f"  {ARM_LABELS[arm]}".ljust(width) + "".join(f"{v:.2f}".rjust(10) for v in values))
    return lines


def nexus_lines(nexus: dict[str, Any], model_names: list[str]) -> list[str]:
    """ToolGT's Nexus tasks (the nexus scorer's ``toolgt`` block), W / U over them, beside the paper's Table 2."""
    lines = [f"ToolGT Nexus (seed 004, Table 7): {nexus['note']}"]
    for task, score in nexus["tasks"].items():
        lines.append(f"  {task:<12} {100 * score['accuracy']:6.2f}  ({score['correct']}/{score['total']})")
    weighted, unweighted = nexus["weighted_average"], nexus["unweighted_average"]
    if weighted is not None:
        lines.append(f"  W / U over these tasks: {100 * weighted:.2f} / {100 * unweighted:.2f}")
    model = paper_model(*model_names)
    if model is not None:
        lines.append(f"paper, Table 2 (Nexus W / U over all 8 tasks), {model.label}:")
        for arm, row in model.arms.items():
            lines.append(f"  {ARM_LABELS[arm]:<22} {row.nexus_w:.2f} / {row.nexus_u:.2f}")
    return lines


__all__ = ["ARM_LABELS", "TABLE_2", "PaperModel", "PaperRow", "bfcl_lines", "nexus_lines", "paper_model", "summary"]
