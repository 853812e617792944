"""Small pieces every reader shares: where a record came from, why it was rejected, JSON I/O."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO

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


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str:
    """What a path that is not a regular file is, from its ``st_mode``, for an error message."""
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


class NotRegularFile(SourceError):
    """An input that is a device, a FIFO, a socket or a folder where a data file is expected."""


def open_input(path: Path) -> BinaryIO:
    """An input file opened for reading (symlinks followed); ``NotRegularFile`` for anything but a
    regular file, the OSError of ``open`` when it cannot be opened (the caller words it).

    Every verb and the training build open their data files here. A device or a FIFO is never a data
    file: reading one may never end (``/dev/zero``) and opening a FIFO blocks until a writer comes. So
    the file is opened without blocking and refused on what ``fstat`` says of what was opened."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"{path}: is {file_kind(mode)}, not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def input_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a data file (``no such file``, ``is a FIFO (named pipe), not a regular
    file`` ...), or None: the check a verb makes before loading anything heavy (``open_input`` still
    checks what it opens)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as err:
        return f"cannot read ({err.strerror or err})"
    return None if stat.S_ISREG(mode) else f"is {file_kind(mode)}, not a regular file"


def refuse_special(path: Path) -> None:
    """NotRegularFile when ``path`` is a device, a FIFO or a socket (a folder or a regular file passes):
    for reader inputs that may be folders, checked before a reader opens anything under them."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # missing or unreadable: the reader says so when it opens it
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise NotRegularFile(f"{path}: is {file_kind(mode)}, not a regular file")


def check_arity(inputs: list[Path], names: tuple[str, ...], optional: int = 0) -> None:
    """Fail early when a reader is given the wrong number of inputs, naming what it expects."""
    low, high = len(names) - optional, len(names)
    if not low <= len(inputs) <= high:
        raise SourceError(
            f"expected {' then '.join(names)}"
            + (f" ({optional} optional)" if optional else "")
            + f", got {len(inputs)} input(s)"
        )
    for path in inputs:
        if not path.exists():
            raise SourceError(f"{path}: no such file or directory")
        refuse_special(path)


def input_files(path: Path) -> list[Path]:
    """The files an input names: itself, or every file under an input folder (sorted: a stable order)."""
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of a file's bytes, read in chunks and computed once per process for a given size and
    modification time: the dataset's cache key and a run's record of its inputs both identify content by it."""
    info = path.stat()
    return _sha256(str(path), info.st_size, info.st_mtime_ns)


@lru_cache(maxsize=1024)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(8 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def read_text(path: Path) -> str:
    try:
        with open_input(path) as fh:
            data = fh.read()
    except OSError as err:
        raise SourceError(f"{path}: cannot read ({err.strerror or err})") from err
    if path.suffix == ".gz":  # a gzipped input reads as its text (a tiny asset of the package ships one)
        import gzip

        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as err:
            raise SourceError(f"{path}: not a readable gzip file ({err})") from err
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise SourceError(f"{path}: not UTF-8 at byte {err.start}") from err


# Bytes that were not UTF-8 survive lenient decoding as lone surrogates (errors="surrogateescape").
UNDECODABLE = re.compile("[\udc80-\udcff]")
_WHITESPACE = re.compile(r"\s*")
REST_LOST = "the rest of the file is unreadable"

# A record bigger than this is refused before it is parsed: parsing, rendering and tokenizing one
# record costs about 250 times its size in memory (a 50 MB line took a training run to 13.5 GB).
# Training reads ``data.max_record_bytes``; the data verbs use this default.
DEFAULT_MAX_RECORD_BYTES = 8 * 1024 * 1024
_max_record_bytes: ContextVar[int] = ContextVar("max_record_bytes", default=DEFAULT_MAX_RECORD_BYTES)


@contextmanager
def record_size_limit(max_bytes: int) -> Iterator[None]:
    """Readers called inside refuse records over ``max_bytes``. A context variable rather than a
    parameter because the limit is applied deep inside thirteen readers that share these helpers."""
    token = _max_record_bytes.set(max_bytes)
    try:
        yield
    finally:
        _max_record_bytes.reset(token)


def max_record_bytes() -> int:
    return _max_record_bytes.get()


class RecordError(ValueError):
    """Why the JSON text of one record is refused. ``code`` and ``where`` are what ``data validate``
    reports (``not-utf8``, ``unreadable-line`` or ``text-encoding``, at ``line`` or a path in the
    record); ``record`` is the decoded value when decoding got that far."""

    def __init__(self, detail: str, code: str = "unreadable-line", where: str = "line", record: Any = None):
        self.detail, self.code, self.where, self.record = detail, code, where, record
        super().__init__(f"text that is not valid Unicode at {where}: {detail}" if code == "text-encoding" else detail)


def too_big(size: int, limit: int) -> RecordError:
    return RecordError(f"record of {size:,} bytes is over the {limit:,}-byte limit (data.max_record_bytes); not read")


def _no_constants(name: str) -> Any:
    # NaN/Infinity are not JSON; kept, they would be written back into the canonical file as-is.
    raise ValueError(f"non-standard JSON constant {name}")


def _finite_float(text: str) -> float:
    # Python reads 1e400 as inf, which json.dumps then writes as Infinity: not JSON any more.
    value = float(text)
    if math.isinf(value):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise ValueError(f"number {shown} is out of range (it would become Infinity)")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of two equal keys without a word; which one the author meant is unknown.
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {printable(key)!r}")
            seen.add(key)
    return obj


# Every JSON document a reader decodes goes through this decoder: standard JSON only.
STRICT_JSON = json.JSONDecoder(parse_constant=_no_constants, parse_float=_finite_float, object_pairs_hook=_unique_keys)
# Where a lone surrogate can come from in text that was valid UTF-8: a \uD800-\uDFFF escape.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def strict_loads(text: str) -> Any:
    """``json.loads`` for data: NaN, Infinity, out-of-range numbers and duplicate keys are ValueErrors."""
    return STRICT_JSON.decode(text)


def _invalid(err: ValueError | RecursionError) -> str:
    if isinstance(err, RecursionError):
        return "invalid JSON: nested too deeply"
    # an integer past the digit limit: Python's advice after ';' is about its own settings
    return f"invalid JSON: {str(err).split(';')[0]}"


def check_unicode(value: Any, text: str, start: int = 0, end: int | None = None) -> None:
    """RecordError (``text-encoding``) when ``value``, decoded from ``text[start:end]``, holds a
    lone surrogate: not text, it cannot be written as UTF-8 and tokenizers fail on it. Only
    records whose text holds a surrogate escape are walked."""
    if not _SURROGATE_ESCAPE.search(text, start, len(text) if end is None else end):
        return
    from train.validate import iter_strings

    for where, string in iter_strings(value, ""):
        found = _LONE_SURROGATE.search(string)
        if found:
            detail = f"lone surrogate U+{ord(found.group()):04X} at character {found.start()}"
            raise RecordError(detail, "text-encoding", where or "record", value)


def decode_record(text: str) -> Any:
    """The value of one record's JSON text (a JSON Lines line), or a RecordError saying why not."""
    try:
        if text.startswith("\ufeff"):  # as json.loads says it; a BOM is only skipped at the start of a file
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        value = STRICT_JSON.decode(text)
    except json.JSONDecodeError as err:
        raise RecordError(f"invalid JSON at column {err.colno}: {err.msg}") from None
    except (ValueError, RecursionError) as err:
        raise RecordError(_invalid(err)) from None
    check_unicode(value, text)
    return value


BLANK = object()  # not None: a line holding `null` is a record (a broken one), a blank line is not


def decode_line(raw: bytes | RecordError, lineno: int) -> Any:
    """A JSON Lines line (from ``iter_lines``) -> its value, or ``BLANK``; RecordError says why not.

    The one place where a line becomes a value, for every verb and the training build: UTF-8, then
    ``decode_record``."""
    if isinstance(raw, RecordError):
        raise raw
    try:
        text = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
    except UnicodeDecodeError as err:
        raise RecordError(f"not UTF-8 at byte {err.start}", "not-utf8") from None
    text = text.rstrip("\r\n")  # without it a line cut off inside a string reads as "Invalid control character"
    if not text.strip():
        return BLANK
    return decode_record(text)


def iter_lines(fh: BinaryIO, limit: int | None = None) -> Iterator[bytes | RecordError]:
    """Each line of a binary file; a line over ``limit`` bytes (default ``max_record_bytes()``) is
    a RecordError naming its size, skipped a chunk at a time so it is never held whole."""
    limit = max_record_bytes() if limit is None else limit
    while raw := fh.readline(limit + 1):
        if raw.endswith(b"\n") or len(raw) <= limit:
            yield raw
            continue
        size = len(raw)
        while (chunk := fh.readline(1 << 20)) and not chunk.endswith(b"\n"):
            size += len(chunk)
        size += len(chunk.rstrip(b"\r\n"))
        yield too_big(size, limit)


def load_json(path: Path) -> Any:
    """A whole-file JSON document; a broken file is a SourceError naming line and column."""
    try:
        return STRICT_JSON.decode(read_text(path))
    except json.JSONDecodeError as err:
        raise SourceError(f"{path}: invalid JSON at line {err.lineno} column {err.colno}: {err.msg}") from err
    except (ValueError, RecursionError) as err:  # integers past the digit limit, absurd nesting
        raise SourceError(f"{path}: invalid JSON: {err}") from err


def iter_json_records(path: Path, salvage: bool = True) -> Iterator[tuple[str, Any] | Rejected]:
    """Yield ``(location, object)`` for each record of a JSON array file or a JSON Lines file.

    The layout is sniffed from the first non-blank character. In JSON Lines a line that is not
    UTF-8, not standard JSON (NaN, a number out of range, a duplicate key), not Unicode (a lone
    surrogate) or over the record size limit becomes a ``Rejected`` and reading goes on; blank
    lines are not records. A JSON array is read element by element (``iter_json_array``), with
    the same checks: a file cut off or broken part-way keeps every record before the break and
    yields the break as one ``Rejected``. ``salvage=False`` reads an array whole instead: any
    break is a ``SourceError``.
    """
    try:
        with open_input(path) as fh:
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
    with open_input(path) as fh:
        for lineno, raw in enumerate(iter_lines(fh), start=1):
            location = f"{path}:{lineno}"
            try:
                value = decode_line(raw, lineno)
            except RecordError as err:
                yield Rejected(location, str(err), _shown(raw))
                continue
            if value is not BLANK:
                yield location, value


def _shown(raw: bytes | RecordError) -> str | None:
    """The start of a refused line, for the rejects file."""
    return None if isinstance(raw, RecordError) else raw[:200].decode("utf-8", "replace")


def iter_json_array(path: Path) -> Iterator[tuple[str, Any] | Rejected]:
    """``(path#index, element)`` for each element of a top-level JSON array, decoded one at a time.

    A break (truncation, a syntax error, a missing ``]``, text after it) is one ``Rejected`` at the
    index where it happens, naming line and column; the elements before it are kept, and reading
    stops (where the next record would start is unknown). Undecodable bytes, a lone surrogate,
    NaN, an out-of-range number or a duplicate key reject only the element that holds them, and
    so does an element over the record size limit, found before it is decoded past the limit.
    Only a file that is not a JSON array at all is a ``SourceError``.
    """
    text = _read_lenient(path)
    limit = max_record_bytes()
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
            obj, end = _decode_element(text, pos, limit)
        except json.JSONDecodeError as err:
            line, column = _line_column(text, err.pos)
            yield Rejected(location, f"invalid JSON at line {line} column {column}: {err.msg}; {REST_LOST}", raw)
            return
        except _Oversize as big:
            if big.end is None:
                yield Rejected(location, f"{too_big(len(text) - pos, limit)}; {REST_LOST}", raw)
                return
            end = big.end
            yield Rejected(location, str(too_big(_size_over(text, pos, end, limit) or end - pos, limit)), raw)
        except (ValueError, RecursionError) as err:  # NaN, 1e400, a duplicate key, the digit limit, nesting
            end = _skip_value(text, pos)
            if end is None:
                yield Rejected(location, f"{_invalid(err)}; {REST_LOST}", raw)
                return
            yield Rejected(location, _invalid(err), raw)
        else:
            if UNDECODABLE.search(text, pos, end):
                yield Rejected(location, "not UTF-8: undecodable bytes in this record", printable(text[pos:end][:200]))
            elif (size := _size_over(text, pos, end, limit)) is not None:
                yield Rejected(location, str(too_big(size, limit)), raw)
            else:
                try:
                    check_unicode(obj, text, pos, end)
                    yield location, obj
                except RecordError as err:
                    yield Rejected(location, str(err), raw)
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


class _Oversize(Exception):
    """An array element runs past the size limit; ``end`` is where it ends (None: nowhere)."""

    def __init__(self, end: int | None):
        self.end = end


_FIRST_WINDOW = 1 << 14  # most records are a few kB: little to copy, rarely a second try


def _decode_element(text: str, pos: int, limit: int) -> tuple[Any, int]:
    """``(value, end)`` of the element at ``pos``. When the rest of the file is over ``limit``
    characters it is decoded from a window of the text that grows (16 Ki characters, doubling) up
    to the limit, so an element over the limit is never decoded whole: ``_Oversize``. Errors are
    raised with positions in ``text``."""
    if len(text) - pos <= limit:
        return STRICT_JSON.raw_decode(text, pos)
    window = min(_FIRST_WINDOW, limit + 1)
    while True:
        try:
            value, end = STRICT_JSON.raw_decode(text[pos : pos + window])
            return value, pos + end
        except json.JSONDecodeError as err:
            if not (err.msg.startswith("Unterminated string") or err.pos >= window - 6):
                raise json.JSONDecodeError(err.msg, text, pos + err.pos) from None  # not the window's edge
            if window > limit:
                raise _Oversize(_skip_value(text, pos)) from None
            window = min(window * 2, limit + 1, len(text) - pos)
            if window == len(text) - pos:  # the whole rest: what fails now is a real error
                return STRICT_JSON.raw_decode(text, pos)


# A JSON string, or one bracket: enough to find where a value ends without decoding it.
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_SCALAR = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[^\s,\]}]+')


def _skip_value(text: str, pos: int) -> int | None:
    """Where the JSON value at ``pos`` ends, found by matching brackets (strings skipped whole)
    without building it; None when the text ends first."""
    if not text.startswith(("[", "{"), pos):
        scalar = _SCALAR.match(text, pos)
        return scalar.end() if scalar and (scalar.group()[0] != '"' or len(scalar.group()) > 1) else None
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text, pos):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
        elif token in ("]", "}"):
            depth -= 1
            if depth == 0:
                return match.end()
    return None


def _size_over(text: str, start: int, end: int, limit: int) -> int | None:
    """The size in bytes of ``text[start:end]`` when it is over ``limit``, else None."""
    if (end - start) * 4 <= limit:
        return None  # no character takes more than 4 bytes: no need to count
    size = len(text[start:end].encode("utf-8", "surrogateescape"))
    return size if size > limit else None


def _read_lenient(path: Path) -> str:
    try:
        with open_input(path) as fh:
            return fh.read().decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")
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
        value = STRICT_JSON.decode(text)
        check_unicode(value, text)
        return value
    except json.JSONDecodeError as err:
        raise SchemaError(what, f"invalid JSON at column {err.colno}: {err.msg}") from err
    except RecordError as err:  # a lone surrogate escaped inside the embedded JSON
        raise SchemaError(what, str(err)) from err
    except (ValueError, RecursionError) as err:
        raise SchemaError(what, _invalid(err)) from err


def name_and_description(function: dict[str, Any], path: str) -> tuple[str, str]:
    """A function definition's ``name`` (a non-empty string) and ``description`` (a string, "" when absent)."""
    name, description = function.get("name"), function.get("description", "")
    if not isinstance(name, str) or not name:
        raise SchemaError(f"{path}.name", "expected a non-empty string")
    if not isinstance(description, str):
        raise SchemaError(f"{path}.description", f"expected a string, got {type(description).__name__}")
    return name, description


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
