"""toolace reader and its call-list parser (``train.base.pysyntax`` plus four rules of the ToolACE format)."""

from __future__ import annotations

import json

import pytest
from helpers import call, split

from train.base.pysyntax import PyCall, PySyntaxError
from train.base.pysyntax import parse_call_list as python_calls
from train.schema import Conversation, dumps
from train.sources.toolace import looks_like_call_list, parse_call_list, read, split_system

PROSE = (
    "You are an expert in composing functions. You are given a question and a set of possible functions. "
    "Based on the question, you will need to make one or more function/tool calls to achieve the purpose. "
    "If none of the function can be used, point it out. If the given question lacks the parameters required by the "
    "function, also point it out.\nYou should only return the function call in tools call sections.\n\n"
    "If you decide to invoke any of the function(s), you MUST put it in the format of "
    "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]\n"
    "You SHOULD NOT include any other text in the response.\n"
    "Here is a list of functions in JSON format that you can invoke.\n"
    ". \nShould you decide to return the function call(s). \n"
    "Put it in the format of [func1(params_name=params_value, params_name2=params_value2...), func2(params)]\n\n"
    "NO other text MUST be included."
)
MARKET = {
    "type": "function",
    "function": {
        "name": "Market Trends API",
        "description": "Get the latest market trends and relevant news for the specified country and language.",
        "parameters": {
            "type": "object",
            "properties": {
                "trend_type": {"description": "Trend type.", "type": "string"},
                "country": {
                    "description": "The country for which to get trends, specified as a 2-letter country code.",
                    "type": "string",
                    "default": "us",
                },
                "language": {"description": "The language to use for the results.", "type": "string", "default": "en"},
            },
            "required": ["trend_type"],
        },
    },
}


@pytest.fixture
def fixture_items(fixtures):
    return split(read([fixtures / "sources/toolace/records.jsonl"]))


def test_fixture_counts_and_reject_reasons(fixture_items):
    accepted, rejected = fixture_items
    assert [c.id for c in accepted] == ["records-0", "records-1", "records-2", "records-3"]
    assert [(r.location.rsplit("/", 1)[-1], r.reason) for r in rejected] == [
        ("records.jsonl:5", "conversations[1].value: broken call list: not valid Python: EOF in multi-line statement"),
        (
            "records.jsonl:6",
            ("conversations[1].value: broken call list: item 0: Hotel Search: positional arguments are not supported"),
        ),
        ("records.jsonl:7", "conversations[2].value: invalid JSON at column 1: Expecting value"),
        (
            "records.jsonl:8",
            (
                "conversations[1].value: broken call list: item 0: Hotel Search: argument 'city': "
                "a variable Rome is not a literal"
            ),
        ),
    ]


def test_single_call_with_spaces_in_the_name_exact(fixture_items):
    assert fixture_items[0][0].to_dict() == {
        "id": "records-0",
        "tools": [MARKET],
        "messages": [
            {"role": "system", "content": PROSE},
            {"role": "user", "content": "Can you show me the most active stocks in the US market today?"},
            {
                "role": "assistant",
                "tool_calls": [
                    call(
                        "call_0", "Market Trends API", {"trend_type": "MOST_ACTIVE", "country": "us", "language": "en"}
                    )
                ],
            },
            {
                "role": "tool",
                "content": '{"trends": [{"name": "Tesla Inc", "ticker": "TSLA", "change": -1.2}]}',
                "tool_call_id": "call_0",
                "name": "Market Trends API",
            },
            {"role": "assistant", "content": "The most active stock in the US today is Tesla (TSLA), down 1.2%."},
        ],
        # ToolACE writes "required": null beside "parameters"; "type": "dict" became "object"
        "meta": {"source": "toolace", "tool_extra": {"0": {"required": None}}},
    }


def test_parallel_calls_mixed_literals_and_results_in_order(fixture_items):
    conv = fixture_items[0][1]
    assert [t.name for t in conv.tools] == ["Market Trends API", "finance.get_exchange_rate"]
    assert conv.tools[1].parameters["properties"]["options"]["type"] == "object"
    assert [m.to_dict() for m in conv.messages[2:4]] == [
        {
            "role": "assistant",
            "tool_calls": [
                call(
                    "call_0",
                    "finance.get_exchange_rate",
                    {
                        "pair": ["EUR", "USD"],
                        "date": "2024-03-01",
                        "options": {"inverse": False, "precision": 4, "note": None},
                    },
                ),
                call("call_1", "Market Trends API", {"trend_type": "GAINERS", "country": "de", "language": "de"}),
            ],
        },
        {"role": "tool", "content": '{"rate": 1.0842}', "tool_call_id": "call_0", "name": "finance.get_exchange_rate"},
    ]
    assert conv.messages[4].tool_call_id == "call_1"


def test_multi_turn_with_chat_only_turns_and_string_results(fixture_items):
    conv = fixture_items[0][2]
    assert conv.tools[0].parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "max_price": {"type": "number"},
            "amenities": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["city"],
    }
    assert [m.to_dict() for m in conv.messages[1:]] == [
        {"role": "user", "content": "Find me a hotel."},
        {"role": "assistant", "content": "Sure! Which city should I search in, and what is your budget per night?"},
        {"role": "user", "content": "Lisbon, at most 120 euros, with wifi and a pool."},
        {
            "role": "assistant",
            "tool_calls": [
                call("call_0", "Hotel Search", {"city": "Lisbon", "max_price": 120.0, "amenities": ["wifi", "pool"]})
            ],
        },
        {"role": "tool", "content": "No hotels found.", "tool_call_id": "call_0", "name": "Hotel Search"},
        {"role": "assistant", "content": "I could not find a hotel in Lisbon under 120 euros with wifi and a pool."},
        {"role": "user", "content": "[Urgent] Then try without the pool (any price)."},
        {
            "role": "assistant",
            "tool_calls": [call("call_1", "Hotel Search", {"city": "Lisbon", "amenities": ["wifi"]})],
        },
    ]


def test_system_without_functions_and_bracketed_prose(fixture_items):
    assert fixture_items[0][3].to_dict() == {
        "id": "records-3",
        "tools": [],
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What does API stand for?"},
            {
                "role": "assistant",
                "content": "[Short answer] Application Programming Interface (it lets programs talk to each other).",
            },
        ],
        "meta": {"source": "toolace"},
    }


def test_broken_lines_are_each_one_reject(fixtures):
    accepted, rejected = split(read([fixtures / "sources/toolace/broken.jsonl"]))
    assert [c.id for c in accepted] == ["broken-0"]
    assert [(r.location.rsplit("/", 1)[-1], r.reason) for r in rejected] == [
        ("broken.jsonl:2", "invalid JSON at column 60: Unterminated string starting at"),
        ("broken.jsonl:3", "not UTF-8 at byte 12"),
        ("broken.jsonl:4", "record: expected an object, got NoneType"),
        ("broken.jsonl:5", "missing key 'conversations'"),
        ("broken.jsonl:6", "conversations: expected a list, got str"),
        ("broken.jsonl:7", "system: expected a string, got list"),
        ("broken.jsonl:8", "conversations[0]: expected an object, got list"),
        (
            "broken.jsonl:9",
            "conversations[0].from: unknown role 'narrator'; expected one of user, human, assistant, gpt, tool, system",
        ),
        ("broken.jsonl:10", "conversations[0]: missing key 'value'"),
        ("broken.jsonl:11", "conversations[0].value: expected a string, got int"),
        ("broken.jsonl:12", "system.functions[0].function.parameters: expected dict, got str"),
        ("broken.jsonl:13", "conversations[1].value: broken call list: item 0: f: argument 'a' given twice"),
        ("broken.jsonl:14", "conversations[1].value: broken call list: expected a list of function calls, got BoolOp"),
        ("broken.jsonl:15", "conversations[2].value: expected a list, got dict"),
        ("broken.jsonl:16", "conversations[2].value: empty list of tool results"),
        ("broken.jsonl:17", "conversations[2].value[0]: missing key 'name'"),
        ("broken.jsonl:18", "conversations[2].value[0]: missing key 'results'"),
        ("broken.jsonl:19", "conversations[2].value[0]: unknown key(s) 'status'"),
        ("broken.jsonl:20", "conversations[2].value[0]: expected an object, got str"),
        ("broken.jsonl:21", "conversations: empty list of turns"),
    ]


def test_result_for_a_tool_never_called_stays_unlinked():
    from train.sources.toolace import conversation_from_toolace

    conv = conversation_from_toolace(
        {
            "system": "s",
            "conversations": [
                {"from": "user", "value": "hi"},
                {"from": "assistant", "value": "[f(a=1)]"},
                {"from": "tool", "value": '[{"name": "API", "results": {"ok": true}}]'},
            ],
        },
        "x-0",
    )
    assert conv.messages[3].to_dict() == {"role": "tool", "content": '{"ok": true}', "name": "API"}


def test_split_system_takes_the_first_function_list_only():
    system = 'Use [f(x=1)] form. [1, 2] [{"name": "a"}] then [{"name": "b"}].'
    assert split_system(system) == ('Use [f(x=1)] form. [1, 2]  then [{"name": "b"}].', [[{"name": "a"}]])


@pytest.mark.parametrize("name", ["records.jsonl", "broken.jsonl"])
def test_every_output_round_trips(fixtures, name):
    accepted, _ = split(read([fixtures / "sources/toolace" / name]))
    for conv in accepted:
        assert Conversation.from_dict(conv.to_dict()) == conv
        assert Conversation.from_dict(json.loads(dumps(conv))) == conv


# ---------------------------------------------------------------- the call-list parser


@pytest.mark.parametrize(
    "text, expected",
    [
        ('[Market Trends API(trend_type="MOST_ACTIVE")]', [("Market Trends API", {"trend_type": "MOST_ACTIVE"})]),
        ("[f()]", [("f", {})]),
        ("[ f (a = 1 ) , g(b=True,) , ]", [("f", {"a": 1}), ("g", {"b": True})]),
        ("[pkg.mod-v2.run(x=-3, y=2.5e3, z=.5, w=+7)]", [("pkg.mod-v2.run", {"x": -3, "y": 2500.0, "z": 0.5, "w": 7})]),
        (
            "[f(a=True, b=False, c=None, d=true, e=false, f=null)]",
            [("f", {"a": True, "b": False, "c": None, "d": True, "e": False, "f": None})],
        ),
        (
            "[f(a=[1, [2, []]], b=(1, 'x'), c={'k': {\"n\": [true]}}, d={})]",
            [("f", {"a": [1, [2, []]], "b": [1, "x"], "c": {"k": {"n": [True]}}, "d": {}})],
        ),
        (
            r"""[f(a='it\'s', b="say \"hi\"", c='tab\there', d="caf\u00e9 \ud83d\ude00", e='C:\dir', f="a,b)c]d")]""",
            [("f", {"a": "it's", "b": 'say "hi"', "c": "tab\there", "d": "café 😀", "e": "C:\\dir", "f": "a,b)c]d"})],
        ),
        ('[f(q="多语言 ünïcode")]', [("f", {"q": "多语言 ünïcode"})]),
        ("\n [f(a=1)]\n", [("f", {"a": 1})]),
    ],
)
def test_parse_call_list(text, expected):
    assert parse_call_list(text) == expected


# CPython words its own syntax errors differently from version to version: for those, the prefix.
@pytest.mark.parametrize(
    "text, message",
    [
        ("[]", "empty call list"),
        ("f(a=1)", "expected a call list in [...]"),
        ("[(a=1)]", "not valid Python: "),
        ("[f(1)]", "item 0: f: positional arguments are not supported"),
        ("[f(a)]", "item 0: f: positional argument 0: a variable a is not a literal"),
        ("[f(a=1 b=2)]", "not valid Python: "),
        ("[f(a=1)", "not valid Python: "),
        ("[f(a='x)]", "not valid Python: "),
        ("[f(a=1, a=2)]", "item 0: f: argument 'a' given twice"),
        ("[f(a={'k': 1, 'k': 2})]", "item 0: f: argument 'a': dict key 'k' given twice"),
        ("[f(a={k: 1})]", "item 0: f: argument 'a': a variable k is not a literal"),
        ("[f(a=celsius)]", "item 0: f: argument 'a': a variable celsius is not a literal"),
        ("[f(a=5px)]", "not valid Python: "),
        ("[f(a=x.y)]", "item 0: f: argument 'a': Attribute x.y is not a literal"),
        ("[f(a=g())]", "item 0: f: argument 'a': nested call g() is not a literal"),
        ("[f(a=)]", "not valid Python: "),
        ("[f(a=1e999)]", "item 0: f: argument 'a': non-finite number 1e309 has no JSON form"),
        ("[f(a=" + "9" * 5000 + ")]", "not valid Python: "),  # past the integer digit limit
        ('[f(a="\\ud800")]', "item 0: f: lone surrogate escape in string '\\ud800'"),
        ('[f(a="\\x4")]', "not valid Python: "),
        ("[f(a=" + "[" * 250 + "]" * 250 + ")]", "not valid Python: "),
        ("[f(a=1)] thanks", "not valid Python: "),
        ("[f(a=1)] and more", "expected a list of function calls, got BoolOp"),
        ("[f(a=1), 2]", "item 1: expected a function call, got a constant"),
    ],
)
def test_parse_call_list_errors(text, message):
    with pytest.raises(PySyntaxError) as err:
        parse_call_list(text)
    assert str(err.value) == message if not message.endswith(": ") else str(err.value).startswith(message)


# ---------------------------------------------------------------- the four rules ToolACE adds to pysyntax
# Each case is one pysyntax alone decides otherwise.


def test_rule_1_a_bare_call_is_not_a_call_list():
    assert python_calls("f(a=1)", lenient=True) == [PyCall("f", [], {"a": 1})]
    assert python_calls("(f(a=1), g())", lenient=True) == [PyCall("f", [], {"a": 1}), PyCall("g")]
    for text in ("f(a=1)", "(f(a=1), g())"):
        with pytest.raises(PySyntaxError, match=r"^expected a call list in \[\.\.\.\]$"):
            parse_call_list(text)


def test_rule_2_an_empty_list_is_no_call_list():
    assert python_calls("[]", lenient=True) == []
    with pytest.raises(PySyntaxError, match="^empty call list$"):
        parse_call_list(" [ ] ")


def test_rule_3_every_argument_is_a_keyword():
    assert python_calls('[Hotel Search("Rome", nights=2)]', lenient=True) == [
        PyCall("Hotel Search", ["Rome"], {"nights": 2})
    ]
    with pytest.raises(PySyntaxError, match="^item 0: Hotel Search: positional arguments are not supported$"):
        parse_call_list('[Hotel Search("Rome", nights=2)]')


def test_rule_4_strings_read_their_escapes_as_json_does():
    text = '[f(q="caf\\u00e9 \\ud83d\\ude00", k={"\\ud83d\\ude00": ["\\ud83d\\ude00"]})]'
    assert python_calls(text, lenient=True)[0].kwargs["q"] == "café \ud83d\ude00"  # Python: two lone halves
    assert parse_call_list(text) == [("f", {"q": "café 😀", "k": {"😀": ["😀"]}})]
    assert python_calls('[f(q="\\udc00")]', lenient=True)[0].kwargs == {"q": "\udc00"}
    with pytest.raises(PySyntaxError, match="lone surrogate escape"):
        parse_call_list('[f(q="\\udc00")]')


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[f(a=1)]", True),
        ("  [ Some Tool Name(", True),
        ("[Short answer] Application Programming Interface (API).", False),
        ("[1, 2, 3]", False),
        ("The answer is [f(a=1)]", False),
        ("", False),
    ],
)
def test_looks_like_call_list(text, expected):
    assert looks_like_call_list(text) is expected
