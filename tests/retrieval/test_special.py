"""The special functions of the paper's A.4 and the executor's result layout (Figures 12 and 15)."""

from __future__ import annotations

import json

import pytest

from train.papers.metatool.retriever import Retriever
from train.papers.metatool.special import GET_USER_INPUT, META_TOOL, SPECIAL_TOOLS, TOOL_SEARCHER, SpecialExecutor
from train.retrieval.embed import load_embedder
from train.retrieval.index import ToolIndex, read_library
from train.schema import Tool, ToolCall

TRAFFIC_JSON = {
    "name": "get_traffic_report",
    "description": "Get the current traffic report",
    "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string", "description": "The city and state, e.g. Los Angeles, CA"}},
        "required": ["location"],
    },
}


@pytest.fixture
def index(fixtures, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path))
    return ToolIndex(read_library(fixtures / "retrieval" / "tiny.library.jsonl"), load_embedder("hash-bow"))


def test_definitions_are_the_papers():
    assert META_TOOL.to_dict() == {
        "type": "function",
        "function": {
            "name": "meta_tool",
            "description": (
                "Use this tool when no suitable tool is available in the current list, and an external tool is "
                "required to provide an accurate response to the user."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "tool_description": {
                        "description": "A clear and concise description of the external tool you need to use.",
                        "type": "string",
                    },
                    "param_description": {
                        "type": "array",
                        "description": "A list of descriptions for each parameter required by the external tool.",
                        "items": {"type": "string"},
                    },
                },
                "required": ["tool_description", "param_description"],
            },
        },
    }
    assert TOOL_SEARCHER.to_dict()["function"] == {
        "name": "ToolSearcher",
        "description": "Searches for relevant tools in library based on the keywords.",
        "parameters": {
            "type": "object",
            "properties": {"keywords": {"type": "string", "description": "The keyword to search for."}},
            "required": ["keywords"],
        },
    }
    assert GET_USER_INPUT.to_dict()["function"] == {
        "name": "get_user_input",
        "description": "Not invoke any additional functions.",
        "parameters": {"type": "object", "properties": {}},
    }
    assert list(SPECIAL_TOOLS) == ["meta_tool", "ToolSearcher", "get_user_input"]
    for tool in SPECIAL_TOOLS.values():  # canonical round trip
        assert Tool.from_dict(tool.to_dict()) == tool


def meta_call(description: str, params: list[str], call_id: str = "call_0") -> ToolCall:
    return ToolCall("meta_tool", {"tool_description": description, "param_description": params}, id=call_id)


def test_meta_tool_with_k_1_answers_in_the_figure_12_layout(index):
    executor = SpecialExecutor(index, k=1)
    entry = executor.execute(meta_call("Get the current traffic report", ["The city and state, e.g. Los Angeles, CA"]))
    assert entry == {"name": "meta_tool", "function_id": 0, "results": TRAFFIC_JSON}


def test_meta_tool_with_k_above_1_lists_the_top_tools_best_first(index):
    executor = SpecialExecutor(index, k=3)
    entry = executor.execute(meta_call("Get the current traffic report", ["The city and state"]), function_id=2)
    assert entry["name"] == "meta_tool" and entry["function_id"] == 2
    assert len(entry["results"]) == 3
    assert [tool["name"] for tool in entry["results"][:2]] == [
        "get_traffic_report",
        "get_weather",
    ]  # shares "current", "city"
    assert entry["results"][0] == TRAFFIC_JSON


def test_tool_searcher_answers_best_matches(index):
    one = SpecialExecutor(index, k=1).execute(ToolCall("ToolSearcher", {"keywords": "traffic report"}))
    assert one == {"name": "ToolSearcher", "function_id": 0, "results": {"best_matches": TRAFFIC_JSON}}
    two = SpecialExecutor(index, k=2).execute(ToolCall("ToolSearcher", {"keywords": "currency amount"}))
    assert [t["name"] for t in two["results"]["best_matches"]] == ["convert_currency", "get_traffic_report"]


def test_get_user_input_returns_nothing_and_bad_calls_get_an_error_entry(index):
    executor = SpecialExecutor(index)
    assert executor.execute(ToolCall("get_user_input", {})) is None
    assert executor.execute(ToolCall("meta_tool", {"tool_description": "x"}), function_id=1) == {
        "name": "meta_tool",
        "function_id": 1,
        "error": "meta_tool needs param_description",
    }
    assert executor.execute(ToolCall("ToolSearcher", {"keywords": 3})) == {
        "name": "ToolSearcher",
        "function_id": 0,
        "error": "ToolSearcher needs a non-empty string keywords",
    }
    with pytest.raises(ValueError, match="'get_weather' is not a special function"):
        executor.execute(ToolCall("get_weather", {"city": "Paris"}))
    with pytest.raises(ValueError, match="k must be at least 1"):
        SpecialExecutor(index, k=0)


def test_tool_messages_answer_a_turn_in_call_order(index):
    executor = SpecialExecutor(index, k=1)
    calls = [
        ToolCall("get_weather", {"city": "Paris"}, id="call_0"),
        meta_call("Get the current traffic report", ["The city and state, e.g. Los Angeles, CA"], "call_1"),
        ToolCall("get_user_input", {}, id="call_2"),
    ]
    messages = executor.tool_messages(calls)
    assert [m.to_dict() for m in messages] == [
        {
            "role": "tool",
            "content": json.dumps([{"name": "meta_tool", "function_id": 1, "results": TRAFFIC_JSON}]),
            "tool_call_id": "call_1",
            "name": "meta_tool",
        }
    ]


def test_retriever_facade_returns_tools(index):
    retriever = Retriever(index.tools, load_embedder("hash-bow"), k=2)
    assert [t.name for t in retriever.meta_tool("Convert an amount between currencies", ["The amount"])][:1] == [
        "convert_currency"
    ]
    assert [t.name for t in retriever.keyword("recipes ingredient")] == ["search_recipes", "get_traffic_report"]
    assert [t.name for t in retriever.history("Book a table at a restaurant for 4 people", k=1)] == ["book_table"]
    assert (
        retriever.executor().execute(ToolCall("ToolSearcher", {"keywords": "quote"}))["results"]["best_matches"][0][
            "name"
        ]
        == "random_quote"
    )
