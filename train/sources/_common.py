"""Small pieces every reader shares: where a record came from, why it was rejected, JSON I/O."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from train.schema import SchemaError, Tool


class SourceError(Exception):
    """The inputs cannot be read at all (missing file, wrong arity, not the expected layout)."""


@dataclass
class Rejected:
    """A source record that could not become a canonical record."""

    location: str  # "file:line" for JSON Lines, "file#index" for JSON arrays and CSV rows
    reason: str
    raw: Any = None

    def to_dict(self) -> dict[str, Any]:
        raw = self.raw
        try:
            json.dumps(raw)
        except (TypeError, ValueError):
            raw = repr(raw)
        return {"location": self.location, "reason": self.reason, "raw": raw}


def check_arity(inputs: list[Path], names: tuple[str, ...], optional: int = 0) -> None:
    """Fail early when a reader is given the wrong number of inputs, naming what it expects."""
    low, high = len(names) - optional, len(names)
    if not low <= len(inputs) <= high:
        raise SourceError(f"expected {' then '.join(names)}" + (f" ({optional} optional)" if optional else "") + f", got {len(inputs)} input(s)")
    for path in inputs:
        if not path.exists():
            raise SourceError(f"{path}: no such file or directory")


def read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise SourceError(f"{path}: cannot read ({err.strerror or err})") from err
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise SourceError(f"{path}: not UTF-8 at byte {err.start}") from err


# Bytes that were not UTF-8 survive lenient decoding as lone surrogates (errors="surrogateescape").
UNDECODABLE = re.compile("[\udc80-\udcff]")
_WHITESPACE = re.compile(r"\s*")
REST_LOST = "the rest of the file is unreadable"


def _no_constants(name: str) -> Any:
    # NaN/Infinity are not JSON; kept, they would be written back into the canonical file as-is.
    raise ValueError(f"non-standard JSON constant {name}")


def load_json(path: Path) -> Any:
    """A whole-file JSON document; a broken file is a SourceError naming line and column."""
    try:
        return json.loads(read_text(path), parse_constant=_no_constants)
    except json.JSONDecodeError as err:
        raise SourceError(f"{path}: invalid JSON at line {err.lineno} column {err.colno}: {err.msg}") from err
    except (ValueError, RecursionError) as err:  # integers past the digit limit, absurd nesting
        raise SourceError(f"{path}: invalid JSON: {err}") from err


def iter_json_records(path: Path, salvage: bool = True) -> Iterator[tuple[str, Any] | Rejected]:
    """Yield ``(location, object)`` for each record of a JSON array file or a JSON Lines file.

    The layout is sniffed from the first non-blank character. In JSON Lines a line that is not
    UTF-8 or not JSON becomes a ``Rejected`` and reading goes on; blank lines are not records.
    A JSON array is read element by element (``iter_json_array``): a file cut off or broken
    part-way keeps every record before the break and yields the break as one ``Rejected``.
    ``salvage=False`` reads an array whole instead: any break is a ``SourceError``.
    """
    try:
        with path.open("rb") as fh:
            head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError as err:
        raise SourceError(f"{path}: cannot read ({err.strerror or err})") from err
    if head.startswith(b"[") and salvage:
        yield from iter_json_array(path)
        return
    if head.startswith(b"["):
        items = load_json(path)
        for index, obj in enumerate(items):
            yield f"{path}#{index}", obj
        return
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            location = f"{path}:{lineno}"
            try:
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as err:
                yield Rejected(location, f"not UTF-8 at byte {err.start}", raw[:200].decode("utf-8", "replace"))
                continue
            if not line.strip():
                continue
            try:
                yield location, json.loads(line, parse_constant=_no_constants)
            except json.JSONDecodeError as err:
                yield Rejected(location, f"invalid JSON at column {err.colno}: {err.msg}", line[:200])
            except RecursionError:
                yield Rejected(location, "invalid JSON: nested too deeply", line[:200])
            except ValueError as err:  # e.g. an integer past Python's digit limit
                yield Rejected(location, f"invalid JSON: {err}", line[:200])


def iter_json_array(path: Path) -> Iterator[tuple[str, Any] | Rejected]:
    """``(path#index, element)`` for each element of a top-level JSON array, decoded one at a time.

    A break (truncation, a syntax error, a missing ``]``, text after it) is one ``Rejected`` at the
    index where it happens, naming line and column; the elements before it are kept, and reading
    stops (where the next record would start is unknown). Undecodable bytes reject only the element
    that holds them. Only a file that is not a JSON array at all is a ``SourceError``.
    """
    text = _read_lenient(path)
    decoder = json.JSONDecoder(parse_constant=_no_constants)
    pos = _WHITESPACE.match(text, 0).end()
    if not text.startswith("[", pos):
        raise SourceError(f"{path}: expected a JSON array of records")
    pos = _WHITESPACE.match(text, pos + 1).end()
    index = 0
    closed = text.startswith("]", pos)  # [] holds no record
    while not closed:
        location = f"{path}#{index}"
        raw = printable(text[pos : pos + 200])
        try:
            obj, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            where = f"line {err.lineno} column {err.colno}"
            yield Rejected(location, f"invalid JSON at {where}: {err.msg}; {REST_LOST}", raw)
            return
        except ValueError as err:  # NaN/Infinity, or an integer past Python's digit limit
            yield Rejected(location, f"invalid JSON: {err}; {REST_LOST}", raw)
            return
        except RecursionError:
            yield Rejected(location, f"invalid JSON: nested too deeply; {REST_LOST}", raw)
            return
        if UNDECODABLE.search(text, pos, end):
            yield Rejected(location, "not UTF-8: undecodable bytes in this record", printable(text[pos:end][:200]))
        else:
            yield location, obj
        index += 1
        pos = _WHITESPACE.match(text, end).end()
        if text.startswith(",", pos):
            pos = _WHITESPACE.match(text, pos + 1).end()
            continue
        closed = text.startswith("]", pos)
        if not closed:
            line, column = _line_column(text, pos)
            if pos >= len(text):
                reason = "file ends before the closing ']' (truncated?)"
            else:
                reason = f"expected ',' or ']' at line {line} column {column}; {REST_LOST}"
            yield Rejected(f"{path}#{index}", reason, printable(text[pos : pos + 200]))
            return
    after = _WHITESPACE.match(text, pos + 1).end()
    if after < len(text):
        line, column = _line_column(text, after)
        reason = f"text after the closing ']' at line {line} column {column}"
        yield Rejected(f"{path}#{index}", reason, printable(text[after : after + 200]))


def _read_lenient(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")
    except OSError as err:
        raise SourceError(f"{path}: cannot read ({err.strerror or err})") from err


def _line_column(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - text.rfind("\n", 0, pos)


def printable(value: Any) -> Any:
    """Raw text for a reject file: undecodable bytes shown as U+FFFD rather than lone surrogates."""
    if isinstance(value, list):
        return [printable(v) for v in value]
    return UNDECODABLE.sub("\ufffd", value) if isinstance(value, str) else value


def parse_json_string(text: Any, what: str) -> Any:
    """Decode a JSON document stored as a string field (glaive tools, xLAM answers ...)."""
    if not isinstance(text, str):
        raise SchemaError(what, f"expected a JSON string, got {type(text).__name__}")
    try:
        return json.loads(text, parse_constant=_no_constants)
    except json.JSONDecodeError as err:
        raise SchemaError(what, f"invalid JSON at column {err.colno}: {err.msg}") from err
    except (ValueError, RecursionError) as err:
        raise SchemaError(what, f"invalid JSON: {err}") from err


def tool_from_spec(spec: Any, path: str = "tool") -> Tool:
    """A tool from either the wrapped ``{"type": "function", "function": {...}}`` form or a bare
    ``{"name", "description", "parameters"}`` function dict, as sources mix both."""
    if isinstance(spec, dict) and "function" in spec and isinstance(spec["function"], dict):
        return Tool.from_dict({"type": spec.get("type", "function"), "function": spec["function"]}, path)
    if not isinstance(spec, dict):
        raise SchemaError(path, f"expected a function definition object, got {type(spec).__name__}")
    known = {k: spec[k] for k in ("name", "description", "parameters") if k in spec}
    return Tool.from_dict({"type": "function", "function": known}, path)


class CallIds:
    """Deterministic tool-call ids for sources that have none: call_0, call_1, ... per conversation.

    ``pending`` remembers issued ids in order so tool results can be linked to the earliest
    unanswered call of the same name (the order sources write results in).
    """

    def __init__(self) -> None:
        self._next = 0
        self._pending: list[tuple[str, str]] = []  # (id, tool name)

    def issue(self, name: str) -> str:
        call_id = f"call_{self._next}"
        self._next += 1
        self._pending.append((call_id, name))
        return call_id

    def answer(self, name: str | None) -> str | None:
        """The id of the earliest unanswered call to ``name`` (any call when name is None)."""
        for index, (call_id, called) in enumerate(self._pending):
            if name is None or called == name:
                del self._pending[index]
                return call_id
        return None
