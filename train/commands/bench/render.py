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
pass over the data is an untimed warm-up; the rate is the best of R timed passes.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from train.commands.bench.common import (
    Rate,
    Row,
    file_problem,
    nothing_to_time,
    positive_options,
    read_conversations,
    table,
    trl_path,
)
from train.commands.chat_setup import load_format_and_tokenizer, reference_for
from train.formats import FORMATS, ChatFormat
from train.formats.tokenize import tokenize, tokenize_many
from train.schema import Conversation


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, metavar="FILE.jsonl", help="canonical conversations (JSON Lines)")
    parser.add_argument(
        "--format", required=True, choices=list(FORMATS), metavar="FORMAT", help=f"one of: {', '.join(FORMATS)}"
    )
    parser.add_argument(
        "--tokenizer", help="a tooltrain tokenizer name or a local tokenizer folder (default: the format's)"
    )
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="use the first N conversations")
    parser.add_argument(
        "--repeat", type=int, default=3, metavar="R", help="timed passes; the best one counts (default 3)"
    )


def ours(fmt: ChatFormat, tokenizer: Any) -> Callable[[Conversation], Row]:
    def encode(conv: Conversation) -> Row:
        tokens = tokenize(fmt, conv, tokenizer)
        return tokens.input_ids, tokens.labels

    return encode


def warm_up(
    conversations: Sequence[Conversation],
    hf: Sequence[Any],
    tooltrain: Callable[[Conversation], Row],
    trl: Callable[[Any], Row] | None,
) -> tuple[list[int], int]:
    """One untimed pass through both paths: which conversations both handle, and on how many
    their input_ids agree (the parity the format's tests check, seen on this data)."""
    keep, identical = [], 0
    for i, conv in enumerate(conversations):
        try:
            ids = tooltrain(conv)[0]
            same = trl is not None and trl(hf[i])[0] == ids
        except Exception:  # noqa: BLE001, S112 - a format's ValueError or any template refusal: left out
            continue
        keep.append(i)
        identical += same
    return keep, identical


def best_pass(path: str, encode: Callable[[Any], Row], items: Sequence[Any], repeat: int) -> Rate:
    best, tokens = float("inf"), 0
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        tokens = sum(len(encode(item)[0]) for item in items)
        best = min(best, time.perf_counter() - start)
    return Rate(path, len(items), tokens, best)


BATCH = 256  # conversations per tokenize_many call, as the dataset build uses


def best_batched_pass(path: str, fmt: ChatFormat, tokenizer: Any, items: Sequence[Conversation], repeat: int) -> Rate:
    """tooltrain's dataset-build path: tokenize_many encodes a chunk's text runs in one backend call."""
    best, tokens = float("inf"), 0
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        tokens = 0
        for first in range(0, len(items), BATCH):
            tokens += sum(len(t.input_ids) for t in tokenize_many(fmt, items[first : first + BATCH], tokenizer))
        best = min(best, time.perf_counter() - start)
    return Rate(path, len(items), tokens, best)


def run(args: argparse.Namespace) -> int:
    from train.formats.hf import to_hf_messages

    problem = file_problem(args.file) or positive_options(args, ("limit", "repeat"))
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    conversations, unreadable = read_conversations(args.file, args.limit)
    if not conversations:  # before the tokenizer is loaded: nothing else to learn
        print(f"error: {nothing_to_time(str(args.file), 0, unreadable, 0)}", file=sys.stderr)
        return 2
    try:
        fmt, tokenizer = load_format_and_tokenizer(args.format, args.tokenizer)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    reference = reference_for(args.format, tokenizer)
    tooltrain = ours(fmt, tokenizer)
    trl = trl_path(reference, tokenizer) if reference is not None else None
    hf = [to_hf_messages(conv) for conv in conversations]
    keep, identical = warm_up(conversations, hf, tooltrain, trl)
    chosen = [conversations[i] for i in keep]
    if not chosen:
        left_out = len(conversations)
        print(f"error: {nothing_to_time(str(args.file), len(conversations), unreadable, left_out)}", file=sys.stderr)
        return 2
    rates = [
        best_pass(f"tooltrain {args.format}", tooltrain, chosen, args.repeat),
        best_batched_pass(f"tooltrain {args.format} batched", fmt, tokenizer, chosen, args.repeat),
    ]
    if reference is not None and trl is not None:
        rates.append(best_pass(reference.label, trl, [hf[i] for i in keep], args.repeat))
    print(
        f"render benchmark: format {args.format}, tokenizer {args.tokenizer or fmt.default_tokenizer}, "
        f"best of {max(1, args.repeat)} passes after a warm-up"
    )
    print(
        f"{len(chosen)} conversations from {args.file}; left out: {len(conversations) - len(chosen)} "
        f"that a path cannot render; unreadable lines: {unreadable}"
    )
    print(table(rates))
    if reference is None:
        print("no reference template for this format and tokenizer: tooltrain's rate only")
        return 0
    masks = "with assistant masks" if reference.masks else "ids only: the template has no {% generation %} markers"
    for ours_rate in rates[:2]:
        ratio = ours_rate.per_second / rates[2].per_second if rates[2].per_second else float("nan")
        print(f"ratio {ours_rate.path} / {reference.label}: {ratio:.2f}x ({reference.label}: {masks})")
    print(f"identical input_ids on {identical} of {len(chosen)} conversations")
    return 0
