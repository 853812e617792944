"""RecTools / PTR query files: real counts, an exact record, and broken inputs rejected with reasons."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from helpers import split_queries

from train.schema import ToolLibrary
from train.sources import SourceError, get_reader

read = get_reader("rectools")


@pytest.fixture
def here(fixtures: Path) -> Path:
    return fixtures / "sources" / "rectools"


def test_real_rectools_counts_and_first_record(shared_data: Path) -> None:
    folder = shared_data / "rectools_ptr"
    queries, rejects, libraries = split_queries(
        list(read([folder / "RecTools_QT.json", folder / "RecTools_tool.json"]))
    )
    assert (len(queries), len(rejects), len(libraries)) == (1000, 0, 1)
    assert len(libraries[0].tools) == 47 and libraries[0].id == "RecTools_tool"
    # exactly 100 queries for each gold-set size 1..10 (SOURCES.md)
    assert Counter(len(q.gold_tools) for q in queries) == {size: 100 for size in range(1, 11)}
    assert queries[0].to_dict() == {
        "id": "RecTools_QT-0",
        "query": "**\n\nI want to find a local restaurant with a menu that fits my diet plan, book a table, get "
        "astrology insights on the best date for my dinner, and select a thoughtful gift for my dining companion.",
        "gold_tools": [
            "StrologyTool",
            "MemoryTool",
            "ResumeTool",
            "GiftTool",
            "DietTool",
            "RestaurantBookingTool",
            "local",
            "HouseRentingTool",
            "HousePurchasingTool",
        ],
        "meta": {"source": "rectools"},
    }
    assert [q.id for q in queries[:3]] == ["RecTools_QT-0", "RecTools_QT-1", "RecTools_QT-2"]
    # kept as published: 34 queries start with the stray "**"; "local" is a tool of the file, so no query warns
    assert sum(q.query.startswith("**") for q in queries) == 34
    assert not any("unknown_gold" in q.meta for q in queries)


def test_real_metatool_qt_is_the_multi_tool_golden_set(shared_data: Path) -> None:
    folder = shared_data / "rectools_ptr"
    queries, rejects, _ = split_queries(list(read([folder / "MetaTool_QT.json", folder / "MetaTool_tool.json"])))
    assert (len(queries), len(rejects)) == (497, 0)
    golden = json.loads((shared_data / "metatool" / "multi_tool_query_golden.json").read_text())
    assert Counter((q.query, frozenset(q.gold_tools)) for q in queries) == Counter(
        (g["query"], frozenset(g["tool"])) for g in golden
    )


def test_mini_file_rejects_wrong_types_and_warns_on_unknown_gold(here: Path) -> None:
    items = list(read([here / "mini_QT.json", here / "mini_tool.json"]))
    queries, rejects, libraries = split_queries(items)
    assert isinstance(items[0], ToolLibrary)  # the library comes before the queries
    assert [t.name for t in libraries[0].tools] == ["RestaurantBookingTool", "WeatherTool", "local"]
    assert [q.to_dict() for q in queries] == [
        {
            "id": "mini_QT-0",
            "query": "**\n\nBook a table and check the weather.",
            "gold_tools": ["RestaurantBookingTool", "WeatherTool"],
            "meta": {"source": "rectools"},
        },
        {
            "id": "mini_QT-1",
            "query": "Find a local shop.",
            "gold_tools": ["local", "ShopTool"],
            "meta": {"source": "rectools", "unknown_gold": ["ShopTool"]},
        },
        {"id": "mini_QT-3", "query": "Plan a trip.", "gold_tools": ["WeatherTool"], "meta": {"source": "rectools"}},
    ]
    path = here / "mini_QT.json"
    assert [(r.location, r.reason) for r in rejects] == [
        (f"{path}#2", "query: expected a string, got int"),
        (f"{path}#4", "empty gold tool list"),
        (f"{path}#5", "tool: expected a name or a list of names, got a list containing int"),
        (f"{path}#6", "expected an object with query and tool, got list"),
        (f"{path}#7", "missing 'query'"),
    ]
    assert rejects[0].raw == {"query": 42, "tool": ["WeatherTool"]}


def test_truncated_array_keeps_the_records_before_the_break(here: Path) -> None:
    queries, rejects, _ = split_queries(list(read([here / "truncated_QT.json", here / "mini_tool.json"])))
    assert [q.query for q in queries] == ["First query.", "Second query."]
    assert [(r.location, r.reason) for r in rejects] == [
        (
            f"{here / 'truncated_QT.json'}#2",
            "invalid JSON at line 4 column 13: Unterminated string starting at; the rest of the file is unreadable",
        ),
    ]


def test_missing_closing_bracket_is_reported(here: Path) -> None:
    queries, rejects, _ = split_queries(list(read([here / "unclosed_QT.json", here / "mini_tool.json"])))
    assert [q.query for q in queries] == ["Complete record."]
    assert [(r.location, r.reason) for r in rejects] == [
        (f"{here / 'unclosed_QT.json'}#1", "file ends before the closing ']' (truncated?)")
    ]


def test_non_utf8_bytes_reject_only_their_record(here: Path) -> None:
    queries, rejects, _ = split_queries(list(read([here / "latin1_QT.json", here / "mini_tool.json"])))
    assert [q.id for q in queries] == ["latin1_QT-0", "latin1_QT-2"]
    assert [(r.location, r.reason) for r in rejects] == [
        (f"{here / 'latin1_QT.json'}#1", "not UTF-8: undecodable bytes in this record")
    ]
    assert rejects[0].raw == '{"query": "Caf\ufffd bad byte.", "tool": ["WeatherTool"]}'
    json.dumps(rejects[0].to_dict())  # the reject file can be written


def test_bad_tool_entries_are_rejected_by_name(here: Path) -> None:
    items = list(read([here / "mini_QT.json", here / "wrongtypes_tool.json"]))
    queries, rejects, libraries = split_queries(items)
    path = here / "wrongtypes_tool.json"
    assert [(r.location, r.reason) for r in rejects[:2]] == [
        (f"{path}#ListTool", "description of tool 'ListTool': expected a string, got list"),
        (f"{path}#", "tool name: expected a non-empty string, got ''"),
    ]
    assert [t.name for t in libraries[0].tools] == ["WeatherTool"]
    assert queries[0].meta["unknown_gold"] == ["RestaurantBookingTool"]


def test_unreadable_tool_file_or_wrong_arity_is_a_source_error(here: Path) -> None:
    with pytest.raises(SourceError, match=r"truncated_tool.json: invalid JSON at line 1 column 39"):
        list(read([here / "mini_QT.json", here / "truncated_tool.json"]))
    with pytest.raises(SourceError, match=r"expected query file \(\*_QT.json\) then tool file \(\*_tool.json\), got 1"):
        list(read([here / "mini_QT.json"]))
    with pytest.raises(SourceError, match="no such file"):
        list(read([here / "absent_QT.json", here / "mini_tool.json"]))


def test_non_json_numbers_reject_instead_of_raising(here: Path, tmp_path: Path) -> None:
    queries_path, tools_path = tmp_path / "odd_QT.json", tmp_path / "odd_tool.json"
    queries_path.write_text(
        '[{"query": "ok", "tool": ["WeatherTool"]}, {"query": "n", "tool": ["WeatherTool"], "score": NaN},'
        ' {"query": "after", "tool": ["WeatherTool"]}]'
    )
    queries, rejects, _ = split_queries(list(read([queries_path, here / "mini_tool.json"])))
    # the NaN rejects its own element only: the array is still well-formed, so reading goes on
    assert [q.query for q in queries] == ["ok", "after"]
    assert [r.reason for r in rejects] == ["invalid JSON: non-standard JSON constant NaN"]
    tools_path.write_text('{"WeatherTool": ' + "9" * 5000 + "}")
    with pytest.raises(SourceError, match=r"odd_tool.json: invalid JSON: Exceeds the limit \(4300 digits\)"):
        list(read([queries_path, tools_path]))
