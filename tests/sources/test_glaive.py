"""glaive reader: the LLaMA-Factory demo files (ShareGPT layout) and a raw-layout fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import split

from train.cli import main
from train.schema import Conversation, SchemaError, dumps
from train.sources import Rejected
from train.sources.glaive import parse_call_payload, read, split_chat, split_system

DEMO = "glaive_toolcall_demo/glaive_toolcall_{}_demo.json"
SYSTEM_WITH_TOOLS = "You are a helpful assistant with access to the following functions. Use them if required -"


def where(rejected: Rejected) -> str:
    return rejected.location.rsplit("/", 1)[-1]


# ---------------------------------------------------------------- the real demo files


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_demo_files_give_300_conversations_and_no_rejects(shared_data, lang):
    path = shared_data / DEMO.format(lang)
    accepted, rejected = split(read([path]))
    assert (len(accepted), len(rejected)) == (300, 0)
    assert [c.id for c in accepted] == [f"glaive_toolcall_{lang}_demo-{i}" for i in range(300)]
    for conv in accepted:
        assert Conversation.from_dict(conv.to_dict()) == conv
        assert conv.meta == {"source": "glaive", "layout": "sharegpt"}


def test_both_demo_files_in_one_run_keep_their_order(shared_data):
    en, zh = shared_data / DEMO.format("en"), shared_data / DEMO.format("zh")
    accepted, _ = split(read([zh, en]))
    assert accepted[0].id == "glaive_toolcall_zh_demo-0"
    assert accepted[300].id == "glaive_toolcall_en_demo-0"


def test_demo_en_record_85_exact(shared_data):
    conv = list(read([shared_data / DEMO.format("en")]))[85]
    assert conv.to_dict() == {
        "id": "glaive_toolcall_en_demo-85",
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "find_nearest_park",
                    "description": "Find the nearest park",
                    "parameters": {
                        "type": "object",
                        "properties": {"location": {"type": "string", "description": "The current location"}},
                        "required": ["location"],
                    },
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "calculate_distance",
                    "description": "Calculate the distance between two locations",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "origin": {"type": "string", "description": "The origin location"},
                            "destination": {"type": "string", "description": "The destination location"},
                        },
                        "required": ["origin", "destination"],
                    },
                },
            },
        ],
        "messages": [
            {"role": "user", "content": "I'm currently at 123 Main Street. Can you find the nearest park to me?"},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "call_0",
                        "type": "function",
                        "function": {"name": "find_nearest_park", "arguments": {"location": "123 Main Street"}},
                    }
                ],
            },
            {
                "role": "tool",
                "content": '{"park_name": "Central Park", "distance": "0.5 miles"}',
                "tool_call_id": "call_0",
                "name": "find_nearest_park",
            },
            {"role": "assistant", "content": "The nearest park to you is Central Park, which is just 0.5 miles away."},
        ],
        "meta": {"source": "glaive", "layout": "sharegpt"},
    }


def test_demo_zh_keeps_chinese_text_exactly(shared_data):
    conv = list(read([shared_data / DEMO.format("zh")]))[90]
    assert conv.to_dict() == {
        "id": "glaive_toolcall_zh_demo-90",
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_random_fact",
                    "description": "获取一个随机的有趣事实",
                    "parameters": {"type": "object", "properties": {}, "required": []},
                },
            }
        ],
        "messages": [
            {"role": "user", "content": "我无聊了。你能告诉我一些有趣的事情吗？"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "call_0", "type": "function", "function": {"name": "get_random_fact", "arguments": {}}}
                ],
            },
            {
                "role": "tool",
                "content": '{"fact": "你知道章鱼有三个心脏吗？"}',
                "tool_call_id": "call_0",
                "name": "get_random_fact",
            },
            {"role": "assistant", "content": "你知道吗，章鱼有三颗心脏？相当有趣，不是吗？"},
        ],
        "meta": {"source": "glaive", "layout": "sharegpt"},
    }
    assert "我无聊了" in dumps(conv)  # written as characters, not \\u escapes


def test_demo_zh_orphan_observations_stay_unlinked_tool_messages(shared_data):
    """Records 197 and 293: an observation after a gpt turn whose call was translated into prose."""
    convs = list(read([shared_data / DEMO.format("zh")]))
    orphans = [
        (c.id, i) for c in convs for i, m in enumerate(c.messages) if m.role == "tool" and m.tool_call_id is None
    ]
    assert orphans == [("glaive_toolcall_zh_demo-197", 2), ("glaive_toolcall_zh_demo-293", 2)]
    message = convs[197].messages[2]
    assert (message.content, message.name) == ('{"discounted_price": 160}', None)


def test_cli_convert_counts_the_en_demo(shared_data, tmp_path, capsys):
    out = tmp_path / "glaive_en.jsonl"
    assert main(["data", "convert", "glaive", str(shared_data / DEMO.format("en")), "-o", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "read 300, written 300, rejected 0"
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 300
    assert json.loads(lines[85])["messages"][1]["tool_calls"][0]["function"]["name"] == "find_nearest_park"


# ---------------------------------------------------------------- raw layout fixture


def test_raw_fixture_counts_and_reasons(fixtures):
    accepted, rejected = split(read([fixtures / "sources/glaive/raw.jsonl"]))
    assert [c.id for c in accepted] == ["raw-0", "raw-1", "raw-2", "raw-3", "raw-6"]
    assert [c.meta["layout"] for c in accepted] == ["raw", "raw", "raw", "raw", "sharegpt"]
    assert [(where(r), r.reason) for r in rejected] == [
        (
            "raw.jsonl:5",
            (
                'chat.turns[1].functioncall[0]: not a call {"name": ..., "arguments": \'...\'}: '
                "'calculate_tip(bill_amount=10)'"
            ),
        ),
        ("raw.jsonl:6", "chat.turns[1].functioncall[0].arguments: arguments string is JSON list, not an object"),
        ("raw.jsonl:8", "neither layout: expected 'conversations' (ShareGPT) or 'system' + 'chat' (raw)"),
    ]
    assert rejected[2].raw == {"prompt": "USER: hi", "completion": "ASSISTANT: hello"}


def test_raw_plain_chat_keeps_the_whole_system_prose(fixtures):
    conv = next(iter(read([fixtures / "sources/glaive/raw.jsonl"])))
    assert conv.to_dict() == {
        "id": "raw-0",
        "tools": [],
        "messages": [
            {"role": "system", "content": "You are a helpful assistant, with no access to external functions."},
            {"role": "user", "content": "Can you tell me a joke?"},
            {"role": "assistant", "content": "Why don't scientists trust atoms? Because they make up everything!"},
            {"role": "user", "content": "Another one, please."},
            {"role": "assistant", "content": "What do you call a fake noodle? An impasta!"},
        ],
        "meta": {"source": "glaive", "layout": "raw"},
    }


def test_raw_two_functions_nested_arguments_with_escaped_quotes(fixtures):
    conv = list(read([fixtures / "sources/glaive/raw.jsonl"]))[2]
    assert [t.name for t in conv.tools] == ["search_restaurants", "calculate_tip"]
    assert conv.tools[0].parameters["properties"]["filters"]["properties"]["price_range"] == {
        "type": "object",
        "properties": {"max": {"type": "number"}},
    }
    assert [m.to_dict() for m in conv.messages] == [
        {"role": "system", "content": SYSTEM_WITH_TOOLS},
        {
            "role": "user",
            "content": 'Find me an Italian place in Rome under 30 euros, and note that we want "Luigi\'s" table.',
        },
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {
                        "name": "search_restaurants",
                        "arguments": {
                            "location": "Rome",
                            "filters": {"cuisine": "Italian", "price_range": {"max": 30}},
                            "note": 'we want "Luigi\'s" table',
                        },
                    },
                }
            ],
        },
        {
            "role": "tool",
            "content": '{"restaurants": [{"name": "Da Luigi", "price": 25}]}',
            "tool_call_id": "call_0",
            "name": "search_restaurants",
        },
        {"role": "assistant", "content": "I found Da Luigi, with meals around 25 euros."},
        {"role": "user", "content": "Our bill was 50 euros. How much should we tip at 15%?"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "calculate_tip", "arguments": {"bill_amount": 50, "tip_percentage": 15}},
                }
            ],
        },
        {"role": "tool", "content": '{"tip_amount": 7.5}', "tool_call_id": "call_1", "name": "calculate_tip"},
        {"role": "assistant", "content": "The tip amount is 7.5 euros."},
    ]


def test_raw_text_turn_then_call_turn_is_one_message(fixtures):
    conv = list(read([fixtures / "sources/glaive/raw.jsonl"]))[3]
    assert conv.messages[2].to_dict() == {
        "role": "assistant",
        "content": "Sure, let me calculate that for you.",
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "calculate_tip", "arguments": {"bill_amount": 80, "tip_percentage": 20}},
            }
        ],
    }
    assert [m.role for m in conv.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert (
        conv.messages[-1].content == "You should leave a tip of 16 dollars."
    )  # no <|endoftext|> at the very end either


def test_broken_lines_are_each_one_reject(fixtures):
    accepted, rejected = split(read([fixtures / "sources/glaive/broken.jsonl"]))
    assert [c.id for c in accepted] == ["broken-0", "broken-19"]
    assert [(where(r), r.reason) for r in rejected] == [
        ("broken.jsonl:2", "invalid JSON at column 59: Unterminated string starting at"),
        ("broken.jsonl:3", "not UTF-8 at byte 33"),
        ("broken.jsonl:4", "record: expected an object, got list"),
        ("broken.jsonl:5", "system: expected a string, got int"),
        ("broken.jsonl:6", "chat: expected a string, got list"),
        ("broken.jsonl:7", "chat: no USER:, ASSISTANT: or FUNCTION RESPONSE: turn"),
        ("broken.jsonl:8", "chat: text before the first turn marker: 'preamble\\n\\nUSER: hi'"),
        ("broken.jsonl:9", "system.functions[0].function.name: expected str, got int"),
        ("broken.jsonl:10", "system.functions[0].function.parameters: expected dict, got list"),
        (
            "broken.jsonl:11",
            "chat.turns[1].functioncall[0].arguments: invalid JSON at column 8: Expecting ',' delimiter",
        ),
        (
            "broken.jsonl:12",
            "chat.turns[1].functioncall[0]: call without a string 'name': '{\"name\": 5, \"arguments\": {}}'",
        ),
        ("broken.jsonl:13", "conversations[0].value: expected a string, got int"),
        (
            "broken.jsonl:14",
            (
                "conversations[0].from: unknown role 'robot'; expected one of human, user, gpt, assistant, "
                "system, function_call, observation, tool, function"
            ),
        ),
        ("broken.jsonl:15", "tools: invalid JSON at column 11: Expecting value"),
        ("broken.jsonl:16", "conversations[1].value.arguments: arguments string is JSON list, not an object"),
        ("broken.jsonl:17", "conversations: expected a list, got str"),
        ("broken.jsonl:18", "conversations: empty list of turns"),
        ("broken.jsonl:19", "id: expected a string or integer, got float"),
    ]


@pytest.mark.parametrize("name", ["raw.jsonl", "broken.jsonl"])
def test_every_output_round_trips(fixtures, name):
    accepted, _ = split(read([fixtures / "sources/glaive" / name]))
    assert accepted
    for conv in accepted:
        assert Conversation.from_dict(conv.to_dict()) == conv
        assert Conversation.from_dict(json.loads(dumps(conv))) == conv


# ---------------------------------------------------------------- the pieces


def test_split_system_cuts_every_function_object_and_keeps_other_braces():
    system = (
        'SYSTEM: Use {curly} words -\n{"name": "a", "parameters": {}}\n\n{"name": "b"}\n\n'
        'Be brief. {"not": "a function"}'
    )
    prose, functions = split_system(system)
    assert functions == [{"name": "a", "parameters": {}}, {"name": "b"}]
    assert prose == 'Use {curly} words -\n\n\n\n\nBe brief. {"not": "a function"}'


def test_split_chat_strips_markers_and_end_tokens():
    chat = (
        "USER: hi <|endoftext|>\n\n\nASSISTANT: Hello!\nUSER: is not a marker here <|endoftext|>\n\n"
        "FUNCTION RESPONSE: {}"
    )
    assert split_chat(chat) == [
        ("USER", "hi"),
        ("ASSISTANT", "Hello!\nUSER: is not a marker here"),
        ("FUNCTION RESPONSE", "{}"),
    ]


@pytest.mark.parametrize(
    "payload, expected",
    [
        ('{"name": "f", "arguments": \'{"a": 1}\'}', ("f", {"a": 1})),
        ('{"name": "f", "arguments": {"a": [1, {"b": null}]}}', ("f", {"a": [1, {"b": None}]})),
        ('{"name": "f", "arguments": "{\\"a\\": 1}"}', ("f", {"a": 1})),
        ('{"name": "f"}', ("f", {})),
        ('{"name": "f\\u00e9", "arguments": \'{"q": "it\'s"}\'}', ("fé", {"q": "it's"})),
    ],
)
def test_parse_call_payload_shapes(payload, expected):
    assert parse_call_payload(payload, "p") == expected


@pytest.mark.parametrize(
    "payload, reason",
    [
        ("", "p: not a call {\"name\": ..., \"arguments\": '...'}: ''"),
        ('{"name": "f", "arguments": \'{"a": }\'}', "p.arguments: invalid JSON at column 7: Expecting value"),
        ('{"name": "f", "arguments": \'"text"\'}', "p.arguments: arguments string is JSON str, not an object"),
        ('{"arguments": {}}', "p: call without a string 'name': '{\"arguments\": {}}'"),
    ],
)
def test_parse_call_payload_errors(payload, reason):
    with pytest.raises(SchemaError) as err:
        parse_call_payload(payload, "p")
    assert str(err.value) == reason


def test_folder_or_missing_input_is_a_source_error(tmp_path):
    from train.sources import SourceError

    with pytest.raises(SourceError, match="is a folder"):
        list(read([tmp_path]))
    with pytest.raises(SourceError, match="cannot read"):
        list(read([tmp_path / "missing.json"]))
    with pytest.raises(SourceError, match="got 0 inputs"):
        list(read([]))


def test_empty_file_reads_nothing(tmp_path):
    path = Path(tmp_path / "empty.jsonl")
    path.write_text("\n\n", encoding="utf-8")
    assert list(read([path])) == []
