"""sharegpt reader: role/key variants, parallel calls, result linking, extras in meta, rejects."""

from __future__ import annotations

import json

import pytest
from helpers import call, split

from train.schema import Conversation, SchemaError, dumps
from train.sources.sharegpt import parse_function_call, read

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Local time in a timezone",
        "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]},
    },
}


@pytest.fixture
def records(fixtures):
    accepted, rejected = split(read([fixtures / "sources/sharegpt/records.jsonl"]))
    assert rejected == []
    return accepted


def test_parallel_calls_in_one_value_and_results_in_order(records):
    assert records[0].to_dict() == {
        "id": "records-0",
        "tools": [WEATHER, TIME],
        "messages": [
            {"role": "system", "content": "You are a travel assistant."},
            {"role": "user", "content": "Weather and time in Tokyo?"},
            {
                "role": "assistant",
                "tool_calls": [
                    call("call_0", "get_weather", {"city": "Tokyo"}),
                    call("call_1", "get_time", {"timezone": "Asia/Tokyo"}),
                ],
            },
            {"role": "tool", "content": '{"temp_c": 21}', "tool_call_id": "call_0", "name": "get_weather"},
            {"role": "tool", "content": '{"time": "14:05"}', "tool_call_id": "call_1", "name": "get_time"},
            {"role": "assistant", "content": "It is 21 °C and 14:05 in Tokyo."},
        ],
        "meta": {"source": "sharegpt"},
    }


def test_role_content_keys_consecutive_call_turns_and_named_results(records):
    conv = records[1]
    assert [m.to_dict() for m in conv.messages] == [
        {"role": "user", "content": "Weather in Oslo and Lima?"},
        {
            "role": "assistant",
            "tool_calls": [
                call("call_0", "get_weather", {"city": "Oslo"}),
                call("call_1", "get_time", {"timezone": "America/Lima"}),
            ],
        },
        # the results name their tool, so they link by name even though they come in the other order
        {"role": "tool", "content": '{"time": "07:00"}', "tool_call_id": "call_1", "name": "get_time"},
        {"role": "tool", "content": '{"temp_c": -3}', "tool_call_id": "call_0", "name": "get_weather"},
        {"role": "assistant", "content": "Oslo is at -3 °C; it is 07:00 in Lima."},
    ]
    assert conv.tools[1].to_dict() == TIME
    assert conv.meta == {"source": "sharegpt", "tool_extra": {"1": {"strict": True}}}


def test_text_then_call_is_one_message_and_extras_go_to_meta(records):
    assert records[2].to_dict() == {
        "id": "sg-7",
        "tools": [WEATHER],
        "messages": [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "Is it raining in Bergen?"},
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [call("call_0", "get_weather", {"city": "Bergen"})],
            },
            {"role": "tool", "content": '{"rain": true}', "tool_call_id": "call_0", "name": "get_weather"},
            {"role": "assistant", "content": "Yes, it is raining in Bergen."},
        ],
        "meta": {"source": "sharegpt", "extra": {"category": "weather"}, "turn_extra": {"2": {"weight": 0}}},
    }


def test_broken_lines_are_each_one_reject(fixtures):
    accepted, rejected = split(read([fixtures / "sources/sharegpt/broken.jsonl"]))
    assert [c.id for c in accepted] == ["sg-7"]
    roles = "human, user, gpt, assistant, system, function_call, observation, tool, function"
    assert [(r.location.rsplit("/", 1)[-1], r.reason) for r in rejected] == [
        ("broken.jsonl:2", "invalid JSON at column 47: Unterminated string starting at"),
        ("broken.jsonl:3", "not UTF-8 at byte 47"),
        ("broken.jsonl:4", "record: expected an object, got str"),
        ("broken.jsonl:5", "expected exactly one of 'conversations' and 'messages'"),
        ("broken.jsonl:6", "expected exactly one of 'conversations' and 'messages'"),
        ("broken.jsonl:7", "conversations: expected a list, got dict"),
        ("broken.jsonl:8", "conversations[0]: expected an object, got str"),
        ("broken.jsonl:9", "conversations[0]: missing key 'from' (or 'role')"),
        ("broken.jsonl:10", "conversations[0]: missing key 'value' (or 'content')"),
        ("broken.jsonl:11", "conversations[0].value: expected a string, got NoneType"),
        ("broken.jsonl:12", f"conversations[0].from: unknown role 1; expected one of {roles}"),
        ("broken.jsonl:13", "system: expected a string, got list"),
        ("broken.jsonl:14", "tools: expected a list, got dict"),
        ("broken.jsonl:15", "tools[0].function: missing key 'name'"),
        ("broken.jsonl:16", "tools[0]: expected an object, got str"),
        ("broken.jsonl:17", "conversations[1].value: invalid JSON at column 13: Expecting ',' delimiter"),
        ("broken.jsonl:18", "conversations[1].value: empty list of calls"),
        ("broken.jsonl:19", "conversations[1].value: call has no 'name'"),
        ("broken.jsonl:20", "conversations[1].value: unknown key(s) in call: 'args'"),
        ("broken.jsonl:21", "conversations[1].value.arguments: expected an object, got int"),
        ("broken.jsonl:22", "conversations[1].value[0]: expected an object, got str"),
        ("broken.jsonl:23", "conversations[1].value: expected a string, got dict"),
        ("broken.jsonl:24", "conversations[1].name: expected a string, got int"),
        ("broken.jsonl:25", "id: expected a string or integer, got list"),
    ]
    assert rejected[-1].raw == {"conversations": [{"from": "human", "value": "hi"}], "id": ["x"]}


def test_json_array_input_and_several_files(fixtures, tmp_path):
    array = tmp_path / "array.json"
    records = [
        json.loads(line)
        for line in (fixtures / "sources/sharegpt/records.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    array.write_text(json.dumps(records[:2]), encoding="utf-8")
    accepted, rejected = split(read([array, fixtures / "sources/sharegpt/records.jsonl"]))
    assert [c.id for c in accepted] == ["array-0", "array-1", "records-0", "records-1", "sg-7"]
    assert rejected == []
    assert accepted[0].messages == accepted[2].messages


def test_observation_with_nothing_to_answer_is_kept_unlinked():
    from train.sources.sharegpt import conversation_from_sharegpt

    conv = conversation_from_sharegpt(
        {
            "conversations": [
                {"from": "human", "value": "hi"},
                {"from": "gpt", "value": "calling"},
                {"from": "observation", "value": "{}"},
                {"from": "gpt", "value": "done"},
            ]
        },
        "x-0",
        "sharegpt",
    )
    assert conv.messages[2].to_dict() == {"role": "tool", "content": "{}"}


def test_function_call_values_in_every_accepted_shape():
    assert parse_function_call('{"name": "f", "arguments": "{\\"a\\": 1}"}', "v") == [("f", {"a": 1})]
    assert parse_function_call({"name": "f"}, "v") == [("f", {})]
    assert parse_function_call([{"name": "f", "arguments": {}}, {"name": "g", "arguments": {"b": [1]}}], "v") == [
        ("f", {}),
        ("g", {"b": [1]}),
    ]
    with pytest.raises(SchemaError, match=r"^v\.arguments: arguments string is JSON int, not an object$"):
        parse_function_call('{"name": "f", "arguments": "3"}', "v")


@pytest.mark.parametrize("name", ["records.jsonl", "broken.jsonl"])
def test_every_output_round_trips(fixtures, name):
    accepted, _ = split(read([fixtures / "sources/sharegpt" / name]))
    for conv in accepted:
        assert Conversation.from_dict(conv.to_dict()) == conv
        assert Conversation.from_dict(json.loads(dumps(conv))) == conv


def test_json_nested_too_deeply_inside_a_string_field_is_a_reject_naming_the_field():
    # One JSON-in-a-string parser for every reader (parse_json_string): it names the field for any
    # bad JSON, nesting too deep for the decoder included (a copy of it used to let RecursionError out).
    with pytest.raises(SchemaError) as err:
        parse_function_call("[" * 100_000 + "]" * 100_000, "conversations[1].value")
    assert str(err.value) == "conversations[1].value: invalid JSON: nested too deeply"
