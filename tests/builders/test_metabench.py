"""Meta-Bench construction on hand-written dialogues: rows, categories, difficulty, pools; scored by its scorer."""

from __future__ import annotations

import json

import pytest

from train.papers.metatool.builder import SYSTEM_INSTRUCTION, MetaToolOptions
from train.papers.metatool.metabench import score_metabench
from train.papers.metatool.metabench_build import (
    BenchOptions,
    MetaBenchBuilder,
    consecutive_assistant,
    library_record,
    tool_library,
)
from train.papers.metatool.special import with_retrieved_tools
from train.papers.metatool.teacher import OfflineTeacher
from train.schema import Conversation, Message, Tool
from train.validate import check_conversation


@pytest.fixture
def dialogues(fixtures) -> dict[str, Conversation]:
    lines = (fixtures / "builders" / "dialogues.jsonl").read_text(encoding="utf-8").splitlines()
    return {c.id: c for c in (Conversation.from_dict(json.loads(line)) for line in lines)}


def bench(dialogues, ids, hard_fraction, pool_size=1000):
    library, _ = tool_library(dialogues.values())
    builder = MetaBenchBuilder(
        MetaToolOptions(), BenchOptions(pool_size=pool_size, hard_fraction=hard_fraction), 3, OfflineTeacher(3)
    )
    rows = {row.id: row for row in builder.build([dialogues[i] for i in ids], library)}
    return rows, builder


def tool_names(row: Conversation) -> list[str]:
    return [t.name for t in row.tools]


def test_library_keeps_the_first_definition_and_counts_conflicts(dialogues):
    library, conflicts = tool_library(dialogues.values())
    assert [t.name for t in library] == [
        "get_weather",
        "get_news",
        "convert_currency",
        "get_time",
        "search_hotels",
        "book_hotel",
    ]
    assert conflicts == 0
    other = Conversation(id="x", tools=[Tool("get_news", "Another definition")], messages=[])
    assert tool_library([*dialogues.values(), other])[1] == 1
    assert library_record(library).to_dict()["id"] == "metabench-library"


def test_simple_rows_of_a_call_dialogue(dialogues):
    rows, builder = bench(dialogues, ["weather"], hard_fraction=0.0, pool_size=3)
    assert list(rows) == [
        "weather/single_call/closed",
        "weather/function_existing/open",
        "weather/function_missing/open/retrieve",
        "weather/function_missing/open/call",
    ]
    closed, existing, retrieve, call = rows.values()
    assert tool_names(closed) == ["get_weather", "get_user_input"]  # simple: the unused get_news is left out
    assert tool_names(existing) == ["meta_tool", "get_weather", "get_user_input"]
    assert tool_names(retrieve) == tool_names(call) == ["meta_tool", "get_user_input"]
    for row in rows.values():
        assert row.messages[0].content == SYSTEM_INSTRUCTION and row.meta["difficulty"] == "simple"
        assert row.meta["turn"] == len(row.messages) - 1 and row.meta["dialogue"] == "weather"
    assert [m.role for m in closed.messages] == ["system", "user", "assistant"]
    assert [c.name for c in closed.messages[2].tool_calls] == ["get_weather"]
    assert (closed.meta["category"], closed.meta["world"]) == ("single_call", "closed")
    assert [c.name for c in retrieve.messages[-1].tool_calls] == ["meta_tool"]
    assert retrieve.meta["gold_tools"] == ["get_weather"] and retrieve.meta["library"] == "library.jsonl"
    assert len(retrieve.meta["pool"]) == 3 and "get_weather" in retrieve.meta["pool"]
    assert [m.role for m in call.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert [c.name for c in call.messages[-1].tool_calls] == ["get_weather"] and "pool" not in call.meta
    assert dict(builder.report.rows) == {
        "simple/closed/single_call": 1,
        "simple/open/function_existing": 1,
        "simple/open/function_missing": 2,
    }


def test_hard_rows_keep_unused_tools_and_pad_to_five(dialogues):
    rows, _ = bench(dialogues, ["weather", "parallel"], hard_fraction=1.0)
    library = {"get_weather", "get_news", "convert_currency", "get_time", "search_hotels", "book_hotel"}
    closed = rows["weather/single_call/closed"]
    ordinary = tool_names(closed)[:-1]
    assert ordinary[:2] == ["get_weather", "get_news"] and len(ordinary) == 5 and set(ordinary) <= library
    missing = tool_names(rows["weather/function_missing/open/retrieve"])
    # the unused get_news and the four other library tools (5 ordinary ones), meta_tool, get_user_input
    assert missing[:2] == ["meta_tool", "get_news"] and "get_weather" not in missing and len(missing) == 7
    multi = rows["parallel/multi_call/closed"]
    assert (multi.meta["category"], multi.meta["difficulty"]) == ("multi_call", "hard")
    assert tool_names(multi)[:3] == ["convert_currency", "get_time", "get_weather"] and len(tool_names(multi)) == 6
    assert rows["parallel/function_missing/open/retrieve"].meta["gold_tools"] == ["convert_currency", "get_time"]


def test_chat_rows_in_both_worlds(dialogues):
    rows, _ = bench(dialogues, ["chat"], hard_fraction=0.0)
    assert list(rows) == ["chat/chat/closed", "chat/chat/open"]
    closed, opened = rows.values()
    assert tool_names(closed) == ["get_user_input"] and tool_names(opened) == ["meta_tool", "get_user_input"]
    assert [m.role for m in opened.messages] == ["system", "user", "assistant"]
    gold = opened.messages[-1]
    assert gold.content == "A three-line Japanese poem of 5, 7 and 5 syllables." and [
        c.name for c in gold.tool_calls
    ] == ["get_user_input"]


def test_consecutive_assistant_dialogues_are_left_out(dialogues):
    doubled = Conversation(
        id="doubled",
        tools=dialogues["chat"].tools,
        messages=[
            Message(role="user", content="hi"),
            Message(role="assistant", content="a"),
            Message(role="assistant", content="b"),
        ],
    )
    assert consecutive_assistant(doubled) and not consecutive_assistant(dialogues["weather"])
    rows, builder = bench({**dialogues, "doubled": doubled}, ["doubled", "chat"], hard_fraction=0.0)
    assert list(rows) == ["chat/chat/closed", "chat/chat/open"]
    assert dict(builder.report.skipped) == {"two assistant turns in a row (left out of Meta-Bench, A.1)": 1}
    assert builder.report.dialogues == 1


def test_rows_validate_and_their_gold_scores_perfectly(dialogues):
    rows, _ = bench(dialogues, ["weather", "parallel", "chat", "dependent"], hard_fraction=0.5)
    references = [row.to_dict() for row in rows.values()]
    for row in rows.values():
        assert [p for p in check_conversation(with_retrieved_tools(row)) if p.severity == "error"] == []
    gold = []
    for ref in references:
        turn = ref["messages"][ref["meta"]["turn"]]
        calls = [
            {"name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in turn.get("tool_calls", [])
        ]
        rankings = [[name] for name in ref["meta"].get("gold_tools", [])]  # one ranking per meta_tool call
        gold.append({"id": ref["id"], "content": turn.get("content"), "tool_calls": calls, "retrieved": rankings})
    result = score_metabench(gold, references)
    overall = result["overall"]
    assert (overall["t_acc"], overall["p_acc"], overall["irr"], overall["fmd"], overall["hr@1"]) == (
        1.0,
        1.0,
        1.0,
        1.0,
        1.0,
    )
    assert (overall["call_turns"], overall["irrelevance_turns"], overall["fmd_turns"]) == (9, 2, 3)
    assert result["reference_errors"] == []
    silent = score_metabench([{"id": ref["id"], "content": "ok", "tool_calls": []} for ref in references], references)[
        "overall"
    ]
    assert (silent["t_acc"], silent["irr"], silent["fmd"]) == (0.0, 1.0, 0.0)


def test_pool_retriever_ranks_only_the_pool(dialogues):
    from train.papers.metatool.pool import PoolRetriever
    from train.schema import ToolCall

    library, _ = tool_library(dialogues.values())
    retriever = PoolRetriever(library, embedder="hash-bow", k=3)
    weather = ToolCall(
        "meta_tool", {"tool_description": "Get the current weather for a city", "param_description": ["The city name"]}
    )
    broken = ToolCall("meta_tool", {"tool_description": "x", "extra": 1})
    hotels = ToolCall(
        "meta_tool", {"tool_description": "Book a hotel room", "param_description": ["The hotel identifier"]}
    )
    pool = ["get_news", "get_weather", "book_hotel", "not_in_library"]
    rankings = retriever.rankings(pool, [weather, ToolCall("get_news", {}), broken, hotels])
    assert [r[0] for r in rankings if r] == ["get_weather", "book_hotel"]
    assert rankings[1] == [] and all(set(r) <= set(pool) for r in rankings) and [len(r) for r in rankings] == [3, 0, 3]
    assert retriever.rankings(["get_news"], [weather]) == [["get_news"]]  # a pool smaller than k
    assert retriever.rankings(pool, [ToolCall("get_news", {})]) == []
