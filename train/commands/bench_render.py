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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from train.commands.chat_setup import Reference, load_format_and_tokenizer, reference_for
from train.formats import FORMATS, ChatFormat
from train.formats.tokenize import tokenize, tokenize_many
from train.schema import Conversation, SchemaError


@dataclass
class Rate:
    path: str
    conversations: int
    tokens: int
    seconds: float  # best pass

    @property
    def per_second(self) -> float:
        return self.conversations / self.seconds if self.seconds > 0 else float("inf")


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


def read_conversations(path: Path, limit: int | None) -> tuple[list[Conversation], int]:
    """The first ``limit`` canonical conversations, and how many lines were not one."""
    from train.sources._common import Rejected, iter_json_records

    conversations, unreadable = [], 0
    for item in iter_json_records(path):
        if limit is not None and len(conversations) >= limit:
            break
        if isinstance(item, Rejected):
            unreadable += 1
            continue
        try:
            conversations.append(Conversation.from_dict(item[1]))
        except SchemaError:
            unreadable += 1
    return conversations, unreadable


Row = tuple[list[int], list[int]]  # input_ids, labels


def ours(fmt: ChatFormat, tokenizer: Any) -> Callable[[Conversation], Row]:
    def encode(conv: Conversation) -> Row:
        tokens = tokenize(fmt, conv, tokenizer)
        return tokens.input_ids, tokens.labels

    return encode


def trl_path(reference: Reference, tokenizer: Any) -> Callable[[tuple[list, list | None]], Row]:
    def encode(hf: tuple[list, list | None]) -> Row:
        messages, tools = hf
        out = tokenizer.apply_chat_template(
            messages,
            tools=tools,
            chat_template=reference.template,
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=reference.masks,
        )
        ids = out["input_ids"]
        if not reference.masks:
            return ids, []
        # timed too: the labels a trainer builds from the mask
        return ids, [t if m else -100 for t, m in zip(ids, out["assistant_masks"])]

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


def table(rates: list[Rate]) -> str:
    rows = [("path", "conversations", "tokens", "conv/s", "tokens/s")]
    for r in rates:
        tokens_per_second = f"{r.tokens / r.seconds:.0f}" if r.seconds else "inf"
        rows.append((r.path, str(r.conversations), str(r.tokens), f"{r.per_second:.1f}", tokens_per_second))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    # the path column is text (left-aligned), the numbers right-aligned
    return "\n".join(
        row[0].ljust(widths[0]) + "".join(f"  {cell.rjust(w)}" for cell, w in zip(row[1:], widths[1:])) for row in rows
    )


def run(args: argparse.Namespace) -> int:
    from train.formats.hf import to_hf_messages

    if not args.file.is_file():
        print(f"error: {args.file}: no such file", file=sys.stderr)
        return 2
    try:
        fmt, tokenizer = load_format_and_tokenizer(args.format, args.tokenizer)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    conversations, unreadable = read_conversations(args.file, args.limit)
    reference = reference_for(args.format, tokenizer)
    tooltrain = ours(fmt, tokenizer)
    trl = trl_path(reference, tokenizer) if reference is not None else None
    hf = [to_hf_messages(conv) for conv in conversations]
    keep, identical = warm_up(conversations, hf, tooltrain, trl)
    chosen = [conversations[i] for i in keep]
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
