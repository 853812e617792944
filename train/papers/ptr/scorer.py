"""Tool recommendation scorer (PTR paper, seed 001, §3 "Metrics" and §4.1): TRACC, and Recall and NDCG in two
conventions: the textbook Recall@K / NDCG@K, and the paper's tables' (its released code's ``metric.py``).

The paper's formula, quoted::

    TRACC = (1 - |n2 - n1| / |A ∪ B|) · ACC,    ACC = |A ∩ B| / n1

"where A denotes the ground-truth tool set and B represents the recommended tool set. The
cardinalities of A and B are denoted by n1 and n2". Recall@K and NDCG@K are reported "with K set to
the size of the ground-truth tool set" (§4.1). Every metric is averaged over queries.

Rows
----
* references: ``{"id", "tools": [names]}`` (the gold *set*), or a canonical ``ToolQuery``
  ``{"id", "query", "gold_tools": [names], "meta"}`` as ``tooltrain data convert rectools|metatool``
  writes it.
* predictions: ``{"id", "tools": [names]}``, ordered by rank (best first).

Definitions where the paper is silent
-------------------------------------
* A is a set: a gold name listed twice counts once. B is the recommended *set*: a name recommended
  twice keeps its first (best) rank and the repeat is dropped (the per-item row says how many).
* Recall@K = |A ∩ B[:K]| / |A| and NDCG@K = DCG@K / IDCG@K with binary relevance,
  DCG@K = Σ_{i=1..K} [B_i ∈ A] / log2(i + 1) and IDCG@K = Σ_{i=1..K} 1 / log2(i + 1) (K = |A|, so the
  ideal list is all relevant). A list shorter than K simply has fewer terms.
* **The paper's convention** (``recall_paper``, ``ndcg_paper``): the numbers of Tables 1-2 come from the released
  code, which computes Recall as ACC = |A ∩ B| / |A| over the *whole* recommendation (no cut at K), and NDCG@K
  (K = |A|) with the ideal DCG taken from the recommendation's *own* relevance list sorted best first: IDCG@K =
  Σ_{i=1..min(K, |A ∩ B|)} 1 / log2(i + 1). A set that finds one gold tool at rank 1 of a three-tool query
  scores NDCG 1.0 there (textbook: 0.469); a hit beyond rank K counts for Recall but not for NDCG; no hit is 0.
  Both conventions are reported side by side, each under its own name.
* A missing prediction is an empty B: TRACC, Recall@K and NDCG@K are all 0.
* A reference with an empty gold set (e.g. MetaTool Task1 negatives) has n1 = 0 and no ACC; it is
  reported under ``reference_errors`` and left out of the averages, never silently.
* The per-item ``correct`` is "B equals A as sets" (TRACC = 1).
"""

from __future__ import annotations

import math
from typing import Any

from train.evaluation import ScorerSpec
from train.evaluation.calls import join_by_id, ratio, score_joined


class RowError(ValueError):
    pass


def tool_list(row: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    for key in keys:
        if key in row:
            value = row[key]
            if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
                raise RowError(f"'{key}' must be a list of tool names")
            return value
    raise RowError(f"no {' or '.join(repr(k) for k in keys)} list")


def ranked_set(names: list[str]) -> list[str]:
    """Names in rank order with repeats removed (each keeps its first rank)."""
    return list(dict.fromkeys(names))


def tracc(gold: set[str], recommended: list[str]) -> float:
    n1, n2 = len(gold), len(set(recommended))
    union = len(gold | set(recommended))
    return (1 - abs(n2 - n1) / union) * (len(gold & set(recommended)) / n1)


def recall_at_k(gold: set[str], ranked: list[str], k: int) -> float:
    return len(gold & set(ranked[:k])) / len(gold)


def ndcg_at_k(gold: set[str], ranked: list[str], k: int) -> float:
    dcg = sum(1 / math.log2(rank + 1) for rank, name in enumerate(ranked[:k], start=1) if name in gold)
    ideal = sum(1 / math.log2(rank + 1) for rank in range(1, min(k, len(gold)) + 1))
    return dcg / ideal


def recall_paper(gold: set[str], ranked: list[str]) -> float:
    """The released code's Recall (its ``TRACCAndAcc``'s ACC): |A ∩ B| / |A| over the whole recommendation."""
    return len(gold & set(ranked)) / len(gold)


def ndcg_paper(gold: set[str], ranked: list[str]) -> float:
    """The released code's NDCG@K (K = |A|): ideal DCG from the recommendation's own hits sorted first."""
    k = len(gold)
    relevance = [1 if name in gold else 0 for name in ranked]
    dcg = sum(rel / math.log2(rank + 1) for rank, rel in enumerate(relevance[:k], start=1))
    ideal = sum(rel / math.log2(rank + 1) for rank, rel in enumerate(sorted(relevance, reverse=True)[:k], start=1))
    return dcg / ideal if ideal > 0 else 0.0


def score_item(gold_names: list[str], predicted: list[str] | None) -> dict[str, Any]:
    gold = set(gold_names)
    ranked = ranked_set(predicted or [])
    k = len(gold)
    return {
        "tracc": tracc(gold, ranked),
        "recall": recall_at_k(gold, ranked, k),
        "ndcg": ndcg_at_k(gold, ranked, k),
        "recall_paper": recall_paper(gold, ranked),
        "ndcg_paper": ndcg_paper(gold, ranked),
        "k": k,
        "correct": set(ranked) == gold,
        "repeats_dropped": len(predicted or []) - len(ranked),
    }


def score_tracc(predictions: list[dict[str, Any]], references: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean TRACC, Recall@K and NDCG@K (K = |A|) and the paper's Recall and NDCG over the references; see the
    module docstring."""
    scored = score_joined(join_by_id(predictions, references), gold_tools, score_prediction, RowError)
    per_item = scored.per_item
    count = len(per_item)
    overall = {
        "tracc": ratio(sum(item["tracc"] for item in per_item), count),
        "recall@k": ratio(sum(item["recall"] for item in per_item), count),
        "ndcg@k": ratio(sum(item["ndcg"] for item in per_item), count),
        "recall_paper": ratio(sum(item["recall_paper"] for item in per_item), count),
        "ndcg_paper": ratio(sum(item["ndcg_paper"] for item in per_item), count),
        "queries": count,
    }
    return scored.result(overall=overall)


def gold_tools(reference: dict[str, Any]) -> list[str]:
    gold = tool_list(reference, ("tools", "gold_tools"))
    if not gold:
        raise RowError("empty gold tool set: TRACC and Recall@K need n1 > 0")
    return gold


def score_prediction(gold: list[str], prediction: dict[str, Any] | None) -> dict[str, Any]:
    error = None
    predicted: list[str] | None = None
    if prediction is None:
        error = "missing prediction"
    else:
        try:
            predicted = tool_list(prediction, ("tools",))
        except RowError as err:
            error = f"unreadable prediction: {err}"
    return {**score_item(gold, predicted), "error": error}


# scored from rows only: PTR's recommendations come from its own pipeline (``tooltrain eval recommend``), not a task
SPEC = ScorerSpec(
    score=score_tracc,
    layout="""\
references: {"id", "tools": [gold names]} or ToolQuery rows ({"id", "query", "gold_tools"}).
predictions: {"id", "tools": [names, best first]}. metrics: TRACC, Recall@K, NDCG@K (K = |gold|).""",
)
