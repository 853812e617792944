"""xlam reader: query + parallel calls, xLAM parameters -> JSON Schema, rejects."""

from __future__ import annotations

import json

import pytest
from helpers import call, split

from train.schema import Conversation, dumps
from train.sources.xlam import json_type, read, schema_from_xlam

LIVE = {
    "type": "function",
    "function": {
        "name": "live_giveaways_by_type",
        "description": "Retrieve live giveaways from the GamerPower API based on the specified type.",
        "parameters": {
            "type": "object",
            "properties": {
                "type": {
                    "description": "The type of giveaways to retrieve (e.g., game, loot, beta).",
                    "type": "string",
                    "default": "game",
                }
            },
            "required": ["type"],
        },
    },
}


@pytest.fixture
def fixture_items(fixtures):
    return split(read([fixtures / "sources/xlam/records.jsonl"]))


def test_parallel_answers_become_one_call_turn_exact(fixture_items):
    assert fixture_items[0][0].to_dict() == {
        "id": "0",
        "tools": [LIVE],
        "messages": [
            {"role": "user", "content": "Where can I find live giveaways for beta access and games?"},
            {
                "role": "assistant",
                "tool_calls": [
                    call("call_0", "live_giveaways_by_type", {"type": "beta"}),
                    call("call_1", "live_giveaways_by_type", {"type": "game"}),
                ],
            },
        ],
        "meta": {"source": "xlam", "xlam_types": {"0": {"type": "str"}}},
    }


def test_optional_and_default_types_are_not_required(fixture_items):
    conv = fixture_items[0][1]
    assert conv.tools[0].parameters == {
        "type": "object",
        "properties": {
            "symbol": {"description": "Ticker symbol.", "type": "string", "default": "AAPL"},
            "interval": {"description": "Interval between points.", "type": "string", "default": "1day"},
            "outputsize": {"description": "Number of points, default 30.", "type": "integer"},
        },
        "required": ["symbol"],
    }
    assert conv.meta["xlam_types"] == {
        "0": {"symbol": "str", "interval": "str, optional", "outputsize": "int, default=30"},
        "1": {"type": "str"},
    }
    assert conv.messages[1].tool_calls[0].arguments == {"symbol": "MSFT", "interval": "1day", "outputsize": 10}


def test_container_and_unknown_types_and_string_arguments(fixture_items):
    conv = fixture_items[0][2]
    assert conv.tools[0].parameters == {
        "type": "object",
        "properties": {
            "numbers": {"description": "The numbers.", "type": "array", "items": {"type": "number"}},
            "weights": {"description": "Per-number weights.", "type": "object"},
            "when": {"description": "Timestamp.", "default": None},
        },
        "required": ["numbers"],
    }
    assert conv.messages[1].tool_calls[0].arguments == {"numbers": [1.5, 2.5, 3]}


def test_fixture_rejects(fixture_items):
    accepted, rejected = fixture_items
    assert [c.id for c in accepted] == ["0", "1", "2"]
    assert [(r.location.rsplit("/", 1)[-1], r.reason) for r in rejected] == [
        ("records.jsonl:4 (id 3)", "answers: invalid JSON at column 57: Expecting ',' delimiter"),
        (
            "records.jsonl:5 (id 4)",
            "answers: empty list: no call to make, and xLAM has no text answer to train instead",
        ),
    ]


def test_broken_lines_are_each_one_reject(fixtures):
    accepted, rejected = split(read([fixtures / "sources/xlam/broken.jsonl"]))
    assert [c.id for c in accepted] == ["0"]
    assert [(r.location.rsplit("/", 1)[-1], r.reason) for r in rejected] == [
        ("broken.jsonl:2", "invalid JSON at column 20: Unterminated string starting at"),
        ("broken.jsonl:3", "not UTF-8 at byte 21"),
        ("broken.jsonl:4", "record: expected an object, got list"),
        ("broken.jsonl:5 (id 11)", "missing key 'query'"),
        ("broken.jsonl:6 (id 12)", "query: expected a string, got int"),
        ("broken.jsonl:7 (id 13)", "tools[0].parameters.x: expected an object, got str"),
        ("broken.jsonl:8 (id 14)", "tools: expected a list, got dict"),
        ("broken.jsonl:9 (id 15)", "answers: expected a list, got dict"),
        ("broken.jsonl:10 (id 16)", "answers[0]: expected an object, got str"),
        ("broken.jsonl:11 (id 17)", "answers[0]: missing key 'name'"),
        ("broken.jsonl:12 (id 18)", "answers[0].arguments: invalid JSON at column 1: Expecting value"),
        ("broken.jsonl:13 (id 19)", "tools[0].parameters.x.type: expected a string, got int"),
        ("broken.jsonl:14 (id 20)", "tools: expected a list, got int"),
        ("broken.jsonl:15", "id: expected a string or integer, got bool"),
    ]


def test_already_decoded_lists_and_json_schema_parameters_are_accepted():
    from train.sources.xlam import conversation_from_xlam

    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    conv = conversation_from_xlam(
        {
            "query": "find x",
            "tools": [{"name": "search", "parameters": schema}],
            "answers": [{"name": "search", "arguments": {"q": "x"}}],
            "source": "apigen",
        },
        "f-3",
    )
    assert conv.id == "f-3"
    assert conv.tools[0].parameters == schema
    assert conv.meta == {"source": "xlam", "extra": {"source": "apigen"}}


@pytest.mark.parametrize(
    "published, expected",
    [
        ("str", {"type": "string"}),
        ("int, optional", {"type": "integer"}),
        ("float", {"type": "number"}),
        ("bool, optional", {"type": "boolean"}),
        ("List[int]", {"type": "array", "items": {"type": "integer"}}),
        ("List[Dict[str, int]], optional", {"type": "array", "items": {"type": "object"}}),
        ("Tuple[int, int]", {"type": "array"}),
        ("list", {"type": "array"}),
        ("Dict[str, Any]", {"type": "object"}),
        ("string", {"type": "string"}),
        ("datetime", {}),
        ("Union[str, int]", {}),
    ],
)
def test_json_type(published, expected):
    assert json_type(published) == expected


def test_schema_from_xlam_keeps_key_order_and_reports_types():
    schema, types = schema_from_xlam(
        {"a": {"type": "Dict[str, int], optional", "description": "d"}, "b": {"description": "no type"}}, "p"
    )
    assert schema == {
        "type": "object",
        "properties": {"a": {"type": "object", "description": "d"}, "b": {"description": "no type"}},
        "required": ["b"],
    }
    assert types == {"a": "Dict[str, int], optional"}


@pytest.mark.parametrize("name", ["records.jsonl", "broken.jsonl"])
def test_every_output_round_trips(fixtures, name):
    accepted, _ = split(read([fixtures / "sources/xlam" / name]))
    for conv in accepted:
        assert Conversation.from_dict(conv.to_dict()) == conv
        assert Conversation.from_dict(json.loads(dumps(conv))) == conv
