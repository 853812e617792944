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
from pathlib import Path

from train.base.records import NotRegularFile
from train.commands.arg_types import count
from train.data.validate_file import Report, Summary, load_library_names, validate_file
from train.validate import DEFAULT_SEVERITIES, SETTINGS, resolve_severities


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
    try:
        summary, reports, hidden = validate_file(args.file, severities, library, args.max_report)
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
