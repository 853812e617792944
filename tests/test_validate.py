"""Tool-aware validation: one test per rule (a conversation that triggers it, one that does not),
severity settings, and the ``data validate`` command on small files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from train.cli import main
from train.schema import Conversation, ToolLibrary, ToolQuery
from train.validate import (
    DEFAULT_SEVERITIES,
    Problem,
    check_conversation,
    check_library,
    check_query,
    json_path,
    link_results,
    resolve_severities,
)

WEATHER_PARAMS = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["city"],
    "additionalProperties": False,
}


def tool(name: str = "get_weather", parameters: Any = None) -> dict:
    params = WEATHER_PARAMS if parameters is None else parameters
    return {"type": "function", "function": {"name": name, "description": "", "parameters": params}}


def call(name: str = "get_weather", arguments: dict | None = None, call_id: str | None = None) -> dict:
    out: dict[str, Any] = {
        "type": "function",
        "function": {"name": name, "arguments": {"city": "Paris"} if arguments is None else arguments},
    }
    if call_id is not None:
        out["id"] = call_id
    return out


def user(text: str = "Weather in Paris?") -> dict:
    return {"role": "user", "content": text}


def system(text: str = "You are helpful.") -> dict:
    return {"role": "system", "content": text}


def calls(*items: dict) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": list(items)}


def answer(text: str = "It is sunny.") -> dict:
    return {"role": "assistant", "content": text}


def result(call_id: str | None = None, name: str | None = "get_weather", content: str = '{"sky": "sunny"}') -> dict:
    out: dict[str, Any] = {"role": "tool", "content": content}
    if call_id is not None:
        out["tool_call_id"] = call_id
    if name is not None:
        out["name"] = name
    return out


def conv(*messages: dict, tools: list | None = None, meta: dict | None = None) -> Conversation:
    return Conversation.from_dict(
        {"id": "c1", "tools": [tool()] if tools is None else tools, "messages": list(messages), "meta": meta or {}}
    )


def problems(*messages: dict, **kwargs: Any) -> list[Problem]:
    return check_conversation(conv(*messages, **kwargs))


def E(code: str, where: str, message: str) -> Problem:
    return Problem("error", code, where, message)


def W(code: str, where: str, message: str) -> Problem:
    return Problem("warning", code, where, message)


def test_a_rich_valid_conversation_has_no_problems():
    two_tools = [tool(), tool("get_time", {"type": "object", "properties": {"tz": {"type": "string"}}})]
    found = problems(
        system(),
        user("Weather in Paris and Oslo, and the time in Tokyo?"),
        calls(
            call(call_id="a"),
            call(arguments={"city": "Oslo", "unit": "celsius", "days": [1, 2]}, call_id="b"),
            call("get_time", {"tz": "Asia/Tokyo"}, "c"),
        ),
        result("a"),
        result("b"),
        result("c", name="get_time", content="09:00"),
        answer("Sunny in both; 9 am in Tokyo."),
        user("Thanks!"),
        answer("You're welcome."),
        tools=two_tools,
    )
    assert found == []


# ------------------------------------------------------------------ undefined-tool


def test_undefined_tool():
    assert problems(user(), calls(call("get_time", {})), tools=[tool()]) == [
        E(
            "undefined-tool",
            "messages[1].tool_calls[0].function.name",
            "'get_time' is not a defined tool (defined: get_weather)",
        )
    ]
    assert problems(user(), calls(call("get_weather")), tools=[tool()]) == []


def test_undefined_tool_when_the_conversation_defines_none():
    assert problems(user(), calls(call()), tools=[]) == [
        E(
            "undefined-tool",
            "messages[1].tool_calls[0].function.name",
            "'get_weather' is not a defined tool (the conversation defines no tools)",
        )
    ]


# ------------------------------------------------------------------ arguments-schema


def test_arguments_schema_reports_each_violation_at_its_json_path():
    bad = {"unit": "kelvin", "days": [1, "two"], "extra": True}
    assert problems(user(), calls(call(arguments=bad))) == [
        E("arguments-schema", "messages[1].tool_calls[0].function.arguments", "'city' is a required property"),
        E(
            "arguments-schema",
            "messages[1].tool_calls[0].function.arguments",
            "Additional properties are not allowed ('extra' was unexpected)",
        ),
        E("arguments-schema", "messages[1].tool_calls[0].function.arguments.days[1]", "'two' is not of type 'integer'"),
        E(
            "arguments-schema",
            "messages[1].tool_calls[0].function.arguments.unit",
            "'kelvin' is not one of ['celsius', 'fahrenheit']",
        ),
    ]


def test_arguments_schema_wrong_type():
    assert problems(user(), calls(call(arguments={"city": 75001}))) == [
        E("arguments-schema", "messages[1].tool_calls[0].function.arguments.city", "75001 is not of type 'string'")
    ]
    assert problems(user(), calls(call(arguments={"city": "Paris", "unit": "celsius", "days": [0]}))) == []


def test_arguments_schema_names_odd_keys_in_brackets_and_clips_huge_values():
    params = {"type": "object", "properties": {"two words": {"type": "integer"}}}
    found = problems(user(), calls(call("f", {"two words": "x" * 10_000})), tools=[tool("f", params)])
    assert [(p.code, p.where) for p in found] == [
        ("arguments-schema", 'messages[1].tool_calls[0].function.arguments["two words"]')
    ]
    assert len(found[0].message) == 200 and found[0].message.endswith("... (10027 chars)")


def test_arguments_too_deep_for_a_recursive_schema_are_reported_not_raised():
    recursive = {"type": "object", "properties": {"x": {"$ref": "#"}}}
    deep: dict = {}
    for _ in range(400):
        deep = {"x": deep}
    assert problems(user(), calls(call("f", deep)), tools=[tool("f", recursive)]) == [
        E("arguments-schema", "messages[1].tool_calls[0].function.arguments", "arguments nested too deeply to check")
    ]
    assert problems(user(), calls(call("f", {"x": {"x": {}}})), tools=[tool("f", recursive)]) == []


# ------------------------------------------------------------------ invalid-tool-schema


def test_invalid_tool_schema_not_a_json_schema_and_its_calls_go_unchecked():
    bfcl_style = {"type": "dict", "properties": {"city": {"type": "string"}}}
    assert problems(user(), calls(call(arguments={"city": 1})), tools=[tool(parameters=bfcl_style)]) == [
        E(
            "invalid-tool-schema",
            "tools[0].function.parameters.type",
            "'get_weather': not a valid JSON Schema: 'dict' is not valid under any of the given schemas",
        )
    ]


def test_invalid_tool_schema_nested_fault_has_its_path():
    params = {"type": "object", "properties": {"n": {"type": "float"}}}
    assert [p.where for p in problems(user(), tools=[tool(parameters=params)])] == [
        "tools[0].function.parameters.properties.n.type"
    ]


def test_invalid_tool_schema_top_level_type_must_be_object():
    assert problems(user(), tools=[tool(parameters={"type": "string"})]) == [
        E(
            "invalid-tool-schema",
            "tools[0].function.parameters.type",
            "'get_weather': top-level type 'string', expected 'object'",
        )
    ]
    assert problems(user(), tools=[tool(parameters={"properties": {}})]) == [
        E("invalid-tool-schema", "tools[0].function.parameters", "'get_weather': no top-level type, expected 'object'")
    ]
    assert problems(user(), tools=[tool(parameters={"type": "object"})]) == []


def test_invalid_tool_schema_unresolvable_ref_is_found_when_applied_once():
    params = {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}
    found = problems(user(), calls(call("f", {"a": 1}), call("f", {"a": 2})), tools=[tool("f", params)])
    assert [(p.code, p.where) for p in found] == [("invalid-tool-schema", "tools[0].function.parameters")]
    assert found[0].message.startswith("'f': unresolvable $ref")


# ------------------------------------------------------------------ duplicate-tool


def test_duplicate_tool():
    assert problems(user(), tools=[tool(), tool("get_time"), tool()]) == [
        E("duplicate-tool", "tools[2].function.name", "'get_weather' is already defined at tools[0]")
    ]
    assert problems(user(), tools=[tool(), tool("get_time")]) == []


# ------------------------------------------------------------------ orphan-tool-result and linking


def test_orphan_result_whose_id_matches_no_call():
    assert problems(user(), calls(call(call_id="a")), result("b"), answer()) == [
        E("orphan-tool-result", "messages[2]", "tool_call_id 'b' matches no earlier call"),
        W(
            "unanswered-call",
            "messages[1].tool_calls[0]",
            "call to 'get_weather' has no result: the conversation ends without its result",
        ),
    ]
    assert problems(user(), calls(call(call_id="a")), result("a"), answer()) == []


def test_orphan_result_without_id_while_calls_have_ids():
    assert problems(user(), calls(call(call_id="a")), result(None)) == [
        E(
            "orphan-tool-result",
            "messages[2]",
            "no tool_call_id, but the call it would answer (messages[1].tool_calls[0]) has id 'a'",
        ),
        W(
            "unanswered-call",
            "messages[1].tool_calls[0]",
            "call to 'get_weather' has no result: the conversation ends without its result",
        ),
    ]


def test_results_without_ids_answer_the_earliest_unanswered_call_of_their_name():
    two = [tool(), tool("get_time", {"type": "object"})]
    messages = [
        user(),
        calls(call(), call("get_time", {}), call(arguments={"city": "Oslo"})),
        result(name="get_time"),
        result(),
        result(),
        answer(),
    ]
    assert problems(*messages, tools=two) == []
    linking = link_results(conv(*messages, tools=two).messages)
    assert [(m, ref.where) for m, ref in linking.answered] == [
        (2, "messages[1].tool_calls[1]"),
        (3, "messages[1].tool_calls[0]"),
        (4, "messages[1].tool_calls[2]"),
    ]
    # a nameless result answers the earliest unanswered call of any name
    assert problems(user(), calls(call()), result(name=None), answer()) == []


def test_orphan_result_without_id_and_no_call_of_its_name():
    assert problems(user(), calls(call()), result(), result(), answer()) == [
        E("orphan-tool-result", "messages[3]", "no unanswered earlier call to 'get_weather'")
    ]


def test_orphan_result_answering_an_already_answered_or_closed_call():
    assert problems(user(), calls(call(call_id="a")), result("a"), result("a"), answer()) == [
        E("orphan-tool-result", "messages[3]", "tool_call_id 'a': that call was already answered at messages[2]")
    ]
    assert problems(
        user(), calls(call(call_id="a")), user("never mind"), calls(call(call_id="b")), result("a"), answer()
    ) == [
        E(
            "orphan-tool-result",
            "messages[4]",
            "tool_call_id 'a': that call was left unanswered before the user turn at messages[2]",
        ),
        W(
            "unanswered-call",
            "messages[1].tool_calls[0]",
            "call to 'get_weather' has no result: the user turn at messages[2] came first",
        ),
        W(
            "unanswered-call",
            "messages[3].tool_calls[0]",
            "call to 'get_weather' has no result: the conversation ends without its result",
        ),
    ]


def test_result_name_mismatch_is_a_warning():
    assert problems(user(), calls(call(call_id="a")), result("a", name="get_time"), answer()) == [
        W(
            "result-name-mismatch",
            "messages[2].name",
            "result names 'get_time' but answers messages[1].tool_calls[0], a call to 'get_weather'",
        )
    ]


# ------------------------------------------------------------------ unanswered-call


def test_unanswered_call_before_the_next_user_turn():
    assert problems(user(), calls(call(call_id="a")), user("hello?"), answer()) == [
        W(
            "unanswered-call",
            "messages[1].tool_calls[0]",
            "call to 'get_weather' has no result: the user turn at messages[2] came first",
        )
    ]


def test_a_trailing_call_turn_is_an_sft_target_not_a_loose_end():
    assert problems(system(), user(), calls(call(call_id="a"), call(arguments={"city": "Oslo"}, call_id="b"))) == []


def test_a_partly_answered_call_turn_leaves_the_rest_unanswered():
    assert problems(user(), calls(call(call_id="a"), call(arguments={"city": "Oslo"}, call_id="b")), result("a")) == [
        W(
            "unanswered-call",
            "messages[1].tool_calls[1]",
            "call to 'get_weather' has no result: the conversation ends without its result",
        )
    ]


# ------------------------------------------------------------------ role-order, consecutive-user


def test_role_order_system_not_first():
    assert problems(user(), system(), answer()) == [E("role-order", "messages[1]", "a system message must come first")]
    assert problems(system(), user(), answer()) == []


def test_role_order_tool_result_not_after_a_call_turn():
    assert problems(user(), result(), answer()) == [
        E("role-order", "messages[1]", "a tool result must follow an assistant call turn, not a user message"),
        E("orphan-tool-result", "messages[1]", "no unanswered earlier call to 'get_weather'"),
    ]
    assert problems(user(), calls(call()), answer("checking"), result()) == [
        E(
            "role-order",
            "messages[3]",
            "a tool result must follow an assistant call turn, not an assistant message without tool calls",
        )
    ]
    assert problems(result(None, name=None), user(), answer())[0] == E(
        "role-order", "messages[0]", "a tool result must follow an assistant call turn, not nothing"
    )


def test_role_order_no_user_message_or_no_messages():
    assert problems(system(), answer()) == [E("role-order", "messages", "the conversation has no user message")]
    assert problems() == [E("role-order", "messages", "the conversation has no messages")]


def test_legitimate_endings_and_openings_are_not_flagged():
    assert problems(system(), user()) == []  # an eval prompt without an answer (BFCL)
    assert problems(user(), calls(call()), result()) == []  # a prompt waiting for the reply to a result
    assert (
        problems(user(), answer("Let me check."), calls(call()), result(), answer()) == []
    )  # two assistant turns in a row


def test_assistant_first_is_a_warning():
    """An assistant greeting before any user message renders in qwen2_5/chatml/mistral, but Llama 3.1's
    template would relabel it as the user message carrying the tools: a warning, not silence."""
    why = (
        "the conversation opens with an assistant turn, before any user message "
        "(llama3_1 refuses it when the tools go in the first user message)"
    )
    greeting = answer("Hi! How can I help?")
    assert problems(greeting, user(), answer()) == [W("assistant-first", "messages[0]", why)]
    assert problems(system(), greeting, user(), answer()) == [W("assistant-first", "messages[1]", why)]
    assert problems(user(), answer("Hi!")) == []
    # no user message at all is the bigger problem, reported alone
    assert [p.code for p in problems(system(), answer())] == ["role-order"]


def test_consecutive_user_is_a_warning():
    assert problems(user("Weather?"), user("In Paris."), answer()) == [
        W("consecutive-user", "messages[1]", "two user messages in a row (messages[0] and messages[1])")
    ]


# ------------------------------------------------------------------ empty-assistant


def test_empty_assistant():
    assert problems(user(), answer("  \n"), user(), {"role": "assistant", "content": None}) == [
        E("empty-assistant", "messages[1]", "assistant message has neither content nor tool calls"),
        E("empty-assistant", "messages[3]", "assistant message has neither content nor tool calls"),
    ]
    assert problems(user(), calls(call())) == []


# ------------------------------------------------------------------ duplicate-call-id


def test_duplicate_call_id():
    found = problems(
        user(),
        calls(call(call_id="x"), call(arguments={"city": "Oslo"}, call_id="x")),
        result("x"),
        result("x"),
        answer(),
    )
    assert found == [
        E("duplicate-call-id", "messages[1].tool_calls[1].id", "id 'x' is already used by messages[1].tool_calls[0]")
    ]
    assert (
        problems(
            user(),
            calls(call(call_id="x"), call(arguments={"city": "Oslo"}, call_id="y")),
            result("x"),
            result("y"),
            answer(),
        )
        == []
    )


# ------------------------------------------------------------------ text-encoding, replacement-char


def test_text_encoding_lone_surrogate_and_nul_anywhere():
    found = problems(
        user("bad \ud83d half emoji"),
        calls(call(arguments={"city": "Par\x00is"})),
        tools=[tool(parameters={**WEATHER_PARAMS, "description": "ok"})],
        meta={"note\udc80": "x"},
    )
    assert found == [
        E("text-encoding", "messages[0].content", "lone surrogate U+D83D at character 4"),
        E("text-encoding", "messages[1].tool_calls[0].function.arguments.city", "NUL character at character 3"),
        E("text-encoding", 'meta["note\udc80"]', "lone surrogate U+DC80 at character 4"),
    ]
    assert problems(user("Wetter in München? 🌦️ 天气"), answer("晴れ")) == []
    assert problems(user("the escape \\u0000 written out is fine"), answer()) == []


def test_replacement_char_is_a_warning():
    assert problems(user("caf\ufffd"), answer()) == [
        W(
            "replacement-char",
            "messages[0].content",
            "replacement character U+FFFD (text decoded lossily upstream) at character 3",
        )
    ]


# ------------------------------------------------------------------ severities


def test_severities_override_defaults_and_ignore_drops_a_code():
    c = conv(user("a"), user("b"), calls(call(call_id="a")), user("c"))
    assert [(p.severity, p.code) for p in check_conversation(c)] == [
        ("warning", "consecutive-user"),
        ("warning", "unanswered-call"),
    ]
    assert [
        (p.severity, p.code) for p in check_conversation(c, {"unanswered-call": "error", "consecutive-user": "ignore"})
    ] == [("error", "unanswered-call")]


def test_severity_settings_are_checked_and_strict_raises_warnings_but_explicit_wins():
    with pytest.raises(ValueError, match="unknown check 'no-such-rule'"):
        resolve_severities({"no-such-rule": "error"})
    with pytest.raises(ValueError, match="unknown severity 'fatal'"):
        resolve_severities({"role-order": "fatal"})
    strict = resolve_severities(strict=True)
    assert set(strict.values()) == {"error"}
    assert resolve_severities({"consecutive-user": "warning"}, strict=True)["consecutive-user"] == "warning"
    assert resolve_severities() == DEFAULT_SEVERITIES


def test_json_path():
    assert json_path("args", ["city", 0, "two words", "é"]) == 'args.city[0]["two words"]["é"]'
    assert json_path("", ["meta"]) == "meta"


# ------------------------------------------------------------------ queries and libraries


def test_query_checks():
    q = ToolQuery(id="q1", query=" ", gold_tools=["a", "b", "a"])
    assert check_query(q, library={"a"}) == [
        E("empty-query", "query", "the query is empty"),
        E("unknown-gold-tool", "gold_tools[1]", "'b' is not in the tool library"),
        W("duplicate-gold-tool", "gold_tools[2]", "'a' is listed twice"),
    ]
    assert check_query(ToolQuery(id="q2", query="Book a table", gold_tools=[])) == [
        W("empty-gold", "gold_tools", "no gold tool (fine for 'no tool needed' queries)")
    ]
    assert check_query(ToolQuery(id="q3", query="Book a table", gold_tools=["OpenTable"]), library={"OpenTable"}) == []


def test_library_checks():
    lib = ToolLibrary.from_dict({"id": "lib", "tools": [tool(), tool(parameters={"type": "dict"}), tool("x\x00")]})
    assert [(p.code, p.where) for p in check_library(lib)] == [
        ("text-encoding", "tools[2].function.name"),
        ("duplicate-tool", "tools[1].function.name"),
        ("invalid-tool-schema", "tools[1].function.parameters.type"),
    ]


# ------------------------------------------------------------------ the command


def write_lines(path: Path, records: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


GOOD = conv(user(), calls(call(call_id="a")), result("a"), answer()).to_dict()
WARNS = conv(user("a"), user("b"), answer()).to_dict() | {"id": "w1"}
BAD = conv(user(), calls(call("nope", {}))).to_dict() | {"id": "e1"}


def test_validate_command_reports_lines_and_summary(tmp_path, capsys):
    path = write_lines(
        tmp_path / "d.jsonl",
        [
            GOOD,
            WARNS,
            "",
            BAD,
            '{"id": "t", "messages": [',
            {"id": "s", "messages": [{"role": "user", "content": True}]},
        ],
    )
    assert main(["data", "validate", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == [
        (
            f"{path}:2 id=w1 warning consecutive-user at messages[1]: two user messages in a row (messages[0] and "
            "messages[1])"
        ),
        (
            f"{path}:4 id=e1 error undefined-tool at messages[1].tool_calls[0].function.name: 'nope' is not a defined "
            "tool (defined: get_weather)"
        ),
        f"{path}:5 id=? error unreadable-line at line: invalid JSON at column 26: Expecting value",
        f"{path}:6 id=s error schema at messages[0].content: expected str, got bool",
    ]
    table = [line.split() for line in out[4:]]
    assert table == [
        ["records", "read", "5"],
        ["valid", "2"],
        ["with", "errors", "3"],
        ["with", "warnings", "1"],
        ["blank", "lines", "(skipped)", "1"],
        ["error", "schema", "1"],
        ["error", "undefined-tool", "1"],
        ["error", "unreadable-line", "1"],
        ["warning", "consecutive-user", "1"],
    ]


def test_validate_command_exit_codes_strict_and_severity(tmp_path, capsys):
    path = write_lines(tmp_path / "w.jsonl", [GOOD, WARNS])
    assert main(["data", "validate", str(path)]) == 0
    assert main(["data", "validate", str(path), "--strict"]) == 1
    assert main(["data", "validate", str(path), "--strict", "--severity", "consecutive-user=ignore"]) == 0
    assert main(["data", "validate", str(tmp_path / "missing.jsonl")]) == 2
    assert main(["data", "validate", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"error: {tmp_path / 'missing.jsonl'}: cannot read (No such file or directory)" in err
    with pytest.raises(SystemExit) as exc:
        main(["data", "validate", str(path), "--severity", "consecutive-user=fatal"])
    assert exc.value.code == 2


def test_validate_command_max_report_and_json(tmp_path, capsys):
    path = write_lines(tmp_path / "e.jsonl", [BAD] + [BAD | {"id": f"e{n}"} for n in range(2, 6)])  # ids unique
    assert main(["data", "validate", str(path), "--max-report", "2"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" ")[0] for line in out[:2]] == [f"{path}:1", f"{path}:2"]
    assert out[2] == "... and 3 more"
    assert main(["data", "validate", str(path), "--max-report", "1", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["summary"] == {
        "records": 5,
        "valid": 0,
        "with_errors": 5,
        "with_warnings": 0,
        "blank_lines": 0,
        "problems": [{"severity": "error", "code": "undefined-tool", "count": 5}],
    }
    assert document["reports"] == [
        {
            "line": 1,
            "id": "e1",
            "severity": "error",
            "code": "undefined-tool",
            "where": "messages[1].tool_calls[0].function.name",
            "message": "'nope' is not a defined tool (defined: get_weather)",
        }
    ]
    assert document["more"] == 4


def test_validate_command_checks_queries_against_a_library(tmp_path, capsys):
    library = write_lines(
        tmp_path / "lib.jsonl", [{"id": "lib", "tools": [tool("OpenTable"), tool("Weather")], "meta": {}}]
    )
    queries = write_lines(
        tmp_path / "q.jsonl",
        [
            {"id": "q1", "query": "Book a table", "gold_tools": ["OpenTable"]},
            {"id": "q2", "query": "Fly me", "gold_tools": ["Kayak"]},
        ],
    )
    assert main(["data", "validate", str(queries)]) == 0
    assert main(["data", "validate", str(queries), "--library", str(library)]) == 1
    assert (
        f"{queries}:2 id=q2 error unknown-gold-tool at gold_tools[0]: 'Kayak' is not in the tool library"
        in capsys.readouterr().out
    )
    assert main(["data", "validate", str(queries), "--library", str(tmp_path / "nope.jsonl")]) == 2
