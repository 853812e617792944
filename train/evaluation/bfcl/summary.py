"""BFCL leaderboard aggregation of per-category accuracies (v4, v3 and v2 formulas).

The formulas, and how a category that was not scored counts, are documented in ``train/evaluation/bfcl/scorer.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# v4 and v3 count a missing category as accuracy 0 over its full dataset size; only the live categories' sizes
# matter (theirs are the only count-weighted means). Sizes of bfcl-eval 2026.3.23's data files (test_bfcl_v4 counts).
V4_DATASET_SIZES = {
    "live_simple": 258, "live_multiple": 1053, "live_parallel": 16, "live_parallel_multiple": 24,
    "live_irrelevance": 884, "live_relevance": 16,
}  # fmt: skip
_V2_NAMES = {"simple": "simple_python", "java": "simple_java", "javascript": "simple_javascript"}

V4_CATEGORIES = (
    "simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple", "irrelevance",
    "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance", "live_relevance",
    "multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context",
    "web_search_base", "web_search_no_snippet", "memory_kv", "memory_vector", "memory_rec_sum",
)  # fmt: skip
BFCL_SUMMARIES = ("v4", "v3", "v2", "bfcl_v4")  # eval score bfcl --summary: the formulas, and the leaderboard's table
V3_CATEGORIES = V4_CATEGORIES[:17]  # v3 is v4 without the agentic categories
V2_CATEGORIES = (
    "simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple", "irrelevance",
    "exec_simple", "exec_multiple", "exec_parallel", "exec_parallel_multiple", "rest",
    "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance", "live_relevance",
)  # fmt: skip


# ToolGT (seed 004, §3.3) scores BFCL-v2 without the exec, REST, sql and chatable categories, in three groups.
# Item counts are the rows of shared/data/bfcl_v2's question files (tests/evaluation/test_toolgt_summary.py counts
# them): non-live 1,150, live 1,335, relevance 1,156, 3,641 in all, as the paper's W needs.
TOOLGT_GROUPS = {
    "non_live": ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple"),
    "live": ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"),
    "relevance": ("irrelevance", "live_irrelevance", "live_relevance"),
}
TOOLGT_ITEM_COUNTS = {
    "simple_python": 400, "simple_java": 100, "simple_javascript": 50, "multiple": 200, "parallel": 200,
    "parallel_multiple": 200, "live_simple": 258, "live_multiple": 1037, "live_parallel": 16,
    "live_parallel_multiple": 24, "irrelevance": 240, "live_irrelevance": 875, "live_relevance": 41,
}  # fmt: skip
TOOLGT_GROUP_SIZES = {group: sum(TOOLGT_ITEM_COUNTS[c] for c in names) for group, names in TOOLGT_GROUPS.items()}
TOOLGT_ITEMS = sum(TOOLGT_GROUP_SIZES.values())


def toolgt_weighted(non_live: float, live: float, relevance: float) -> float:
    """ToolGT's "W" from its three group columns (each a weighted accuracy over its group, Table 6): the
    accuracy over all 3,641 items."""
    sizes = TOOLGT_GROUP_SIZES
    return (non_live * sizes["non_live"] + live * sizes["live"] + relevance * sizes["relevance"]) / TOOLGT_ITEMS


def summarize_toolgt(read: Mapping[str, tuple[float, int]]) -> dict:
    """ToolGT's BFCL-v2 numbers from ``{category: (accuracy, count)}``.

    ``W``: accuracy over every scored item (over all 3,641 when all 13 categories are scored, the paper's W);
    ``non_live`` / ``live`` / ``relevance``: the same over each group's categories (Table 6's columns);
    ``bfcl``: the v2 leaderboard overall without its exec groups (exec, REST need live APIs and ToolGT drops
    them): unweighted(simple, multiple, parallel, parallel_multiple, each unweighted(non-live, live),
    unweighted(irrelevance, live_irrelevance), live_relevance). The paper's "BFCL" column cannot be
    recomputed from its tables (its Relevancy column merges categories the formula keeps apart); this is
    the leaderboard's formula on the categories ToolGT scores. A category not scored drops out of every
    mean (listed in ``missing``; nothing counts as 0), so a subset gives the numbers of that subset.
    """
    names = [name for group in TOOLGT_GROUPS.values() for name in group]
    scored = {name: read[name] for name in names if name in read}
    summary: dict[str, Any] = {"version": "toolgt", "W": _weighted_or_none(scored.values())}
    for group, members in TOOLGT_GROUPS.items():
        summary[group] = _weighted_or_none([scored[m] for m in members if m in scored])
    summary["bfcl"] = _exec_free_overall(scored)
    summary["items"] = sum(count for _, count in scored.values())
    summary["paper_items"] = TOOLGT_ITEMS
    summary["categories"] = {name: scored[name][0] for name in scored}
    summary["missing"] = [name for name in names if name not in scored]
    return summary


def _weighted_or_none(scores: Any) -> float | None:
    scores = list(scores)
    total = sum(count for _, count in scores)
    return sum(accuracy * count for accuracy, count in scores) / total if total else None


def _mean_or_none(values: Any) -> float | None:
    present = [value for value in values if value is not None]
    return sum(present) / len(present) if present else None


def _exec_free_overall(s: Mapping[str, tuple[float, int]]) -> float | None:
    def acc(name: str) -> float | None:
        return s[name][0] if name in s else None

    simple_non_live = _mean_or_none([acc("simple_python"), acc("simple_java"), acc("simple_javascript")])
    ast_totals = [
        _mean_or_none([simple_non_live, acc("live_simple")]),
        _mean_or_none([acc("multiple"), acc("live_multiple")]),
        _mean_or_none([acc("parallel"), acc("live_parallel")]),
        _mean_or_none([acc("parallel_multiple"), acc("live_parallel_multiple")]),
    ]
    irrelevance = _mean_or_none([acc("irrelevance"), acc("live_irrelevance")])
    return _mean_or_none([*ast_totals, irrelevance, acc("live_relevance")])


def _unweighted(*scores: tuple[float, int]) -> tuple[float, int]:
    return sum(accuracy for accuracy, _ in scores) / len(scores), sum(count for _, count in scores)


def _weighted(*scores: tuple[float, int]) -> tuple[float, int]:
    total = sum(count for _, count in scores)
    return (sum(accuracy * count for accuracy, count in scores) / total if total else 0.0), total


def _category_key(name: str) -> str:
    bare = re.sub(r"^BFCL_v\d+_", "", name)
    return _V2_NAMES.get(bare, bare)


def _read_scores(scores: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[float, int]]:
    read = {}
    for name, score in scores.items():
        count = score.get("total", score.get("total_count", 0))
        read[_category_key(name)] = (float(score["accuracy"]), int(count))
    return read


def summarize_bfcl(scores: Mapping[str, Mapping[str, Any]], version: str = "v4") -> dict:
    """Leaderboard numbers from ``{category: {"accuracy", "total"}}`` (``score_bfcl`` results fit as they are).

    Categories may use v2 or v4 names; ones the scorer cannot compute (exec, REST, multi-turn, agentic) may
    be supplied from elsewhere. Returns the summary accuracies (fractions in [0, 1]), ``categories`` (the
    accuracy used for each category) and ``missing`` (categories counted as 0; for ``toolgt``, left out).
    """
    read = _read_scores(scores)
    if version == "toolgt":
        return summarize_toolgt(read)
    if version in ("v4", "v3"):
        names, default_count = (V4_CATEGORIES if version == "v4" else V3_CATEGORIES), V4_DATASET_SIZES
    elif version == "v2":
        names, default_count = V2_CATEGORIES, {}
    else:
        raise ValueError(f"unknown BFCL version {version!r}; valid versions: v2, v3, v4, toolgt")
    missing = [name for name in names if name not in read]
    score = {name: read.get(name, (0.0, default_count.get(name, 0))) for name in names}
    summary = {"v4": _summarize_v4, "v3": _summarize_v3, "v2": _summarize_v2}[version](score)
    return {
        "version": version,
        **{key: value[0] for key, value in summary.items()},
        "categories": {name: score[name][0] for name in names},
        "missing": missing,
    }


def _summarize_v4(s: dict[str, tuple[float, int]]) -> dict[str, tuple[float, int]]:
    simple_ast = _unweighted(s["simple_python"], s["simple_java"], s["simple_javascript"])
    non_live = _unweighted(simple_ast, s["multiple"], s["parallel"], s["parallel_multiple"])
    live = _weighted(s["live_simple"], s["live_multiple"], s["live_parallel"], s["live_parallel_multiple"])
    irrelevance = _unweighted(s["irrelevance"], s["live_irrelevance"])
    multi_turn = _unweighted(
        s["multi_turn_base"], s["multi_turn_miss_func"], s["multi_turn_miss_param"], s["multi_turn_long_context"]
    )
    web_search = _unweighted(s["web_search_base"], s["web_search_no_snippet"])
    memory = _unweighted(s["memory_kv"], s["memory_vector"], s["memory_rec_sum"])
    agentic = _unweighted(web_search, memory)
    weights = ((non_live, 10), (live, 10), (irrelevance, 10), (multi_turn, 30), (agentic, 40))
    weight_sum = sum(weight for _, weight in weights)
    overall = sum(part[0] * (weight / weight_sum) for part, weight in weights)  # BFCL normalises the weights first
    return {
        "overall": (overall, 0),
        "non_live_overall": non_live,
        "non_live_ast_summary": non_live,
        "non_live_simple_ast": simple_ast,
        "live_overall": live,
        "live_ast_summary": live,
        "irrelevance": irrelevance,
        "relevance": s["live_relevance"],
        "multi_turn_overall": multi_turn,
        "web_search_summary": web_search,
        "memory_summary": memory,
        "agentic_overall": agentic,
    }


def _summarize_v3(s: dict[str, tuple[float, int]]) -> dict[str, tuple[float, int]]:
    # gorilla cd9429cc (2025-08-06, the last v3 before the v4 release; executable categories retired in 4ed459c0)
    simple_ast = _unweighted(s["simple_python"], s["simple_java"], s["simple_javascript"])
    non_live_ast = _unweighted(simple_ast, s["multiple"], s["parallel"], s["parallel_multiple"])
    non_live = _unweighted(simple_ast, s["multiple"], s["parallel"], s["parallel_multiple"], s["irrelevance"])
    live_ast = (s["live_simple"], s["live_multiple"], s["live_parallel"], s["live_parallel_multiple"])
    live = _weighted(*live_ast, s["live_irrelevance"], s["live_relevance"])
    multi_turn = _unweighted(
        s["multi_turn_base"], s["multi_turn_miss_func"], s["multi_turn_miss_param"], s["multi_turn_long_context"]
    )
    return {
        "overall": _unweighted(live, non_live, multi_turn),
        "non_live_overall": non_live,
        "non_live_ast_summary": non_live_ast,
        "non_live_simple_ast": simple_ast,
        "live_overall": live,
        "live_ast_summary": _weighted(*live_ast),
        "irrelevance": _unweighted(s["irrelevance"], s["live_irrelevance"]),
        "relevance": s["live_relevance"],
        "multi_turn_overall": multi_turn,
    }


def _summarize_v2(s: dict[str, tuple[float, int]]) -> dict[str, tuple[float, int]]:
    simple_ast = _unweighted(s["simple_python"], s["simple_java"], s["simple_javascript"])
    simple_exec = _unweighted(s["exec_simple"], s["rest"])
    non_live_ast = (simple_ast, s["multiple"], s["parallel"], s["parallel_multiple"])
    non_live_exec = (simple_exec, s["exec_multiple"], s["exec_parallel"], s["exec_parallel_multiple"])
    live_ast = (s["live_simple"], s["live_multiple"], s["live_parallel"], s["live_parallel_multiple"])
    totals_ast = [_unweighted(non_live, live) for non_live, live in zip(non_live_ast, live_ast)]
    irrelevance = _unweighted(s["irrelevance"], s["live_irrelevance"])
    relevance = s["live_relevance"]
    return {
        "overall": _unweighted(*totals_ast, *non_live_exec, irrelevance, relevance),
        "ast_summary": _unweighted(*totals_ast),
        "exec_summary": _unweighted(*non_live_exec),
        "simple_ast": totals_ast[0],
        "multiple_ast": totals_ast[1],
        "parallel_ast": totals_ast[2],
        "parallel_multiple_ast": totals_ast[3],
        "non_live_overall": _unweighted(*non_live_ast, *non_live_exec, s["irrelevance"]),
        "non_live_ast_summary": _unweighted(*non_live_ast),
        "non_live_exec_summary": _unweighted(*non_live_exec),
        "non_live_simple_ast": simple_ast,
        "non_live_simple_exec": simple_exec,
        "live_overall": _weighted(*live_ast, s["live_irrelevance"], relevance),
        "live_ast_summary": _weighted(*live_ast),
        "irrelevance": irrelevance,
        "relevance": relevance,
    }
