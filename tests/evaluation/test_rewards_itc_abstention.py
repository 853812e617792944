"""The ITC F1 rewards and the abstention reward (train/evaluation/rewards/itc_f1.py, abstention.py) on
hand-computed cases, and the REWARDS registry."""

from __future__ import annotations

import pytest

from train.evaluation.rewards import REWARDS, RewardSpec, describe, get_reward
from train.evaluation.rewards.abstention import abstention_reward
from train.evaluation.rewards.base import completion_of, parse_completion
from train.evaluation.rewards.itc_f1 import invocation_f1, tool_f1
from train.schema import Conversation, Message, Tool, ToolCall


def call(name: str, **arguments) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


def reference(gold_calls=(), gold_text=None, meta=None, tools=()) -> Conversation:
    gold = Message(role="assistant", content=gold_text, tool_calls=list(gold_calls))
    messages = [Message(role="user", content="Book it."), gold]
    return Conversation(id="r", messages=messages, tools=list(tools), meta=dict(meta or {}))


GOLD = reference([call("f", a=1, b=2), call("g", c=3)])  # gold triples: (f,a,1) (f,b,2) (g,c,3); names f, g


@pytest.mark.parametrize(
    ("predicted", "ti_f1", "tool"),
    [
        ([call("f", a=1, b=2), call("g", c=3)], 1.0, 1.0),
        ([call("g", c=3), call("f", b=2, a=1.0)], 1.0, 1.0),  # order ignored, 1 == 1.0 (calls.canonical)
        # triples: 1 of 2 predicted right, 1 of 3 gold found: P 1/2, R 1/3, F1 = 2 * 1/6 / (5/6) = 2/5
        # names: 1 of 1 predicted, 1 of 2 gold: P 1, R 1/2, F1 = 2/3
        ([call("f", a=1, b=5)], 0.4, 2 / 3),
        ([], 0.0, 0.0),  # no call where two are gold: P and R 0
        # an extra g: triples 3 of 4 predicted, 3 of 3 gold: F1 = 2 * 3/4 / (7/4) = 6/7; names 2/3, 1: 4/5
        ([call("f", a=1, b=2), call("g", c=3), call("g", c=4)], 6 / 7, 0.8),
    ],
    ids=["exact", "reordered", "wrong_value", "no_call", "extra_call"],
)
def test_itc_f1_per_item(predicted, ti_f1, tool):
    completion = completion_of(content="Thought." if not predicted else None, calls=predicted)
    assert invocation_f1(completion, GOLD) == pytest.approx(ti_f1)
    assert tool_f1(completion, GOLD) == pytest.approx(tool)


def test_itc_f1_conventions():
    text_gold = reference(gold_text="There is no such tool.")
    assert invocation_f1(completion_of(content="No tool fits."), text_gold) == 1.0  # nothing either side, calls right
    assert invocation_f1(completion_of(calls=[call("f", a=1)]), text_gold) == 0.0  # a call where none is gold
    no_args = reference([call("g")])
    assert invocation_f1(completion_of(calls=[call("g")]), no_args) == 1.0  # no triple either side, calls right
    assert invocation_f1(completion_of(content="Done."), no_args) == 0.0  # [] for [g()]: not a vacuous 1
    assert invocation_f1(completion_of(error="parse: unclosed"), GOLD) == 0.0  # fails FM with no call: 0
    # ITC's own text answer, written as the completion's content, is read as that answer
    answer = '{"Thought": "Book both.", "Action": "[f(a=1, b=2), g(c=3)]"}'
    assert invocation_f1(completion_of(content=answer), GOLD) == 1.0


def test_itc_seal_matching():
    gold = reference([call("f", a=1), call("f", a=2)])
    predicted = completion_of(calls=[call("f", a=1), call("f", a=2)])
    assert invocation_f1(predicted, gold) == 1.0
    # Seal-Tools: both calls meet the first gold f(a=1): 1 of 2 parameters right each way, F1 1/2
    assert invocation_f1(predicted, gold, matching="seal") == pytest.approx(0.5)


FLIGHT = Tool(name="book_flight", description="Book a flight", parameters={"type": "object", "properties": {
    "date": {"type": "string"}}, "required": ["date"]})  # fmt: skip


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        (completion_of(content="Which date would you like to fly?"), 1.0),  # asks for the missing parameter
        (completion_of(content="I can't book trains with these tools."), 1.0),  # says no tool fits
        (completion_of(calls=[call("book_flight", date="2025-01-01")]), 0.0),  # a hallucinated value
        (completion_of(content="Sure.", calls=[call("book_flight", date="today")]), 0.0),
        (completion_of(error="parse: <tool_call> never closed"), 0.0),  # the format could not read it
        (completion_of(content="  "), 0.0),  # wrote nothing
    ],
    ids=["asks", "refuses", "hallucinated_call", "text_and_call", "unparsed", "empty"],
)
def test_abstention_where_no_call_is_expected(completion, expected):
    asked = reference(gold_text="Which date?", tools=[FLIGHT])
    assert abstention_reward(completion, asked) == expected


def test_abstention_does_not_apply_where_a_call_is_expected():
    gold = reference([call("book_flight", date="2025-01-01")], tools=[FLIGHT])
    text = completion_of(content="Which date?")
    assert abstention_reward(text, gold) == 0.0
    assert abstention_reward(text, gold, call_expected=0.5) == 0.5


def test_abstention_on_bfcl_questions_without_a_gold_turn():
    question = [Message(role="user", content="Tell me a joke.")]
    irrelevance = Conversation(id="i", messages=question, meta={"category": "irrelevance"})
    relevance = Conversation(id="r", messages=question, meta={"category": "live_relevance"})
    assert abstention_reward(completion_of(content="Here is one."), irrelevance) == 1.0
    assert abstention_reward(completion_of(calls=[call("joke")]), irrelevance) == 0.0
    assert abstention_reward(completion_of(calls=[call("joke")]), relevance, call_expected=-1.0) == -1.0
    with pytest.raises(ValueError, match="no gold assistant turn"):
        abstention_reward(completion_of(content="x"), Conversation(id="n", messages=question))


def test_registry_lists_every_reward_and_takes_module_attr():
    assert REWARDS.names() == [
        "bfcl_ast",
        "toolrl",
        "toolrl_format",
        "toolrl_correctness",
        "itc_invocation_f1",
        "itc_tool_f1",
        "abstention",
        "bfcl_multi_turn",
    ]
    for name in REWARDS:
        spec = REWARDS.get(name)
        assert isinstance(spec, RewardSpec) and spec.low < spec.high and callable(get_reward(name))
    assert get_reward("train.evaluation.rewards.abstention:SPEC") is abstention_reward
    assert describe("itc_invocation_f1")["high"] == 1.0
    with pytest.raises(ValueError, match="unknown reward 'nope'.*abstention"):
        get_reward("nope")
    with pytest.raises(ValueError, match="is not a reward"):
        get_reward("train.evaluation.rewards.abstention:abstention_reward")


def test_parse_completion_is_the_formats_parse():
    from train.formats import get_format

    fmt = get_format("qwen3")
    good = parse_completion(fmt, '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>')
    assert good.error is None and [(c.name, c.arguments) for c in good.tool_calls] == [("f", {"a": 1})]
    bad = parse_completion(fmt, '<tool_call>\n{"name": "f", "arguments": \n</tool_call>')
    assert bad.error is not None and bad.tool_calls == []
    gold = reference([call("f", a=1)])
    assert invocation_f1(good, gold) == 1.0 and invocation_f1(bad, gold) == 0.0


def test_the_doc_lists_every_reward_with_its_range():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "rewards.md").read_text(encoding="utf-8")
    for name in REWARDS:
        assert f"| `{name}` |" in doc, name
