"""Retrieval evaluation on tool-query datasets: HR@k for meta_tool, history and keyword retrieval.

HR@k is the Meta-Tool paper's "hit rate of the ground truth tool within the retrieved tool set"
(§3.3.2), counted like ``train.papers.metatool.metabench``: micro-averaged over (query, gold tool)
pairs. A pair is a hit at k when its gold tool is among the first k tools of the ranking that
serves it:

* ``metatool`` with ``gold``/``rewrite`` hypotheses: one meta_tool query, and so one ranking, per
  gold tool (a model calls meta_tool once per tool it lacks);
* ``metatool`` with ``teacher`` hypotheses, ``history`` and ``keyword``: one ranking per request,
  shared by all its gold tools — so on ToolLens, where most requests need three tools, HR@1 of a
  single ranking is at most 1/3 of its pairs for such a request.

A gold tool missing from the library is a miss (``unknown_gold`` counts them); a query with no gold
tool (MetaTool Task1 negatives) has nothing to hit and is skipped (``skipped_queries``). A teacher that
gives no valid meta_tool call (``teacher``/``rewrite`` hypotheses) leaves its pairs without a ranking:
misses, listed with the reason in ``hypothesis_failures``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from train.papers.metatool import retrieve as metatool
from train.papers.metatool.baselines import KeywordIndex, history_scores
from train.papers.metatool.hypothesis import RuleTeacher, gold_hypothesis, rewritten_hypothesis, teacher_hypothesis
from train.papers.metatool.retrieve import ToolHypothesis
from train.retrieval.index import ToolIndex, top_k
from train.schema import ToolQuery

METHODS = ("metatool", "history", "keyword")
HYPOTHESES = ("teacher", "gold", "rewrite")
KEYWORD_SCORING = ("bm25", "dense")  # keyword retrieval: BM25, or embeddings of the keywords


@dataclass
class Pairs:
    """What to rank and what should be found: ``requests[pair_request[i]]`` should find ``pair_gold[i]``."""

    requests: list[Any] = field(default_factory=list)  # ToolHypothesis or text, one per ranking
    pair_query: list[str] = field(default_factory=list)
    pair_gold: list[str] = field(default_factory=list)
    pair_request: list[int] = field(default_factory=list)  # -1: no ranking (unknown gold tool, failed teacher)
    skipped_queries: list[str] = field(default_factory=list)
    unknown_gold: int = 0
    failures: list[dict[str, str]] = field(default_factory=list)  # {"id", "reason"}: no hypothesis from the teacher

    def add(self, key: str, make) -> int:
        """Append ``make()`` as a request and return its index; -1 (and the reason) when the teacher fails."""
        from train.papers.metatool.teacher import TeacherError
        from train.teacher import TeacherUnavailable

        try:
            self.requests.append(make())
        except TeacherUnavailable:  # the teacher stopped answering: the evaluation stops, not every query
            raise
        except (ValueError, TeacherError) as err:
            self.failures.append({"id": key, "reason": str(err)})
            return -1
        return len(self.requests) - 1


def sample_queries(queries: Sequence[ToolQuery], n: int | None) -> list[ToolQuery]:
    """A deterministic sample: the n queries whose ids hash lowest (stable under file reordering), in file order."""
    if n is None or n >= len(queries):
        return list(queries)
    rank = sorted(range(len(queries)), key=lambda i: (hashlib.sha256(queries[i].id.encode("utf-8")).hexdigest(), i))
    keep = set(rank[:n])
    return [q for i, q in enumerate(queries) if i in keep]


def build_pairs(
    queries: Sequence[ToolQuery], index: ToolIndex, method: str, hypothesis: str = "teacher", *, teacher=None
) -> Pairs:
    """The requests to rank and the (query, gold tool) pairs they serve."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if hypothesis not in HYPOTHESES:
        raise ValueError(f"hypothesis must be one of {', '.join(HYPOTHESES)}, got {hypothesis!r}")
    if teacher is None:
        from train.papers.metatool.teacher import OfflineTeacher

        teacher = OfflineTeacher(seed=0)
    by_name = {t.name: t for t in index.tools}
    rules = RuleTeacher()
    pairs = Pairs()
    per_gold = method == "metatool" and hypothesis in ("gold", "rewrite")
    for query in queries:
        gold = list(dict.fromkeys(query.gold_tools))
        if not gold:
            pairs.skipped_queries.append(query.id)
            continue
        shared = -1
        if not per_gold:
            shared = pairs.add(query.id, partial(_request, method, query.query, rules, teacher, query.id))
        for name in gold:
            request = shared
            if per_gold and name in by_name:
                tool = by_name[name]
                key = f"{query.id}/{name}"
                make = (
                    partial(gold_hypothesis, tool)
                    if hypothesis == "gold"
                    else partial(rewritten_hypothesis, tool, teacher, key)
                )
                request = pairs.add(key, make)
            pairs.unknown_gold += name not in by_name
            pairs.pair_query.append(query.id)
            pairs.pair_gold.append(name)
            pairs.pair_request.append(request if name in by_name else -1)
    return pairs


def _request(method: str, text: str, rules: RuleTeacher, teacher, key: str) -> ToolHypothesis | str:
    if method == "metatool":
        return teacher_hypothesis(text, teacher, key)
    if method == "keyword":
        return rules.keywords(text)
    return text  # history: the request is the whole dialogue so far


def rankings(
    pairs: Pairs, index: ToolIndex, method: str, *, alphas: Sequence[float], k: int, keyword_scoring: str = "bm25"
) -> dict[float | None, np.ndarray]:
    """(requests, k) library indices per α (metatool) or under the key None (the baselines)."""
    if method == "metatool":
        encoded = metatool.encode_hypotheses(index, pairs.requests)
        return {alpha: metatool.rank(index, encoded, alpha, k) for alpha in alphas}
    if method == "history":
        return {None: top_k(history_scores(index, pairs.requests), k)}
    return {None: top_k(KeywordIndex(index, keyword_scoring).scores(pairs.requests), k)}


def hit_ranks(pairs: Pairs, index: ToolIndex, ranking: np.ndarray) -> list[int | None]:
    """Per pair, the 1-based rank of its gold tool in its ranking, or None (not in the top k, or unknown)."""
    position = {t.name: i for i, t in enumerate(index.tools)}
    out: list[int | None] = []
    for gold, request in zip(pairs.pair_gold, pairs.pair_request):
        if request < 0:
            out.append(None)
            continue
        hits = np.flatnonzero(ranking[request] == position[gold])
        out.append(int(hits[0]) + 1 if len(hits) else None)
    return out


def hit_rates(ranks: Sequence[int | None], ks: Sequence[int]) -> dict[str, float | None]:
    """HR@k per k: the share of pairs whose rank is at most k (None when there are no pairs)."""
    if not ranks:
        return {f"HR@{k}": None for k in ks}
    return {f"HR@{k}": sum(1 for r in ranks if r is not None and r <= k) / len(ranks) for k in ks}


def evaluate(
    queries: Sequence[ToolQuery],
    index: ToolIndex,
    method: str,
    *,
    alphas: Sequence[float] = (metatool.DEFAULT_ALPHA,),
    ks: Sequence[int] = (1, 3, 5),
    hypothesis: str = "teacher",
    keyword_scoring: str = "bm25",
    teacher=None,
) -> dict[str, Any]:
    """Rows of HR@k (one per α for metatool, one for a baseline), counts, and per-pair ranks."""
    if not ks or min(ks) < 1:
        raise ValueError("every k must be at least 1")
    pairs = build_pairs(queries, index, method, hypothesis, teacher=teacher)
    ranked = rankings(pairs, index, method, alphas=alphas, k=max(ks), keyword_scoring=keyword_scoring)
    rows, per_pair = [], []
    for alpha, ranking in ranked.items():
        ranks = hit_ranks(pairs, index, ranking)
        rows.append({"alpha": alpha, **hit_rates(ranks, ks)})
        for i, rank in enumerate(ranks):
            request = pairs.pair_request[i]
            top = [index.tools[j].name for j in ranking[request]] if request >= 0 else []
            per_pair.append(
                {"alpha": alpha, "id": pairs.pair_query[i], "gold": pairs.pair_gold[i], "rank": rank, "retrieved": top}
            )
    return {
        "method": method,
        "hypothesis": hypothesis if method == "metatool" else None,
        "queries": len(queries) - len(pairs.skipped_queries),
        "pairs": len(pairs.pair_gold),
        "rankings": len(pairs.requests),
        "unknown_gold": pairs.unknown_gold,
        "hypothesis_failures": pairs.failures,
        "skipped_queries": pairs.skipped_queries,
        "rows": rows,
        "per_pair": per_pair,
    }
