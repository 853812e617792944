"""``tooltrain bench train recipe=NAME [key=value ...] [--steps N] [--warmup W]``.

Training throughput of one recipe three ways (``tooltrain packed``, ``tooltrain padded``, ``trl packed``), on the
same model, data and optimizer settings, for the same number of optimizer steps after an untimed warm-up; each path
in a fresh process with its own log. The measurement, and what each path is, is ``train.engine.bench_train``; this
verb checks the overrides, runs the paths one after another and prints the table: real tokens/s (over wall time and
over the process's CPU time), padding efficiency, MFU (n/a, and why, without a known peak), peak memory and each
path's tokens/s over trl's, then the ratios of the packed path to the others; every figure also goes to
OUTPUT_DIR/bench_train.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from train.commands.arg_types import count
from train.commands.outputs import add_out_dir, make_folder, open_output
from train.engine.bench_train import PATHS, TRL, Measurement, path_folder, run_isolated, step_overrides

RESULTS = "bench_train.json"  # in the output folder: every figure of the table


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
        (
            "path",
            "steps",
            "real tokens",
            "seconds",
            "tokens/s",
            "cpu s",
            "tokens/cpu s",
            "padding eff",
            "MFU",
            "peak mem MiB",
            "vs trl",
        )
    ]
    trl = next((r for r in results if r.path == TRL), None)
    for r in results:
        if r.error or not r.steps:
            rows.append((r.path, *["-"] * (len(rows[0]) - 1)))
            continue
        mfu = r.mfu
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
                "n/a" if mfu is None else f"{mfu:.1%}",
                f"{r.peak_memory_mib:,.0f}",
                tokens_ratio(r, trl),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        row[0].ljust(widths[0]) + "".join(f"  {c.rjust(w)}" for c, w in zip(row[1:], widths[1:])) for row in rows
    )


def share(numerator: Measurement, denominator: Measurement | None) -> float | None:
    """``numerator``'s tokens/s over ``denominator``'s; None where either was not measured."""
    if denominator is None or any(m.error or not m.steps or not m.tokens_per_s for m in (numerator, denominator)):
        return None
    return numerator.tokens_per_s / denominator.tokens_per_s


def tokens_ratio(numerator: Measurement, denominator: Measurement | None) -> str:
    """``share`` as ``1.23x``, ``-`` without one."""
    value = share(numerator, denominator)
    return "-" if value is None else f"{value:.2f}x"


def ratio(numerator: Measurement, denominator: Measurement) -> str:
    if numerator.error or denominator.error or not denominator.tokens_per_s or not numerator.steps:
        return "n/a"
    by_cpu = (
        f"{numerator.tokens_per_cpu_s / denominator.tokens_per_cpu_s:.2f}x" if denominator.tokens_per_cpu_s else "n/a"
    )
    return f"{numerator.tokens_per_s / denominator.tokens_per_s:.2f}x tokens/s, {by_cpu} tokens/cpu s"


def mfu_lines(results: list[Measurement]) -> list[str]:
    """Why the measured paths without MFU have none (one line per reason), and the peak the others divide by."""
    why: dict[str, list[str]] = {}
    for r in results:
        if r.steps and not r.error and r.mfu is None:
            why.setdefault(r.mfu_note or "no FLOPs counted", []).append(r.path)
    lines = [f"MFU n/a ({', '.join(paths)}): {reason}" for reason, paths in why.items()]
    peaks = sorted({r.peak_tflops for r in results if r.mfu is not None})
    if peaks:
        lines.append(f"MFU: training FLOPs / seconds / dense bf16 peak of {', '.join(f'{p:g}' for p in peaks)} TFLOP/s")
    return lines


def as_json(header: dict[str, Any], results: list[Measurement]) -> dict[str, Any]:
    """The benchmark's JSON: the setup, each path's figures with its tokens/s over trl's (``vs_trl``)."""
    trl = next((r for r in results if r.path == TRL), None)
    return {**header, "paths": [{**r.figures(), "vs_trl": share(r, trl)} for r in results]}


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
    header = {
        "model": cfg.model.name,
        "data": cfg.data.name,
        "max_seq_len": cfg.data.max_seq_len,
        "micro_batch_size": cfg.train.micro_batch_size,
        "global_batch_size": cfg.train.global_batch_size,
        "steps": args.steps,
        "warmup": args.warmup,
        "device": device,
        "overrides": list(args.overrides),
    }
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
    with open_output(args.out_dir / RESULTS) as fh:
        fh.write(json.dumps(as_json(header, results), indent=1) + "\n")
    print(f"every figure: {args.out_dir / RESULTS}")
    return 1 if any(r.error for r in results) else 0


def report(results: list[Measurement]) -> None:
    print(table(results))
    for line in mfu_lines(results):
        print(line)
    by_path = {r.path: r for r in results}
    print(
        f"ratio tooltrain packed / tooltrain padded: {ratio(by_path['tooltrain packed'], by_path['tooltrain padded'])}"
    )
    print(f"ratio tooltrain packed / trl packed: {ratio(by_path['tooltrain packed'], by_path['trl packed'])}")
    for r in results:
        if r.note:
            print(f"{r.path}: {r.note}")
    print(f"memory: {results[0].memory_kind or 'peak RSS'} of each path's process, model loading included")
