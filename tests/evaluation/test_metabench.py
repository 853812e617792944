"""Meta-Bench metrics (Meta-Tool §3.3.2) on hand-built turns with hand-computed values."""

from __future__ import annotations

import json

import pytest

from train.evaluation.calls import Call
from train.papers.metatool.metabench import gold_turn, score_metabench, score_turn, turn_kind


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def turn(
    item_id: str, category: str, calls: list[dict], difficulty: str = "simple", world: str = "closed", **meta
) -> dict:
    return {
        "id": item_id,
        "tool_calls": calls,
        "meta": {"category": category, "difficulty": difficulty, "world": world, **meta},
    }


def wrapped(name: str, call_id: str, **arguments) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# Two meta_tool calls whose results (in the paper's two layouts) name the tools retrieval should find.
CONVERSATION = {
    "id": "m3",
    "tools": [],
    "messages": [
        {"role": "user", "content": "Find me q and r."},
        {"role": "assistant", "content": "No tool fits.", "tool_calls": [
            wrapped("meta_tool", "call_0", tool_description="q", param_description=[]),
            wrapped("meta_tool", "call_1", tool_description="r", param_description=[]),
        ]},
        {"role": "tool", "tool_call_id": "call_0", "name": "meta_tool",
         "content": json.dumps({"name": "q", "description": "..."})},
        {"role": "tool", "tool_call_id": "call_1", "name": "meta_tool",
         "content": json.dumps([{"name": "meta_tool", "function_id": 0, "results": {"name": "r"}}])},
        {"role": "assistant", "content": "Done."},
    ],
    "meta": {"category": "function_missing", "difficulty": "simple", "world": "open", "turn": 1},
}  # fmt: skip

REFERENCES = [
    turn("s1", "single_call", [call("f", a=1, b="x")]),
    turn("s2", "single_call", [call("f", a=1)]),
    turn("s3", "multi_call", [call("f", x=1), call("f", x=2), call("g")], difficulty="hard"),
    turn("s4", "multi_call", [call("f", x=1), call("f", x=2)], difficulty="hard"),
    turn("s5", "multi_call", [call("f", x=1), call("f", x=2)], difficulty="hard"),
    turn("c1", "chat", []),
    turn("c2", "chat", [call("get_user_input")]),
    turn("c3", "chat", []),
    turn("c4", "chat", []),
    turn(
        "m1",
        "function_missing",
        [call("meta_tool", tool_description="d", param_description=[])],
        world="open",
        gold_tools=["g"],
    ),
    turn(
        "m2",
        "function_missing",
        [call("meta_tool", tool_description="d", param_description=[])],
        world="open",
        gold_tools=["g"],
    ),
    CONVERSATION,
    turn("e1", "function_existing", [call("f", a=1)], world="open"),
    turn("e2", "function_existing", [call("f", a=1)], world="open"),
    turn("fm", "function_missing", [call("get_traffic_report", location="Miami, FL")], world="open"),
    {"id": "bad", "tool_calls": [], "meta": {"difficulty": "simple"}},
]
PREDICTIONS = [
    {"id": "s1", "content": None, "tool_calls": [call("f", b="x", a=1.0)]},  # key order and 1 == 1.0
    {"id": "s2", "tool_calls": [call("f", a=2)]},  # right tool, wrong value
    {"id": "s3", "tool_calls": [call("g"), call("f", x=2), call("f", x=1.0)]},  # any order
    {"id": "s4", "tool_calls": [call("f", x=1), call("f", x=1)]},  # duplicated call: names right, params not
    {"id": "s5", "tool_calls": [call("f", x=1)]},  # one call short
    {"id": "c1", "content": "Could you tell me the city?"},
    {"id": "c2", "tool_calls": [call("get_user_input")]},
    {"id": "c3", "tool_calls": [call("f")]},
    {"id": "c4", "tool_calls": "f()"},  # malformed: wrong, not a crash
    {"id": "m1", "tool_calls": [call("meta_tool", tool_description="x")], "retrieved": ["h", "g", "i", "j", "k"]},
    {"id": "m2", "content": "Here is the weather: sunny.", "retrieved": ["g"]},  # no meta_tool call: nothing retrieved
    {"id": "m3", "tool_calls": [call("meta_tool"), call("meta_tool")], "retrieved": [["a", "b", "c", "d", "q"], ["r"]]},
    {"id": "e1", "tool_calls": [call("meta_tool", tool_description="f")]},  # the tool was in context
    {"id": "fm", "tool_calls": [call("get_traffic_report", location="Miami, FL")]},
    {"id": "stray", "tool_calls": []},
]


@pytest.fixture(scope="module")
def result() -> dict:
    return score_metabench(PREDICTIONS, REFERENCES)


def test_overall(result):
    assert result["overall"] == {
        "t_acc": 5 / 8,  # s1 s2 s3 s4 fm of s1 s2 s3 s4 s5 e1 e2 fm
        "p_acc": 3 / 8,  # s1 s3 fm
        "irr": 2 / 4,  # c1 c2 of c1..c4
        "fmd": 2 / 3,  # m1 m3 of m1 m2 m3
        "hr@1": 1 / 4,  # gold tools g, g, q, r: only r at rank 1
        "hr@3": 2 / 4,  # + g (rank 2 for m1)
        "hr@5": 3 / 4,  # + q (rank 5 for m3); m2 never called meta_tool
        "call_turns": 8,
        "irrelevance_turns": 4,
        "fmd_turns": 3,
        "hr_gold_tools": 4,
    }


def test_by_category_and_group(result):
    pick = lambda metrics: {k: v for k, v in metrics.items() if v is not None and not k.endswith(("turns", "tools"))}
    assert {name: pick(m) for name, m in result["by_category"].items()} == {
        "chat": {"irr": 0.5},
        "function_missing": {"t_acc": 1.0, "p_acc": 1.0, "fmd": 2 / 3, "hr@1": 0.25, "hr@3": 0.5, "hr@5": 0.75},
        "function_existing": {"t_acc": 0.0, "p_acc": 0.0},
        "single_call": {"t_acc": 1.0, "p_acc": 0.5},
        "multi_call": {"t_acc": 2 / 3, "p_acc": 1 / 3},
    }
    assert list(result["by_group"]) == [
        "hard/closed/multi_call",
        "simple/closed/chat",
        "simple/closed/single_call",
        "simple/open/function_existing",
        "simple/open/function_missing",
    ]


def test_per_item_verdicts(result):
    rows = {item["id"]: item for item in result["per_item"]}
    assert [item["id"] for item in result["per_item"]] == [r["id"] for r in REFERENCES[:-1]]
    assert (rows["s4"]["tool_correct"], rows["s4"]["params_correct"], rows["s4"]["correct"]) == (True, False, False)
    assert rows["c4"]["correct"] is False
    assert rows["c4"]["error"] == "malformed prediction: tool_calls: expected a list, got str"
    assert rows["m3"]["gold_tools"] == ["q", "r"] and rows["m3"]["hits"] == {"@1": 1, "@3": 1, "@5": 2}
    assert rows["m2"]["hits"] == {"@1": 0, "@3": 0, "@5": 0}
    assert rows["e2"]["error"] == "missing prediction" and rows["e2"]["tool_correct"] is False
    assert result["reference_errors"] == [
        {
            "id": "bad",
            "reason": (
                "meta.category None is not one of chat, function_missing, function_existing, single_call, multi_call"
            ),
        }
    ]
    assert result["unknown_prediction_ids"] == ["stray"]


def test_turn_kinds():
    assert turn_kind([]) == "irrelevance"
    assert turn_kind([Call("get_user_input")]) == "irrelevance"
    assert turn_kind([Call("meta_tool"), Call("f")]) == "fmd"
    assert turn_kind([Call("f"), Call("get_user_input")]) == "call"


def test_fmd_with_malformed_ranking_keeps_the_call():
    item = score_turn([Call("meta_tool")], ["g"], {"id": "x", "tool_calls": [call("meta_tool")], "retrieved": "g"})
    assert item["correct"] is True
    assert item["hits"] == {"@1": 0, "@3": 0, "@5": 0}
    assert item["error"] == "malformed prediction: retrieved: expected a list of tool names or a list of such lists"


def test_fmd_without_gold_tools_counts_fmd_only():
    result = score_metabench(
        [{"id": "x", "tool_calls": [call("meta_tool")]}], [turn("x", "function_missing", [call("meta_tool")])]
    )
    overall = result["overall"]
    assert (overall["fmd"], overall["hr@1"], overall["fmd_turns_without_gold_tools"]) == (1.0, None, 1)


def test_conversation_gold_turn_defaults_to_last_assistant():
    conversation = {**CONVERSATION, "meta": {"category": "function_missing"}}
    assert gold_turn(conversation) == ([], None)  # the final "Done." reply
    calls, gold_tools = gold_turn(CONVERSATION)
    assert [c.name for c in calls] == ["meta_tool", "meta_tool"] and gold_tools == ["q", "r"]
    with pytest.raises(ValueError, match=r"meta.turn 0: messages\[0\] is not an assistant message"):
        gold_turn({**CONVERSATION, "meta": {"category": "chat", "turn": 0}})


def test_empty_predictions_are_all_wrong():
    result = score_metabench([], REFERENCES[:-1])
    overall = result["overall"]
    assert (overall["t_acc"], overall["p_acc"], overall["irr"], overall["fmd"], overall["hr@5"]) == (
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
    )
    assert len(result["missing_prediction_ids"]) == 15
