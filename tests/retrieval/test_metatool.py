"""Algorithm 1 on a hand-built library with a lookup-table embedder: exact scores, rankings and the
empty-parameter rules; the vectorised scores against the paper's loop on random data."""

from __future__ import annotations

import numpy as np
import pytest

from train.papers.metatool import retrieve as metatool
from train.papers.metatool.retrieve import ToolHypothesis, scores, search, tool_similarity
from train.retrieval.embed import load_embedder
from train.retrieval.index import ToolIndex, required_param_texts, top_k
from train.schema import Tool

# Unit vectors chosen so every cosine is a short decimal.
VECTORS = {
    "weather now": (1, 0, 0, 0),
    "the city": (0, 0, 1, 0),
    "the date": (0, 0, 0, 1),
    "Get the current weather": (0.8, 0.6, 0, 0),
    "The city and state": (0, 0, 1, 0),
    "Temperature unit": (0, 0, 0, 1),
    "Get the weather forecast": (0.6, 0.8, 0, 0),
    "City": (0, 0, 0.6, 0.8),
    "day": (0, 0, 0.8, 0.6),
    "Book a table": (0, 1, 0, 0),
    "Weather now": (1, 0, 0, 0),
}


def lookup(texts: list[str]) -> np.ndarray:
    return np.array([VECTORS[t] for t in texts], dtype=np.float32)


def params(props: dict[str, str | None], required: list[str]) -> dict:
    properties = {
        name: ({"type": "string", "description": d} if d else {"type": "string"}) for name, d in props.items()
    }
    return {"type": "object", "properties": properties, "required": required}


LIBRARY = [
    # the optional "unit" would match "the date" exactly: it must not count
    Tool(
        "current_weather",
        "Get the current weather",
        params({"location": "The city and state", "unit": "Temperature unit"}, ["location"]),
    ),
    Tool(
        "forecast", "Get the weather forecast", params({"city": "City", "day": None}, ["city", "day"])
    ),  # "day": no description
    Tool("book_table", "Book a table", {"type": "object", "properties": {}}),
    Tool("weather_now", "Weather now", {"type": "object", "properties": {}}),
]
QUERY = ToolHypothesis("weather now", ("the city", "the date"))


@pytest.fixture
def index(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path))
    return ToolIndex.build(LIBRARY, load_embedder("fake-lookup", encode=lookup))


def test_required_param_texts_use_required_only_and_fall_back_to_the_name():
    assert required_param_texts(LIBRARY[0]) == ["The city and state"]
    assert required_param_texts(LIBRARY[1]) == ["City", "day"]
    assert required_param_texts(LIBRARY[2]) == []
    odd = Tool(
        "odd", "x", {"type": "object", "properties": {"a": {"description": "  "}}, "required": ["a", 3, "ghost"]}
    )
    assert required_param_texts(odd) == ["a", "ghost"]  # blank description -> name; non-string skipped; undeclared kept
    assert required_param_texts(Tool("bad", "x", {"type": "object", "required": "a"})) == []


@pytest.mark.parametrize(
    ("alpha", "expected", "order"),
    [
        # current_weather: 0.5*0.8 + 0.5*mean(1, 0)     forecast: 0.5*0.6 + 0.5*mean(0.8, 0.8)
        # book_table: no required params -> 0.5*0 + 0    weather_now: 0.5*1 + 0
        (0.5, [0.65, 0.70, 0.0, 0.5], ["forecast", "current_weather", "weather_now", "book_table"]),
        (0.8, [0.74, 0.64, 0.0, 0.8], ["weather_now", "current_weather", "forecast", "book_table"]),
        (1.0, [0.8, 0.6, 0.0, 1.0], ["weather_now", "current_weather", "forecast", "book_table"]),
        (0.0, [0.5, 0.8, 0.0, 0.0], ["forecast", "current_weather", "book_table", "weather_now"]),
    ],
)
def test_algorithm_1_exact_scores_and_ranking(index, alpha, expected, order):
    encoded = metatool.encode_hypotheses(index, [QUERY])
    got = scores(index, encoded.desc, encoded.params, encoded.param_query, alpha)
    assert got.shape == (1, 4)
    assert got[0].tolist() == pytest.approx(expected, abs=1e-6)
    ranked = search(index, [QUERY], alpha=alpha, k=4)[0]
    assert [name for name, _ in ranked] == order
    assert [score for _, score in ranked] == pytest.approx(sorted(expected, reverse=True), abs=1e-6)


def test_a_query_without_parameters_ranks_by_description_alone(index):
    ranked = search(index, [ToolHypothesis("weather now")], alpha=0.5, k=4)[0]
    assert [name for name, _ in ranked] == ["weather_now", "current_weather", "forecast", "book_table"]
    assert [score for _, score in ranked] == pytest.approx([1.0, 0.8, 0.6, 0.0], abs=1e-6)


def test_batch_rows_are_independent_and_top_k_cuts(index):
    batch = [QUERY, ToolHypothesis("weather now"), QUERY]
    ranked = search(index, batch, alpha=0.5, k=2)
    assert [[n for n, _ in row] for row in ranked] == [
        ["forecast", "current_weather"],
        ["weather_now", "current_weather"],
        ["forecast", "current_weather"],
    ]


def test_top_k_breaks_ties_by_library_order():
    scores_ = np.array([[0.5, 0.9, 0.5, 0.9, 0.5]], dtype=np.float32)
    assert top_k(scores_, 3).tolist() == [[1, 3, 0]]
    assert top_k(scores_, 10).tolist() == [[1, 3, 0, 2, 4]]
    assert top_k(np.zeros((2, 3)), 2).tolist() == [[0, 1], [0, 1]]


def test_alpha_outside_unit_interval_is_refused(index):
    with pytest.raises(ValueError, match=r"alpha must lie in \[0, 1\], got 1.5"):
        search(index, [QUERY], alpha=1.5)


def test_vectorised_scores_equal_the_papers_loop():
    rng = np.random.default_rng(7)
    n_tools, dim = 40, 16
    counts = rng.integers(0, 4, size=n_tools)  # some tools without required parameters

    class Index:
        description = _unit(rng.normal(size=(n_tools, dim)))
        params = _unit(rng.normal(size=(int(counts.sum()), dim)))
        param_tool = np.repeat(np.arange(n_tools), counts)

    q_counts = np.array([2, 0, 1, 3, 0, 1])
    desc_q = _unit(rng.normal(size=(len(q_counts), dim)))
    params_q = _unit(rng.normal(size=(int(q_counts.sum()), dim)))
    param_query = np.repeat(np.arange(len(q_counts)), q_counts)
    for alpha in (0.0, 0.35, 0.65, 1.0):
        got = scores(Index, desc_q, params_q, param_query, alpha)
        for b in range(len(q_counts)):
            for v in range(n_tools):
                want = tool_similarity(
                    desc_q[b],
                    params_q[param_query == b],
                    Index.description[v],
                    Index.params[Index.param_tool == v],
                    alpha,
                )
                assert got[b, v] == pytest.approx(want, abs=1e-5)


def _unit(matrix: np.ndarray) -> np.ndarray:
    return (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)


def test_hypothesis_from_arguments_follows_the_definition():
    assert ToolHypothesis.from_arguments(
        {"tool_description": "Get news", "param_description": ["topic", " "]}
    ) == ToolHypothesis("Get news", ("topic",))
    cases = [
        ({"tool_description": "x"}, "meta_tool needs param_description"),
        ({"param_description": []}, "meta_tool needs tool_description"),
        ({"tool_description": "x", "param_description": [], "name": "y"}, "not 'name'"),
        ({"tool_description": " ", "param_description": []}, "non-empty string tool_description"),
        ({"tool_description": "x", "param_description": "city"}, "must be a list of strings"),
        ("text", "must be an object, got str"),
    ]
    for arguments, message in cases:
        with pytest.raises(ValueError, match=message):
            ToolHypothesis.from_arguments(arguments)
