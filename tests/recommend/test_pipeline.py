"""PTR per query: each stage switch changes exactly its stage, the ranking's order, the JSON-ready trace."""

from __future__ import annotations

import json

import pytest
from ptr_fakes import AngleEmbedder, scripted_teacher

from train.papers.ptr.pipeline import Recommender, parse_stages, recommend

LIBRARY = {"A": "a", "B": "b", "C": "c", "D": "d"}
HISTORY = [("past one", ["C"]), ("past two", ["D"])]
QUERY = "need A and C"
BUNDLE = ["B", "A"]
ANGLES = {"A: a": 0, "B: b": 90, "C: c": 180, "D: d": 270, "past one": 180, "past two": 270}
ANGLES |= {"need A": 0, "need C": 180, QUERY: 100}


def run(stages):
    asked: list[str] = []

    def d1(query):
        asked.append("D.1")
        return "- need A\n- need C"

    def d2(requirement, tools):
        asked.append(f"D.2 {requirement}")
        return "- A: a" if requirement == "need A" else "None"

    recommender = Recommender(LIBRARY, HISTORY, scripted_teacher(d1, d2), AngleEmbedder(ANGLES), stages, k=1)
    ranking, trace = recommender.recommend(QUERY, BUNDLE)
    return ranking, trace, asked


def test_all_three_stages():
    ranking, trace, asked = run("1,2,3")
    assert asked == ["D.1", "D.2 need A", "D.2 need C"]
    assert trace.bundle == ["B", "A"] and trace.requirements == ["need A", "need C"]
    assert trace.kept == ["A"] and trace.scenario == "partial" and trace.unsolved == ["need C"]
    assert [(v["dsa"], v["hqc"], v["cte"], v["top"], v["added"]) for v in trace.views] == [
        (["C"], ["C"], ["C"], "C", True)
    ]
    assert trace.added == ["C"] and ranking == trace.ranking == ["A", "C"]  # kept (bundle order), then additions
    assert json.loads(json.dumps(trace.to_json()))["views"][0]["ranked"] == [["C", 3]]


def test_without_stage_1_every_requirement_is_a_problem():
    ranking, trace, asked = run([2, 3])
    assert asked == ["D.1"]  # no bundle: no D.2 question
    assert trace.bundle == [] and trace.kept == [] and trace.unsolved == ["need A", "need C"]
    assert trace.added == ["A", "C"] and ranking == ["A", "C"]


def test_without_stage_2_the_bundle_is_kept_and_the_query_is_the_problem():
    ranking, trace, asked = run([1, 3])
    assert asked == [] and trace.requirements == [] and trace.scenario is None
    assert trace.kept == ["B", "A"] and trace.unsolved == [QUERY]
    # the query (100°) is nearest to B; B is in the bundle already: nothing is added
    assert trace.views[0]["top"] == "B" and trace.views[0]["added"] is False
    assert ranking == ["B", "A"]


def test_without_stage_3_nothing_is_added():
    ranking, trace, asked = run([1, 2])
    assert asked == ["D.1", "D.2 need A", "D.2 need C"]
    assert trace.unsolved == ["need C"] and trace.views == [] and trace.added == []
    assert ranking == ["A"]


@pytest.mark.parametrize(
    ("stages", "expected"),
    [((1,), ["B", "A"]), ((), []), ((2,), []), ((3,), ["B"])],
)
def test_single_stages(stages, expected):
    ranking, _, asked = run(stages)
    assert ranking == expected
    assert (asked != []) == (2 in stages)


def test_recommend_function_and_duplicate_bundle_entries():
    teacher = scripted_teacher(lambda q: "- need A", lambda r, tools: "- A: a")
    ranking, trace = recommend(QUERY, ["A", "A", "B"], LIBRARY, HISTORY, teacher, AngleEmbedder(ANGLES), k=1)
    assert trace.bundle == ["A", "B"] and ranking == ["A"] and trace.scenario == "over"


def test_stage_arguments_are_checked():
    assert parse_stages("3, 1") == (1, 3) and parse_stages([]) == ()
    with pytest.raises(ValueError, match="unknown stage"):
        parse_stages("1,4")
    with pytest.raises(ValueError, match="stages must be numbers"):
        parse_stages("one")
    with pytest.raises(ValueError, match="needs a teacher"):
        Recommender(LIBRARY, HISTORY, None, AngleEmbedder(ANGLES), "1,2")
    with pytest.raises(ValueError, match="needs an embedder"):
        Recommender(LIBRARY, HISTORY, object(), None, "3")
    Recommender(LIBRARY, HISTORY, None, None, "1")  # the bundle alone needs neither


def test_teacher_trouble_is_counted_in_the_trace():
    teacher = scripted_teacher(lambda q: "", lambda r, tools: "no idea, sorry")
    recommender = Recommender(LIBRARY, HISTORY, teacher, AngleEmbedder(ANGLES), "1,2", k=1)
    ranking, trace = recommender.recommend(QUERY, BUNDLE)
    assert trace.issues == {"requirements_unreadable": 1, "match_unreadable": 1}
    assert trace.unsolved == [QUERY] and ranking == []
    recommender.recommend(QUERY, BUNDLE)
    assert dict(recommender.issues) == {"requirements_unreadable": 2, "match_unreadable": 2}
