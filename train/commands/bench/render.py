"""``tooltrain bench render FILE.jsonl --format F [--tokenizer T] [--limit N] [--repeat R]``.

How fast tooltrain turns conversations into training rows (render + tokenize + mask), next to
the path trl takes: ``tokenizer.apply_chat_template(messages, tools=tools, tokenize=True,
return_dict=True, return_assistant_tokens_mask=...)`` with trl's own copy of the family's chat
template, then labels from the assistant mask. Templates with ``{% generation %}`` markers give
assistant masks (qwen2_5 uses ``qwen2_5_training.jinja`` for that reason); others give ids only,
and the table says so.

* ``chatml`` is compared with ``qwen2_5_training.jinja`` on the same tokenizer: it is the same
  ChatML + Hermes layout with generation markers, so both paths do the same work. SmolLM2's own
  template has no tools and no markers.
* A format with no trl template falls back to the tokenizer's own ``chat_template``; with none,
  only tooltrain's rate is reported.

Both paths get the same conversations, parsed beforehand (canonical records for tooltrain, HF
messages for trl): conversations either path cannot handle are left out and counted. The first
pass over the data is an untimed warm-up; the rate is the best of R timed passes. The measurement is
``train.data.bench_render``; this verb reads the file, loads the format and prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from train.commands.arg_types import count
from train.commands.bench.common import file_problem, nothing_to_time, table
from train.commands.chat_setup import load_format_and_tokenizer
from train.data.bench_render import Comparison, Reference, compare_paths, first_conversations, reference_for
from train.formats import FORMATS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, metavar="FILE.jsonl", help="canonical conversations (JSON Lines)")
    parser.add_argument(
        "--format", required=True, choices=list(FORMATS), metavar="FORMAT", help=f"one of: {', '.join(FORMATS)}"
    )
    parser.add_argument(
        "--tokenizer", help="a tooltrain tokenizer name or a local tokenizer folder (default: the format's)"
    )
    parser.add_argument("--limit", type=count(1), default=None, metavar="N", help="use the first N conversations")
    parser.add_argument(
        "--repeat", type=count(1), default=3, metavar="R", help="timed passes; the best one counts (default 3)"
    )


def run(args: argparse.Namespace) -> int:
    problem = file_problem(args.file)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    conversations, unreadable = first_conversations(args.file, args.limit)
    if not conversations:  # before the tokenizer is loaded: nothing else to learn
        print(f"error: {nothing_to_time(str(args.file), 0, unreadable, 0)}", file=sys.stderr)
        return 2
    try:
        fmt, tokenizer = load_format_and_tokenizer(args.format, args.tokenizer)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    reference = reference_for(args.format, tokenizer)
    compared = compare_paths(args.format, fmt, tokenizer, conversations, reference, args.repeat)
    if not compared.kept:
        left_out = len(conversations)
        print(f"error: {nothing_to_time(str(args.file), len(conversations), unreadable, left_out)}", file=sys.stderr)
        return 2
    print(
        f"render benchmark: format {args.format}, tokenizer {args.tokenizer or fmt.default_tokenizer}, "
        f"best of {max(1, args.repeat)} passes after a warm-up"
    )
    print(
        f"{compared.kept} conversations from {args.file}; left out: {len(conversations) - compared.kept} "
        f"that a path cannot render; unreadable lines: {unreadable}"
    )
    print(table(compared.rates))
    if reference is not None:
        print_ratios(compared, reference)
    else:
        print("no reference template for this format and tokenizer: tooltrain's rate only")
    return 0


def print_ratios(compared: Comparison, reference: Reference) -> None:
    """Each tooltrain rate over trl's (the last), and how many conversations both paths encode alike."""
    rates = compared.rates
    masks = "with assistant masks" if reference.masks else "ids only: the template has no {% generation %} markers"
    for ours_rate in rates[:2]:
        ratio = ours_rate.per_second / rates[2].per_second if rates[2].per_second else float("nan")
        print(f"ratio {ours_rate.path} / {reference.label}: {ratio:.2f}x ({reference.label}: {masks})")
    print(f"identical input_ids on {compared.identical} of {compared.kept} conversations")
