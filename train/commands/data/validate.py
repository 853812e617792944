"""``tooltrain data validate FILE.jsonl [--strict] [--severity CODE=LEVEL ...] [--max-report N] [--json]``.

Streams a canonical JSON Lines file and checks every line: UTF-8 (``not-utf8``), standard JSON
(``unreadable-line``: truncated, too deeply nested, NaN, a number out of range, a duplicate key,
a line over the record size limit), Unicode (``text-encoding``: a lone surrogate), structure
(``schema``, with the path ``train.schema`` names), then the tool-aware rules of
``train.validate``, and ids unique within each record kind (``duplicate-id``). Blank lines are not
records. Prints one line per problem, ``FILE:LINE id=ID severity code at PATH: reason`` (the
first ``--max-report``), then a summary table. ``--json`` prints one JSON document instead.
Exit 0 when no record has an error, 1 when one has, 2 when the file cannot be read or is not a
regular file (a device or a FIFO is refused, not read forever).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from train.base.progress import progress
from train.base.records import BLANK, NotRegularFile, RecordError, decode_line, iter_lines, open_input
from train.commands.arg_types import count
from train.schema import Conversation, SchemaError, ToolLibrary, ToolQuery, record_from_dict
from train.validate import (
    DEFAULT_SEVERITIES,
    SETTINGS,
    Problem,
    Setting,
    check_conversation,
    check_library,
    check_query,
    resolve_severities,
)

# Line-level problems: the line never became a record, so they are always errors.
LINE_CODES = ("not-utf8", "unreadable-line", "schema")


def parse_severity(text: str) -> tuple[str, str]:
    """``CODE=LEVEL`` for argparse, with the valid choices in the error."""
    code, sep, level = text.partition("=")
    if not sep or code not in DEFAULT_SEVERITIES or level not in SETTINGS:
        raise argparse.ArgumentTypeError(
            f"expected CODE=LEVEL with LEVEL one of {', '.join(SETTINGS)} "
            f"and CODE one of: {', '.join(DEFAULT_SEVERITIES)}"
        )
    return code, level


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", type=Path, metavar="FILE.jsonl", help="canonical JSON Lines (conversations, tool queries or libraries)"
    )
    parser.add_argument(
        "--strict", action="store_true", help="treat every warning as an error (an explicit --severity still wins)"
    )
    parser.add_argument(
        "--severity",
        type=parse_severity,
        action="append",
        default=[],
        metavar="CODE=LEVEL",
        help="set one check to error, warning or ignore; repeatable",
    )
    parser.add_argument(
        "--max-report", type=count(0), default=50, metavar="N", help="print at most N problem lines (default 50)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON document (problems and summary) instead of text"
    )
    parser.add_argument(
        "--library",
        type=Path,
        metavar="FILE",
        help="tool library JSON Lines: gold tools of queries must be named in it",
    )


@dataclass
class Report:
    """One problem found on one line."""

    line: int
    record_id: str | None
    problem: Problem

    def to_dict(self) -> dict[str, Any]:
        p = self.problem
        return {
            "line": self.line,
            "id": self.record_id,
            "severity": p.severity,
            "code": p.code,
            "where": p.where,
            "message": p.message,
        }


@dataclass
class Summary:
    records: int = 0
    valid: int = 0
    with_errors: int = 0
    with_warnings: int = 0
    blank_lines: int = 0
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (severity, code) -> problems

    def add(self, problems: list[Problem]) -> None:
        self.records += 1
        errors = any(p.severity == "error" for p in problems)
        self.valid += not errors
        self.with_errors += errors
        self.with_warnings += any(p.severity == "warning" for p in problems)
        self.counts.update((p.severity, p.code) for p in problems)

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "valid": self.valid,
            "with_errors": self.with_errors,
            "with_warnings": self.with_warnings,
            "blank_lines": self.blank_lines,
            "problems": [{"severity": s, "code": c, "count": n} for (s, c), n in sorted(self.counts.items())],
        }


def check_value(obj: Any, severities: dict[str, Setting], library: set[str] | None) -> list[Problem]:
    """Structure first (one ``schema`` problem), then the checks for the record's kind."""
    try:
        record = record_from_dict(obj)
    except SchemaError as err:
        where = err.path.removeprefix("record.") if err.path != "record" else "record"
        return [Problem("error", "schema", where, err.reason)]
    except RecursionError:
        return [Problem("error", "schema", "record", "nested too deeply")]
    if isinstance(record, Conversation):
        return check_conversation(record, severities)
    if isinstance(record, ToolQuery):
        return check_query(record, severities, library)
    if isinstance(record, ToolLibrary):
        return check_library(record, severities)
    raise AssertionError(f"unhandled record kind {type(record).__name__}")


def record_id(obj: Any) -> str | None:
    return obj["id"] if isinstance(obj, dict) and isinstance(obj.get("id"), str) else None


def check_file(
    path: Path, severities: dict[str, Setting], library: set[str] | None
) -> Iterator[tuple[int, str | None, list[Problem] | None]]:
    """``(line, record id, problems)`` for each line; problems is None for a blank line.

    Lines are read and decoded as every reader does (``train.base.records.decode_line``): a
    line refused there is one problem under the code it names. A record whose id an earlier
    record of its kind already used gets a ``duplicate-id`` problem naming that line."""
    first_line: dict[tuple[str, str], int] = {}  # (kind, id) -> the line that used it first
    duplicate = resolve_severities(severities)["duplicate-id"]
    with open_input(path) as fh:  # a device or a FIFO is refused: reading one never ends
        for lineno, raw in enumerate(progress(iter_lines(fh), desc=f"validate {path.name}", unit="line"), start=1):
            try:
                value = decode_line(raw, lineno)
            except RecordError as err:
                yield lineno, record_id(err.record), [Problem("error", err.code, err.where, err.detail)]
                continue
            if value is BLANK:
                yield lineno, None, None
                continue
            rid, problems = record_id(value), check_value(value, severities, library)
            if rid is not None and duplicate != "ignore" and not any(p.code == "schema" for p in problems):
                key = (record_kind(value), rid)
                if key in first_line:
                    why = f"id {rid!r} is already used by the {key[0]} at line {first_line[key]}"
                    problems.append(Problem(duplicate, "duplicate-id", "id", why))
                else:
                    first_line[key] = lineno
            yield lineno, rid, problems


def record_kind(obj: Any) -> str:
    """The record kind as ``record_from_dict`` tells them apart; ids need only be unique within one."""
    if "messages" in obj:
        return "conversation"
    return "tool query" if "query" in obj or "gold_tools" in obj else "tool library"


def load_library_names(path: Path) -> set[str]:
    """Tool names of every record with tools in a JSON Lines file (``OUT.library.jsonl``)."""
    names: set[str] = set()
    with open_input(path) as fh:
        for lineno, raw in enumerate(iter_lines(fh), start=1):
            try:
                value = decode_line(raw, lineno)
            except RecordError as err:
                raise ValueError(f"{path}:{lineno}: {err}") from None
            if isinstance(value, dict) and isinstance(value.get("tools"), list):
                names.update(
                    t["function"]["name"]
                    for t in value["tools"]
                    if isinstance(t, dict)
                    and isinstance(t.get("function"), dict)
                    and isinstance(t["function"].get("name"), str)
                )
    return names


def printable(text: str) -> str:
    """Text a UTF-8 terminal can show: lone surrogates become escapes instead of crashing print."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def format_report(path: Path, report: Report) -> str:
    p = report.problem
    rid = printable(report.record_id) if report.record_id is not None else "?"
    return printable(f"{path}:{report.line} id={rid} {p.severity} {p.code} at {p.where}: {p.message}")


def format_summary(summary: Summary) -> str:
    rows = [
        ("records read", summary.records),
        ("valid", summary.valid),
        ("with errors", summary.with_errors),
        ("with warnings", summary.with_warnings),
    ]
    if summary.blank_lines:
        rows.append(("blank lines (skipped)", summary.blank_lines))
    rows += [(f"{severity} {code}", count) for (severity, code), count in sorted(summary.counts.items())]
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {count:>8}" for label, count in rows)


def run(args: argparse.Namespace) -> int:
    severities = resolve_severities(dict(args.severity), strict=args.strict)
    library = None
    if args.library is not None:
        try:
            library = load_library_names(args.library)
        except (OSError, ValueError, NotRegularFile) as err:
            print(printable(f"error: library {err}"), file=sys.stderr)
            return 2
    summary = Summary()
    reports: list[Report] = []
    hidden = 0
    try:
        for lineno, rid, problems in check_file(args.file, severities, library):
            if problems is None:
                summary.blank_lines += 1
                continue
            summary.add(problems)
            for problem in problems:
                if len(reports) < max(args.max_report, 0):
                    reports.append(Report(lineno, rid, problem))
                else:
                    hidden += 1
    except OSError as err:
        print(printable(f"error: {args.file}: cannot read ({err.strerror or err})"), file=sys.stderr)
        return 2
    except NotRegularFile as err:
        print(printable(f"error: {err}"), file=sys.stderr)
        return 2
    try:
        emit(args, summary, reports, hidden)
    except BrokenPipeError:
        # `validate ... | head`: the reader left; the exit code still tells the verdict.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 1 if summary.with_errors else 0


def emit(args: argparse.Namespace, summary: Summary, reports: list[Report], hidden: int) -> None:
    if args.json:
        document = {
            "file": str(args.file),
            "summary": summary.to_dict(),
            "reports": [r.to_dict() for r in reports],
            "more": hidden,
        }
        print(json.dumps(document, ensure_ascii=True))
    else:
        for report in reports:
            print(format_report(args.file, report))
        if hidden:
            print(f"... and {hidden} more")
        print(format_summary(summary))
    sys.stdout.flush()  # a closed pipe shows up here, inside the handler, not at interpreter exit
