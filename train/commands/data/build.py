"""``tooltrain data build NAME INPUT... [KEY=VALUE ...] --out-dir DIR [--seed N]``: a recipe's data, built by its
builder.

NAME is a data builder (``train.builders.BUILDERS``, or ``module:attr`` naming a ``BuilderSpec`` of your own).
INPUT is canonical JSON Lines (``tooltrain data convert`` output), or ``SOURCE:PATH[,PATH...]`` to read source
files with that reader first (``glaive:train/assets/demo/glaive_sample.json``; SOURCE may be a ``module:attr``
reader too); ``pkg://train/...`` names a file the package ships. Inputs are read in the order given (the order a
recipe's data config lists its sources). ``KEY=VALUE`` sets one of the builder's arguments: the fields of its one
arguments dataclass, which a recipe writes as ``data.builder_args`` (``teacher.kind=http`` sets a key of a
mapping); they go with the inputs, before ``--out-dir``/``--seed``. With the same seed and arguments the training rows
equal what ``data.builder: NAME`` gives the recipe.

A builder writes, in DIR, ``train.jsonl`` (the training conversations) and ``report.json`` (every count: read,
rejected inputs, dropped with reasons, rows; read = rejected + dropped + rows). A builder with files of its own
(``BuilderSpec.outputs`` and ``files``: a paper's benchmark rows, its tool library, ...) writes those beside them and
its own counts in ``report.json``; its spec's module (``train/papers/<paper>/builder_spec.py``) lists them.
The same command with the same seed writes byte-identical files (with the offline teacher). The files are
replaced together, only when the build succeeds; an output that is one of the inputs is refused before
anything is read (``train.commands.outputs``).
A build that makes no training rows (every input record rejected, every teacher call failed) writes nothing: its
counts are printed, one ``error:`` line says why, and a previous build in DIR is kept as it was (exit 1, as
``data convert`` does when it rejects every record).
Exit code 0; 1 when the build made no training rows; 2 when an input cannot be read, an output cannot be written
or an argument is wrong.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections import Counter
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from train import builders
from train.commands.data.rejects import shorten
from train.commands.outputs import OutputFile, Outputs, add_out_dir, make_folder
from train.registry import TARGET
from train.schema import Conversation, dumps
from train.sources import SOURCES, Rejected, SourceError, get_reader

ARGUMENT = re.compile(r"^[A-Za-z_]\w*(?:\.\w+)?=")  # KEY=VALUE (a builder argument), not an input path
SOURCE_INPUT = re.compile(r"^([A-Za-z_][\w.]*:[A-Za-z_][\w.]*):(.+)$")  # module:attr:PATHS, a reader of your own


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("builder", metavar="NAME", help=f"the data builder: {', '.join(builders.BUILDERS)}; or module:attr")
    add(
        "inputs",
        nargs="+",
        metavar="INPUT | KEY=VALUE",
        help="canonical JSON Lines, or SOURCE:PATH[,PATH...]; KEY=VALUE sets a builder argument (what a recipe "
        "writes in data.builder_args), e.g. holdout_fraction=0.15 teacher.kind=http teacher.base_url=URL "
        "teacher.model=NAME; before --out-dir and --seed",
    )
    add_out_dir(parser, "-o", "--output", required=True, help="the folder the builder's files and report.json go to")
    add("--seed", type=int, default=42, help="the run's seed: every seeded choice the builder makes (42)")


def split_words(words: list[str]) -> tuple[list[str], list[str]]:
    """(inputs, KEY=VALUE builder arguments)."""
    return [w for w in words if not ARGUMENT.match(w)], [w for w in words if ARGUMENT.match(w)]


# ---------------------------------------------------------------- reading


def parse_input(spec: str) -> tuple[str, list[Path]]:
    """``SOURCE:PATH[,PATH]`` -> (source, paths); anything else is one canonical file."""
    from train.data.inputs import resolve_input

    head, colon, rest = spec.partition(":")
    if colon and head in SOURCES and rest:  # a registered name first: glaive:pkg://train/... is glaive's
        return head, [resolve_input(p) for p in rest.split(",")]
    match = SOURCE_INPUT.match(spec)
    if match and TARGET.match(match.group(1)):  # a reader of your own: mypkg.readers:read:PATH
        return match.group(1), [resolve_input(p) for p in match.group(2).split(",")]
    return "canonical", [resolve_input(spec)]


def read_inputs(specs: list[str], rejected: Counter, per_input: list[dict[str, Any]]) -> list[Conversation]:
    """Every input's conversations in order; each rejected record counted by its reason."""
    conversations: list[Conversation] = []
    for spec in specs:
        source, paths = parse_input(spec)
        counts = Counter()
        for item in get_reader(source)(paths):  # "canonical": train.sources.canonical
            if isinstance(item, Rejected):
                counts["rejected"] += 1
                rejected[re.split(r" at |:\d", item.reason, maxsplit=1)[0][:160]] += 1
            elif isinstance(item, Conversation):
                counts["read"] += 1
                conversations.append(item)
        per_input.append({"input": spec, "conversations": counts["read"], "rejected": counts["rejected"]})
    return conversations


# ---------------------------------------------------------------- building


def build_files(
    name: str, conversations: list[Conversation], arguments: Any, seed: int
) -> tuple[dict[str, list], dict[str, Any], list[str]]:
    """The builder's own files (``BuilderSpec.files``), else its conversations as train.jsonl."""
    spec = builders.BUILDERS.get(name)
    if spec.files is not None:
        return spec.files(conversations, arguments, seed)
    dropped: Counter = Counter()
    given = asdict(arguments) if is_dataclass(arguments) else {}
    train = list(spec.build(conversations, seed=seed, on_drop=lambda reason: dropped.update([reason]), **given))
    report = {"dropped": dict(sorted(dropped.items())), "train": {"rows": len(train)}, "options": given}
    return {"train.jsonl": train}, report, [f"training rows {len(train)}, dropped {sum(dropped.values())}"]


class NothingBuilt(Exception):
    """The build made no training rows: its outputs are discarded, a previous build is kept."""


def why_empty(report: dict[str, Any]) -> str:
    """What became of the records a build read (its report's counts), for the error line."""
    read, rejected = report["read"], sum(report["rejected"].values())
    if read == 0:
        return "the inputs hold no records"
    if rejected == read:
        first = next(iter(report["rejected"]))
        return f"all {read} records were rejected (e.g. {shorten(first)})"
    dropped = report.get("dropped") or {}
    counts = ", ".join(f"{count} {reason}" for reason, count in list(dropped.items())[:3])
    return f"{read - rejected} of {read} records were read and none became a training row" + (
        f" (dropped: {counts})" if counts else ""
    )


def write_jsonl(fh: OutputFile, records: list) -> None:
    for record in records:
        fh.write(dumps(record) + "\n")


def run(args: argparse.Namespace) -> int:
    inputs, words = split_words(args.inputs)
    try:
        spec = builders.BUILDERS.get(args.builder)
        arguments = builders.make_args(args.builder, builders.parse_args(args.builder, words))
    except ValueError as err:  # unknown builder (listing the valid ones), unknown key (listing them), bad value
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not inputs:
        print("error: no INPUT given (canonical JSON Lines, or SOURCE:PATH[,PATH...])", file=sys.stderr)
        return 2
    created = not args.out_dir.exists()
    make_folder(args.out_dir)  # before the build: a bad --out-dir costs nothing
    code = _build(args, spec, inputs, arguments)
    if code and created:
        with contextlib.suppress(OSError):  # a refused build leaves no empty folder it made (never one with files)
            args.out_dir.rmdir()
    return code


def _build(args: argparse.Namespace, spec: Any, inputs: list[str], arguments: Any) -> int:
    names = [*spec.outputs, "report.json"]
    rejected: Counter = Counter()
    per_input: list[dict[str, Any]] = []
    try:
        input_paths = [path for item in inputs for path in parse_input(item)[1]]
        with Outputs([args.out_dir / name for name in names], inputs=input_paths) as outputs:
            # opened (as temporary files) before the build: an unwritable folder costs nothing
            files = {name: outputs.open(args.out_dir / name) for name in names}
            conversations = read_inputs(inputs, rejected, per_input)
            records, built, lines = build_files(args.builder, conversations, arguments, args.seed)
            training = spec.outputs[0]  # train.jsonl for every builder: what a recipe trains on
            for name in spec.outputs:
                write_jsonl(files[name], records.get(name, []))
            report = {
                "builder": args.builder,
                "seed": args.seed,
                "inputs": per_input,
                "read": len(conversations) + sum(rejected.values()),
                "rejected": dict(sorted(rejected.items())),
                **built,
            }
            if not records.get(training):  # raised inside the block: every temporary file is removed
                raise NothingBuilt(why_empty(report))
            files["report.json"].write(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    except (SourceError, ValueError) as err:  # an unreadable input; builder arguments (teacher kind, fractions)
        print(f"error: {err}", file=sys.stderr)
        return 2
    except NothingBuilt as err:
        print(f"read {report['read']}: {lines[0]}, rejected {sum(rejected.values())}")
        print("\n".join(lines[1:]), end="\n" if lines[1:] else "")
        kept = "the previous build there is unchanged" if (args.out_dir / training).exists() else "nothing written"
        print(f"error: no training rows for {args.out_dir / training}: {err}; {kept}", file=sys.stderr)
        return 1
    print(f"read {report['read']}: {lines[0]}, rejected {sum(rejected.values())}")
    for line in lines[1:]:
        print(line)
    print(f"wrote {args.out_dir}/{', '.join(names)}")
    return 0
