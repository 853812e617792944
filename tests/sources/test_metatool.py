"""MetaTool query and tool files: real counts per layout, exact records, broken inputs rejected with reasons."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from helpers import split_queries

from train.sources import SourceError, get_reader

read = get_reader("metatool")


@pytest.fixture
def here(fixtures: Path) -> Path:
    return fixtures / "sources" / "metatool"


def test_real_csv_single_tool_queries(shared_data: Path) -> None:
    folder = shared_data / "metatool"
    queries, rejects, libraries = split_queries(list(read([folder / "all_clean_data.csv", folder / "plugin_des.json"])))
    assert (len(queries), len(rejects), len(libraries)) == (20614, 0, 1)
    assert len(libraries[0].tools) == 199
    assert {len(q.gold_tools) for q in queries} == {1}
    assert len({q.gold_tools[0] for q in queries}) == 199
    assert not any("unknown_gold" in q.meta for q in queries)
    assert queries[0].to_dict() == {
        "id": "all_clean_data-0",
        "query": "Can I find academic research papers on this topic?",
        "gold_tools": ["ResearchHelper"],
        "meta": {"source": "metatool"},
    }
    # a quoted field spanning two lines stays one record, kept as published (mojibake included)
    assert queries[5923].query == (
        "I'm going hiking in the Rocky Mountains tomorrow, what's the weather going to be like in Colorado?\u9225?\n"
        "Weather_Forecast,I'm curious about the weather in Sydney"
    )
    assert queries[5923].gold_tools == ["WeatherTool"]


def test_real_multi_tool_golden(shared_data: Path) -> None:
    folder = shared_data / "metatool"
    queries, rejects, libraries = split_queries(
        list(read([folder / "multi_tool_query_golden.json", folder / "big_tool_des.json"]))
    )
    assert (len(queries), len(rejects), len(libraries[0].tools)) == (497, 0, 47)
    assert Counter(len(q.gold_tools) for q in queries) == {2: 497}
    assert queries[0].to_dict() == {
        "id": "multi_tool_query_golden-0",
        "query": "I want to know the latest news about Tesla and how it has impacted the stock market.",
        "gold_tools": ["FinanceTool", "NewsTool"],
        "meta": {"source": "metatool"},
    }


def test_real_task_files(shared_data: Path) -> None:
    folder = shared_data / "metatool"
    task1, rejects, _ = split_queries(list(read([folder / "Task1.json", folder / "plugin_des.json"])))
    assert (len(task1), len(rejects)) == (1040, 0)
    assert Counter((q.meta["label"], len(q.gold_tools)) for q in task1) == {("positive", 1): 520, ("negative", 0): 520}
    assert task1[0].gold_tools == ["Now"] and task1[0].meta["thought_prompt"].startswith("You are an intelligent agent")

    subtask3, rejects, libraries = split_queries(
        list(read([folder / "Task2-Subtask3.json", folder / "plugin_info.json"]))
    )
    assert (len(subtask3), len(libraries[0].tools)) == (995, 388)
    # plugin_info.json defines SEO and web_scraper twice: the second definitions are rejected, the first kept
    assert [r.reason.split(" (")[0] for r in rejects] == [
        "duplicate tool name 'web_scraper'",
        "duplicate tool name 'SEO'",
    ]
    assert libraries[0].meta["plugins"]["vio_com"] == {
        "name_for_human": "Vio.com",
        "description_for_human": "A better deal on your next hotel, motel or accommodation booking.",
    }
    first = subtask3[0]
    assert (first.id, first.query, first.gold_tools) == (
        "Task2-Subtask3-0",
        "How can I make this experience as immersive as possible?",
        ["timeport"],
    )
    assert sorted(first.meta) == ["action_prompt", "index", "source", "thought_prompt"] and first.meta["index"] == 9

    subtask4, rejects, _ = split_queries(list(read([folder / "Task2-Subtask4.json", folder / "big_tool_des.json"])))
    assert (len(subtask4), len(rejects)) == (497, 0)
    assert Counter(len(q.gold_tools) for q in subtask4) == {2: 497}


def test_csv_rows_multiline_and_broken(here: Path) -> None:
    queries, rejects, _ = split_queries(list(read([here / "mini.csv", here / "mini_tools.json"])))
    assert [(q.id, q.query, q.gold_tools) for q in queries] == [
        ("mini-0", "Can I find academic research papers on this topic?", ["ResearchHelper"]),
        ("mini-1", "A query over\ntwo lines, with a comma", ["WeatherTool"]),
    ]
    path = here / "mini.csv"
    assert [(r.location, r.reason) for r in rejects] == [
        (f"{path}#2", "row has 1 field(s), the header has 2"),
        (f"{path}#3", "row has 3 field(s), the header has 2"),  # the blank line before it is not a record
        (f"{path}#4", "empty query"),
        (f"{path}#5", "tool: empty tool name"),
    ]


def test_csv_non_utf8_row_is_rejected_alone(here: Path) -> None:
    queries, rejects, _ = split_queries(list(read([here / "latin1.csv", here / "mini_tools.json"])))
    assert [q.id for q in queries] == ["latin1-0", "latin1-2"]
    assert [(r.location, r.reason, r.raw) for r in rejects] == [
        (
            f"{here / 'latin1.csv'}#1",
            "not UTF-8: undecodable bytes in the row ending at line 3",
            ["Caf\ufffd row", "WeatherTool"],
        )
    ]


def test_csv_without_the_tool_column_is_a_source_error(here: Path) -> None:
    with pytest.raises(
        SourceError, match=r"missing_column.csv: missing column\(s\) Tool; header is \['Query', 'Label'\]"
    ):
        list(read([here / "missing_column.csv", here / "mini_tools.json"]))


def test_task_layout_gold_from_tool_or_label(here: Path) -> None:
    queries, rejects, _ = split_queries(list(read([here / "mini_task.json", here / "mini_tools.json"])))
    assert [q.to_dict() for q in queries] == [
        {
            "id": "mini_task-0",
            "query": "Check the trends.",
            "gold_tools": ["WeatherTool"],
            "meta": {
                "source": "metatool",
                "thought_prompt": "Do you need a tool? Query: check trends",
                "label": "positive",
            },
        },
        {
            "id": "mini_task-1",
            "query": "Write a poem.",
            "gold_tools": [],
            "meta": {
                "source": "metatool",
                "thought_prompt": "Do you need a tool? Query: write a poem",
                "label": "negative",
            },
        },
        {
            "id": "mini_task-2",
            "query": "Tell me a joke.",
            "gold_tools": [],
            "meta": {
                "source": "metatool",
                "thought_prompt": "Assess the query.",
                "action_prompt": "Choose one tool or None.",
                "index": 9,
            },
        },
        {
            "id": "mini_task-3",
            "query": "Tesla news and stock.",
            "gold_tools": ["FinanceTool", "NewsTool"],
            "meta": {
                "source": "metatool",
                "thought_prompt": "Assess the query.",
                "action_prompt": "Choose two tools.",
                "unknown_gold": ["NewsTool"],
            },
        },
        {
            "id": "mini_task-6",
            "query": "Extra keys.",
            "gold_tools": ["WeatherTool"],
            "meta": {"source": "metatool", "action_prompt": "Choose one tool.", "extra": {"difficulty": "easy"}},
        },
    ]
    path = here / "mini_task.json"
    assert [(r.location, r.reason) for r in rejects] == [
        (f"{path}#4", "label 'positive' but no 'tool'"),
        (f"{path}#5", "tool: expected a name or a list of names, got dict"),
    ]


def test_plugin_info_tool_file(here: Path) -> None:
    items = list(read([here / "mini_multi.json", here / "mini_plugin_info.json"]))
    queries, rejects, libraries = split_queries(items)
    path = here / "mini_plugin_info.json"
    assert [(r.location, r.reason) for r in rejects] == [
        (f"{path}#2", f"duplicate tool name 'SEO' (first defined at {path}#0); the first definition is kept"),
        (f"{path}#3", "expected a plugin_info entry with name_for_model and description_for_model"),
        (f"{path}#4", "description of tool 'numbers': expected a string, got int"),
    ]
    assert libraries[0].to_dict() == {
        "id": "mini_plugin_info",
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "SEO",
                    "description": "On-page SEO analysis.",
                    "parameters": {"type": "object", "properties": {}},
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "web_scraper",
                    "description": "Scrape webpages.",
                    "parameters": {"type": "object", "properties": {}},
                },
            },
        ],
        "meta": {
            "source": "metatool",
            "file": "mini_plugin_info.json",
            "plugins": {
                "SEO": {"name_for_human": "SEO", "description_for_human": "SEO analysis!"},
                "web_scraper": {"name_for_human": "Scraper", "description_for_human": "Scrape webpages."},
            },
        },
    }
    assert [q.meta["unknown_gold"] for q in queries] == [["FinanceTool", "NewsTool"], ["WeatherTool", "ResearchHelper"]]


def test_query_file_that_is_not_records(here: Path) -> None:
    queries, rejects, _ = split_queries(list(read([here / "scenario_list.json", here / "mini_tools.json"])))
    assert queries == []
    assert [r.reason for r in rejects] == ["expected an object with query and tool, got str"] * 2
    with pytest.raises(SourceError, match="mini_tools.json: expected a JSON array of records"):
        list(read([here / "mini_tools.json", here / "mini_tools.json"]))
