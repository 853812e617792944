"""The Meta-Tool builder's stages on hand-written dialogues (tests/fixtures/builders/dialogues.jsonl)."""

from __future__ import annotations

import json

import pytest

from train.builders import bind, get_builder
from train.papers.metatool.builder import (
    SYSTEM_INSTRUCTION,
    BuildReport,
    MetaToolBuilder,
    MetaToolOptions,
    assign_worlds,
    chat_turns,
    closed_world,
    held_out,
    meta_call_arguments,
    open_world,
    rewrite_meta_calls,
    split_tools,
    unbuildable,
    with_get_user_input,
    with_instruction,
)
from train.papers.metatool.special import parse_rewrite, verify_meta_call, with_retrieved_tools
from train.papers.metatool.teacher import TeacherError
from train.schema import Conversation, Tool
from train.validate import check_conversation


@pytest.fixture
def dialogues(fixtures) -> dict[str, Conversation]:
    lines = (fixtures / "builders" / "dialogues.jsonl").read_text(encoding="utf-8").splitlines()
    convs = [Conversation.from_dict(json.loads(line)) for line in lines]
    return {c.id: c for c in convs}


def names(tools: list[Tool]) -> list[str]:
    return [t.name for t in tools]


def roles_and_calls(conv: Conversation) -> list[str]:
    out = []
    for m in conv.messages:
        calls = ",".join(c.name for c in m.tool_calls)
        out.append(f"{m.role}:{calls}" if calls else m.role)
    return out


# ---------------------------------------------------------------- tools and meta_tool arguments


def test_split_tools_by_whether_any_turn_calls_them(dialogues):
    invoked, unused = split_tools(dialogues["parallel"])
    assert (names(invoked), names(unused)) == (["convert_currency", "get_time"], ["get_weather"])
    invoked, unused = split_tools(dialogues["chat"])
    assert (names(invoked), names(unused)) == ([], ["get_news"])


def test_meta_call_arguments_are_the_description_and_required_parameter_texts(dialogues):
    tools = {t.name: t for t in dialogues["parallel"].tools}
    # "amount" has no description: its name stands in, as the retriever's index does
    assert meta_call_arguments(tools["convert_currency"]) == {
        "tool_description": "Convert an amount between currencies",
        "param_description": ["amount", "Target currency code"],
    }
    # no description, no required parameter: the name, and an empty list
    assert meta_call_arguments(tools["get_time"]) == {"tool_description": "get_time", "param_description": []}


def test_unbuildable_dialogues_say_why(dialogues):
    assert unbuildable(dialogues["undefined"]) == "invalid dialogue (undefined-tool)"
    assert unbuildable(dialogues["question_only"]) == "no assistant turn (nothing to train on or to score)"
    assert unbuildable(dialogues["weather"]) is None


# ---------------------------------------------------------------- worlds


def test_open_world_inserts_one_meta_turn_before_the_first_use_only(dialogues):
    built = open_world(dialogues["weather"])
    conv = built.conversation
    assert names(conv.tools) == ["meta_tool", "get_news"]
    assert roles_and_calls(conv) == [
        "user",
        "assistant:meta_tool",
        "tool",
        "assistant:get_weather",
        "tool",
        "assistant",
        "user",
        "assistant:get_weather",
        "tool",
        "assistant",
    ]
    assert (
        built.inserted == 1 and built.new_tools == {1: ["get_weather"]} and built.positions == [0, 3, 4, 5, 6, 7, 8, 9]
    )
    meta_call = conv.messages[1].tool_calls[0]
    assert meta_call.to_dict() == {
        "id": "meta_0",
        "type": "function",
        "function": {
            "name": "meta_tool",
            "arguments": {
                "tool_description": "Get the current weather for a city",
                "param_description": ["The city name"],
            },
        },
    }
    result = conv.messages[2]
    assert (result.tool_call_id, result.name) == ("meta_0", "meta_tool")
    assert json.loads(result.content) == {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": dialogues["weather"].tools[0].parameters,
    }
    # the original turns are untouched
    assert [m.to_dict() for m in conv.messages[3:]] == [m.to_dict() for m in dialogues["weather"].messages[1:]]


def test_tools_first_called_in_one_turn_share_one_meta_turn(dialogues):
    conv = open_world(dialogues["parallel"]).conversation
    assert roles_and_calls(conv) == [
        "system",
        "user",
        "assistant:meta_tool,meta_tool",
        "tool",
        "tool",
        "assistant:convert_currency,get_time",
        "tool",
        "tool",
        "assistant",
    ]
    assert [m.tool_call_id for m in conv.messages[3:5]] == ["meta_0", "meta_1"]
    assert [json.loads(m.content)["name"] for m in conv.messages[3:5]] == ["convert_currency", "get_time"]
    assert names(conv.tools) == ["meta_tool", "get_weather"]


def test_a_dependent_call_gets_its_own_meta_turn_after_the_first_result(dialogues):
    conv = open_world(dialogues["dependent"]).conversation
    assert roles_and_calls(conv) == [
        "user",
        "assistant:meta_tool",
        "tool",
        "assistant:search_hotels",
        "tool",
        "assistant:meta_tool",
        "tool",
        "assistant:book_hotel",
        "tool",
        "assistant",
    ]
    assert [c.id for m in conv.messages for c in m.tool_calls if c.name == "meta_tool"] == ["meta_0", "meta_1"]


def test_open_world_is_valid_once_retrieved_tools_count_as_defined(dialogues):
    conv = open_world(dialogues["weather"]).conversation
    assert "get_weather" not in names(conv.tools)  # no longer listed ...
    assert [p for p in check_conversation(conv) if p.severity == "error"] == []  # ... the meta_tool result defines it
    view = with_retrieved_tools(conv)
    assert names(view.tools) == ["meta_tool", "get_news", "get_weather"]
    assert check_conversation(view) == check_conversation(conv)


def test_closed_world_is_the_dialogue_itself(dialogues):
    conv = closed_world(dialogues["parallel"])
    assert conv.to_dict() == dialogues["parallel"].to_dict()


def test_half_half_mix_is_exact_and_seeded():
    ids = [f"d{i}" for i in range(101)]
    worlds = assign_worlds(ids, seed=3, open_fraction=0.5)
    assert sum(w == "open" for w in worlds.values()) == 50
    assert worlds == assign_worlds(list(reversed(ids)), seed=3, open_fraction=0.5)  # order does not matter
    assert worlds != assign_worlds(ids, seed=4, open_fraction=0.5)


def test_hold_out_depends_on_id_and_seed_only():
    chosen = [i for i in range(2000) if held_out(f"d{i}", 7, 0.2)]
    assert 340 < len(chosen) < 460
    assert chosen == [i for i in range(2000) if held_out(f"d{i}", 7, 0.2)]
    assert not any(held_out(f"d{i}", 7, 0.0) for i in range(100))


# ---------------------------------------------------------------- turns


def test_get_user_input_follows_chat_replies_not_answers_to_results(dialogues):
    assert chat_turns(dialogues["weather"]) == []  # both replies answer tool results
    assert chat_turns(dialogues["chat"]) == [1, 3]
    conv, added = with_get_user_input(dialogues["chat"])
    assert added == 2 and names(conv.tools) == ["get_news", "get_user_input"]
    assert conv.messages[1].content == "A three-line Japanese poem of 5, 7 and 5 syllables."
    assert [c.to_dict() for c in conv.messages[1].tool_calls] == [
        {"id": "input_0", "type": "function", "function": {"name": "get_user_input", "arguments": {}}}
    ]


def test_instruction_replaces_the_system_message(dialogues):
    conv = with_instruction(dialogues["parallel"])
    assert conv.messages[0].content == SYSTEM_INSTRUCTION and conv.messages[1].role == "user"
    assert len(conv.messages) == len(dialogues["parallel"].messages)
    assert SYSTEM_INSTRUCTION.startswith("You are a powerful and helpful chatbot.\nGiven the following functions,")
    assert "{TOOLS}" not in SYSTEM_INSTRUCTION


# ---------------------------------------------------------------- A.3 verification and rewrites


@pytest.mark.parametrize(
    ("call", "reason"),
    [
        ([1], "not a JSON object but list"),
        ({"name": "meta_tool"}, "keys must be exactly name and parameters, got ['name']"),
        ({"name": "meta-tool", "parameters": {}}, "name is 'meta-tool', not 'meta_tool'"),
        (
            {"name": "meta_tool", "parameters": {"tool_description": "x", "param_description": [], "k": 1}},
            "meta_tool takes tool_description and param_description only, not 'k'",
        ),
        ({"name": "meta_tool", "parameters": {"tool_description": "x"}}, "meta_tool needs param_description"),
        (
            {"name": "meta_tool", "parameters": {"tool_description": " ", "param_description": []}},
            "meta_tool needs a non-empty string tool_description",
        ),
        (
            {"name": "meta_tool", "parameters": {"tool_description": "x", "param_description": "y"}},
            "meta_tool param_description must be a list of strings",
        ),
        ({"name": "meta_tool", "parameters": {"tool_description": "x", "param_description": ["y"]}}, None),
    ],
)
def test_json_structure_verification(call, reason):
    assert verify_meta_call(call) == reason


def test_parse_rewrite_tolerates_one_code_fence():
    assert parse_rewrite('```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_rewrite(' {"a": 1} ') == {"a": 1}
    with pytest.raises(ValueError):
        parse_rewrite("Here it is: {}")


class ScriptedTeacher:
    """Answers rewrites from a script, in order; records what it was asked."""

    def __init__(self, answers):
        self.answers, self.asked = list(answers), []

    def rewrite(self, original, *, key, attempt):
        self.asked.append((key, attempt))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def meta(description, params):
    return json.dumps(
        {"name": "meta_tool", "parameters": {"tool_description": description, "param_description": params}}
    )


def by_description(original, rewrite):
    # a stand-in similarity: 1.0 for "close" rewrites, 0.5 otherwise
    return 1.0 if rewrite["tool_description"].startswith("Fetch") else 0.5


def test_rewrites_are_retried_verified_thresholded_and_counted(dialogues):
    conv = open_world(dialogues["dependent"]).conversation  # two meta_tool calls
    teacher = ScriptedTeacher(
        [
            "not json",
            TeacherError("HTTP 500 from x"),
            '{"name": "meta_tool"}',  # call 1: three failures -> dropped
            meta("Something else", ["x"]),
            meta("Fetch hotels in a city", ["The city"]),  # call 2: kept at attempt 2
        ]
    )
    options = MetaToolOptions(rewrite_attempts=3, similarity_threshold=0.9)
    report = BuildReport()
    out, kept = rewrite_meta_calls(conv, teacher, by_description, options, report)
    assert kept == 1
    assert teacher.asked == [
        ("dependent/meta_0", 0),
        ("dependent/meta_0", 1),
        ("dependent/meta_0", 2),
        ("dependent/meta_1", 0),
        ("dependent/meta_1", 1),
    ]
    calls = [c for m in out.messages for c in m.tool_calls if c.name == "meta_tool"]
    assert calls[0].arguments == conv.messages[1].tool_calls[0].arguments  # dropped: the original stays
    assert calls[1].arguments == {"tool_description": "Fetch hotels in a city", "param_description": ["The city"]}
    assert dict(report.counts) == {
        "rewrite_attempts": 5,
        "rewrites_dropped": 1,
        "rewrites_kept": 1,
        "rewrites_unchanged": 0,
    }
    assert dict(report.rewrite_failures) == {
        "not JSON": 1,
        "teacher: HTTP 500 from x": 1,
        "structure: keys must be exactly name and parameters, got …": 1,
        "similarity below 0.9": 1,
    }


# ---------------------------------------------------------------- the whole builder


def test_builder_options_are_checked():
    with pytest.raises(ValueError, match=r"unknown argument\(s\) \['teachr'\]; valid: alpha, embedder,"):
        MetaToolOptions.from_args({"teachr": {}})
    with pytest.raises(ValueError, match="open_fraction must be in"):
        MetaToolOptions.from_args({"open_fraction": 2})
    with pytest.raises(ValueError, match="unknown teacher kind 'gpt'"):
        bind("metatool", 0, {"teacher": {"kind": "gpt"}})
    with pytest.raises(ValueError, match="unknown data builder 'nope'; valid builders: metatool"):
        get_builder("nope")


def test_build_accounts_for_every_dialogue_and_stamps_the_world(dialogues):
    dropped: list[str] = []
    convs = [*dialogues.values(), dialogues["chat"]]  # a repeated id
    out = list(bind("metatool", 5, {"embedder": "hash-bow"})(convs, on_drop=dropped.append))
    assert [c.id for c in out] == ["weather", "parallel", "chat", "dependent"]
    assert dropped == [
        "invalid dialogue (undefined-tool)",
        "no assistant turn (nothing to train on or to score)",
        "repeated id 'chat'",
    ]
    assert sorted(c.meta["world"] for c in out) == ["closed", "closed", "open", "open"]
    for conv in out:
        assert conv.meta["source"] == "fixture"
        has_meta = any(c.name == "meta_tool" for m in conv.messages for c in m.tool_calls)
        assert has_meta == (conv.meta["world"] == "open" and conv.id != "chat")
        assert conv.messages[0].content == SYSTEM_INSTRUCTION
        for message in conv.messages:  # every call turn has its reasoning
            if message.tool_calls and message.tool_calls[0].name != "get_user_input":
                assert message.content and message.content.strip()


def test_holdout_in_the_builder_is_reported_as_a_drop(dialogues):
    dropped: list[str] = []
    builder = MetaToolBuilder(MetaToolOptions(holdout_fraction=0.5, embedder="hash-bow"), seed=11)
    out = list(builder.build(list(dialogues.values()), on_drop=dropped.append))
    held = [c.id for c in dialogues.values() if held_out(c.id, 11, 0.5) and unbuildable(c) is None]
    assert dropped.count("held out for Meta-Bench") == len(held) == builder.report.counts["held_out"]
    assert len(out) + len(dropped) == len(dialogues)


def test_offline_build_is_deterministic(dialogues):
    def run(seed):
        return [
            json.dumps(c.to_dict())
            for c in get_builder("metatool")(list(dialogues.values()), seed=seed, embedder="hash-bow")
        ]

    assert run(1) == run(1)
    assert run(1) != run(2)
