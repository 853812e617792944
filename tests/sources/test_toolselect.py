"""ToolSelect reader: candidates in row order, Thought + gold call, tools.csv cross-check, broken rows."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from train.base.records import Rejected, SourceError
from train.cli import main as cli_main
from train.schema import Conversation
from train.sources import toolselect


@pytest.fixture
def fx(fixtures: Path) -> Path:
    return fixtures / "sources" / "toolselect"


def test_fixture_outcomes(fx):
    items = list(toolselect.read([fx / "train.csv", fx / "tools.csv"]))
    prefix = f"{fx}/"
    assert [
        ("ok", i.id) if isinstance(i, Conversation) else (i.location.replace(prefix, ""), i.reason) for i in items
    ] == [
        ("ok", "train-0"),
        ("ok", "train-1"),
        ("train.csv#2", "text: expected 3 sections separated by '###', got 2"),
        ("train.csv#3", "text: first section does not start with 'User: '"),
        (
            "train.csv#4",
            (
                "text.choices[1]: expected '<name> = <description>', got 'News: The News tool gets the top news for a "
                "particular topic'"
            ),
        ),
        (
            "train.csv#5",
            "text.gold: CALLTOOL['Music Player'] names no candidate ('Book Review', 'News', 'Weather Now')",
        ),
        ("train.csv#6", "text.choices: duplicate candidate(s) 'Book Review'"),
        ("train.csv#7", "text: expected 3 sections separated by '###', got 1"),
        ("train.csv#8", "row: 1 field(s) more than the header"),
        ("train.csv#9", "text: third section is not 'Thought: ...' then 'Act: CALLTOOL[\"<tool>\"]'"),
        ("train.csv#10", "text.gold: CALLTOOL['Sun'] names no candidate ('Sun-Rise', 'Sun-Set')"),
        ("ok", "train-11"),
    ]


def test_fixture_exact_record(fx):
    first = next(toolselect.read([fx / "train.csv", fx / "tools.csv"]))
    assert first.to_dict() == {
        "id": "train-0",
        "tools": [
            {"type": "function", "function": {
                "name": "Book Review",
                "description": "The Book Review tool gets the top-rated book reviews for a particular book.",
                "parameters": {"type": "object", "properties": {}},
            }},
            {"type": "function", "function": {
                "name": "News",
                "description": "The News tool gets the top news for a particular topic or query.",
                "parameters": {"type": "object", "properties": {}},
            }},
            {"type": "function", "function": {
                "name": "Weather Now",
                "description": "Current weather at a place.",
                "parameters": {"type": "object", "properties": {}},
            }},
        ],
        "messages": [
            {"role": "user", "content": '10 reviews for "Dune".'},
            {"role": "assistant", "content": "The user wants reviews of a book.\nThe Book Review tool fits.",
             "tool_calls": [
                 {"id": "call_0", "type": "function", "function": {"name": "Book Review", "arguments": {}}},
             ]},
        ],
        "meta": {
            "source": "toolselect",
            "candidates": ["Book Review", "News", "Weather Now"],
            "gold_tool": "Book Review",
            "description_mismatch": {"News": "The News tool gets the top news for a given topic."},
            "not_in_tools_csv": ["Weather Now"],
        },
    }  # fmt: skip


def test_hyphen_cut_gold_label_and_unicode(fx):
    items = [i for i in toolselect.read([fx / "train.csv"]) if isinstance(i, Conversation)]
    sun = items[1]
    assert sun.messages[-1].tool_calls[0].name == "Sun-Rise Time tool"
    assert sun.meta == {
        "source": "toolselect",
        "candidates": ["Sun-Rise Time tool", "Sun Set Time"],
        "gold_tool": "Sun-Rise Time tool",
        "gold_label": "Sun",
    }
    assert items[2].messages[0].content == "Wie wird das Wetter in Köln? 天气怎么样？"
    assert "description_mismatch" not in items[0].meta  # no tools.csv given, no cross-check


def test_unusable_inputs(fx, tmp_path):
    with pytest.raises(SourceError, match=r"expected TRAIN_CSV then TOOLS_CSV \(1 optional\), got 3"):
        list(toolselect.read([fx / "train.csv"] * 3))
    with pytest.raises(SourceError, match="missing column.s. text; has Name, Description"):
        list(toolselect.read([fx / "tools.csv"]))
    with pytest.raises(SourceError, match="expected a CSV file, got a folder"):
        list(toolselect.read([fx]))
    duplicated = tmp_path / "tools.csv"
    duplicated.write_text("Name,Description\nA,x\nA,y\n", encoding="utf-8")
    with pytest.raises(SourceError, match=r"tools.csv#1: expected a unique Name and a Description"):
        list(toolselect.read([fx / "train.csv", duplicated]))


@pytest.mark.shared_data
def test_real_train_set(shared_data):
    folder = shared_data / "toolselect_toolverifier"
    items = list(toolselect.read([folder / "train.csv", folder / "tools.csv"]))
    assert len(items) == 555 and not [i for i in items if isinstance(i, Rejected)]
    assert all(i.meta["candidates"] == [t.name for t in i.tools] for i in items)
    assert all(i.meta["gold_tool"] in i.meta["candidates"] for i in items)
    assert all(i.messages[-1].tool_calls[0].name == i.meta["gold_tool"] for i in items)
    assert Counter(len(i.tools) for i in items) == {8: 482, 3: 39, 2: 18, 4: 16}
    assert [(i.id, i.meta["gold_label"]) for i in items if "gold_label" in i.meta] == [
        ("train-36", "Sun"),
        ("train-37", "Sun"),
        ("train-38", "Sun"),
    ]
    assert sum("not_in_tools_csv" in i.meta for i in items) == 0
    assert (
        sum("description_mismatch" in i.meta for i in items),
        sum(len(i.meta.get("description_mismatch", {})) for i in items),
    ) == (276, 386)
    first = items[0]
    assert first.messages[0].content == '10 reviews for "Harry Potter and the Philosopher\'s Stone".'
    assert first.meta["candidates"][3] == "Book Review" and first.meta["gold_tool"] == "Book Review"


@pytest.mark.shared_data
def test_cli_converts_the_train_set(shared_data, tmp_path, capsys):
    folder = shared_data / "toolselect_toolverifier"
    out = tmp_path / "toolselect.jsonl"
    assert (
        cli_main(
            ["data", "convert", "toolselect", str(folder / "train.csv"), str(folder / "tools.csv"), "-o", str(out)]
        )
        == 0
    )
    assert capsys.readouterr().out.splitlines()[0] == "read 555, written 555, rejected 0"
