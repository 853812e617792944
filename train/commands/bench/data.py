"""``tooltrain bench data FILE.jsonl... --format F [--workers N] [--tokenizer T] [--limit N] [--repeat R]``.

The data path at corpus scale, in one run:

1. **render + tokenize + mask, one process**: conversations/s and tokens/s of tooltrain's build path
   (``tokenize_many``, a chunk of 256 at a time, as ``train.data.dataset`` calls it) next to trl's
   ``apply_chat_template`` path (``bench render`` explains which template) on the same
   conversations: those both paths handle. Best of R timed passes after an untimed warm-up.
2. **the build**: ``train.data.dataset.build_dataset`` (read, validate, render, tokenize, mask, write the
   cache) in a fresh child process, with ``data.num_workers = N``; its wall time, rates and peak RSS
   (``getrusage``'s high-water mark), and the RSS it started from (imports and tokenizer loaded).
   trl's path gets the same child: every row of ``apply_chat_template`` kept in memory, its peak RSS.
3. **the read**: a second fresh child opens the built set (``build_dataset`` finds the cache), packs
   it as training does (``train.engine.run.make_rows``) and collates one epoch of packed batches
   (``PackedCollator``); its RSS before opening and its peak.

Each child is a fresh interpreter (``spawn``), so one stage's memory never counts in another's. The
build is written under a temporary cache folder that is removed afterwards. The measurements are
``train.data.bench_render`` (stage 1) and ``train.engine.bench_data`` (stages 2 and 3); this verb
reads the files, loads the format and prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from train.commands.arg_types import count
from train.commands.bench.common import file_problem, nothing_to_time, table
from train.commands.chat_setup import load_format_and_tokenizer, tokenizer_target
from train.data.bench_render import Rate, all_conversations, build_path_rates, reference_for
from train.engine.bench_data import Stages, data_config, default_workers, measure_stages
from train.formats import FORMATS

MIB = 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", type=Path, nargs="+", metavar="FILE.jsonl", help="canonical conversations")
    parser.add_argument(
        "--format", required=True, choices=list(FORMATS), metavar="FORMAT", help=f"one of: {', '.join(FORMATS)}"
    )
    parser.add_argument(
        "--tokenizer", help="a tooltrain tokenizer name or a local tokenizer folder (default: the format's)"
    )
    parser.add_argument(
        "--workers", type=count(1), default=None, metavar="N", help="data.num_workers (default: all cores)"
    )
    parser.add_argument("--limit", type=count(1), default=None, metavar="N", help="use the first N conversations")
    parser.add_argument(
        "--repeat",
        type=count(1),
        default=3,
        metavar="R",
        help="timed passes of stage 1; the best one counts (default 3)",
    )
    parser.add_argument(
        "--max-seq-len",
        type=count(1),
        default=4096,
        metavar="L",
        help="data.max_seq_len: packed row length (default 4096)",
    )
    parser.add_argument("--batch-size", type=count(1), default=8, metavar="B", help="packed rows per batch (default 8)")


def mib(n: int) -> str:
    return f"{n / MIB:.0f} MiB"


def run(args: argparse.Namespace) -> int:
    problem = next(filter(None, map(file_problem, args.files)), None)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    files = ", ".join(map(str, args.files))
    conversations, unreadable = all_conversations(args.files, args.limit)
    if not conversations:  # before the tokenizer is loaded and the children are started
        print(f"error: {nothing_to_time(files, 0, unreadable, 0)}", file=sys.stderr)
        return 2
    try:
        fmt, tokenizer = load_format_and_tokenizer(args.format, args.tokenizer)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    workers = args.workers or default_workers()
    reference = reference_for(args.format, tokenizer)
    rates, left_out = build_path_rates(fmt, tokenizer, conversations, reference, args.repeat)
    if not rates[0].conversations:
        print(f"error: {nothing_to_time(files, len(conversations), unreadable, left_out)}", file=sys.stderr)
        return 2
    print(f"data benchmark: format {args.format}, tokenizer {args.tokenizer or fmt.default_tokenizer}")
    print(
        f"{rates[0].conversations} conversations from {files}; left out: {left_out} that a path cannot render; "
        f"unreadable lines: {unreadable}"
    )
    print_rates(rates, args.repeat)
    data_cfg = data_config(args.files, args.limit, args.max_seq_len, workers)
    target = tokenizer_target(fmt, args.tokenizer)
    try:
        stages = measure_stages(
            args.files, args.limit, args.format, target, data_cfg, args.batch_size, trl=reference is not None
        )
    except RuntimeError as err:
        print(f"error: the benchmark's child process failed: {err}", file=sys.stderr)
        return 2
    print_stages(stages, workers, reference.label if reference is not None else "", args)
    return 0


def print_rates(rates: list[Rate], repeat: int) -> None:
    print(f"render+tokenize+mask, one process, best of {max(1, repeat)} passes after a warm-up:")
    print(table(rates))
    if len(rates) == 2:
        ratio = rates[0].per_second / rates[1].per_second if rates[1].per_second else float("nan")
        print(f"ratio {rates[0].path} / {rates[1].path}: {ratio:.2f}x")
    else:
        print("no reference template for this format and tokenizer: tooltrain's rate only")


def print_stages(stages: Stages, workers: int, trl_label: str, args: argparse.Namespace) -> None:
    build, read, trl_rows = stages.build, stages.read, stages.trl_rows
    seconds = build["seconds"]
    print(
        f"build (data.num_workers={workers}, fresh process): {build['read']} read, {build['rows']} rows, "
        f"{build['tokens']} tokens in {seconds:.2f} s = {build['read'] / seconds:.1f} conv/s, "
        f"{build['tokens'] / seconds:.0f} tokens/s; peak RSS {mib(build['rss_peak'])} "
        f"({mib(build['rss_before'])} before the build)"
    )
    if trl_rows is not None:
        print(
            f"{trl_label}, every row kept in memory (fresh process): {trl_rows['rows']} rows; "
            f"peak RSS {mib(trl_rows['rss_peak'])} ({mib(trl_rows['rss_before'])} before encoding)"
        )
    print(
        f"read (fresh process): open the built set, pack and collate one epoch: {read['rows']} packed rows of "
        f"<= {args.max_seq_len} tokens in {read['batches']} batches of {args.batch_size}, {read['seconds']:.2f} s; "
        f"peak RSS {mib(read['rss_peak'])} ({mib(read['rss_before'])} before opening)"
        + ("" if read["from_cache"] else "; it found no built set and built one")
    )
