"""Meta-Tool retrieval: Algorithm 1 of the Meta-Tool paper (seed 000, §3.1 and A.6), vectorised.

A *tool query* t^q is what a model asks for through ``meta_tool``: a tool description and a list
of parameter descriptions. Its similarity to a library tool t^v is::

    S_t        = cos(E(des_t^q), E(des_t^v))
    S_p[i]     = max_j cos(E(des_p^q[i]), E(des_p^v[j]))    j over the *required* parameters of t^v
    similarity = α · S_t + (1 - α) · mean_i S_p[i]

("For each required parameter in t_q, we calculate parameter cosine similarity S_p[i] and identify
the most similar parameter among the required parameters in t^v", §3.1). α = 0.5 in the paper,
0.65–0.8 best in its ablation (Table 6).

Empty parameter lists: Algorithm 1 leaves them undefined (its loop over an empty list gives the
mean of nothing; a tool without required parameters gives the max of nothing). tooltrain's rule:

* **the query lists no parameters** -> similarity = S_t (the loop never runs; only the description
  is compared, for every tool alike, so a hypothesis without parameters ranks by description and is
  not biased toward or against tools that have parameters). Two parameter-less tools are then as
  similar as their descriptions — what the paper's ≥ 0.90 rewrite check needs.
* **the query lists parameters, the library tool has no required ones** -> each S_p[i] = 0 (no
  parameter of t^v matches), so similarity = α · S_t: the tool lacks what the query says it needs.

``scores`` computes the whole (queries × library) matrix with three matrix products and two
``reduceat`` segment reductions; ``tool_similarity`` is the same rule for one pair, written as the
paper's loop (the reference the tests hold the vectorised form to).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from train.retrieval.embed import cached_encode
from train.retrieval.index import ToolIndex, top_k

DEFAULT_ALPHA = 0.5
DEFAULT_K = 5
QUERY_CHUNK = 256  # queries scored at once: bounds the (parameters × library parameters) matrix


@dataclass(frozen=True)
class ToolHypothesis:
    """A meta_tool call's arguments: the tool a model wishes it had."""

    tool_description: str
    param_description: tuple[str, ...] = ()

    @classmethod
    def from_arguments(cls, arguments: dict) -> ToolHypothesis:
        """From a meta_tool call's arguments; ValueError says what is wrong (A.3's structure rules)."""
        if not isinstance(arguments, dict):
            raise ValueError(  # noqa: TRY004 - A.3 structure rules: every violation is the one ValueError callers count
                f"meta_tool arguments must be an object, got {type(arguments).__name__}"
            )
        extra = sorted(set(arguments) - {"tool_description", "param_description"})
        if extra:
            raise ValueError(
                f"meta_tool takes tool_description and param_description only, not {', '.join(map(repr, extra))}"
            )
        missing = [key for key in ("tool_description", "param_description") if key not in arguments]
        if missing:
            raise ValueError(f"meta_tool needs {' and '.join(missing)}")
        description = arguments["tool_description"]
        if not isinstance(description, str) or not description.strip():
            raise ValueError("meta_tool needs a non-empty string tool_description")
        params = arguments["param_description"]
        if not isinstance(params, list) or not all(isinstance(p, str) for p in params):
            raise ValueError("meta_tool param_description must be a list of strings")
        return cls(description, tuple(p for p in params if p.strip()))


def tool_similarity(
    desc_q: np.ndarray, params_q: np.ndarray, desc_v: np.ndarray, params_v: np.ndarray, alpha: float
) -> float:
    """Algorithm 1 for one (query, value) pair of unit vectors, as the paper writes it (loop over query params)."""
    s_t = float(desc_q @ desc_v)
    if len(params_q) == 0:
        return s_t
    s_p = [float(np.max(params_v @ p)) if len(params_v) else 0.0 for p in params_q]
    return alpha * s_t + (1 - alpha) * float(np.mean(s_p))


def scores(
    index: ToolIndex, desc_q: np.ndarray, params_q: np.ndarray, param_query: np.ndarray, alpha: float
) -> np.ndarray:
    """(B, N) Algorithm 1 similarities of B queries to the N library tools.

    desc_q: (B, d) query description rows; params_q: (P, d) all queries' parameter rows, each
    query's contiguous; param_query: (P,) the query each row belongs to, non-decreasing.
    """
    _check_alpha(alpha)
    s_t = desc_q @ index.description.T
    batch, n_tools = s_t.shape
    s_p = np.zeros((batch, n_tools), dtype=np.float32)
    if len(params_q) and len(index.params):
        tools_with, tool_starts = np.unique(index.param_tool, return_index=True)
        queries_with, query_starts, query_counts = np.unique(param_query, return_index=True, return_counts=True)
        pairwise = params_q @ index.params.T  # (P, M)
        best = np.maximum.reduceat(pairwise, tool_starts, axis=1)  # (P, tools with params): max over each tool's block
        mean = np.add.reduceat(best, query_starts, axis=0) / query_counts[:, None]  # (queries with params, ...)
        s_p[np.ix_(queries_with, tools_with)] = mean
    combined = alpha * s_t + (1 - alpha) * s_p
    without = np.setdiff1d(np.arange(batch), param_query)
    combined[without] = s_t[without]  # no query parameters: the description alone
    return combined


def _check_alpha(alpha: float) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")


@dataclass
class EncodedHypotheses:
    desc: np.ndarray
    params: np.ndarray
    param_query: np.ndarray


def encode_hypotheses(
    index: ToolIndex, hypotheses: Sequence[ToolHypothesis], *, use_cache: bool | None = None
) -> EncodedHypotheses:
    """Embed the hypotheses as queries (descriptions and parameters), cached like the library."""
    use_cache = index.use_cache if use_cache is None else use_cache
    embedder = index.embedder
    desc = cached_encode(
        embedder, [h.tool_description for h in hypotheses], "query", label="hypothesis-description", use_cache=use_cache
    )
    flat = [p for h in hypotheses for p in h.param_description]
    params = cached_encode(embedder, flat, "query", label="hypothesis-params", use_cache=use_cache)
    if not flat:
        params = np.zeros((0, index.description.shape[1]), dtype=np.float32)
    param_query = np.repeat(np.arange(len(hypotheses)), [len(h.param_description) for h in hypotheses])
    return EncodedHypotheses(desc, params, param_query)


def score_encoded(index: ToolIndex, encoded: EncodedHypotheses, alpha: float, start: int, stop: int) -> np.ndarray:
    """Scores of hypotheses[start:stop] (a chunk of an encoded batch)."""
    rows = (encoded.param_query >= start) & (encoded.param_query < stop)
    return scores(index, encoded.desc[start:stop], encoded.params[rows], encoded.param_query[rows] - start, alpha)


def rank(index: ToolIndex, encoded: EncodedHypotheses, alpha: float, k: int) -> np.ndarray:
    """(B, k) library indices, best first, for every encoded hypothesis."""
    _check_alpha(alpha)
    batch = len(encoded.desc)
    out = [
        top_k(score_encoded(index, encoded, alpha, s, min(s + QUERY_CHUNK, batch)), k)
        for s in range(0, batch, QUERY_CHUNK)
    ]
    return np.concatenate(out) if out else np.zeros((0, min(k, len(index.tools))), dtype=np.int64)


def search(
    index: ToolIndex, hypotheses: Sequence[ToolHypothesis], *, alpha: float = DEFAULT_ALPHA, k: int = DEFAULT_K
) -> list[list[tuple[str, float]]]:
    """Per hypothesis, the top-k (tool name, similarity), best first."""
    encoded = encode_hypotheses(index, hypotheses)
    out: list[list[tuple[str, float]]] = []
    for start in range(0, len(hypotheses), QUERY_CHUNK):
        stop = min(start + QUERY_CHUNK, len(hypotheses))
        chunk = score_encoded(index, encoded, alpha, start, stop)
        for row, picks in enumerate(top_k(chunk, k)):
            out.append([(index.tools[i].name, float(chunk[row, i])) for i in picks])
    return out
