"""JSON-array source files cut off or broken part-way: the complete records before the break are kept,
the break is one rejected record naming file, line and column, and read = written + rejected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import split

from train.base.records import iter_json_records
from train.cli import main
from train.sources import Rejected, SourceError
from train.sources.glaive import read

ASSET = Path(__file__).resolve().parents[2] / "train" / "assets" / "demo" / "glaive_en_300.json"
RECORDS = json.loads(ASSET.read_text(encoding="utf-8"))[:10]


def dump(records) -> str:
    return json.dumps(records, ensure_ascii=False, indent=2)


def cut_inside_record(tmp_path: Path, index: int) -> tuple[Path, int, int]:
    """The 10 records written as a pretty array, cut in the middle of record ``index``; (path, line, column)."""
    whole = dump(RECORDS)
    start = len(dump(RECORDS[:index])) - 2 if index else 1  # where record ``index`` begins (before its ",\n  ")
    middle = whole.index('"value"', start + 10) + 12  # inside the first value string of that record
    path = tmp_path / "cut.json"
    path.write_text(whole[:middle], encoding="utf-8")
    return path, middle, whole[:middle].count("\n") + 1


def test_a_file_cut_mid_record_keeps_the_records_before_the_cut(tmp_path):
    path, _, _ = cut_inside_record(tmp_path, 7)
    accepted, rejected = split(read([path]))
    assert len(accepted) == 7
    assert [conv.messages[0].content for conv in accepted] == [r["conversations"][0]["value"] for r in RECORDS[:7]]
    [reject] = rejected
    assert reject.location == f"{path}#7"
    assert reject.reason.startswith("invalid JSON at line ") and "Unterminated string starting at" in reject.reason
    assert reject.reason.endswith("; the rest of the file is unreadable")


def test_the_reason_names_line_and_column_of_the_break(tmp_path):
    path, _, _ = cut_inside_record(tmp_path, 3)
    text = path.read_text(encoding="utf-8")
    last_line = text.splitlines()[-1]
    column = last_line.index('"', last_line.index(":")) + 1  # the unterminated string opens here
    [reject] = [item for item in iter_json_records(path) if isinstance(item, Rejected)]
    assert reject.reason == (
        f"invalid JSON at line {text.count(chr(10)) + 1} column {column}: "
        "Unterminated string starting at; the rest of the file is unreadable"
    )


def test_convert_counts_the_broken_tail_as_one_rejected_record(tmp_path, capsys):
    path, _, _ = cut_inside_record(tmp_path, 7)
    out = tmp_path / "out.jsonl"
    assert main(["data", "convert", "glaive", str(path), "-o", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "read 8, written 7, rejected 1"
    assert len(out.read_text(encoding="utf-8").splitlines()) == 7
    [reject] = [json.loads(line) for line in (tmp_path / "out.rejects.jsonl").read_text().splitlines()]
    assert reject["location"] == f"{path}#7" and "Unterminated string" in reject["reason"]


@pytest.mark.parametrize(
    ("text", "kept", "reason"),
    [
        (dump(RECORDS)[:-2], 10, "file ends before the closing ']' (truncated?)"),  # cut right after the last record
        (dump(RECORDS) + "\n]", 10, "text after the closing ']' at line {last} column 1"),
        # a missing comma between two records: the first is kept, the break is where the comma should be
        (
            dump(RECORDS[:2])[:-2] + "\n  {}\n]",
            2,
            "expected ',' or ']' at line {last_but_one} column 3; the rest of the file is unreadable",
        ),
        (
            "[\n" + json.dumps(RECORDS[0])[:40],
            0,
            "invalid JSON at line 2 column 38: Unterminated string starting at; the rest of the file is unreadable",
        ),
    ],
)
def test_every_kind_of_break_is_one_reject(tmp_path, text, kept, reason):
    path = tmp_path / "broken.json"
    path.write_text(text, encoding="utf-8")
    items = list(iter_json_records(path))
    records = [item for item in items if not isinstance(item, Rejected)]
    rejects = [item for item in items if isinstance(item, Rejected)]
    assert [obj for _, obj in records] == RECORDS[:kept]
    assert [(r.location, r.reason) for r in rejects] == [
        (f"{path}#{kept}", reason.format(last=text.count("\n") + 1, last_but_one=text.count("\n")))
    ]


def test_a_whole_array_and_an_empty_one_read_as_before(tmp_path):
    path = tmp_path / "whole.json"
    path.write_text(dump(RECORDS), encoding="utf-8")
    assert [obj for _, obj in iter_json_records(path)] == RECORDS
    assert [loc for loc, _ in iter_json_records(path)] == [f"{path}#{i}" for i in range(10)]
    path.write_text(" [ ] \n", encoding="utf-8")
    assert list(iter_json_records(path)) == []


def test_without_salvage_a_broken_array_is_a_source_error(tmp_path):
    path, _, _ = cut_inside_record(tmp_path, 7)
    with pytest.raises(SourceError, match=r"invalid JSON at line \d+ column \d+"):
        list(iter_json_records(path, salvage=False))


@pytest.mark.shared_data
def test_the_real_demo_file_cut_in_half(shared_data, tmp_path, capsys):
    text = (shared_data / "glaive_toolcall_demo" / "glaive_toolcall_en_demo.json").read_text(encoding="utf-8")
    cut = text[: len(text) // 2]
    complete = cut.count("\n  }")  # the file is indented by 2: a record ends with a line that is exactly "  }"
    path = tmp_path / "half.json"
    path.write_text(cut, encoding="utf-8")
    out = tmp_path / "half.jsonl"
    assert main(["data", "convert", "glaive", str(path), "-o", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"read {complete + 1}, written {complete}, rejected 1"
    assert 100 < complete < 200
