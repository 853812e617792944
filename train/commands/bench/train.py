"""``tooltrain bench train recipe=NAME [key=value ...] [--steps N] [--warmup W]``.

Training throughput of one recipe three ways (``tooltrain packed``, ``tooltrain padded``, ``trl packed``), on the
same model, data and optimizer settings, for the same number of optimizer steps after an untimed warm-up; each path
in a fresh process with its own log. The measurement, and what each path is, is ``train.engine.bench_train``; this
verb checks the overrides, runs the paths one after another and prints the table: real tokens/s (over wall time and
over the process's CPU time), padding efficiency and peak memory, with the ratios of the packed path to the others.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from train.commands.arg_types import count
from train.commands.outputs import add_out_dir, make_folder
from train.engine.bench_train import PATHS, Measurement, path_folder, run_isolated, step_overrides


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="training config overrides, e.g. recipe=demo")
    parser.add_argument(
        "--steps", type=count(1), default=8, metavar="N", help="timed optimizer steps per path (default 8)"
    )
    parser.add_argument("--warmup", type=count(0), default=2, metavar="W", help="untimed steps before them (default 2)")
    add_out_dir(
        parser,
        "-o",
        "--output-dir",
        default=Path("runs/bench_train"),
        help="the folder each path's run directory and log go to (default runs/bench_train)",
    )


def table(results: list[Measurement]) -> str:
    rows = [
        ("path", "steps", "real tokens", "seconds", "tokens/s", "cpu s", "tokens/cpu s", "padding eff", "peak mem MiB")
    ]
    for r in results:
        if r.error or not r.steps:
            rows.append((r.path, *["-"] * (len(rows[0]) - 1)))
            continue
        rows.append(
            (
                r.path,
                str(r.steps),
                f"{r.real_tokens:,}",
                f"{r.seconds:.1f}",
                f"{r.tokens_per_s:.1f}",
                f"{r.cpu_seconds:.1f}",
                f"{r.tokens_per_cpu_s:.1f}",
                f"{r.padding_efficiency:.1%}",
                f"{r.peak_memory_mib:,.0f}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        row[0].ljust(widths[0]) + "".join(f"  {c.rjust(w)}" for c, w in zip(row[1:], widths[1:])) for row in rows
    )


def ratio(numerator: Measurement, denominator: Measurement) -> str:
    if numerator.error or denominator.error or not denominator.tokens_per_s or not numerator.steps:
        return "n/a"
    by_cpu = (
        f"{numerator.tokens_per_cpu_s / denominator.tokens_per_cpu_s:.2f}x" if denominator.tokens_per_cpu_s else "n/a"
    )
    return f"{numerator.tokens_per_s / denominator.tokens_per_s:.2f}x tokens/s, {by_cpu} tokens/cpu s"


def run(args: argparse.Namespace) -> int:
    from train.engine.config import compose

    make_folder(args.out_dir)  # a file in the way is an OutputError (one line) before any training process starts
    try:
        cfg = compose(step_overrides(args.overrides, args.warmup, args.steps, args.out_dir / "check"))
    except Exception as err:  # noqa: BLE001 - a bad override: Hydra's message lists the valid choices
        print(f"error: {err}", file=sys.stderr)
        return 2
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU, {torch.get_num_threads()} threads"
    print(
        f"training benchmark: model {cfg.model.name}, data {cfg.data.name} (max_seq_len {cfg.data.max_seq_len}), "
        f"micro batch {cfg.train.micro_batch_size}, global batch {cfg.train.global_batch_size}, "
        f"{args.steps} timed steps after {args.warmup} warm-up, on {device}",
        flush=True,
    )
    results = []
    for path in PATHS:
        started = time.perf_counter()
        folder = path_folder(args.out_dir, path)
        result = run_isolated(path, list(args.overrides), args.warmup, args.steps, folder)
        results.append(result)
        status = f"failed: {result.error} (log: {folder}.log)" if result.error else "done"
        print(f"  {path}: {status} in {time.perf_counter() - started:.0f} s", flush=True)
    report(results)
    return 1 if any(r.error for r in results) else 0


def report(results: list[Measurement]) -> None:
    print(table(results))
    by_path = {r.path: r for r in results}
    print(
        f"ratio tooltrain packed / tooltrain padded: {ratio(by_path['tooltrain packed'], by_path['tooltrain padded'])}"
    )
    print(f"ratio tooltrain packed / trl packed: {ratio(by_path['tooltrain packed'], by_path['trl packed'])}")
    for r in results:
        if r.note:
            print(f"{r.path}: {r.note}")
    print(f"memory: {results[0].memory_kind or 'peak RSS'} of each path's process, model loading included")
