"""A canonical JSON Lines file checked line by line, the way ``tooltrain data validate`` reports it (the verb
prints; the rules for one record are ``train.validate``'s).

Every line is read and decoded as every reader does (``train.base.records.decode_line``): UTF-8, standard JSON,
Unicode, the record size limit; a line refused there is one problem under the code it names. A record's structure
comes next (one ``schema`` problem, with the path ``train.schema`` names), then the tool-aware rules of its kind, then
ids unique within each record kind (``duplicate-id``). Blank lines are not records. ``Summary`` counts records by
outcome and problems by (severity, code); ``Report`` is one problem of one line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from train.base.progress import progress
from train.base.records import BLANK, RecordError, decode_line, iter_lines, open_input
from train.schema import Conversation, SchemaError, ToolLibrary, ToolQuery, record_from_dict
from train.validate import Problem, Setting, check_conversation, check_library, check_query, resolve_severities


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


def validate_file(
    path: Path, severities: dict[str, Setting], library: set[str] | None, max_reports: int
) -> tuple[Summary, list[Report], int]:
    """The whole file: its summary, the first ``max_reports`` problems and how many more there were. Raises what
    ``open_input`` raises (``OSError``, ``NotRegularFile``) for a file that cannot be read."""
    summary = Summary()
    reports: list[Report] = []
    hidden = 0
    for lineno, rid, problems in check_file(path, severities, library):
        if problems is None:
            summary.blank_lines += 1
            continue
        summary.add(problems)
        for problem in problems:
            if len(reports) < max(max_reports, 0):
                reports.append(Report(lineno, rid, problem))
            else:
                hidden += 1
    return summary, reports, hidden
