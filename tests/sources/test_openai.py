"""openai reader: string arguments decoded, legacy function calling converted, rejects with paths."""

from __future__ import annotations

import json

import pytest
from helpers import call, split, tool

from train.schema import Conversation, dumps
from train.sources.openai import conversation_from_openai, read

WEATHER_PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TIME_PARAMS = {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}


@pytest.fixture
def records(fixtures):
    accepted, rejected = split(read([fixtures / "sources/openai/records.jsonl"]))
    assert rejected == []
    return accepted


def test_string_arguments_are_decoded_and_extras_kept(records):
    assert records[0].to_dict() == {
        "id": "chat-001",
        "tools": [tool("get_weather", "Current weather for a city", WEATHER_PARAMS)],
        "messages": [
            {"role": "system", "content": "You are a weather bot."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "tool_calls": [call("call_abc", "get_weather", {"city": "Paris"})]},
            {"role": "tool", "content": '{"temp_c": 18}', "tool_call_id": "call_abc", "name": "get_weather"},
            {"role": "assistant", "content": "18 °C in Paris."},
        ],
        "meta": {
            "source": "openai",
            "extra": {"parallel_tool_calls": False},
            "message_extra": {"4": {"weight": 1}},
            "tool_extra": {"0": {"strict": True}},
        },
    }


def test_legacy_function_calling_becomes_tool_calls(records):
    assert records[1].to_dict() == {
        "id": "records-1",
        "tools": [tool("get_time", "Local time in a timezone", TIME_PARAMS)],
        "messages": [
            {"role": "user", "content": "Time in Lima?"},
            {"role": "assistant", "tool_calls": [call("call_0", "get_time", {"timezone": "America/Lima"})]},
            {"role": "tool", "content": '{"time": "07:00"}', "tool_call_id": "call_0", "name": "get_time"},
            {"role": "assistant", "content": "It is 07:00 in Lima."},
        ],
        "meta": {"source": "openai"},
    }


def test_calls_without_ids_get_ids_and_results_link_by_name_then_order(records):
    assert [m.to_dict() for m in records[2].messages] == [
        {"role": "user", "content": "Weather in Rome and time in Rome?"},
        {
            "role": "assistant",
            "content": "Checking both.",
            "tool_calls": [
                call("call_0", "get_weather", {"city": "Rome"}),
                call("call_1", "get_time", {"timezone": "Europe/Rome"}),
            ],
        },
        {"role": "tool", "content": "12:00", "tool_call_id": "call_1", "name": "get_time"},
        {"role": "tool", "content": '{"temp_c": 25}', "tool_call_id": "call_0", "name": "get_weather"},
        {"role": "assistant", "content": "25 °C, and it is noon."},
    ]


def test_broken_lines_are_each_one_reject(fixtures):
    accepted, rejected = split(read([fixtures / "sources/openai/broken.jsonl"]))
    assert [c.id for c in accepted] == ["broken-0"]
    assert [(r.location.rsplit("/", 1)[-1], r.reason) for r in rejected] == [
        ("broken.jsonl:2", "invalid JSON at column 43: Unterminated string starting at"),
        ("broken.jsonl:3", "not UTF-8 at byte 43"),
        ("broken.jsonl:4", "record: expected an object, got int"),
        ("broken.jsonl:5", "missing key 'messages'"),
        ("broken.jsonl:6", "messages: expected a list, got str"),
        ("broken.jsonl:7", "messages[0]: expected an object, got str"),
        ("broken.jsonl:8", "messages[0]: missing key 'role'"),
        ("broken.jsonl:9", "messages[0].role: expected one of system, user, assistant, tool, got 'robot'"),
        ("broken.jsonl:10", "messages[0].content: expected str, got int"),
        ("broken.jsonl:11", "messages[0].content: expected str, got list"),
        (
            "broken.jsonl:12",
            "messages[1].tool_calls[0].function.arguments: invalid JSON at column 17: Expecting ',' delimiter",
        ),
        (
            "broken.jsonl:13",
            "messages[1].tool_calls[0].function.arguments: arguments string is JSON list, not an object",
        ),
        ("broken.jsonl:14", "messages[1].tool_calls[0].function.arguments: expected an object, got int"),
        ("broken.jsonl:15", "messages[1].tool_calls[0].id: expected str, got int"),
        ("broken.jsonl:16", "messages[1].tool_calls[0].type: expected 'function', got 'code'"),
        ("broken.jsonl:17", "messages[1].tool_calls: expected a list, got dict"),
        ("broken.jsonl:18", "messages[1].tool_calls[0].function: missing key 'name'"),
        ("broken.jsonl:19", "messages[1].tool_calls[0]: missing key 'function'"),
        ("broken.jsonl:20", "messages[1].function_call.arguments: invalid JSON at column 1: Expecting value"),
        ("broken.jsonl:21", "messages[1]: missing key 'name'"),
        ("broken.jsonl:22", "messages[0].tool_calls: only assistant messages carry tool calls, not 'user'"),
        ("broken.jsonl:23", "messages[1].tool_call_id: expected str, got int"),
        ("broken.jsonl:24", "tools[0].type: expected 'function', got 'retrieval'"),
        ("broken.jsonl:25", "tools: expected a list, got str"),
        ("broken.jsonl:26", "functions[0].function.parameters: expected dict, got str"),
        ("broken.jsonl:27", "no messages"),
    ]


def test_arguments_string_that_is_not_an_object_names_the_call():
    from train.schema import SchemaError

    record = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "tool_calls": [call("a", "f", "{}"), call("b", "g", '"Paris"')]},
        ]
    }
    with pytest.raises(SchemaError) as err:
        conversation_from_openai(record, "x-0")
    assert str(err.value) == "messages[1].tool_calls[1].function.arguments: arguments string is JSON str, not an object"


def test_record_already_canonical_passes_unchanged():
    canonical = {
        "id": "c1",
        "tools": [tool("get_time", "Local time in a timezone", TIME_PARAMS)],
        "messages": [
            {"role": "user", "content": "Time?"},
            {"role": "assistant", "tool_calls": [call("t1", "get_time", {"timezone": "UTC"})]},
            {"role": "tool", "content": "12:00", "tool_call_id": "t1", "name": "get_time"},
        ],
        "meta": {"source": "glaive", "layout": "raw"},
    }
    assert conversation_from_openai(canonical, "x-0").to_dict() == canonical
    assert conversation_from_openai(dict(canonical, meta={}), "x-0").meta == {"source": "openai"}


@pytest.mark.parametrize("name", ["records.jsonl", "broken.jsonl"])
def test_every_output_round_trips(fixtures, name):
    accepted, _ = split(read([fixtures / "sources/openai" / name]))
    for conv in accepted:
        assert Conversation.from_dict(conv.to_dict()) == conv
        assert Conversation.from_dict(json.loads(dumps(conv))) == conv
