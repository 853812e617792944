"""Readers take Parquet, Arrow, CSV and ``datasets`` folders (``train.sources.tables``) as they take JSON Lines:
the same conversations, the same counted rejects, one SourceError for a file that cannot be read."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from train.base.records import Rejected, SourceError, iter_json_records, record_size_limit
from train.schema import Conversation
from train.sources import get_reader
from train.sources.tables import NESTED_COLUMNS, iter_rows, read_renamed, renamed_columns

FIXTURES = Path(__file__).parent.parent / "fixtures" / "sources"
LAYOUTS = ("xlam", "openai", "sharegpt", "toolace")


def fixture_rows(layout: str) -> list[dict]:
    return [obj for _, obj in iter_json_records(FIXTURES / layout / "records.jsonl")]


def table_rows(layout: str) -> list[dict]:
    """The fixture records one table can hold: a column has one type, so a record whose ``arguments`` is an
    object where an earlier one's is a string is left out (a limit of tables, not of the reader)."""
    import datasets

    kept: list[dict] = []
    for row in fixture_rows(layout):
        try:
            names = list(dict.fromkeys(key for one in [*kept, row] for key in one))
            datasets.Dataset.from_list([{name: one.get(name) for name in names} for one in [*kept, row]])
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
            continue
        kept.append(row)
    return kept


def as_csv_text(row: dict) -> dict:
    """What a CSV keeps of a record: text, with lists and objects as JSON text (as people export them)."""
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in row.items()}


def as_read_from_csv(row: dict) -> dict:
    """What a reader gets from a CSV row: text, but for the nested columns, decoded from their JSON text."""
    return {
        k: v if isinstance(v, str) or (k in NESTED_COLUMNS and isinstance(v, (list, dict))) else json.dumps(v)
        for k, v in row.items()
    }


def without_nulls(value):
    """A table row as read (``train.sources.tables``): a null is an absent key."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    return [without_nulls(v) for v in value] if isinstance(value, list) else value


def write_jsonl(rows: list[dict], path: Path) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_csv(rows: list[dict], path: Path) -> Path:
    names = list(dict.fromkeys(key for row in rows for key in row))
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, names)
        writer.writeheader()
        for row in rows:
            writer.writerow(as_csv_text(row))
    return path


def write_table(rows: list[dict], kind: str, folder: Path) -> Path:
    """``rows`` as ``datasets`` writes them (every struct field in every row, nulls where absent)."""
    import datasets

    if kind == "csv":
        return write_csv(rows, folder / "rows.csv")
    names = list(dict.fromkeys(key for row in rows for key in row))  # from_list takes the first row's keys only
    dataset = datasets.Dataset.from_list([{name: row.get(name) for name in names} for row in rows])
    if kind == "parquet":
        dataset.to_parquet(str(folder / "rows.parquet"))
        return folder / "rows.parquet"
    if kind == "arrow":
        table = dataset.data.table
        with pa.ipc.new_file(str(folder / "rows.arrow"), table.schema) as writer:
            writer.write_table(table)
        return folder / "rows.arrow"
    dataset.save_to_disk(str(folder / "rows"))
    return folder / "rows"


def conversations(layout: str, path: Path) -> tuple[list[dict], list[Rejected]]:
    items = list(get_reader(layout)([path]))
    accepted = [item.to_dict() for item in items if isinstance(item, Conversation)]
    return accepted, [item for item in items if isinstance(item, Rejected)]


@pytest.mark.parametrize("kind", ["parquet", "arrow", "csv", "folder"])
def test_xlam_table_reads_the_exact_conversations_of_its_jsonl(tmp_path, kind):
    expected, expected_rejects = conversations("xlam", FIXTURES / "xlam" / "records.jsonl")
    got, rejects = conversations("xlam", write_table(fixture_rows("xlam"), kind, tmp_path))
    assert got == expected and len(got) == 3
    assert [r.reason for r in rejects] == [r.reason for r in expected_rejects]


@pytest.mark.parametrize("layout", ["openai", "sharegpt", "toolace"])
@pytest.mark.parametrize("kind", ["parquet", "csv", "folder"])
def test_dialogue_layouts_read_the_same_from_tables(tmp_path, layout, kind):
    rows = table_rows(layout)
    assert rows  # sharegpt's fixture mixes types across records: one of them makes a table
    (tmp_path / "jsonl").mkdir()
    # a CSV's false is the text "false"; a table's null an absent key
    text = [as_read_from_csv(row) if kind == "csv" else without_nulls(row) for row in rows]
    expected, expected_rejects = conversations(layout, write_jsonl(text, tmp_path / "jsonl" / "rows.jsonl"))
    got, rejects = conversations(layout, write_table(rows, kind, tmp_path))
    assert got == expected and len(got) + len(rejects) == len(rows)
    assert [r.reason for r in rejects] == [r.reason for r in expected_rejects]


def test_a_rejected_row_is_counted_naming_file_and_row(tmp_path):
    rows = fixture_rows("xlam")[:3]
    rows[1] = {**rows[1], "answers": "[]"}  # an irrelevance sample: rejected by the xLAM reader's own check
    path = write_table(rows, "parquet", tmp_path)
    items = list(get_reader("xlam")([path]))
    rejects = [item for item in items if isinstance(item, Rejected)]
    assert len(items) == 3 and len(rejects) == 1
    assert rejects[0].location.startswith(f"{path}#1") and "answers" in rejects[0].reason


def test_values_json_cannot_hold_and_oversized_rows_are_rejects(tmp_path):
    path = tmp_path / "odd.parquet"
    pq.write_table(pa.table({"query": ["a", "b", "c" * 5000], "score": [1.0, float("nan"), 2.0]}), path)
    with record_size_limit(4000):
        items = list(iter_rows(path))
    assert items[0] == (f"{path}#0", {"query": "a", "score": 1.0})
    assert isinstance(items[1], Rejected) and items[1].location == f"{path}#1" and "JSON" in items[1].reason
    assert isinstance(items[2], Rejected) and "4,000-byte limit" in items[2].reason


def test_csv_bad_json_cell_rejects_the_row_naming_the_column(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text('query,answers,tools\nhi,"[{""name"": ",[]\n', encoding="utf-8")
    (item,) = iter_rows(path)
    assert (
        isinstance(item, Rejected) and item.location == f"{path}#0" and item.reason.startswith("answers: invalid JSON")
    )


@pytest.mark.parametrize("name", ["bad.parquet", "bad.arrow"])
def test_a_file_that_is_not_its_format_is_one_source_error(tmp_path, name):
    path = tmp_path / name
    path.write_text("not a table\n", encoding="utf-8")
    with pytest.raises(SourceError, match=r"bad\.(parquet|arrow): not a readable (Parquet|Arrow) file") as err:
        list(get_reader("xlam")([path]))
    assert "\n" not in str(err.value)


def test_a_dataset_dict_folder_names_its_splits(tmp_path):
    import datasets

    rows = fixture_rows("xlam")[:2]
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(SourceError, match=r"several splits; name one: .*dd/train"):
        list(get_reader("xlam")([tmp_path / "dd"]))
    assert len(list(get_reader("xlam")([tmp_path / "dd" / "train"]))) == 2


def test_a_plain_folder_is_still_refused(tmp_path):
    with pytest.raises(SourceError, match="is a folder"):
        list(get_reader("xlam")([tmp_path]))


def test_column_mapping_renames_file_columns_to_reader_keys(tmp_path):
    rows = [{"question": r["query"], "tools": r["tools"], "answers": r["answers"]} for r in fixture_rows("xlam")[:2]]
    path = write_table(rows, "parquet", tmp_path)
    assert next(iter_rows(path, {"query": "question"}))[1]["query"] == rows[0]["question"]
    with renamed_columns({"query": "question"}):
        items = list(get_reader("xlam")([path]))
    assert all(isinstance(item, Conversation) for item in items) and len(items) == 2
    with pytest.raises(SourceError, match=r"no column 'prompt' \(columns: question, tools, answers\)"):
        list(iter_rows(path, {"query": "prompt"}))


def test_column_mapping_applies_to_json_lines_too(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"dialog": [1]}\n{"dialog": [2], "messages": []}\n', encoding="utf-8")
    first, second = iter_rows(path, {"messages": "dialog"})
    assert first == (f"{path}:1", {"messages": [1]})
    assert isinstance(second, Rejected) and "'messages'" in second.reason


def test_struct_nulls_from_datasets_are_absent_keys(tmp_path):
    path = tmp_path / "m.parquet"
    import datasets

    rows = [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "name": "x"}]}]
    datasets.Dataset.from_list(rows).to_parquet(str(path))
    assert pq.read_table(path).to_pylist()[0]["messages"][0] == {"role": "user", "content": "hi", "name": None}
    assert next(iter_rows(path))[1] == rows[0]


@pytest.mark.slow
def test_a_large_parquet_is_read_a_batch_at_a_time(tmp_path):
    path = tmp_path / "big.parquet"
    count = 200_000
    table = pa.table({"query": [f"q{i:06d} " + "x" * 40 for i in range(count)], "n": list(range(count))})
    pq.write_table(table, path, row_group_size=10_000)
    whole = table.nbytes
    del table
    rows = iter_rows(path)
    assert iter(rows) is rows and not isinstance(rows, list)  # a generator: nothing read yet
    before = pa.total_allocated_bytes()
    assert next(rows) == (f"{path}#0", {"query": "q000000 " + "x" * 40, "n": 0})
    assert pa.total_allocated_bytes() - before < whole / 4  # a row group (1/20 of it) in memory, not the file
    assert sum(1 for _ in rows) == count - 1


def test_hermes_calls_in_text_read_from_parquet_as_from_json_lines(tmp_path):
    from tests.sources.test_call_markup import HERMES

    rows = HERMES[:2]  # hermes-function-calling-v1's layout and a Qwen-rendered one: <tool_call> in the text
    (tmp_path / "jsonl").mkdir()
    expected, _ = conversations(
        "sharegpt", write_jsonl([without_nulls(r) for r in rows], tmp_path / "jsonl" / "rows.jsonl")
    )
    got, rejects = conversations("sharegpt", write_table(rows, "parquet", tmp_path))
    assert got == expected and not rejects
    assert [len(m.get("tool_calls", [])) for m in got[0]["messages"]] == [0, 2, 0, 0, 0]


def test_read_renamed_sets_the_mapping_only_while_the_reader_reads(tmp_path):
    rows = [{"question": r["query"], "tools": r["tools"], "answers": r["answers"]} for r in fixture_rows("xlam")[:2]]
    path = write_table(rows, "csv", tmp_path)
    records = read_renamed(get_reader("xlam"), [path], {"query": "question"})
    first = next(records)
    assert isinstance(first, Conversation) and first.messages[0].content == rows[0]["question"]
    assert next(iter_rows(path))[1]["question"] == rows[0]["question"]  # between steps: no mapping in force
    assert isinstance(next(records), Conversation) and next(records, None) is None


def test_csv_cells_past_the_header_reject_the_row(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("query,answers\nhi,[],extra\nok,[]\n", encoding="utf-8")
    first, second = iter_rows(path)
    assert isinstance(first, Rejected) and first.location == f"{path}#0" and "1 more cell" in first.reason
    assert second == (f"{path}#1", {"query": "ok", "answers": []})
