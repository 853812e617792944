"""The metatool builder as ``train.builders.BUILDERS`` registers it: MT-LLaMA training rows (``build``), its one
arguments dataclass (``MetaToolOptions``: ``data.builder_args`` and ``data build metatool key=value``), and the
files ``tooltrain data build metatool`` writes: the training set, Meta-Bench rows from the held-out dialogues
(``train.papers.metatool.metabench_build``), the tool library their pools name, and every count.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from train.builders import BuilderSpec
from train.papers.metatool.builder import BUILDER_VERSION, PAPER_HOLDOUT, MetaToolOptions, build
from train.schema import Conversation


@dataclass
class CommandOptions(MetaToolOptions):
    """The builder's arguments as ``tooltrain data build metatool`` (and a recipe's ``builder_args`` check) takes
    them. The command exists to hold dialogues out for Meta-Bench, so with no ``holdout_fraction`` it holds out the
    paper's share (the training builder's own default, 0.0, holds none out: there it means "no Meta-Bench")."""

    holdout_fraction: float = PAPER_HOLDOUT


def files(
    conversations: list[Conversation], options: MetaToolOptions, seed: int
) -> tuple[dict[str, list], dict[str, Any], list[str]]:
    """(train.jsonl, bench.jsonl and library.jsonl records; the report's counts; the summary lines)."""
    from train.papers.metatool.builder import MetaToolBuilder
    from train.papers.metatool.metabench_build import BenchOptions, MetaBenchBuilder, library_record, tool_library

    if not 0.0 < options.holdout_fraction < 1.0:
        raise ValueError(
            "data build metatool: holdout_fraction (the share of dialogues held out for Meta-Bench) "
            f"must be in (0, 1), got {options.holdout_fraction}; leave it out for the paper's {PAPER_HOLDOUT}"
        )
    bench_options = BenchOptions(
        pool_size=options.pool_size, hard_tool_count=options.hard_tool_count, hard_fraction=options.hard_fraction
    )
    builder = MetaToolBuilder(options, seed)
    usable = builder.usable(conversations)
    train_dialogues, bench_dialogues = builder.split(usable)
    train = list(builder.samples(train_dialogues))
    library, conflicts = tool_library(usable)
    bench_builder = MetaBenchBuilder(options, bench_options, seed, builder.teacher)
    bench = list(bench_builder.build(bench_dialogues, library))
    train_report = builder.report.to_dict()
    report = {
        "skipped": train_report["skipped"],
        "held_out": len(bench_dialogues),
        "train": {
            "rows": len(train),
            **train_report["counts"],
            "rewrite_failures": train_report["rewrite_failures"],
            "reasoning_fallbacks": train_report["reasoning_fallbacks"],
        },
        "bench": {**bench_builder.report.to_dict(), "stages": bench_builder.stages.to_dict()},
        "library": {"tools": len(library), "name_conflicts": conflicts},
        "options": {**asdict(options), **asdict(bench_options)},
    }
    for key in ("read", "held_out"):  # reported once, at the top level
        report["train"].pop(key, None)
    counts, bench_report = report["train"], report["bench"]
    first = (
        f"training rows {len(train)} (open {counts.get('open', 0)}, closed {counts.get('closed', 0)}), held out "
        f"{len(bench_dialogues)}, skipped {sum(report['skipped'].values())}"
    )
    calls = (
        f"meta_tool insertions {counts.get('meta_tool_insertions', 0)}; rewrites kept "
        f"{counts.get('rewrites_kept', 0)}, dropped {counts.get('rewrites_dropped', 0)}; "
        f"bench rows {bench_report['rows']} from {bench_report['dialogues']} dialogues"
    )
    lines = [first, calls, *(f"  bench {group}: {count}" for group, count in bench_report["by_group"].items())]
    outputs = {"train.jsonl": train, "bench.jsonl": bench, "library.jsonl": [library_record(library)]}
    return outputs, report, lines


SPEC = BuilderSpec(
    build=build,
    args=CommandOptions,
    version=BUILDER_VERSION,
    outputs=("train.jsonl", "bench.jsonl", "library.jsonl"),
    files=files,
)

__all__ = ["SPEC", "CommandOptions", "files"]
