"""Tool-call markup in text (issue #24, item 3): Hermes/Qwen ``<tool_call>`` blocks, ``<tools>`` in the system prompt
and ``<tool_response>`` turns become canonical calls, tools and tool messages; markup that cannot be read is a
counted reject naming it; ``data convert`` never writes a call as text; user text is never parsed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from train.cli import main
from train.schema import Conversation, SchemaError

# The parsers are imported where used: the data convert tests then show today's main's behaviour (not an ImportError).
CODE = "call-markup-in-text"

WEATHER = {
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
# hermes-function-calling-v1's system prompt: the tools and the call format as Python literals
HERMES_SYSTEM = (
    "You are a function calling AI model. You are provided with function signatures within <tools> </tools> XML "
    "tags. You may call one or more functions to assist with the user query. Don't make assumptions about what "
    "values to plug into functions.\n<tools>\n"
    "[{'type': 'function', 'function': {'name': 'get_weather', 'description': 'Weather of a city', 'parameters': "
    "{'type': 'object', 'properties': {'city': {'type': 'string'}}, 'required': ['city']}}}]\n</tools>\n"
    "For each function call return a json object with function name and arguments within <tool_call> </tool_call> "
    "tags with the following schema:\n<tool_call>\n{'arguments': <args-dict>, 'name': <function-name>}\n</tool_call>\n"
)
# Qwen2.5's template: the user's system prompt, then the tool section with one JSON definition per line
QWEN_SYSTEM = (
    "You are a terse assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    + json.dumps({"type": "function", "function": WEATHER})
    + "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n'
    "</tool_call>"
)
USER_MARKUP = "Paris and Rome? (I once saw <tool_call>x</tool_call> in a log)"
HERMES = [
    {
        "id": "parallel",
        "conversations": [
            {"from": "system", "value": HERMES_SYSTEM},
            {"from": "human", "value": USER_MARKUP},
            {
                "from": "gpt",
                "value": "<tool_call>\n{'arguments': {'city': 'Paris'}, 'name': 'get_weather'}\n</tool_call>\n"
                '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>',
            },
            {
                "from": "tool",
                "value": '<tool_response>\n{"name": "get_weather", "content": {\'temp\': 21, \'sky\': None}}\n'
                '</tool_response>\n<tool_response>\n{"name": "get_weather", "content": "cloudy"}\n</tool_response>',
            },
            {"from": "gpt", "value": "Paris: 21 degrees. Rome: cloudy."},
        ],
    },
    {
        "id": "qwen",
        "system": QWEN_SYSTEM,
        "conversations": [
            {"from": "human", "value": "Oslo?"},
            {
                "from": "gpt",
                "value": 'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
            },
            {"from": "tool", "value": '<tool_response>\n{"temp": -3}\n</tool_response>'},
            {"from": "gpt", "value": "-3 degrees."},
        ],
    },
    {
        "id": "broken",
        "conversations": [
            {"from": "human", "value": "Oslo?"},
            {
                "from": "gpt",
                "value": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}\n</tool_call>',
            },
        ],
    },
]


def call(call_id: str, city: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": {"city": city}}}


def convert(tmp_path: Path, source: str, records: list[dict], capsys) -> tuple[int, list[dict], list[dict], str]:
    """(exit code, written records, rejects, console) of ``data convert`` over ``records``; the input unchanged."""
    path = tmp_path / "input.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    before = path.read_bytes()
    out = tmp_path / "out.jsonl"
    code = main(["data", "convert", source, str(path), "-o", str(out)])
    assert path.read_bytes() == before
    console = capsys.readouterr().out
    lines = out.read_text(encoding="utf-8").splitlines() if out.exists() else []
    rejects_path = tmp_path / "out.rejects.jsonl"
    rejects = rejects_path.read_text(encoding="utf-8").splitlines() if rejects_path.exists() else []
    return code, [json.loads(line) for line in lines], [json.loads(line) for line in rejects], console


def test_hermes_sharegpt_converts_to_calls_tools_and_results(tmp_path, capsys):
    code, written, rejects, console = convert(tmp_path, "sharegpt", HERMES, capsys)
    assert code == 0 and console.startswith("read 3, written 2, rejected 1\n")
    tools = [{"type": "function", "function": WEATHER}]
    parallel, qwen = written
    assert parallel["tools"] == tools and qwen["tools"] == tools
    assert parallel["messages"] == [  # the system prompt was only the tool section: no system message left
        {"role": "user", "content": USER_MARKUP},  # user text stays text, markup and all
        {"role": "assistant", "tool_calls": [call("call_0", "Paris"), call("call_1", "Rome")]},
        {"role": "tool", "content": '{"temp": 21, "sky": null}', "tool_call_id": "call_0", "name": "get_weather"},
        {"role": "tool", "content": "cloudy", "tool_call_id": "call_1", "name": "get_weather"},
        {"role": "assistant", "content": "Paris: 21 degrees. Rome: cloudy."},
    ]
    assert parallel["meta"]["call_markup"] == {
        "parsed": ["<tool_call>", "<tool_response>", "<tools>"],
        "system": [HERMES_SYSTEM],  # lossless: the prompt as the source wrote it
    }
    assert qwen["messages"] == [
        {"role": "system", "content": "You are a terse assistant."},  # the tool section taken out, the rest kept
        {"role": "user", "content": "Oslo?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [call("call_0", "Oslo")]},
        {"role": "tool", "content": '{"temp": -3}', "tool_call_id": "call_0", "name": "get_weather"},
        {"role": "assistant", "content": "-3 degrees."},
    ]
    assert [r["location"].rsplit(" ", 2)[-2:] for r in rejects] == [["(id", "broken)"]]
    assert "conversations[1].value: <tool_call> body is neither JSON nor a Python literal" in rejects[0]["reason"]
    assert "<tool_call> body is neither JSON nor a Python literal" in console


def test_openai_messages_with_markup_in_content(tmp_path, capsys):
    records = [
        {
            "id": "ok",
            "messages": [
                {"role": "system", "content": QWEN_SYSTEM},
                {"role": "user", "content": "Oslo?"},
                {
                    "role": "assistant",
                    "content": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
                },
                {
                    "role": "tool",
                    "content": '<tool_response>\n{"name": "get_weather", "content": {"temp": -3}}\n</tool_response>',
                },
                {"role": "assistant", "content": "-3 degrees."},
            ],
        },
        {
            "id": "both",
            "messages": [
                {"role": "user", "content": "Oslo?"},
                {
                    "role": "assistant",
                    "content": '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>',
                    "tool_calls": [call("c9", "Oslo")],
                },
            ],
        },
        {
            "id": "glaive-text",
            "messages": [
                {"role": "user", "content": "Oslo?"},
                {"role": "assistant", "content": '<functioncall> {"name": "get_weather", "arguments": "{}"}'},
            ],
        },
    ]
    code, written, rejects, console = convert(tmp_path, "openai", records, capsys)
    assert code == 0 and console.startswith("read 3, written 1, rejected 2\n")
    assert written[0]["tools"] == [{"type": "function", "function": WEATHER}]
    assert written[0]["messages"] == [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "Oslo?"},
        {"role": "assistant", "tool_calls": [call("call_0", "Oslo")]},
        {"role": "tool", "content": '{"temp": -3}', "name": "get_weather", "tool_call_id": "call_0"},
        {"role": "assistant", "content": "-3 degrees."},
    ]
    reasons = {r["location"].rsplit("(id ", 1)[1].rstrip(")"): r["reason"] for r in rejects}
    assert reasons["both"] == (
        "messages[1].content: call markup in the content of a message with tool_calls: which are its calls?"
    )
    assert reasons["glaive-text"].startswith(
        "messages[1].content: call markup '<functioncall>' in assistant text, a layout not parsed here"
    )


def test_convert_rejects_markup_a_reader_left_in_text(tmp_path, capsys):
    """The canonical reader reads records as they are: ``data convert`` is the net that refuses calls as text."""
    records = [
        {
            "id": "as-text",
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "[TOOL_CALLS] []"}],
        },
        {
            "id": "user-markup",
            "messages": [{"role": "user", "content": USER_MARKUP}, {"role": "assistant", "content": "ok"}],
        },
    ]
    code, written, rejects, console = convert(tmp_path, "canonical", records, capsys)
    assert code == 0 and console.startswith("read 2, written 1, rejected 1\n")
    assert [r["id"] for r in written] == ["user-markup"]
    assert rejects[0]["reason"] == (
        f"{CODE} at messages[1].content: assistant text holds call markup '[TOOL_CALLS]': a call kept as text, "
        "not in tool_calls"
    )


def test_validate_findings_have_validates_shape():
    """``markup_findings`` yields validate.py's ``(code, where, reason)``: a warning there once registered."""
    from train.base.call_markers import markup_findings
    from train.validate import Problem

    conv = Conversation.from_dict(
        {
            "id": "c",
            "messages": [
                {"role": "system", "content": HERMES_SYSTEM},
                {"role": "user", "content": USER_MARKUP},
                {"role": "assistant", "content": '<|python_tag|>{"name": "f", "parameters": {}}'},
                {"role": "tool", "content": "<tool_response>1</tool_response>", "tool_call_id": None},
            ],
        }
    )
    findings = list(markup_findings(conv))
    assert [(code, where) for code, where, _ in findings] == [
        (CODE, "messages[0].content"),
        (CODE, "messages[2].content"),
        (CODE, "messages[3].content"),
    ]
    assert str(Problem("warning", *findings[1])) == (
        f"{CODE} at messages[2].content: assistant text holds call markup '<|python_tag|>': a call kept as text, "
        "not in tool_calls"
    )


# ---------------------------------------------------------------- the parsers, one layout at a time


def test_llama_python_tag_and_mistral_tool_calls():
    from train.sources.call_markup import assistant_calls

    assert assistant_calls(
        '<|python_tag|>{"name": "f", "parameters": {"a": 1}}; {"name": "g", "parameters": {}}', "p"
    ) == (
        None,
        [("f", {"a": 1}), ("g", {})],
    )
    assert assistant_calls('Sure. [TOOL_CALLS] [{"name": "f", "arguments": {"a": 1}}]', "p") == (
        "Sure.",
        [("f", {"a": 1})],
    )
    assert assistant_calls('[TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g[ARGS]{}', "p") == (
        None,
        [("f", {"a": 1}), ("g", {})],
    )
    assert assistant_calls("plain prose about tools", "p") is None
    with pytest.raises(SchemaError, match=r"<\|python_tag\|> is not followed by JSON calls: 'brave_search.call"):
        assistant_calls('<|python_tag|>brave_search.call(query="x")', "p")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('<tool_call>{"name": "f", "arguments": {}}', "unclosed or unopened <tool_call> markup"),
        ('<tool_call>{"arguments": {}}</tool_call>', "<tool_call> call is not an object with a string 'name'"),
        ('<tool_call>{"name": "f", "arguments": [1]}</tool_call>', "arguments are list, not an object"),
        ('<tool_call>{"name": "f", "arguments": {}, "x": 1}</tool_call>', "unexpected key(s) ['x']"),
        ("<tool_call>__import__('os').system('x')</tool_call>", "neither JSON nor a Python literal"),
        (
            '<tool_call>{"name": "f", "arguments": {"a": "\\ud800"}}</tool_call>',
            "text-encoding: <tool_call> body holds",
        ),
    ],
)
def test_unreadable_hermes_markup_is_named(text, reason):
    from train.sources.call_markup import assistant_calls

    with pytest.raises(SchemaError) as err:
        assistant_calls(text, "conversations[2].value")
    assert err.value.path == "conversations[2].value" and reason in err.value.reason


def test_tools_block_and_results():
    from train.sources.call_markup import system_tools, tool_results

    assert system_tools("Call tools within <tools> </tools> tags.", "s") is None  # prose naming the tag
    kept, specs = system_tools(QWEN_SYSTEM, "s")
    assert (kept, specs) == ("You are a terse assistant.", [{"type": "function", "function": WEATHER}])
    with pytest.raises(SchemaError, match="the <tools> block of the system prompt is not JSON function definitions"):
        system_tools("<tools>\n{not json\n</tools>", "s")
    assert tool_results("plain result", "t") is None
    assert tool_results("<tool_response>free text</tool_response>", "t") == [(None, "free text")]
    with pytest.raises(SchemaError, match="text outside the <tool_response> blocks"):
        tool_results("note <tool_response>1</tool_response>", "t")


def test_record_tools_come_first_and_the_prompt_adds_the_others(tmp_path, capsys):
    other = {"name": "get_time", "description": "Time in a city", "parameters": {"type": "object", "properties": {}}}
    prompt = f"<tools>\n{json.dumps([WEATHER, other])}\n</tools>"
    record = {
        "id": "both",
        "tools": [{"type": "function", "function": WEATHER}],
        "conversations": [
            {"from": "system", "value": prompt},
            {"from": "human", "value": "hi"},
            {"from": "gpt", "value": "hello"},
        ],
    }
    code, written, rejects, _ = convert(tmp_path, "sharegpt", [record], capsys)
    assert code == 0 and rejects == []
    assert [t["function"]["name"] for t in written[0]["tools"]] == ["get_weather", "get_time"]
    assert [m["role"] for m in written[0]["messages"]] == ["user", "assistant"]


def test_markup_without_closers_is_read_in_linear_time():
    """``<tag>(.*?)</tag>`` rescans the text from every opener without a closer: 200,000 openers would stall."""
    import time

    from train.sources.call_markup import assistant_calls, system_tools, tool_results

    many = 200_000
    started = time.monotonic()
    with pytest.raises(SchemaError, match="unclosed or unopened <tool_call>"):
        assistant_calls("<tool_call>" * many, "p")
    assert system_tools("<tools>" * many, "s") is None
    section = f"# Tools\n\n<tools>{json.dumps(WEATHER)}</tools>\n<tool_call>{{<function-name>}}</tool_call>"
    assert system_tools("\n" * many + section, "s") == (None, [WEATHER])
    assert tool_results("<tool_response>" * many + "</tool_response>", "t") == [(None, "<tool_response>" * (many - 1))]
    assert time.monotonic() - started < 5
