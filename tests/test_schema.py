"""The canonical records: dict -> record -> JSON line -> record -> dict is lossless, and every
structural fault raises SchemaError naming the path of the offending field."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from train.schema import Conversation, SchemaError, ToolLibrary, ToolQuery, dumps, record_from_dict

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search_hotels",
        "description": "Hotels by filters — ünïcode in descriptions too.",
        "parameters": {"type": "object", "properties": {"filters": {"type": "object"}}},
    },
}

# Canonical form: an assistant call turn without text has no "content" key at all.
RICH: dict[str, Any] = {
    "id": "rich-0",
    "tools": [WEATHER, SEARCH],
    "messages": [
        {"role": "system", "content": "You are a travel agent."},
        {"role": "user", "content": "Wetter in München und Zürich? Hotels in 東京 bitte 🏨"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": {"city": "München", "unit": "celsius"}},
                },
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": {"city": "Zürich"}},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {
                        "name": "search_hotels",
                        "arguments": {
                            "filters": {
                                "city": "東京",
                                "stars": [4, 5],
                                "price": {"max": 250.5, "currency": "EUR"},
                                "pets": None,
                                "spa": True,
                            }
                        },
                    },
                },
            ],
        },
        {"role": "tool", "content": '{"temp": 21}', "tool_call_id": "call_0", "name": "get_weather"},
        {"role": "tool", "content": '{"temp": 18}', "tool_call_id": "call_1", "name": "get_weather"},
        {"role": "tool", "content": "[]", "tool_call_id": "call_2", "name": "search_hotels"},
        {
            "role": "assistant",
            "content": "21 °C und 18 °C; keine Hotels gefunden. Noch einmal?",
            "tool_calls": [
                {"type": "function", "function": {"name": "search_hotels", "arguments": {}}},
            ],
        },
        {"role": "tool", "content": '["Hotel Ōkura"]', "name": "search_hotels"},
        {"role": "assistant", "content": "Hotel Ōkura."},
        {"role": "user", "content": None},
    ],
    "meta": {"source": "handmade", "category": ["parallel", "multi-turn"], "original": {"turns": 10, "score": 0.5}},
}
QUERY = {
    "id": "q-1",
    "query": "Book a table for two — ça va?",
    "gold_tools": ["OpenTable", "Yelp"],
    "meta": {"source": "rectools", "size": 2},
}
LIBRARY = {"id": "lib-1", "tools": [WEATHER, SEARCH], "meta": {"source": "metatool"}}


@pytest.mark.parametrize(
    "canonical, kind",
    [(RICH, Conversation), (QUERY, ToolQuery), (LIBRARY, ToolLibrary)],
    ids=["conversation", "query", "library"],
)
def test_round_trip_through_a_json_line_is_lossless(canonical, kind):
    record = record_from_dict(copy.deepcopy(canonical))
    assert isinstance(record, kind)
    line = dumps(record)
    assert "\n" not in line
    again = record_from_dict(json.loads(line))
    assert again == record
    assert again.to_dict() == canonical
    assert dumps(again) == line  # byte-identical rebuilds


def test_json_line_keeps_non_ascii_readable_and_key_order_stable():
    line = dumps(record_from_dict(RICH))
    assert "München" in line and "東京" in line and "🏨" in line
    assert line.startswith('{"id": "rich-0", "tools": [{"type": "function", "function": {"name": "get_weather", ')


def test_null_content_beside_tool_calls_is_the_canonical_absent_content():
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": {}}}],
    }
    record = record_from_dict({"id": "x", "messages": [message]})
    assert record.messages[0].content is None
    assert record.to_dict()["messages"][0] == {"role": "assistant", "tool_calls": message["tool_calls"]}


def test_defaults_fill_in_optional_fields():
    record = record_from_dict(
        {
            "id": "x",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "f"}}],
        }
    )
    assert record.to_dict() == {
        "id": "x",
        "tools": [
            {
                "type": "function",
                "function": {"name": "f", "description": "", "parameters": {"type": "object", "properties": {}}},
            }
        ],
        "messages": [{"role": "user", "content": "hi"}],
        "meta": {},
    }


def at(*keys: Any) -> Callable[[dict, Any], None]:
    """A mutation setting RICH[keys...] to a value."""

    def mutate(obj: dict, value: Any) -> None:
        for key in keys[:-1]:
            obj = obj[key]
        obj[keys[-1]] = value

    return mutate


CALL = ("messages", 2, "tool_calls", 0)
TOOL = ("tools", 0)
STRUCTURE_FAULTS = [
    # (where to write, what, expected path, expected reason)
    (at("messages"), True, "record.messages", "expected list, got bool"),
    (at("messages", 1), True, "record.messages[1]", "expected dict, got bool"),
    (at("messages", 1), ["user", "hi"], "record.messages[1]", "expected dict, got list"),
    (
        at("messages", 1, "role"),
        "robot",
        "record.messages[1].role",
        "expected one of system, user, assistant, tool, got 'robot'",
    ),
    (at("messages", 1, "content"), {"text": "hi"}, "record.messages[1].content", "expected str, got dict"),
    (at("messages", 1, "content"), 42, "record.messages[1].content", "expected str, got int"),
    (at("messages", 1, "weight"), 1, "record.messages[1]", "unknown key(s) 'weight'"),
    (
        at("messages", 1, "tool_calls"),
        [{"function": {"name": "get_weather"}}],
        "record.messages[1].tool_calls",
        "only assistant messages carry tool calls, not 'user'",
    ),
    (
        at("messages", 3, "tool_calls"),
        [{"function": {"name": "get_weather"}}],
        "record.messages[3].tool_calls",
        "only assistant messages carry tool calls, not 'tool'",
    ),
    (at("messages", 2, "tool_calls"), True, "record.messages[2].tool_calls", "expected list, got bool"),
    (
        at("messages", 2, "tool_call_id"),
        "call_0",
        "record.messages[2].tool_call_id",
        "only tool messages carry tool_call_id, not 'assistant'",
    ),
    (at("messages", 3, "tool_call_id"), 7, "record.messages[3].tool_call_id", "expected str, got int"),
    (at("messages", 3, "name"), True, "record.messages[3].name", "expected str, got bool"),
    (at(*CALL), True, "record.messages[2].tool_calls[0]", "expected dict, got bool"),
    (at(*CALL, "id"), 0, "record.messages[2].tool_calls[0].id", "expected str, got int"),
    (
        at(*CALL, "type"),
        "code_interpreter",
        "record.messages[2].tool_calls[0].type",
        "expected 'function', got 'code_interpreter'",
    ),
    (at(*CALL, "index"), 0, "record.messages[2].tool_calls[0]", "unknown key(s) 'index'"),
    (at(*CALL, "function"), True, "record.messages[2].tool_calls[0].function", "expected dict, got bool"),
    (
        at(*CALL, "function", "name"),
        None,
        "record.messages[2].tool_calls[0].function.name",
        "expected str, got NoneType",
    ),
    (
        at(*CALL, "function", "arguments"),
        '{"city": "München"}',
        "record.messages[2].tool_calls[0].function.arguments",
        "arguments must be an object, not a JSON string",
    ),
    (
        at(*CALL, "function", "arguments"),
        True,
        "record.messages[2].tool_calls[0].function.arguments",
        "expected dict, got bool",
    ),
    (
        at(*CALL, "function", "arguments"),
        ["München"],
        "record.messages[2].tool_calls[0].function.arguments",
        "expected dict, got list",
    ),
    (
        at(*CALL, "function", "parameters"),
        {},
        "record.messages[2].tool_calls[0].function",
        "unknown key(s) 'parameters'",
    ),
    (at("tools"), True, "record.tools", "expected list, got bool"),
    (at(*TOOL), True, "record.tools[0]", "expected dict, got bool"),
    (at(*TOOL, "type"), "retrieval", "record.tools[0].type", "expected 'function', got 'retrieval'"),
    (at(*TOOL, "function"), True, "record.tools[0].function", "expected dict, got bool"),
    (at(*TOOL, "function", "name"), 5, "record.tools[0].function.name", "expected str, got int"),
    (at(*TOOL, "function", "description"), True, "record.tools[0].function.description", "expected str, got bool"),
    (at(*TOOL, "function", "parameters"), True, "record.tools[0].function.parameters", "expected dict, got bool"),
    (
        at(*TOOL, "function", "parameters"),
        '{"type": "object"}',
        "record.tools[0].function.parameters",
        "expected dict, got str",
    ),
    (at(*TOOL, "function", "strict"), True, "record.tools[0].function", "unknown key(s) 'strict'"),
    (at("meta"), True, "record.meta", "expected dict, got bool"),
    (at("meta"), ["a"], "record.meta", "expected dict, got list"),
    (at("id"), 17, "record.id", "expected str, got int"),
    (at("extra"), 1, "record", "unknown key(s) 'extra'"),
]


@pytest.mark.parametrize(
    "mutate, value, path, reason", STRUCTURE_FAULTS, ids=[f"{f[2]}={f[1]!r}"[:60] for f in STRUCTURE_FAULTS]
)
def test_structure_faults_name_their_path(mutate, value, path, reason):
    obj = copy.deepcopy(RICH)
    mutate(obj, value)
    with pytest.raises(SchemaError) as exc:
        record_from_dict(obj)
    assert (exc.value.path, exc.value.reason) == (path, reason)


@pytest.mark.parametrize(
    "obj, path, reason",
    [
        (True, "record", "expected dict, got bool"),
        ([RICH], "record", "expected dict, got list"),
        (7, "record", "expected dict, got int"),
        (
            {"id": "x"},
            "record",
            "not a conversation (messages), tool query (query, gold_tools) or tool library (tools)",
        ),
        ({"messages": []}, "record", "missing key 'id'"),
        ({**QUERY, "gold_tools": "OpenTable"}, "record.gold_tools", "expected list, got str"),
        ({**QUERY, "gold_tools": ["OpenTable", 3]}, "record.gold_tools[1]", "expected str, got int"),
        ({**QUERY, "query": True}, "record.query", "expected str, got bool"),
        ({"id": "q", "query": "x"}, "record", "missing key 'gold_tools'"),
        (
            {**LIBRARY, "tools": [{"type": "function", "function": {"description": "no name"}}]},
            "record.tools[0].function",
            "missing key 'name'",
        ),
        ({**LIBRARY, "tools": [{"name": "bare"}]}, "record.tools[0]", "missing key 'type'"),
    ],
)
def test_record_kind_faults_name_their_path(obj, path, reason):
    with pytest.raises(SchemaError) as exc:
        record_from_dict(obj)
    assert (exc.value.path, exc.value.reason) == (path, reason)
    assert str(exc.value) == f"{path}: {reason}"


# Only an absent or null optional container takes its default: a falsy wrong type (False, 0, "")
# must be rejected, not silently turned into {} / [].
@pytest.mark.parametrize(
    "mutate, value", [(at("meta"), False), (at("tools"), 0), (at("messages", 2, "tool_calls"), False), (at("meta"), "")]
)
def test_falsy_wrong_types_are_rejected_too(mutate, value):
    obj = copy.deepcopy(RICH)
    mutate(obj, value)
    with pytest.raises(SchemaError):
        record_from_dict(obj)


def test_assistant_reasoning_round_trips_and_other_roles_cannot_carry_it():
    obj = {
        "id": "r1",
        "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "reasoning_content": "The user wants weather.", "content": "Sunny."},
        ],
    }
    conv = Conversation.from_dict(obj)
    assert conv.messages[1].reasoning_content == "The user wants weather."
    assert conv.to_dict()["messages"][1] == obj["messages"][1]
    assert "reasoning_content" not in conv.to_dict()["messages"][0]
    bad = {"id": "r2", "messages": [{"role": "user", "content": "q", "reasoning_content": "no"}]}
    with pytest.raises(SchemaError, match=r"messages\[0\]\.reasoning_content.*only assistant"):
        Conversation.from_dict(bad)
    with pytest.raises(SchemaError, match="reasoning_content"):
        Conversation.from_dict({"id": "r3", "messages": [{"role": "assistant", "reasoning_content": 3}]})
