"""``tooltrain data convert SOURCE INPUT... -o OUT.jsonl``.

Writes canonical records to OUT.jsonl, every rejected source record with its reason to
OUT.rejects.jsonl, and a query dataset's tool library to OUT.library.jsonl. Prints
``read N, written A, rejected R`` with N = A + R, the first rejects with their file:line and
reason, and a note when written conversations have no assistant turn (nothing to train on).
Conversion keeps every record the source holds; ``tooltrain data validate`` judges them. A conversation
whose text still carries tool-call markup after its reader (``<tool_call>`` in assistant text, a ``<tools>``
block in the system prompt, ``<tool_response>`` in a tool message: ``train.sources.call_markup``) is
rejected naming the markup: its calls would train as text, with no tools listed. With
``--validate``, records that fail tool-aware validation with an *error* are rejected here too
(warnings pass).

What is kept of each record is ``train.sources.convert.canonical_line``.
Outputs are replaced only when the conversion succeeds (``train.commands.outputs``); an output
that is one of the inputs is refused. ``-o -`` writes the records to stdout and the report to
stderr; beside stdout or a device (``-o /dev/null``) side files are written only to the paths
``--rejects`` and ``--library`` name.
Exit code 0; 1 when every record of a non-empty input was rejected (nothing is written: the
wrong source, or its inputs in the wrong order); 2 when the inputs cannot be read at all or an
output cannot be written.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from train.base.progress import progress
from train.commands.data.rejects import RejectReport, nothing_written, where_rejects_are
from train.commands.outputs import Outputs, is_stdout, output_path, side_file
from train.schema import ToolLibrary, dumps
from train.sources import SOURCES, Reader, Rejected, SourceError, get_reader
from train.sources.convert import canonical_line, source_inputs, trains_nothing


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source", metavar="SOURCE", help=f"one of: {', '.join(SOURCES)}; or module:attr (a reader of your own)"
    )
    parser.add_argument(
        "inputs", nargs="+", type=Path, metavar="INPUT", help="source files or folders, in the order the source expects"
    )
    parser.add_argument(
        "-o",
        "--output",
        type=output_path,
        required=True,
        help="canonical JSON Lines output; '-' for stdout (the report then goes to stderr)",
    )
    parser.add_argument(
        "--rejects",
        type=output_path,
        metavar="PATH",
        help="rejected records with their reasons (default OUT.rejects.jsonl; "
        "with -o - or a device, only written when given)",
    )
    parser.add_argument(
        "--library",
        type=output_path,
        metavar="PATH",
        help="a query dataset's tool library (default OUT.library.jsonl; with -o - or a device, "
        "only written when given)",
    )
    parser.add_argument(
        "--validate",
        action="store_true",
        help="also reject records with tool-aware validation errors (structure is always checked)",
    )


@dataclass
class Converted:
    """What one conversion wrote and rejected."""

    written: int = 0
    no_assistant: int = 0  # written conversations that end before any assistant turn
    rejects: RejectReport = field(default_factory=RejectReport)
    libraries: list[ToolLibrary] = field(default_factory=list)


def run(args: argparse.Namespace) -> int:
    try:
        reader = get_reader(args.source)
    except SourceError as err:  # an unknown name lists the valid ones
        print(f"error: {err}", file=sys.stderr)
        return 2
    rejects_path = side_file(args.output, "rejects", args.rejects)
    library_path = side_file(args.output, "library", args.library)
    try:
        done = convert(args, reader, rejects_path, library_path)
    except SourceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    report_to = sys.stderr if is_stdout(args.output) else sys.stdout
    print(
        f"read {done.written + done.rejects.count}, written {done.written}, rejected {done.rejects.count}",
        file=report_to,
    )
    for line in done.rejects.lines():
        print(line, file=report_to)
    if not done.written:
        hint = (
            f"is {args.source} the right source for these files, and are they in the order it reads? "
            f"{args.source} reads: {source_inputs(args.source)}"
        )
        return nothing_written(done.rejects.count, args.output, hint)
    notes(args, done, rejects_path, library_path, report_to)
    return 0


def convert(
    args: argparse.Namespace, reader: Reader, rejects_path: Path | None, library_path: Path | None
) -> Converted:
    """Every item the reader yields written as a canonical line or rejected; the outputs replaced together, and
    only when something was written."""
    done = Converted()
    # checked and created before any input is read: a bad -o costs nothing, an input is never an output
    with Outputs([args.output, rejects_path, library_path], inputs=args.inputs) as outputs:
        out = outputs.open(args.output, "wb")
        rejects_file = outputs.open(rejects_path) if rejects_path else None
        for item in progress(reader(list(args.inputs)), desc=f"convert {args.source}", unit="rec"):
            if isinstance(item, ToolLibrary):
                done.libraries.append(item)
                continue
            line = canonical_line(item, args.validate)
            if isinstance(line, Rejected):
                done.rejects.add(line)
                if rejects_file:
                    # ASCII escapes: a rejected record may hold the very text that cannot be encoded
                    rejects_file.write(json.dumps(line.to_dict(), ensure_ascii=True) + "\n")
                continue
            done.written += 1
            done.no_assistant += trains_nothing(item)
            out.write(line + b"\n")
        if not done.written:
            outputs.discard()  # a wrong reader rejects everything: keep whatever was there before
        elif done.libraries and library_path:
            library_file = outputs.open(library_path)
            for library in done.libraries:
                library_file.write(dumps(library) + "\n")
    return done


def notes(
    args: argparse.Namespace, done: Converted, rejects_path: Path | None, library_path: Path | None, report_to: TextIO
) -> None:
    """The lines under the counts: where the rejects are, a library not written, conversations that train nothing."""
    if done.rejects.count:
        print(where_rejects_are(rejects_path), file=report_to)
    if done.libraries and not library_path:
        print(
            "  tool library not written (the output is not a regular file): give --library PATH to keep it",
            file=report_to,
        )
    if done.no_assistant:
        print(
            f"  note: {done.no_assistant} of {done.written} conversations have no assistant turn (nothing to train "
            f"on); {args.source} reads: {source_inputs(args.source)}",
            file=report_to,
        )
