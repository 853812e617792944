"""Algorithm 1 (seed 001, §2.3) on a hand-built case: the three lists, the counts, the tie rule, the added tool."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from ptr_fakes import AngleEmbedder

from train.papers.ptr.rerank import CachedEmbedder, K, MultiView, PastQuery, nearest, rank_views, unique_tools

LIBRARY = {"Primary": "p", "Weather": "w", "Alpha": "a", "Dining": "d", "Events": "e"}
HISTORY = [
    PastQuery("q1", ("Alpha", "Weather")),
    PastQuery("q2", ("Dining",)),
    PastQuery("q3", ("Events", "Alpha")),
    PastQuery("q4", ("Primary",)),  # the fourth-nearest query: outside k = 3
]
ANGLES = {
    "Primary: p": 0,
    "Weather: w": 10,
    "Alpha: a": 20,
    "Dining: d": 90,
    "Events: e": 100,
    "q1": 340,
    "q2": 300,
    "q3": 270,
    "q4": 180,
    "the problem": 358,
}


def hand_case() -> MultiView:
    return MultiView(LIBRARY, HISTORY, AngleEmbedder(ANGLES), k=3)


def test_three_lists_counts_and_tie_to_list_one():
    views = hand_case().views("the problem")
    # DSA: tools by angle from 358°: Primary 2°, Weather 12°, Alpha 22° (Dining 92° is fourth)
    assert views.dsa == ["Primary", "Weather", "Alpha"]
    # HQC: q1 18°, q2 58°, q3 88° (q4 178° is out); their tools in order, the second Alpha dropped
    assert views.nearest_queries == ["q1", "q2", "q3"]
    assert views.hqc == ["Alpha", "Weather", "Dining", "Events"]
    # CTE: the tools nearest to DSA[0] = Primary, Primary itself first
    assert views.cte == ["Primary", "Weather", "Alpha"]
    # Weather and Alpha are in all three lists (3 each); Alpha comes first in L_HQC but Weather comes first in
    # L_DSA, and a tie goes to list one's order (neither the name order nor L_HQC's)
    assert views.ranked == [("Weather", 3), ("Alpha", 3), ("Primary", 2), ("Dining", 1), ("Events", 1)]
    assert views.top == "Weather"


def test_top_tool_already_recommended_is_ignored_not_replaced():
    added, views = hand_case().resolve(["the problem"], recommended=["Weather"])
    assert added == [] and views[0].top == "Weather" and views[0].added is False  # no fall back to Alpha
    added, views = hand_case().resolve(["the problem", "the problem"], recommended=[])
    assert added == ["Weather"] and [v.added for v in views] == [True, False]  # a second problem adds no copy


def test_rank_views_orders_ties_by_first_appearance_in_the_concatenation():
    assert rank_views(["b", "a"], ["c", "a", "b"], ["c"]) == [("b", 2), ("a", 2), ("c", 2)]
    assert rank_views([], ["x"], []) == [("x", 1)]
    assert rank_views([], [], []) == []


def test_unique_tools_keeps_first_and_query_order():
    past = [PastQuery("a", ("T2", "T1")), PastQuery("b", ("T1", "T3"))]
    assert unique_tools(past) == ["T2", "T1", "T3"]


def test_nearest_breaks_equal_similarity_by_row_order():
    matrix = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 0.0]], dtype=np.float32)
    assert nearest(matrix, np.array([1.0, 0.0], dtype=np.float32), 2) == [1, 2]
    assert nearest(np.zeros((0, 0), np.float32), np.array([1.0, 0.0]), 2) == []


def test_default_k_is_seven_and_lists_hold_seven():
    library = {f"T{i}": "x" for i in range(10)}
    angles = {f"T{i}: x": 10 * i for i in range(10)} | {f"q{i}": 10 * i for i in range(10)} | {"u": 0}
    history = [PastQuery(f"q{i}", (f"T{i}",)) for i in range(10)]
    views = MultiView(library, history, AngleEmbedder(angles)).views("u")
    assert K == 7
    assert views.dsa == [f"T{i}" for i in range(7)] and views.cte == views.dsa
    assert views.hqc == [f"T{i}" for i in range(7)] and views.top == "T0"


def test_library_and_history_are_embedded_once():
    embedder = AngleEmbedder(ANGLES)
    multi = MultiView(LIBRARY, HISTORY, embedder, k=3)
    multi.resolve(["the problem", "the problem"], [])
    assert embedder.calls == [[f"{n}: {LIBRARY[n]}" for n in LIBRARY], ["q1", "q2", "q3", "q4"],
                              ["the problem", "the problem"]]  # fmt: skip


@dataclass(frozen=True)
class Example:  # the shape of train.papers.ptr.data.Example
    id: str
    query: str
    tools: tuple[str, ...]


@pytest.mark.parametrize("history", [[], [("q1", ["Alpha"])], [Example("1", "q1", ("Alpha",))]])
def test_empty_or_tuple_history(history):
    views = MultiView(LIBRARY, history, AngleEmbedder(ANGLES), k=3).views("the problem")
    assert views.hqc == ([] if not history else ["Alpha"])
    assert views.top == ("Primary" if not history else "Alpha")  # Primary: DSA + CTE (2); Alpha: all three


def test_cached_embedder_embeds_each_text_once():
    inner = AngleEmbedder(ANGLES)
    cached = CachedEmbedder(inner)
    first = cached.encode(["q1", "q2", "q1"])
    again = cached.encode(["q2", "q3"])
    assert inner.calls == [["q1", "q2"], ["q3"]] and cached.name == "angles"
    assert np.allclose(first[0], first[2]) and np.allclose(again[0], first[1])
    assert cached.encode([]).shape == (0, 0)
