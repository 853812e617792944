"""PTR stage 3, multi-view based re-ranking (seed 001, §2.3, Algorithm 1), one unsolved problem at a time.

For a problem U (K = 7, the released code's ``similarity_search(..., 7)``; the paper leaves K open):

1. L_DSA (direct semantic alignment): the K library tools nearest to U.
2. L_HQC (historical query correlation): the K past queries nearest to U, then their tools, query by query in
   rank order and each query's tools in its gold order, duplicates removed keeping the first (line 9). It may hold
   more than K tools. (The released code builds it through a ``set``: its order, and so its ties, were arbitrary.)
3. L_CTE (contextual tool expansion): when L_DSA is not empty, the K library tools nearest to L_DSA[0] (the
   primary tool itself among them: its similarity to itself is 1).
4. L_DSA + L_HQC + L_CTE are counted; tools are ranked by count, descending; a tie goes to the tool that appears
   first in that concatenation, so to list one's order first, then L_HQC's, then L_CTE's (Python's
   ``Counter.most_common`` on the concatenation, as in the released code, gives the same order). The top tool is
   the problem's recommendation.

Similarity is the cosine of one embedder's vectors throughout: U, the tools (as ``"name: description"``, the
released code's text) and the past queries. "Nearest" breaks equal similarities by library (or history) order.
A recommendation already in the toolset (the tools kept by stage 2, or an earlier problem's addition) is ignored
(§2.3: "in such instances, the tool will be ignored"): the problem adds nothing, it does not fall back to the
second-ranked tool.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

from train.papers.ptr.teacher import tool_text

K = 7


class Embedder(Protocol):
    """Texts -> L2-normalised rows (a dot product is a cosine). ``name`` identifies it (cache keys, traces)."""

    name: str

    def encode(self, texts: list[str]) -> np.ndarray: ...


class RetrievalEmbedder:
    """A ``train.retrieval.embed.Embedder`` (texts and a role) as an ``Embedder``: one role for every text, since
    Algorithm 1 compares problems, tools and past queries with the same similarity (prefix-free models such as
    MiniLM ignore the role)."""

    def __init__(self, embedder: Any, role: str = "query"):
        self.embedder, self.role, self.name = embedder, role, embedder.name

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.embedder.encode(list(texts), self.role)


class CachedEmbedder:
    """An ``Embedder`` that remembers each text's vector (this instance only): stage 2's offline matcher and
    stage 3 embed the same requirements, and a threshold sweep asks the same questions again."""

    def __init__(self, embedder: Embedder):
        self.embedder, self.name = embedder, embedder.name
        self.memo: dict[str, np.ndarray] = {}

    def encode(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if missing:
            self.memo.update(zip(missing, np.asarray(self.embedder.encode(missing), dtype=np.float32)))
        return np.stack([self.memo[t] for t in texts]) if texts else np.zeros((0, 0), dtype=np.float32)


def load_embedder(name: str | None = None) -> RetrievalEmbedder:
    """The retrieval embedders by name (``train.retrieval.embed.load_embedder``; MiniLM by default, offline)."""
    from train.retrieval.embed import DEFAULT_EMBEDDER
    from train.retrieval.embed import load_embedder as load

    return RetrievalEmbedder(load(name or DEFAULT_EMBEDDER))


@dataclass(frozen=True)
class PastQuery:
    """One row of the history: a past query and the tools it used (its gold set)."""

    query: str
    tools: tuple[str, ...]


def past_query(row: Any) -> PastQuery:
    """A history row as a ``PastQuery``: anything with ``query`` and ``tools`` (``train.papers.ptr.data.Example``),
    or a ``(query, tools)`` pair."""
    if isinstance(row, PastQuery):
        return row
    if hasattr(row, "query") and hasattr(row, "tools"):
        return PastQuery(str(row.query), tuple(row.tools))
    query, tools = row
    return PastQuery(str(query), tuple(tools))


@dataclass
class Views:
    """Algorithm 1 on one problem: the three lists, the counts (ranked) and the top tool; ``added`` says whether
    the top tool joined the recommendation (False: it was already there)."""

    problem: str
    dsa: list[str]
    nearest_queries: list[str]
    hqc: list[str]
    cte: list[str]
    ranked: list[tuple[str, int]]
    top: str | None
    added: bool = False

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ranked"] = [[tool, count] for tool, count in self.ranked]
        return out


def rank_views(dsa: Sequence[str], hqc: Sequence[str], cte: Sequence[str]) -> list[tuple[str, int]]:
    """Lines 14-16: (tool, count) by count descending, ties in order of first appearance in L_DSA + L_HQC + L_CTE."""
    counts = Counter([*dsa, *hqc, *cte])  # a Counter keeps first-insertion order; sorted() is stable
    return sorted(counts.items(), key=lambda item: -item[1])


def unique_tools(queries: Sequence[PastQuery]) -> list[str]:
    """Lines 4-9: the queries' tools in order, the first of each kept."""
    return list(dict.fromkeys(tool for past in queries for tool in past.tools))


def nearest(matrix: np.ndarray, probe: np.ndarray, k: int) -> list[int]:
    """Rows of ``matrix`` by cosine with ``probe``, highest first, equal ones in row order; at most ``k``."""
    if matrix.size == 0:
        return []
    return np.argsort(-(matrix @ probe), kind="stable")[:k].tolist()


class MultiView:
    """The library's tools and the history's queries, embedded once, and Algorithm 1 over them."""

    def __init__(
        self,
        library: Mapping[str, str],
        history: Sequence[Any],  # rows with .query and .tools, or (query, tools) pairs: ``past_query``
        embedder: Embedder,
        k: int = K,
    ):
        self.names = list(library)
        self.history = [past_query(p) for p in history]
        self.embedder, self.k = embedder, int(k)
        self.tools = self._encode([tool_text(n, library[n]) for n in self.names])
        self.queries = self._encode([p.query for p in self.history])

    def _encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.embedder.encode(texts), dtype=np.float32) if texts else np.zeros((0, 0), np.float32)

    def views(self, problem: str, vector: np.ndarray | None = None) -> Views:
        probe = self._encode([problem])[0] if vector is None else vector
        dsa_rows = nearest(self.tools, probe, self.k)
        dsa = [self.names[i] for i in dsa_rows]
        past = [self.history[i] for i in nearest(self.queries, probe, self.k)]
        hqc = unique_tools(past)
        cte = [self.names[i] for i in nearest(self.tools, self.tools[dsa_rows[0]], self.k)] if dsa_rows else []
        ranked = rank_views(dsa, hqc, cte)
        return Views(problem, dsa, [p.query for p in past], hqc, cte, ranked, ranked[0][0] if ranked else None)

    def resolve(self, problems: Sequence[str], recommended: Sequence[str]) -> tuple[list[str], list[Views]]:
        """Each problem's top tool, added unless already recommended: (additions in problem order, views)."""
        vectors = self._encode(list(problems))
        have = set(recommended)
        added: list[str] = []
        every: list[Views] = []
        for problem, vector in zip(problems, vectors):
            view = self.views(problem, vector)
            if view.top is not None and view.top not in have:
                view.added = True
                have.add(view.top)
                added.append(view.top)
            every.append(view)
        return added, every


__all__ = [
    "Embedder",
    "K",
    "MultiView",
    "PastQuery",
    "RetrievalEmbedder",
    "Views",
    "load_embedder",
    "nearest",
    "past_query",
    "rank_views",
    "unique_tools",
]
