"""Preference pairs on tool calls (train.data.preference): each kind's rejected turn, exactly; turns no kind applies to
are counted as skipped; the draw is seeded by the pair's id."""

from __future__ import annotations

from collections import Counter

import pytest

from train.data.preference import KINDS, conversation_pairs, pairs
from train.schema import Conversation, Message, Tool, ToolCall

WEATHER = Tool(
    name="get_weather",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city"],
    },
)
TIME = Tool(name="get_time", parameters={"type": "object", "properties": {"city": {"type": "string"}}})


def conversation(*messages: Message, tools=(WEATHER, TIME), cid="c1") -> Conversation:
    return Conversation(id=cid, messages=list(messages), tools=list(tools))


CALL = Message(
    role="assistant", content="Checking.", tool_calls=[ToolCall("get_weather", {"city": "Paris", "unit": "c"})]
)
USER = Message(role="user", content="Weather in Paris, in Celsius?")


def by_kind(conv: Conversation, seed: int = 0) -> dict:
    return {pair.kind: pair for pair in conversation_pairs(conv, KINDS, seed)}


def test_each_kind_changes_exactly_the_mistake_it_names():
    made = by_kind(conversation(USER, CALL))
    assert set(made) == {"wrong_tool", "wrong_argument", "missing_argument"}  # the turn calls: no spurious call
    for pair in made.values():
        assert pair.prompt.messages == [USER] and pair.prompt.tools == [WEATHER, TIME] and pair.chosen == CALL
        assert pair.rejected.content == "Checking." and pair.id == f"c1/t1/{pair.kind}"
    # get_time declares only city: unit is left out
    assert made["wrong_tool"].rejected.tool_calls == [ToolCall("get_time", {"city": "Paris"})]
    # city is the only string (no other string to take), so unit takes the other enum member
    assert made["wrong_argument"].rejected.tool_calls == [ToolCall("get_weather", {"city": "Paris", "unit": "f"})]
    assert made["missing_argument"].rejected.tool_calls == [ToolCall("get_weather", {"unit": "c"})]


def test_a_text_turn_with_tools_offered_gets_a_spurious_call():
    text = Message(role="assistant", content="I cannot tell the future.")
    (pair,) = conversation_pairs(conversation(Message(role="user", content="Lottery numbers?"), text), KINDS, 0)
    assert pair.kind == "spurious_call" and pair.rejected.content == text.content
    assert [call.arguments for call in pair.rejected.tool_calls] == [{}]
    assert pair.rejected.tool_calls[0].name in {"get_weather", "get_time"}


def test_numbers_and_booleans_are_changed_and_the_draw_is_seeded_by_the_pair():
    tool = Tool(name="f", parameters={"type": "object", "properties": {"n": {"type": "integer"}, "b": {}}})
    call = Message(role="assistant", tool_calls=[ToolCall("f", {"n": 3, "b": True})])
    seen = {
        tuple(sorted(by_kind(conversation(USER, call, tools=[tool]), seed)["wrong_argument"].rejected.tool_calls[0]
                     .arguments.items()))
        for seed in range(20)
    }  # fmt: skip
    assert seen == {(("b", True), ("n", 4)), (("b", False), ("n", 3))}
    assert by_kind(conversation(USER, call, tools=[tool]), 7) == by_kind(conversation(USER, call, tools=[tool]), 7)


def test_every_assistant_turn_pairs_and_the_counts_add_up():
    result = Message(role="tool", content='{"temp": 20}', name="get_weather")
    answer = Message(role="assistant", content="20 degrees.")
    lone = conversation(USER, Message(role="assistant", content="Hi."), tools=[], cid="c2")  # no tool: nothing to do
    counts = Counter()
    made = list(pairs([conversation(USER, CALL, result, answer), lone], seed=0, counts=counts))
    assert [pair.id for pair in made] == [
        "c1/t1/wrong_tool", "c1/t1/wrong_argument", "c1/t1/missing_argument", "c1/t3/spurious_call",
    ]  # fmt: skip
    assert made[-1].prompt.messages == [USER, CALL, result]
    assert counts == Counter(
        read=2, paired=1, **{"skipped: no assistant turn a kind applies to": 1}, wrong_tool=1, wrong_argument=1,
        missing_argument=1, spurious_call=1,
    )  # fmt: skip


def test_an_unknown_kind_names_the_valid_ones():
    with pytest.raises(ValueError, match="unknown preference pair kind.*no_call; valid: wrong_tool, wrong_argument"):
        list(pairs([], kinds=["no_call"]))
