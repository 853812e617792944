"""The Meta-Tool paper's two retrieval baselines (seed 000, §4 "Tool Retrieval Baseline Methods").

* **Dialogue-history retrieval** "operates by treating the user's query or dialogue history as a
  direct input to assess its similarity against the standard tool JSONs": the history text is
  embedded as a query, every tool's JSON (``{"name", "description", "parameters"}``) as a passage,
  ranked by cosine.
* **Keyword retrieval** (API-Bank's ToolSearcher): "the keyword will be used to calculate similarity
  with concatenated strings of tool names and descriptions". Scored with BM25 (``bm25s``, its
  Lucene variant, k1 = 1.5, b = 0.75) by default, or densely (``scoring="dense"``) like history.

BM25 tokens: lower-cased words with snake_case and camelCase names split (``get_traffic_report``
matches the keyword "traffic"), one-letter words and bm25s's English stop words (``STOPWORDS_EN_PLUS``,
179 words) removed, no stemming. A keyword with no token
in the library scores 0 against every tool; ties keep library order (``index.top_k``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from train.retrieval.embed import cached_encode, words
from train.retrieval.index import ToolIndex, name_description_text, top_k

SCORINGS = ("bm25", "dense")


def history_scores(index: ToolIndex, histories: Sequence[str]) -> np.ndarray:
    queries = cached_encode(index.embedder, list(histories), "query", label="history", use_cache=index.use_cache)
    return queries @ index.view("json").T if len(histories) else np.zeros((0, len(index.tools)), dtype=np.float32)


def history_search(index: ToolIndex, histories: Sequence[str], k: int = 5) -> list[list[str]]:
    return _names(index, top_k(history_scores(index, histories), k))


def bm25_tokens(text: str) -> list[str]:
    return [w for w in words(text) if len(w) > 1 and w not in _stopwords()]


@functools.cache
def _stopwords() -> frozenset[str]:
    from bm25s.tokenization import STOPWORDS_EN_PLUS

    return frozenset(STOPWORDS_EN_PLUS)


class KeywordIndex:
    """ToolSearcher over a library: BM25 on "name description", or dense cosine on the same text."""

    def __init__(self, index: ToolIndex, scoring: str = "bm25"):
        if scoring not in SCORINGS:
            raise ValueError(f"keyword scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
        self.index = index
        self.scoring = scoring
        self._bm25 = None

    def _retriever(self):
        if self._bm25 is None:
            import bm25s

            corpus = [bm25_tokens(name_description_text(t)) for t in self.index.tools]
            # bm25s wants one token in every document; a tool with none cannot be found by keyword anyway
            self._bm25 = bm25s.BM25(k1=1.5, b=0.75)
            self._bm25.index([tokens or ["\x00"] for tokens in corpus], show_progress=False)
        return self._bm25

    def scores(self, keywords: Sequence[str]) -> np.ndarray:
        if self.scoring == "dense":
            queries = cached_encode(
                self.index.embedder, list(keywords), "query", label="keywords", use_cache=self.index.use_cache
            )
            return (
                queries @ self.index.view("name_description").T
                if len(keywords)
                else np.zeros((0, len(self.index.tools)), dtype=np.float32)
            )
        retriever = self._retriever()
        out = np.zeros((len(keywords), len(self.index.tools)), dtype=np.float32)
        for row, keyword in enumerate(keywords):
            tokens = bm25_tokens(keyword)
            if tokens:
                out[row] = retriever.get_scores(tokens)
        return out

    def search(self, keywords: Sequence[str], k: int = 5) -> list[list[str]]:
        return _names(self.index, top_k(self.scores(keywords), k))


def _names(index: ToolIndex, picks: np.ndarray) -> list[list[str]]:
    return [[index.tools[i].name for i in row] for row in picks]
