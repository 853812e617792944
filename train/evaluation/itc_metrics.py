"""ITC aggregation: micro and per-sample (macro) P/R/F1, the Seal-Tools matching mode, breakdowns (seed 002).

Micro and macro
---------------
``micro``: Appendix B as written. Amounts are summed over the test set, then P = correct / predicted,
R = correct / gold, F1 = 2PR / (P + R). A ratio whose denominator is 0 is 0.0, unless nothing was predicted
*and* nothing was gold in the whole set (then P, R and F1 are null).

``macro``: P, R and F1 computed for each item from that item's amounts, then averaged over the items.
**This is what reproduces the paper's tables.** Table 3's Qwen2.5-7B-Instruct invocation P / R / F1 is
42.76 / 43.37 / 42.71: F1 below both P and R. The micro F1 is a harmonic mean of P and R, so it always lies
between them; an average of per-item F1s does not (two items with (P, R) = (1, 0.5) and (0.5, 1) average to
P = R = 0.75 and F1 = 0.667). GPT-4o's 82.18 / 81.57 / 81.57 says the same (the harmonic mean is 81.87).
Per-item conventions (the paper states none; these are ours, chosen so that a right answer scores 1):

* an item whose output fails FM and holds no call list scores 0 for all six numbers (it is not an answer); one
  that fails FM but holds calls (``itc.loose_calls``) is scored on those calls, as the paper's tables do;
* an item with nothing predicted and nothing gold scores 1 for P, R and F1: for tools, a ``[]`` answer where
  ``[]`` is right; for invocation (no (tool, key, value) triple either side), only when the calls are right
  too (``[]`` for ``[]``, ``[g()]`` for ``[g()]``; ``[]`` for ``[g()]`` scores 0, not a vacuous 1);
* otherwise a 0 denominator gives 0 (calls where the gold has none: P 0, R 0; no call where there are gold
  calls: P 0, R 0), and F1 is 0 when P + R is 0.

Calls in outputs that fail FM. The paper's Table 3 shows watt-tool-8B with FM 5.53 and tool F1 88.30: its tables
read calls even out of outputs that fail FM (watt-tool and ToolACE write bare call lists, no JSON answer). The
scorer does the same (``itc.loose_calls``: the broken answer's Action, else the first bracketed call list in the
text, as Seal-Tools takes the first call list it finds), in micro and macro alike; FM stays false for them.

Matching (``matching=``)
------------------------
``multiset`` (default): names and (tool, key, value) triples are multisets; correct = the multiset
intersection, each gold call or triple matched at most once; values compared after JSON normalisation
(``calls.canonical``: ``1 == 1.0``, ``"1" != 1``). Recall never exceeds 1.

``seal``: Seal-Tools' counting (its ``calculate_score_ToolLearning``, which §5.2 says the metrics follow).
Each predicted call is matched to the *first* gold call of the same name, without consuming it; the call is
a correct tool, and each of its (key, value) pairs is correct when that gold call has the key and
``str(predicted) == str(gold)``. Worked example (correct tools, correct parameters, of the predicted ones):

=========================== ================================ ===================== ===========================
gold                        prediction                       multiset              seal
=========================== ================================ ===================== ===========================
``[f(a=1), f(a=2)]``        ``[f(a=1), f(a=2)]``             2 of 2, 2 of 2        2 of 2, 1 of 2 (both calls
                                                                                   meet f(a=1))
``[f(a=1), f(a=2)]``        ``[f(a=1), f(a=1), f(a=1)]``     2 of 3, 1 of 3        3 of 3, 3 of 3 (R = 3/2)
``[f(a=1), g(b=2)]``        ``[f(a='1'), g(b=2.0)]``         2 of 2, 1 of 2        2 of 2, 1 of 2
                                                             (2.0 == 2, '1' != 1)  ('1' == str(1), '2.0' != '2')
=========================== ================================ ===================== ===========================

The Table 4 breakdown (``itc.error_breakdown``) does not depend on ``matching``.

Breakdowns
----------
``by_language`` (the query's language: ``meta.language``, else langid of the query), ``non_english`` (every
item whose query is not English: the test set of the paper's Table 7) and ``by_task_type`` (``meta.task_type``:
single / repeated / parallel / nested; present when some reference has it, unlabelled items under
``unlabelled``). Each is a block ``{"items", "lm", "fm", "micro": {...}, "macro": {...}}``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PRF_KEYS = ("tool_p", "tool_r", "tool_f1", "ti_p", "ti_r", "ti_f1")
SELECTION_ERRORS = ("hallucinated_tools", "missing_tools", "extra_tools")
INVOCATION_ERRORS = ("incorrect_params", "missing_params", "extra_params")
MATCHINGS = ("multiset", "seal")
UNLABELLED = "unlabelled"


def precision_recall_f1(correct: int, predicted: int, gold: int) -> dict[str, float | None]:
    """Micro P/R/F1 from summed amounts; null when nothing was predicted and nothing was gold."""
    if predicted == 0 and gold == 0:
        return {"p": None, "r": None, "f1": None}
    p = correct / predicted if predicted else 0.0
    r = correct / gold if gold else 0.0
    return {"p": p, "r": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


def _item_side(counts: dict[str, int], vacuous: float = 1.0) -> tuple[float, float, float]:
    if counts["predicted"] == 0 and counts["gold"] == 0:
        return vacuous, vacuous, vacuous
    result = precision_recall_f1(counts["correct"], counts["predicted"], counts["gold"])
    return result["p"], result["r"], result["f1"]  # type: ignore[return-value]


def item_prf(item: dict[str, Any]) -> dict[str, float]:
    """One item's P/R/F1 for tools and invocation, with the per-item conventions of the module docstring."""
    if not item["format_ok"] and not item["tools"]["predicted"]:  # no answer, and no call found in it
        return dict.fromkeys(PRF_KEYS, 0.0)
    tools = item["tools"]
    calls_right = tools["correct"] == tools["predicted"] == tools["gold"]  # no triple either side: the calls decide
    tool, invocation = _item_side(tools), _item_side(item["params"], 1.0 if calls_right else 0.0)
    return dict(zip(PRF_KEYS, (*tool, *invocation)))


def micro(items: list[dict[str, Any]]) -> dict[str, float | None]:
    sums = {
        side: {k: sum(item[side][k] for item in items) for k in ("predicted", "gold", "correct")}
        for side in ("tools", "params")
    }
    tool = precision_recall_f1(sums["tools"]["correct"], sums["tools"]["predicted"], sums["tools"]["gold"])
    ti = precision_recall_f1(sums["params"]["correct"], sums["params"]["predicted"], sums["params"]["gold"])
    return dict(zip(PRF_KEYS, (tool["p"], tool["r"], tool["f1"], ti["p"], ti["r"], ti["f1"])))


def macro(items: list[dict[str, Any]]) -> dict[str, float | None]:
    if not items:
        return dict.fromkeys(PRF_KEYS)
    per_item = [item["prf"] for item in items]
    return {key: sum(values[key] for values in per_item) / len(items) for key in PRF_KEYS}


def block(items: list[dict[str, Any]]) -> dict[str, Any]:
    """LM, FM, micro and macro P/R/F1 of a group of scored items."""
    n = len(items)
    return {
        "items": n,
        "lm": sum(item["language_ok"] for item in items) / n if n else None,
        "fm": sum(item["format_ok"] for item in items) / n if n else None,
        "micro": micro(items),
        "macro": macro(items),
    }


def _groups(items: list[dict[str, Any]], key: Callable[[dict[str, Any]], str]) -> dict[str, dict[str, Any]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        grouped.setdefault(key(item), []).append(item)
    return {name: block(grouped[name]) for name in sorted(grouped)}


def _shares(counts: dict[str, int], keys: tuple[str, ...]) -> dict[str, float | None]:
    total = sum(counts[key] for key in keys)
    return {key: (counts[key] / total if total else None) for key in keys}


def aggregate(items: list[dict[str, Any]], matching: str = "multiset") -> dict[str, Any]:
    """The scorer's metrics from its scored items (each with ``prf`` from ``item_prf``)."""
    whole = block(items)
    sums = {
        side: {k: sum(item[side][k] for item in items) for k in ("predicted", "gold", "correct")}
        for side in ("tools", "params")
    }
    errors = {key: sum(item["errors"][key] for item in items) for key in SELECTION_ERRORS + INVOCATION_ERRORS}
    metrics: dict[str, Any] = {
        "overall": {"lm": whole["lm"], "fm": whole["fm"], "items": whole["items"], "matching": matching},
        "micro": whole["micro"],
        "macro": whole["macro"],
        "by_language": _groups(items, lambda item: item["query_language"] or "unknown"),
    }
    non_english = [item for item in items if item["query_language"] != "en"]
    if non_english:
        metrics["non_english"] = block(non_english)
    if any(item["task_type"] is not None for item in items):
        metrics["by_task_type"] = _groups(items, lambda item: item["task_type"] or UNLABELLED)
    metrics["counts"] = {"tools": sums["tools"], "params": sums["params"], "errors": errors}
    metrics["error_shares"] = {
        "selection": _shares(errors, SELECTION_ERRORS),
        "invocation": _shares(errors, INVOCATION_ERRORS),
    }
    return metrics


__all__ = [
    "INVOCATION_ERRORS",
    "MATCHINGS",
    "PRF_KEYS",
    "SELECTION_ERRORS",
    "aggregate",
    "block",
    "item_prf",
    "macro",
    "micro",
    "precision_recall_f1",
]
