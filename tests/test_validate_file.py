"""``train.data.validate_file``: a canonical file checked line by line (the verb's printing is tested in
tests/test_validate.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from train.data.validate_file import (
    Summary,
    check_file,
    check_value,
    load_library_names,
    record_kind,
    validate_file,
)
from train.validate import Problem

GOOD = {"id": "a", "tools": [], "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]}
UNDEFINED_CALL = {
    "id": "b",
    "tools": [],
    "messages": [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "x", "arguments": {}}}],
        },
    ],
}


def write(path: Path, lines: list) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_check_value_tells_structure_from_the_rules_of_a_kind():
    assert check_value(GOOD, {}, None) == []
    assert [p.code for p in check_value(UNDEFINED_CALL, {}, None)] == ["undefined-tool"]
    (schema,) = check_value({"id": "c", "messages": "no"}, {}, None)
    assert (schema.severity, schema.code) == ("error", "schema")
    assert check_value({"id": "q", "query": "find", "gold_tools": ["t"]}, {}, {"t"}) == []
    assert [p.code for p in check_value({"id": "q", "query": "find", "gold_tools": ["t"]}, {}, {"u"})]


def test_record_kind():
    assert record_kind(GOOD) == "conversation"
    assert record_kind({"id": "q", "query": "x"}) == record_kind({"gold_tools": []}) == "tool query"
    assert record_kind({"id": "l", "tools": []}) == "tool library"


def test_check_file_names_lines_blank_lines_and_repeated_ids(tmp_path):
    path = write(tmp_path / "f.jsonl", [GOOD, "", "{broken", GOOD, {"id": "a", "query": "q", "gold_tools": ["t"]}])
    lines = list(check_file(path, {}, None))
    assert [(line, rid) for line, rid, _ in lines] == [(1, "a"), (2, None), (3, None), (4, "a"), (5, "a")]
    assert lines[0][2] == [] and lines[1][2] is None  # a blank line is no record
    assert [p.code for p in lines[2][2]] == ["unreadable-line"]
    (duplicate,) = lines[3][2]
    assert duplicate.code == "duplicate-id" and "line 1" in duplicate.message
    assert lines[4][2] == []  # ids are unique within a kind: a query may reuse a conversation's id
    assert list(check_file(path, {"duplicate-id": "ignore"}, None))[3][2] == []


def test_validate_file_keeps_the_first_reports_and_counts_the_rest(tmp_path):
    path = write(tmp_path / "f.jsonl", [GOOD, UNDEFINED_CALL, "", {**UNDEFINED_CALL, "id": "c"}])
    summary, reports, hidden = validate_file(path, {}, None, 1)
    assert (summary.records, summary.valid, summary.with_errors, summary.blank_lines) == (3, 1, 2, 1)
    assert [(r.line, r.record_id, r.problem.code) for r in reports] == [(2, "b", "undefined-tool")] and hidden == 1
    assert summary.to_dict()["problems"] == [{"severity": "error", "code": "undefined-tool", "count": 2}]
    assert reports[0].to_dict()["line"] == 2


def test_summary_counts_warnings_and_errors_per_record():
    summary = Summary()
    summary.add([Problem("warning", "w", "x", "m"), Problem("warning", "w", "y", "m")])
    summary.add([])
    assert (summary.records, summary.valid, summary.with_warnings, summary.counts[("warning", "w")]) == (2, 2, 1, 2)


def test_load_library_names(tmp_path):
    tool = {"type": "function", "function": {"name": "t1", "description": "d", "parameters": {"type": "object"}}}
    path = write(tmp_path / "lib.jsonl", [{"id": "l", "tools": [tool, {"function": {"name": 3}}]}, {"id": "n"}])
    assert load_library_names(path) == {"t1"}
    bad = write(tmp_path / "bad.jsonl", ["{"])
    with pytest.raises(ValueError, match=rf"^{re.escape(str(bad))}:1: "):
        load_library_names(bad)
