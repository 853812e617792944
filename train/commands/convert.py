"""``tooltrain data convert SOURCE INPUT... -o OUT.jsonl``.

Writes canonical records to OUT.jsonl, every rejected source record with its reason to
OUT.rejects.jsonl, and a query dataset's tool library to OUT.library.jsonl. Prints
``read N, written A, rejected R`` with N = A + R. Conversion keeps every record the source
holds; ``tooltrain data validate`` judges them. With ``--validate``, records that fail tool-aware
validation with an *error* are rejected here too (warnings pass).
Exit code 0 unless the inputs cannot be read at all (2).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

from train.commands.outputs import open_output
from train.progress import progress
from train.schema import Conversation, ToolLibrary, dumps
from train.sources import SOURCES, Rejected, SourceError, get_reader
from train.validate import check_conversation


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", choices=list(SOURCES), metavar="SOURCE", help=f"one of: {', '.join(SOURCES)}")
    parser.add_argument("inputs", nargs="+", type=Path, metavar="INPUT", help="source files or folders, in the order the source expects")
    parser.add_argument("-o", "--output", type=Path, required=True, help="canonical JSON Lines output")
    parser.add_argument("--validate", action="store_true", help="also reject records with tool-aware validation errors (structure is always checked)")


def sibling(output: Path, suffix: str) -> Path:
    """OUT.jsonl -> OUT.<suffix>.jsonl"""
    stem = output.name[: -len(".jsonl")] if output.name.endswith(".jsonl") else output.name
    return output.with_name(f"{stem}.{suffix}.jsonl")


def run(args: argparse.Namespace) -> int:
    reader = get_reader(args.source)
    rejects_path = sibling(args.output, "rejects")
    written = rejected = 0
    reasons: Counter[str] = Counter()
    libraries: list[ToolLibrary] = []
    try:
        with open_output(args.output, "wb") as out, open_output(rejects_path, "w", encoding="utf-8") as rejects:
            for item in progress(reader(list(args.inputs)), desc=f"convert {args.source}", unit="rec"):
                if isinstance(item, ToolLibrary):
                    libraries.append(item)
                    continue
                if isinstance(item, Conversation) and args.validate:
                    errors = [p for p in check_conversation(item) if p.severity == "error"]
                    if errors:
                        item = Rejected(item.id, "; ".join(map(str, errors)), item.to_dict())
                if not isinstance(item, Rejected):
                    try:
                        line = dumps(item).encode("utf-8")
                    except UnicodeEncodeError as err:  # lone surrogates: text that is not Unicode
                        item = Rejected(item.id, f"text-encoding: not encodable as UTF-8 ({err.reason})")
                if isinstance(item, Rejected):
                    rejected += 1
                    reasons[re.split(r" at |:", item.reason, maxsplit=1)[0]] += 1
                    # ASCII escapes: a rejected record may hold the very text that cannot be encoded
                    rejects.write(json.dumps(item.to_dict(), ensure_ascii=True) + "\n")
                else:
                    written += 1
                    out.write(line + b"\n")
    except SourceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if libraries:
        with open_output(sibling(args.output, "library"), "w", encoding="utf-8") as fh:
            for library in libraries:
                fh.write(dumps(library) + "\n")
    print(f"read {written + rejected}, written {written}, rejected {rejected}")
    for reason, count in reasons.most_common(5):
        print(f"  rejected {count}: {reason}")
    if rejected:
        print(f"  reasons per record: {rejects_path}")
    return 0
