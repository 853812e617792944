"""PTR stage 2 with a scripted teacher: matched tools kept (the released code's filter NOT reproduced), unmatched
requirements become the unsolved problems, malformed or failed answers counted, never a traceback."""

from __future__ import annotations

from ptr_fakes import scripted_teacher

from train.papers.ptr.coverage import assess, map_coverage
from train.teacher.backends import TeacherError

LIBRARY = {
    "WeatherTool": "Provide you with the latest weather information.",
    "RestaurantBookingTool": "Tool for booking restaurant",
    "ToolBox": "Everything a handyman needs.",
    "NewsTool": "Stay connected to global events with our up-to-date news around the world.",
}
BUNDLE = ["NewsTool", "ToolBox", "RestaurantBookingTool", "WeatherTool"]
QUERY = "Check the weather, book a table and fix the shelf, then read a poem."
MATCHES = {
    "Check the weather": "- WeatherTool: Provide you with the latest weather information.",
    "Book a table": "Matched Tools:\n- **RestaurantBookingTool**: Tool for booking restaurant",
    "Fix the shelf": "- ToolBox: Everything a handyman needs.\n- RestaurantBookingTool: no",
    "Read a poem": "None",
}


def requirements(query: str) -> str:
    return "Key Requirements:\n" + "".join(f"- {r}\n" for r in MATCHES)


def test_matched_tools_kept_in_bundle_order_and_unmatched_become_problems():
    asked: list[tuple[str, list[str]]] = []

    def match(requirement, tools):
        asked.append((requirement, list(tools)))
        return MATCHES[requirement]

    coverage = map_coverage(QUERY, BUNDLE, LIBRARY, scripted_teacher(requirements, match))
    assert coverage.requirements == list(MATCHES)
    assert asked == [(r, BUNDLE) for r in MATCHES]  # D.2 once per requirement, on the whole bundle
    assert [m["tools"] for m in coverage.matches] == [
        ["WeatherTool"],
        ["RestaurantBookingTool"],
        ["ToolBox", "RestaurantBookingTool"],
        [],
    ]
    # WeatherTool (no "Tool" prefix: the released reader skipped it) and ToolBox (a "tool" prefix: the released
    # caller dropped it) are both kept; NewsTool, matched by nothing, is discarded
    assert coverage.kept == ["ToolBox", "RestaurantBookingTool", "WeatherTool"]
    assert coverage.unsolved == ["Read a poem"]
    assert coverage.scenario == "partial"
    assert dict(coverage.issues) == {}


def test_scenarios():
    every = [{"requirement": "a", "tools": ["X"]}, {"requirement": "b", "tools": ["Y"]}]
    assert assess(["X", "Y"], every) == (["X", "Y"], [], "exact")
    assert assess(["Z", "X", "Y"], every) == (["X", "Y"], [], "over")
    assert assess(["X"], [{"requirement": "a", "tools": ["X"]}, {"requirement": "b", "tools": []}]) == (
        ["X"],
        ["b"],
        "partial",
    )


def test_empty_bundle_asks_no_match_question_and_every_requirement_is_unsolved():
    def match(requirement, tools):
        raise AssertionError("no D.2 question without a bundle")

    coverage = map_coverage(QUERY, [], LIBRARY, scripted_teacher(requirements, match))
    assert coverage.kept == [] and coverage.unsolved == list(MATCHES)


def test_malformed_and_failed_answers_are_counted():
    answers = {
        "Check the weather": TeacherError("timeout"),
        "Book a table": "I think the second one would probably do it.",
        "Fix the shelf": "- HammerTool: hits nails\n- ToolBox: x",
        "Read a poem": "",
    }
    teacher = scripted_teacher(requirements, lambda requirement, tools: answers[requirement])
    coverage = map_coverage(QUERY, BUNDLE + ["GhostTool"], LIBRARY, teacher)
    assert coverage.kept == ["ToolBox"]
    assert coverage.unsolved == ["Check the weather", "Book a table", "Read a poem"]
    assert dict(coverage.issues) == {
        "match_failed": 1,
        "match_unreadable": 2,
        "unknown_tools": 1,
        "bundle_unknown": 1,
    }
    assert coverage.matches[2]["unknown"] == ["HammerTool"]


def test_unreadable_or_failed_extraction_falls_back_to_the_query():
    for answer, issue in (("", "requirements_unreadable"), (TeacherError("down"), "requirements_failed")):
        teacher = scripted_teacher(lambda query, a=answer: a, lambda requirement, tools: "None")
        coverage = map_coverage(QUERY, BUNDLE, LIBRARY, teacher)
        assert coverage.requirements == [QUERY] and coverage.unsolved == [QUERY]
        assert dict(coverage.issues) == {issue: 1}
