"""The canonical reader: JSON Lines (or a JSON array) of canonical conversations, already converted.

INPUTS: one or more canonical files (``tooltrain data convert`` output), or the same records in Parquet, Arrow,
CSV or a ``datasets`` folder (``train.sources.tables``).

The one reader of canonical records: training data (``data.sources.N.name: canonical``), ``data build``
inputs and ``eval run``/the eval callback's references all read through it. Records are read with the
strict JSON rules of ``train.base.records.iter_json_records`` (no NaN/inf or duplicate keys, no lone
surrogates, nothing over the record size limit); a record that is not a conversation (a tool query, a
library) or fails the schema is a ``Rejected`` naming its ``file:line``, so read = accepted + rejected.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from train.base.records import Rejected, SourceError, iter_json_records
from train.schema import Conversation, record_from_dict
from train.sources.tables import is_saved_dataset, iter_rows


def read(inputs: list[Path]) -> Iterator[Conversation | Rejected]:
    """Each file's records in order: a Conversation, or a Rejected with its location and reason."""
    for path in map(Path, inputs):
        if not path.is_file() and not is_saved_dataset(path):
            raise SourceError(f"{path}: {'not a file' if path.exists() else 'no such file'}")
        for item in iter_rows(path):
            if isinstance(item, Rejected):
                yield item
                continue
            location, obj = item
            try:
                record = record_from_dict(obj)
            except ValueError as err:  # SchemaError is a ValueError
                yield Rejected(location, str(err))
                continue
            if isinstance(record, Conversation):
                yield record
            else:
                yield Rejected(location, f"a {record.kind}, not a conversation")


def looks_canonical(path: Path) -> bool:
    """Whether the file's first record is a canonical conversation (JSON Lines or a JSON array)."""
    if not path.is_file():  # a benchmark folder (ToolBench's) is for its reader
        return False
    try:
        for item in iter_json_records(path):
            return not isinstance(item, Rejected) and isinstance(item[1], dict) and "messages" in item[1]
    except SourceError:
        return False
    return False


__all__ = ["looks_canonical", "read"]
