"""``tooltrain data stats``: hand-counted fixtures, broken lines, the CLI outputs, and a real converted file."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from train.cli import main
from train.commands.data.stats import print_rich
from train.commands.data.stats import sections as report_sections
from train.data.stats import count_lines
from train.schema import ToolLibrary, dumps
from train.sources import get_reader

# conversations.jsonl, counted by hand:
#   line 1 "parallel": 2 tools; system, user, assistant(2 calls), tool, tool, assistant            -> 6 messages
#   line 2 "no-tools": 0 tools; user, assistant (French)                                           -> 2 messages
#   line 3 truncated JSON; line 4 blank (not a record)
#   line 5 "sequential-then-parallel": 2 tools; user, assistant(1 call), tool,
#          assistant(3 calls), tool x3, assistant                                                   -> 8 messages
#   line 6 role "robot" (not canonical); line 7 "tools-unused": 1 tool; user, assistant (Spanish)    -> 2 messages
#   line 8 not UTF-8; line 9 a JSON array
EXPECTED_CONVERSATIONS = {
    "conversations": 4,
    "messages": 18,
    "messages_by_role": {"system": 1, "user": 4, "assistant": 7, "tool": 6},
    "assistant_turns": 7,
    "tool_calls": 6,
    "parallel_turns": 2,
    "parallel_turn_calls": 5,
    "tool_results": 6,
    "tools_per_conversation": {"min": 0, "mean": 1.25, "max": 2},
    "distinct_tools": 3,
    "distinct_called_tools": 3,
    "conversations_without_tools": 1,
    "conversations_without_tool_calls": 2,
    "languages": {},
}
EXPECTED_UNREADABLE = [
    {"line": 3, "reason": "invalid JSON at column 31: Expecting value"},
    {
        "line": 6,
        "reason": "not a canonical record: record.messages[0].role: expected one of system, user, assistant, "
        "tool, got 'robot'",
    },
    {"line": 8, "reason": "not UTF-8 at byte 62"},
    {"line": 9, "reason": "not a canonical record: record: expected dict, got list"},
]


@pytest.fixture
def here(fixtures: Path) -> Path:
    return fixtures / "stats"


def count_file(path: Path, language_of=None):
    with path.open("rb") as fh:
        return count_lines(fh, language_of)


def test_conversation_counts(here: Path) -> None:
    stats = count_file(here / "conversations.jsonl")
    assert (stats.records, stats.unreadable) == (8, 4)
    assert stats.unreadable_lines == EXPECTED_UNREADABLE
    assert stats.conversations.to_dict() == EXPECTED_CONVERSATIONS
    assert stats.queries.queries == 0 and stats.libraries.libraries == 0


def test_languages_use_the_first_user_message(here: Path) -> None:
    seen: list[str] = []

    def fake_language(text: str) -> str:
        seen.append(text)
        return {"B": "fr", "¿": "es"}.get(text[0], "en")

    stats = count_file(here / "conversations.jsonl", fake_language)
    assert seen == [
        "What's the weather in Paris and the time in Tokyo?",
        "Bonjour, comment ça va ?",
        "Find me a cheap flight to Berlin next Friday.",
        "¿Cuál es el clima en Madrid hoy?",
    ]
    assert stats.conversations.languages == {"en": 2, "fr": 1, "es": 1}


def test_query_and_library_counts(here: Path) -> None:
    stats = count_file(here / "queries.jsonl")
    assert (stats.records, stats.unreadable) == (7, 2)
    assert stats.unreadable_lines == [
        {"line": 6, "reason": "invalid JSON at column 1: Expecting value"},
        {"line": 7, "reason": "not a canonical record: record.gold_tools: expected list, got str"},
    ]
    assert stats.queries.to_dict() == {
        "queries": 4,
        "gold_per_query": {"min": 0, "mean": 1.5, "max": 3},
        "gold_size_histogram": {"0": 1, "1": 1, "2": 1, "3": 1},
        "distinct_gold_tools": 4,
        "splits": {"test": 1, "train": 2},
        "queries_with_unknown_gold": 1,
    }
    assert stats.libraries.to_dict() == {"libraries": 1, "tools": 3, "distinct_tools": 3}
    assert stats.conversations.conversations == 0


def test_only_the_first_ten_unreadable_lines_are_listed(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text("oops\n" * 13)
    stats = count_file(path)
    assert (stats.records, stats.unreadable) == (13, 13)
    assert [item["line"] for item in stats.unreadable_lines] == list(range(1, 11))
    assert ("unreadable lines (first 10)", "1, 2, 3, 4, 5, 6, 7, 8, 9, 10") in report_sections(stats)[0][1]


def test_cli_plain_text(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = here / "queries.jsonl"
    assert main(["data", "stats", str(path)]) == 0
    assert (
        capsys.readouterr().out
        == f"""{path}

[file]
records                                7
unreadable                             2
unreadable lines                       6, 7
  line 6                               invalid JSON at column 1: Expecting value
  line 7                               not a canonical record: record.gold_tools: expected list, got str

[tool queries]
queries                                4
gold tools per query                   min 0, mean 1.50, max 3
  0 gold tool(s)                       1
  1 gold tool(s)                       1
  2 gold tool(s)                       1
  3 gold tool(s)                       1
distinct gold tools                    4
split test                             1
split train                            2
queries with gold outside the library  1

[tool libraries]
libraries                              1
tools                                  3
distinct tools                         3
"""
    )


def test_cli_json_with_languages(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = here / "conversations.jsonl"
    assert main(["data", "stats", str(path), "--json", "--languages"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    report = json.loads(out)
    assert report["file"] == str(path)
    assert (report["records"], report["unreadable"], report["unreadable_lines"]) == (8, 4, EXPECTED_UNREADABLE)
    assert report["conversations"] == {**EXPECTED_CONVERSATIONS, "languages": {"en": 2, "fr": 1, "es": 1}}
    assert report["tool_queries"]["queries"] == 0 and report["tool_libraries"]["libraries"] == 0


def test_cli_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "stats", str(tmp_path / "absent.jsonl")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'absent.jsonl'}: cannot open (No such file or directory)\n"
    assert main(["data", "stats", str(tmp_path)]) == 2


def test_rich_tables_print_reasons_verbatim(capsys: pytest.CaptureFixture[str]) -> None:
    # a reason holding "[...]" must not be eaten as rich markup
    print_rich("f.jsonl", [("file", [("  line 6", "bad [at all]")]), ("conversations", [("tool calls", "6")])])
    out = capsys.readouterr().out
    assert "bad [at all]" in out and "tool calls" in out and "conversations" in out


def test_stats_of_converted_rectools_match_the_source(shared_data: Path, tmp_path: Path) -> None:
    folder = shared_data / "rectools_ptr"
    source = json.loads((folder / "RecTools_QT.json").read_text())
    converted, library = tmp_path / "rt.jsonl", tmp_path / "rt.library.jsonl"
    with converted.open("w") as out, library.open("w") as lib:
        for record in get_reader("rectools")([folder / "RecTools_QT.json", folder / "RecTools_tool.json"]):
            (lib if isinstance(record, ToolLibrary) else out).write(dumps(record) + "\n")
    stats = count_file(converted)
    sizes = Counter(len(item["tool"]) for item in source)
    assert (stats.records, stats.unreadable) == (len(source), 0) == (1000, 0)
    assert stats.queries.to_dict() == {
        "queries": len(source),
        "gold_per_query": {
            "min": min(sizes),
            "mean": sum(k * n for k, n in sizes.items()) / len(source),
            "max": max(sizes),
        },
        "gold_size_histogram": {str(k): sizes[k] for k in sorted(sizes)},
        "distinct_gold_tools": len({name for item in source for name in item["tool"]}),
        "splits": {},
        "queries_with_unknown_gold": 0,
    }
    assert stats.queries.to_dict()["distinct_gold_tools"] == 47
    lib_stats = count_file(library)
    assert lib_stats.libraries.to_dict() == {"libraries": 1, "tools": 47, "distinct_tools": 47}


def test_hostile_lines_are_unreadable_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(
        b"\n".join(
            [
                b'{"id": "nan", "messages": [], "meta": {"score": NaN}}',
                b'{"id": "big", "messages": [], "meta": {"n": ' + b"9" * 5000 + b"}}",
                "\ufeff".encode() + b'{"id": "bom", "messages": []}',
                b"[" * 10_000 + b"]" * 10_000,
                b'{"id": "deep", "messages": [], "meta": ' + b'{"x": ' * 10_000 + b"1" + b"}" * 10_000 + b"}",
                b"   \t",
            ]
        )
        + b"\n"
    )
    stats = count_file(path)
    assert (stats.records, stats.unreadable) == (5, 5)
    assert [item["reason"][:48] for item in stats.unreadable_lines] == [
        "invalid JSON: non-standard JSON constant NaN",
        "invalid JSON: Exceeds the limit (4300 digits) fo",
        "invalid JSON at column 1: Unexpected UTF-8 BOM (",
        "invalid JSON: nested too deeply",
        "invalid JSON: nested too deeply",
    ]
