"""BFCL v4 as the leaderboard shows it: ``--summary bfcl_v4``'s table, with published numbers of reference models.

Rows are the columns of the leaderboard's ``data_overall.csv`` (BFCL's ``generate_leaderboard_csv``), plus the v3
overall. A row whose categories were not all scored shows ``N/A``, as the leaderboard does; the overall rows still
count a missing category as 0 (``summary.summarize_bfcl``), so they are lower bounds until every category is scored.

Reference numbers are copied from the leaderboard's published CSV, nothing else: ``REFERENCE_SOURCE`` names the file
and commit. Only the v4 columns are published there (the leaderboard moved to v4 in August 2025), so the reference
models' v3 overall is not shown. The published numbers come from BFCL's own per-model handlers on the data of their
checkpoint, not from tooltrain's run: they place a number, they do not validate one.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

from train.evaluation.bfcl.summary import V4_CATEGORIES, summarize_bfcl

REFERENCE_SOURCE = (
    "https://github.com/ShishirPatil/gorilla/blob/ea03bc8dd716546f4d4c6dd462368a9ab18cc2e0/data_overall.csv "
    "(gh-pages, 'Leaderboard Update - 2025/12/16 (Checkpoint f7cf735)', the newest change of that file as of "
    "gh-pages 8c24bd7, 2026-04-12)"
)
# accuracies in %, as published (rank 34, 39, 40 of 109)
REFERENCE_MODELS: dict[str, dict[str, float]] = {
    "xLAM-2-8b-fc-r (FC)": {
        "overall": 46.68, "non_live_ast_summary": 84.58, "non_live_simple_ast": 73.83, "multiple": 93.50,
        "parallel": 87.50, "parallel_multiple": 83.50, "live_overall": 67.95, "live_simple": 75.58,
        "live_multiple": 66.57, "live_parallel": 56.25, "live_parallel_multiple": 54.17, "multi_turn_overall": 70.00,
        "multi_turn_base": 76.00, "multi_turn_miss_func": 72.00, "multi_turn_miss_param": 65.00,
        "multi_turn_long_context": 67.00, "web_search_summary": 6.50, "memory_summary": 13.98, "relevance": 87.50,
        "irrelevance": 63.28,
    },
    "Qwen3-8B (FC)": {
        "overall": 42.57, "non_live_ast_summary": 87.58, "non_live_simple_ast": 72.83, "multiple": 96.50,
        "parallel": 92.00, "parallel_multiple": 89.00, "live_overall": 80.53, "live_simple": 84.50,
        "live_multiple": 79.68, "live_parallel": 75.00, "live_parallel_multiple": 79.17, "multi_turn_overall": 41.75,
        "multi_turn_base": 50.50, "multi_turn_miss_func": 42.00, "multi_turn_miss_param": 40.00,
        "multi_turn_long_context": 34.50, "web_search_summary": 12.00, "memory_summary": 14.62, "relevance": 93.75,
        "irrelevance": 79.07,
    },
    "ToolACE-2-8B (FC)": {
        "overall": 42.44, "non_live_ast_summary": 87.10, "non_live_simple_ast": 73.42, "multiple": 91.00,
        "parallel": 93.00, "parallel_multiple": 91.00, "live_overall": 77.42, "live_simple": 71.32,
        "live_multiple": 79.39, "live_parallel": 68.75, "live_parallel_multiple": 62.50, "multi_turn_overall": 38.38,
        "multi_turn_base": 49.00, "multi_turn_miss_func": 28.00, "multi_turn_miss_param": 30.50,
        "multi_turn_long_context": 46.00, "web_search_summary": 8.50, "memory_summary": 18.49, "relevance": 75.00,
        "irrelevance": 90.79,
    },
}  # fmt: skip

WEIGHTS = (
    "v4 = 40% agentic + 30% multi-turn + 10% live + 10% non-live + 10% irrelevance; "
    "v3 = mean of live (weighted, with (ir)relevance), non-live (with irrelevance), multi-turn"
)
_SIMPLE = ("simple_python", "simple_java", "simple_javascript")
_NON_LIVE = (*_SIMPLE, "multiple", "parallel", "parallel_multiple")
_LIVE = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
_MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
_V3 = (*_NON_LIVE, "irrelevance", *_LIVE, "live_irrelevance", "live_relevance", *_MULTI_TURN)

# (label, summary key or category, version, the categories it needs)
ROWS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("Overall (v4)", "overall", "v4", V4_CATEGORIES),
    ("Overall (v3)", "overall", "v3", _V3),
    ("Non-live AST", "non_live_ast_summary", "v4", _NON_LIVE),
    ("  simple (python, java, javascript)", "non_live_simple_ast", "v4", _SIMPLE),
    *((f"  {name}", name, "v4", (name,)) for name in ("multiple", "parallel", "parallel_multiple")),
    ("Live (weighted AST)", "live_overall", "v4", _LIVE),
    *((f"  {name}", name, "v4", (name,)) for name in _LIVE),
    ("Multi-turn", "multi_turn_overall", "v4", _MULTI_TURN),
    *((f"  {name}", name, "v4", (name,)) for name in _MULTI_TURN),
    ("Web search (agentic)", "web_search_summary", "v4", ("web_search_base", "web_search_no_snippet")),
    ("Memory (agentic)", "memory_summary", "v4", ("memory_kv", "memory_vector", "memory_rec_sum")),
    ("Relevance", "relevance", "v4", ("live_relevance",)),
    ("Irrelevance", "irrelevance", "v4", ("irrelevance", "live_irrelevance")),
)  # fmt: skip


def leaderboard(scores: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``{"v4", "v3", "rows": [{"label", "ours" (% or None for N/A), "reference": {model: %}}], "missing"}``
    from ``{category: {"accuracy", "total"}}``."""
    summaries = {version: summarize_bfcl(scores, version) for version in ("v4", "v3")}
    missing = set(summaries["v4"]["missing"])
    rows = []
    for label, key, version, needs in ROWS:
        summary = summaries[version]
        value = summary[key] if key in summary else summary["categories"][key]
        ours = None if missing.intersection(needs) and key != "overall" else 100 * value
        reference = {model: numbers[key] for model, numbers in REFERENCE_MODELS.items() if version == "v4"}
        rows.append({"label": label, "ours": ours, "reference": reference})
    return {
        "v4": summaries["v4"],
        "v3": summaries["v3"],
        "rows": rows,
        "missing": summaries["v4"]["missing"],
        "reference_source": REFERENCE_SOURCE,
    }


def leaderboard_lines(board: Mapping[str, Any], ours: str = "this run") -> list[str]:
    """The table as text: one row per leaderboard column, this run beside the reference models."""
    models = list(REFERENCE_MODELS)
    width = max(len(row["label"]) for row in board["rows"])
    columns = [ours, *(model.removesuffix(" (FC)") for model in models)]
    header = "  ".join([" " * width, *(f"{column:>14}" for column in columns)])
    lines = ["BFCL v4, as the leaderboard reports it (accuracy %)", header]
    for row in board["rows"]:
        cells = [_cell(row["ours"], "N/A"), *(_cell(row["reference"].get(model), "-") for model in models)]
        lines.append("  ".join([row["label"].ljust(width), *(f"{cell:>14}" for cell in cells)]))
    lines += textwrap.wrap(WEIGHTS, 110, subsequent_indent="  ")
    lines.append("-: not published (the leaderboard publishes v4 only)")
    if board["missing"]:
        lines += textwrap.wrap(
            f"N/A: not scored here; the overall rows count these {len(board['missing'])} categories as 0, as BFCL "
            f"does: {', '.join(board['missing'])}",
            110,
            subsequent_indent="  ",
        )
    lines.append(f"reference models (FC): {board['reference_source']}")
    return lines


def _cell(value: float | None, absent: str) -> str:
    return absent if value is None else f"{value:.2f}"


__all__ = ["REFERENCE_MODELS", "REFERENCE_SOURCE", "ROWS", "leaderboard", "leaderboard_lines"]
