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
build is written under a temporary cache folder that is removed afterwards. Where the build hooks
in: ``_build_in_child`` passes ``data_cfg["num_workers"]`` to ``build_dataset`` and
``_read_in_child`` reads through ``make_rows`` and the collator, so a storage or parallel build
behind those two calls is measured without changes here.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from train.commands.bench.common import (
    Rate,
    file_problem,
    nothing_to_time,
    positive_options,
    read_conversations,
    table,
    trl_path,
)
from train.commands.chat_setup import load_format_and_tokenizer, reference_for
from train.formats import FORMATS
from train.formats.tokenize import tokenize_many

CHUNK = 256  # conversations per tokenize_many call, as the dataset build uses
MIB = 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", type=Path, nargs="+", metavar="FILE.jsonl", help="canonical conversations")
    parser.add_argument(
        "--format", required=True, choices=list(FORMATS), metavar="FORMAT", help=f"one of: {', '.join(FORMATS)}"
    )
    parser.add_argument(
        "--tokenizer", help="a tooltrain tokenizer name or a local tokenizer folder (default: the format's)"
    )
    parser.add_argument("--workers", type=int, default=None, metavar="N", help="data.num_workers (default: all cores)")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="use the first N conversations")
    parser.add_argument(
        "--repeat", type=int, default=3, metavar="R", help="timed passes of stage 1; the best one counts (default 3)"
    )
    parser.add_argument(
        "--max-seq-len", type=int, default=4096, metavar="L", help="data.max_seq_len: packed row length (default 4096)"
    )
    parser.add_argument("--batch-size", type=int, default=8, metavar="B", help="packed rows per batch (default 8)")


# ---- stage 1: one process, both paths ------------------------------------------------------------


def timed(encode_all: Callable[[], int], repeat: int) -> tuple[float, int]:
    best, tokens = float("inf"), 0
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        tokens = encode_all()
        best = min(best, time.perf_counter() - start)
    return best, tokens


def render_rates(fmt: Any, tokenizer: Any, conversations: list, reference: Any, repeat: int) -> tuple[list[Rate], int]:
    """tooltrain's and trl's rates on the conversations both handle; how many were left out."""
    from train.formats.hf import to_hf_messages

    trl = trl_path(reference, tokenizer) if reference is not None else None
    ours = tokenize_many(fmt, conversations, tokenizer)  # the warm-up: which conversations tooltrain renders
    keep = []
    for conv, tokens in zip(conversations, ours):
        if isinstance(tokens, ValueError):
            continue
        hf = to_hf_messages(conv)
        try:
            if trl is not None:
                trl(hf)
        except Exception:  # noqa: BLE001, S112 - any template refusal: left out of both paths
            continue
        keep.append((conv, hf))
    chosen = [conv for conv, _ in keep]

    def tooltrain_pass() -> int:
        return sum(
            len(t.input_ids)
            for first in range(0, len(chosen), CHUNK)
            for t in tokenize_many(fmt, chosen[first : first + CHUNK], tokenizer)
        )

    seconds, tokens = timed(tooltrain_pass, repeat)
    rates = [Rate(f"tooltrain {fmt.name}", len(chosen), tokens, seconds)]
    if trl is not None:
        seconds, tokens = timed(lambda: sum(len(trl(hf)[0]) for _, hf in keep), repeat)
        rates.append(Rate(reference.label, len(keep), tokens, seconds))
    return rates, len(conversations) - len(chosen)


# ---- stages 2 and 3: fresh child processes -------------------------------------------------------


def rss_now() -> int:
    """This process's resident set, in bytes (psutil when installed, else /proc)."""
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except ImportError:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def rss_peak() -> int:
    """This process's high-water resident set, in bytes (Linux reports KiB)."""
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def data_config(files: list[Path], limit: int | None, max_seq_len: int, workers: int) -> dict[str, Any]:
    source: dict[str, Any] = {"name": "canonical", "inputs": [str(f.resolve()) for f in files]}
    if limit is not None:
        source["limit"] = limit
    return {
        "name": "bench",
        "sources": [source],
        "max_seq_len": max_seq_len,
        "overlong": "truncate",
        "eval_fraction": 0.0,
        "packing": True,
        "num_workers": workers,  # the parallel build's worker count (data.num_workers)
    }


def _build_in_child(data_cfg: dict, format_name: str, tokenizer_name: str | None, cache_root: str) -> dict:
    from train.data.dataset import build_dataset

    _, tokenizer = load_format_and_tokenizer(format_name, tokenizer_name)
    before = rss_now()
    start = time.perf_counter()
    built = build_dataset(data_cfg, format_name, tokenizer, Path(cache_root))
    seconds = time.perf_counter() - start
    tokens = int(built.train.lengths.sum())  # the memory-mapped rows' lengths: no row is materialised
    report = built.report
    return {
        "seconds": seconds,
        "read": report.read,
        "rows": report.accepted,
        "tokens": tokens,
        "rss_before": before,
        "rss_peak": rss_peak(),
    }


def _trl_rows_in_child(files: list[Path], limit: int | None, format_name: str, tokenizer_name: str | None) -> dict:
    from train.formats.hf import to_hf_messages

    _, tokenizer = load_format_and_tokenizer(format_name, tokenizer_name)
    reference = reference_for(format_name, tokenizer)
    conversations = [conv for file in files for conv in read_conversations(file, None)[0]][:limit]
    before = rss_now()
    encode = trl_path(reference, tokenizer)
    rows = []
    for conv in conversations:
        try:
            rows.append(encode(to_hf_messages(conv)))
        except Exception:  # noqa: BLE001, S112 - left out, as in stage 1
            continue
    return {"rows": len(rows), "rss_before": before, "rss_peak": rss_peak()}


def _read_in_child(data_cfg: dict, format_name: str, tokenizer_name: str | None, cache_root: str, batch: int) -> dict:
    from types import SimpleNamespace

    from train.data.dataset import build_dataset
    from train.data.packing import PackedCollator
    from train.engine.run import make_rows

    _, tokenizer = load_format_and_tokenizer(format_name, tokenizer_name)
    before = rss_now()
    start = time.perf_counter()
    built = build_dataset(data_cfg, format_name, tokenizer, Path(cache_root))
    rows, _ = make_rows(built, SimpleNamespace(packing=True, max_seq_len=data_cfg["max_seq_len"]))
    collate = PackedCollator(tokenizer.pad_token_id, pad_to=data_cfg["max_seq_len"])
    batches = tokens = 0
    for first in range(0, len(rows), batch):
        tensors = collate([rows[i] for i in range(first, min(first + batch, len(rows)))])  # rows cut from the maps
        batches += 1
        tokens += int((tensors["labels"] != -100).sum())  # touch every batch, as a training step would
    return {
        "seconds": time.perf_counter() - start,
        "rows": len(rows),
        "batches": batches,
        "from_cache": built.from_cache,
        "rss_before": before,
        "rss_peak": rss_peak(),
    }


def _child_main(queue: Any, target: Callable[..., dict], args: tuple) -> None:
    try:
        queue.put(("ok", target(*args)))
    except BaseException as err:  # noqa: BLE001 - reported by the parent as one error line
        queue.put(("error", f"{type(err).__name__}: {err}"))


def in_child(target: Callable[..., dict], *args: Any) -> dict:
    """``target(*args)`` in a fresh interpreter; its result, or RuntimeError with the child's error."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child_main, args=(queue, target, args))
    process.start()
    try:
        status, value = queue.get()
    finally:
        process.join()
    if status != "ok":
        raise RuntimeError(value)
    return value


# ---- the command ---------------------------------------------------------------------------------


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def mib(n: int) -> str:
    return f"{n / MIB:.0f} MiB"


def run(args: argparse.Namespace) -> int:
    problem = next(filter(None, map(file_problem, args.files)), None) or positive_options(
        args, ("workers", "limit", "repeat", "max_seq_len", "batch_size")
    )
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    files = ", ".join(map(str, args.files))
    conversations, unreadable = [], 0
    for file in args.files:
        read, bad = read_conversations(file, None)
        conversations += read
        unreadable += bad
    conversations = conversations[: args.limit]
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
    rates, left_out = render_rates(fmt, tokenizer, conversations, reference, args.repeat)
    if not rates[0].conversations:
        print(f"error: {nothing_to_time(files, len(conversations), unreadable, left_out)}", file=sys.stderr)
        return 2
    print(f"data benchmark: format {args.format}, tokenizer {args.tokenizer or fmt.default_tokenizer}")
    print(
        f"{rates[0].conversations} conversations from {files}; left out: {left_out} that a path cannot render; "
        f"unreadable lines: {unreadable}"
    )
    print(f"render+tokenize+mask, one process, best of {max(1, args.repeat)} passes after a warm-up:")
    print(table(rates))
    if len(rates) == 2:
        ratio = rates[0].per_second / rates[1].per_second if rates[1].per_second else float("nan")
        print(f"ratio {rates[0].path} / {rates[1].path}: {ratio:.2f}x")
    else:
        print("no reference template for this format and tokenizer: tooltrain's rate only")
    data_cfg = data_config(args.files, args.limit, args.max_seq_len, workers)
    with tempfile.TemporaryDirectory(prefix="tooltrain-bench-data-") as cache_root:
        try:
            build = in_child(_build_in_child, data_cfg, args.format, args.tokenizer, cache_root)
            read = in_child(_read_in_child, data_cfg, args.format, args.tokenizer, cache_root, args.batch_size)
            trl_rows = in_child(_trl_rows_in_child, args.files, args.limit, args.format, args.tokenizer)
            trl_rows = trl_rows if reference is not None else None
        except RuntimeError as err:
            print(f"error: the benchmark's child process failed: {err}", file=sys.stderr)
            return 2
    seconds = build["seconds"]
    print(
        f"build (data.num_workers={workers}, fresh process): {build['read']} read, {build['rows']} rows, "
        f"{build['tokens']} tokens in {seconds:.2f} s = {build['read'] / seconds:.1f} conv/s, "
        f"{build['tokens'] / seconds:.0f} tokens/s; peak RSS {mib(build['rss_peak'])} "
        f"({mib(build['rss_before'])} before the build)"
    )
    if trl_rows is not None:
        print(
            f"{reference.label}, every row kept in memory (fresh process): {trl_rows['rows']} rows; "
            f"peak RSS {mib(trl_rows['rss_peak'])} ({mib(trl_rows['rss_before'])} before encoding)"
        )
    print(
        f"read (fresh process): open the built set, pack and collate one epoch: {read['rows']} packed rows of "
        f"<= {args.max_seq_len} tokens in {read['batches']} batches of {args.batch_size}, {read['seconds']:.2f} s; "
        f"peak RSS {mib(read['rss_peak'])} ({mib(read['rss_before'])} before opening)"
        + ("" if read["from_cache"] else "; it found no built set and built one")
    )
    return 0
