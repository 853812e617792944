"""Rows from the files people keep datasets in: ``iter_rows(path)`` for every dialogue reader and the canonical one.

``iter_rows`` yields ``(location, row)`` or a ``Rejected`` per record, the contract of
``train.base.records.iter_json_records``, whatever holds the records:

* ``.parquet``: read a batch at a time (``pyarrow.parquet.ParquetFile.iter_batches``), never the whole table;
* ``.arrow``: an Arrow IPC file or stream (what ``datasets`` caches and saves), batch by batch, memory-mapped;
* ``.csv``: the ``csv`` module, a row at a time; every cell is text (see below);
* a folder written by ``datasets``' ``Dataset.save_to_disk`` (``state.json`` beside its ``.arrow`` files), through
  ``datasets.load_from_disk`` (memory-mapped) and read in batches; a ``DatasetDict`` folder is refused naming its
  splits (``FOLDER/train`` is one), as reading every split would train on the test one;
* anything else (``.json``, ``.jsonl``, ``.gz``) is JSON or JSON Lines, read as before.

So memory stays bounded by a batch whatever the corpus size (the tokenized cache already is). A row location is
``file#index`` (0-based, as JSON arrays), so a reject names file and row. Every row keeps the strict checks of a
JSON record: a value JSON cannot hold (NaN, Infinity, bytes, a timestamp) or a row over ``data.max_record_bytes``
is a ``Rejected`` and reading goes on; a file that cannot be read at all is one ``SourceError``.

Why nulls are dropped: a table has every column in every row and every field in every struct, so a record that
had no ``tool_calls`` reads back ``"tool_calls": None`` (``datasets`` fills structs that way). A null in a table
row, at any depth inside a struct, is therefore read as "absent" and left out. JSON records keep their nulls.

Why some CSV cells are decoded: CSV holds only text, so a column a reader needs as a list or an object
(``NESTED_COLUMNS``: ``messages``, ``conversations``, ``tools``, ...) is written as JSON text; such a cell is
decoded with the strict JSON rules (a bad one rejects the row naming the column). Other cells stay text, an empty
one is absent.

Column mapping: ``columns={"messages": "dialog"}`` reads the file's ``dialog`` column as the reader's
``messages`` key (reader key -> file column), for any file type. It is an argument here, or set for a whole read
with ``read_renamed(reader, inputs, mapping)`` / ``renamed_columns(mapping)`` (a context variable, like
``record_size_limit``, because it must reach the row loop of every reader without changing their signature).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from train.base.records import (
    REST_LOST,
    RecordError,
    Rejected,
    SourceError,
    iter_json_records,
    max_record_bytes,
    open_input,
    parse_json_string,
    too_big,
)
from train.schema import SchemaError

TABLE_SUFFIXES = {".parquet": "Parquet", ".arrow": "Arrow", ".csv": "CSV"}
NESTED_COLUMNS = ("messages", "conversations", "tools", "functions", "answers", "meta")
BATCH_ROWS = 1024  # rows decoded to Python at a time: bounded memory, and few enough calls into Arrow

_columns: ContextVar[Mapping[str, str] | None] = ContextVar("columns", default=None)


@contextmanager
def renamed_columns(mapping: Mapping[str, str] | None) -> Iterator[None]:
    """Reads inside take the reader key ``k`` from the file column ``mapping[k]`` (module docstring)."""
    token = _columns.set(dict(mapping or {}) or None)
    try:
        yield
    finally:
        _columns.reset(token)


def read_renamed(
    reader: Callable[[list[Path]], Iterator[Any]], inputs: list[Path], columns: Mapping[str, str] | None
) -> Iterator[Any]:
    """``reader(inputs)`` with ``columns`` in force while it reads (a source's column mapping), and only then: the
    mapping is set around each step of the reader, so it never leaks into the code consuming the records."""
    records = reader(inputs)
    while True:
        with renamed_columns(columns):
            try:
                item = next(records)
            except StopIteration:
                return
        yield item


def is_saved_dataset(path: Path) -> bool:
    """A folder written by ``datasets``' ``save_to_disk`` (a Dataset or a DatasetDict)."""
    return path.is_dir() and any((path / name).is_file() for name in ("state.json", "dataset_dict.json"))


def is_table(path: Path) -> bool:
    """Whether ``iter_rows`` reads ``path`` as a table rather than as JSON."""
    return path.suffix.lower() in TABLE_SUFFIXES or is_saved_dataset(path)


def iter_rows(path: Path, columns: Mapping[str, str] | None = None) -> Iterator[tuple[str, Any] | Rejected]:
    """``(location, record)`` or ``Rejected`` for each record of ``path`` (module docstring), renamed by ``columns``
    (default: the ``renamed_columns`` in force)."""
    mapping = dict((_columns.get() if columns is None else columns) or {})
    if not is_table(path):
        for item in iter_json_records(path):
            yield item if isinstance(item, Rejected) else _renamed_item(item, mapping)
        return
    kind = "datasets" if path.is_dir() else TABLE_SUFFIXES[path.suffix.lower()]
    batches = _saved_dataset(path) if path.is_dir() else _READERS[kind](path)
    index = 0
    try:
        for names, batch in batches:
            _check_mapping(path, names, mapping)
            for row in batch:
                yield _checked_row(f"{path}#{index}", row, mapping, kind == "CSV")
                index += 1
    except _Broken as broken:
        yield Rejected(f"{path}#{index}", f"{broken}; {REST_LOST}")
    except SourceError:
        raise
    except Exception as err:  # pyarrow and datasets raise many kinds; any of them means "unreadable"
        what = "folder saved by datasets" if kind == "datasets" else f"{kind} file"
        raise SourceError(f"{path}: not a readable {what} ({type(err).__name__}: {_first_line(err)})") from err


class _Broken(Exception):
    """A CSV file broken part-way: the rows before stay read, the break is one reject."""


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [""])[0][:300]


def _parquet(path: Path) -> Iterator[tuple[list[str], list[dict[str, Any]]]]:
    import pyarrow.parquet as pq

    with open_input(path) as fh:  # refuses FIFOs and devices like every other input
        parquet = pq.ParquetFile(fh)
        names = parquet.schema_arrow.names
        for batch in parquet.iter_batches(batch_size=BATCH_ROWS):  # a row group at a time, never the whole file
            yield names, batch.to_pylist()


def _arrow(path: Path) -> Iterator[tuple[list[str], list[dict[str, Any]]]]:
    import pyarrow as pa

    open_input(path).close()  # refuses FIFOs and devices before mapping anything
    with pa.memory_map(str(path)) as source:
        try:
            reader: Any = pa.ipc.open_file(source)
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
        except pa.ArrowInvalid:  # not the file format: the stream format (what ``datasets`` writes)
            source.seek(0)
            reader = pa.ipc.open_stream(source)
            batches = iter(reader)
        for batch in batches:
            for start in range(0, batch.num_rows, BATCH_ROWS):
                yield reader.schema.names, batch.slice(start, BATCH_ROWS).to_pylist()


def _csv(path: Path) -> Iterator[tuple[list[str], list[dict[str, Any]]]]:
    # a cell may hold a whole record: let it be as big as a record may be (the size check then names it)
    csv.field_size_limit(max(csv.field_size_limit(), max_record_bytes() + 1))
    try:
        fh = open_input(path)
    except OSError as err:
        raise SourceError(f"{path}: cannot read ({err.strerror or err})") from err
    with io.TextIOWrapper(fh, encoding="utf-8-sig", newline="") as text:
        rows = csv.DictReader(text)
        try:
            names = list(rows.fieldnames or [])
            for row in rows:
                yield names, [row]
        except UnicodeDecodeError as err:
            raise _Broken(f"not UTF-8 ({err.reason})") from None
        except csv.Error as err:
            raise _Broken(f"unreadable CSV at line {rows.line_num}: {err}") from None


def _saved_dataset(path: Path) -> Iterator[tuple[list[str], list[dict[str, Any]]]]:
    if (path / "dataset_dict.json").is_file():
        try:
            splits = json.loads((path / "dataset_dict.json").read_text(encoding="utf-8")).get("splits", [])
        except (OSError, ValueError, AttributeError):
            splits = []
        named = ", ".join(f"{path / split}" for split in splits) or "one of its split folders"
        raise SourceError(f"{path}: a DatasetDict folder holds several splits; name one: {named}")
    import datasets

    dataset = datasets.load_from_disk(str(path))  # memory-mapped: nothing is read until a batch is asked for
    names = list(dataset.column_names)
    for batch in dataset.iter(batch_size=BATCH_ROWS):
        yield names, [dict(zip(names, values)) for values in zip(*(batch[name] for name in names))]


_READERS = {"Parquet": _parquet, "Arrow": _arrow, "CSV": _csv}


def _check_mapping(path: Path, names: list[str], mapping: Mapping[str, str]) -> None:
    """A table has one set of columns: a mapped column it lacks, or a clash, is an error about the file."""
    missing = [column for column in mapping.values() if column not in names]
    if missing:
        raise SourceError(f"{path}: no column {', '.join(map(repr, missing))} (columns: {', '.join(names)})")
    clash = [key for key, column in mapping.items() if key in names and key != column and key not in mapping.values()]
    if clash:
        raise SourceError(f"{path}: column {clash[0]!r} exists and is also mapped from {mapping[clash[0]]!r}")


def rename(row: Any, mapping: Mapping[str, str]) -> Any:
    """``row`` with each mapped file column under its reader key (SchemaError-free: a clash is a ValueError)."""
    if not mapping or not isinstance(row, dict):
        return row
    moved = {key: row[column] for key, column in mapping.items() if column in row}
    clash = [key for key in moved if key in row and key not in mapping.values()]
    if clash:
        raise ValueError(f"the record has {clash[0]!r} and its mapped column {mapping[clash[0]]!r}")
    kept = {key: value for key, value in row.items() if key not in mapping.values()}
    return {**kept, **moved}


def _renamed_item(item: tuple[str, Any], mapping: Mapping[str, str]) -> tuple[str, Any] | Rejected:
    location, obj = item
    try:
        return location, rename(obj, mapping)
    except ValueError as err:
        return Rejected(location, str(err), obj)


def _checked_row(location: str, row: dict[str, Any], mapping: Mapping[str, str], is_csv: bool) -> Any:
    """One table row as a record: nulls dropped, CSV's nested cells decoded, JSON-only values, within the size."""
    try:
        if is_csv and None in row:  # csv.DictReader keeps cells past the header's under None
            raise RecordError(f"{len(row[None])} more cell(s) than the header has columns")
        if is_csv:  # JSON text in a cell keeps its nulls: they were written, not filled in
            record = {
                key: _cell(key, value) for key, value in row.items() if key is not None and value not in ("", None)
            }
        else:
            record = _without_nulls(row)
        record = rename(record, mapping)
        size = len(json.dumps(record, ensure_ascii=False, allow_nan=False).encode("utf-8", "surrogatepass"))
    except RecordError as err:
        return Rejected(location, str(err), row)
    except (TypeError, ValueError) as err:  # bytes, a timestamp, NaN: not JSON, and no reader can take them
        return Rejected(location, f"not a JSON value: {_first_line(err)}", row)  # Rejected.to_dict shows its repr
    if size > max_record_bytes():
        return Rejected(location, str(too_big(size, max_record_bytes())))
    return location, record


def _cell(column: str, text: str) -> Any:
    if column not in NESTED_COLUMNS or not text.lstrip().startswith(("[", "{")):
        return text
    try:  # the readers' own decoding of JSON held in a string field: the same reject reasons as from JSON Lines
        return parse_json_string(text, column)
    except SchemaError as err:
        raise RecordError(str(err)) from None


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
    return value


__all__ = [
    "NESTED_COLUMNS",
    "TABLE_SUFFIXES",
    "is_saved_dataset",
    "is_table",
    "iter_rows",
    "read_renamed",
    "renamed_columns",
]
