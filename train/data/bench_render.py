"""How fast conversations become training rows (render + tokenize + mask): tooltrain's path next to trl's, measured.

``tooltrain bench render`` and the first stage of ``tooltrain bench data`` time both paths here; the verbs only pick
the files and print. trl's path is ``tokenizer.apply_chat_template(messages, tools=tools, tokenize=True,
return_dict=True, return_assistant_tokens_mask=...)`` on the HF messages of the same conversations
(``to_hf_messages``), then labels from the assistant mask, as a trainer builds them.

trl's reference for a format (``reference_for``) is trl's own copy of the family's chat template where trl ships one
(``chatml`` and ``qwen2_5`` use ``qwen2_5_training.jinja``: the same ChatML + Hermes layout, with ``{% generation %}``
markers), else the tokenizer's own ``chat_template``, else none (tooltrain's rate only). A template with generation
markers gives assistant masks; one without gives ids only, and ``Reference.masks`` says so. ``train.engine.bench_data``
and ``train.engine.bench_train`` use the same reference for trl's side of their comparisons.

A rate is the best of R timed passes (``best_of``): the fastest pass is the one least disturbed by other work on the
machine; the first, untimed pass (the warm-up) also decides which conversations both paths handle.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from train.formats.base import ChatFormat
from train.formats.tokenize import tokenize, tokenize_many
from train.schema import Conversation, SchemaError

BATCH = 256  # conversations per tokenize_many call, as the dataset build uses
# format -> trl template file (trl/chat_templates/)
TRL_TEMPLATES = {
    "llama3_1": "llama3_1.jinja",
    "qwen2_5": "qwen2_5_training.jinja",
    "chatml": "qwen2_5_training.jinja",
}
GENERATION_MARKER = re.compile(r"{%-?\s*generation\s*-?%}")

Row = tuple[list[int], list[int]]  # input_ids, labels ([] where the template marks no assistant output)


@dataclass
class Reference:
    """The chat template trl's path renders with."""

    label: str  # what the tables call it
    template: str
    masks: bool  # the template marks assistant output


def reference_for(format_name: str, tokenizer: Any) -> Reference | None:
    """trl's template for ``format_name``, else the tokenizer's own, else None."""
    if format_name in TRL_TEMPLATES:
        name = TRL_TEMPLATES[format_name]
        template = (resources.files("trl") / "chat_templates" / name).read_text(encoding="utf-8")
        label = f"trl {name}"
    elif getattr(tokenizer, "chat_template", None):
        template, label = tokenizer.chat_template, "tokenizer's chat template"
    else:
        return None
    return Reference(label, template, bool(GENERATION_MARKER.search(template)))


@dataclass
class Rate:
    """One path's best pass over ``conversations``."""

    path: str
    conversations: int
    tokens: int
    seconds: float  # best pass

    @property
    def per_second(self) -> float:
        return self.conversations / self.seconds if self.seconds > 0 else float("inf")


def first_conversations(path: Path, limit: int | None) -> tuple[list[Conversation], int]:
    """The first ``limit`` canonical conversations of a JSON Lines file, and how many lines were not one."""
    from train.base.records import Rejected, iter_json_records

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


def all_conversations(files: Sequence[Path], limit: int | None) -> tuple[list[Conversation], int]:
    """The first ``limit`` canonical conversations of the files together, in order, and how many lines of them were
    not one (every file is read whole)."""
    conversations, unreadable = [], 0
    for file in files:
        read, bad = first_conversations(file, None)
        conversations += read
        unreadable += bad
    return conversations[:limit], unreadable


def trl_path(reference: Reference, tokenizer: Any) -> Callable[[tuple[list, list | None]], Row]:
    """trl's path: HF ``(messages, tools)`` -> ids and, when the template marks assistant output, labels."""

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


def tooltrain_path(fmt: ChatFormat, tokenizer: Any) -> Callable[[Conversation], Row]:
    """tooltrain's path, one conversation at a time: render, tokenize, mask (the format's ValueError when it cannot
    express the conversation)."""

    def encode(conv: Conversation) -> Row:
        tokens = tokenize(fmt, conv, tokenizer)
        return tokens.input_ids, tokens.labels

    return encode


def best_of(work: Callable[[], int], repeat: int) -> tuple[float, int]:
    """The seconds of the fastest of ``repeat`` timed calls of ``work`` (at least one), and what it returned."""
    best, tokens = float("inf"), 0
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        tokens = work()
        best = min(best, time.perf_counter() - start)
    return best, tokens


def best_pass(path: str, encode: Callable[[Any], Row], items: Sequence[Any], repeat: int) -> Rate:
    """``encode`` over every item, one at a time; tokens are the ids it returns."""
    seconds, tokens = best_of(lambda: sum(len(encode(item)[0]) for item in items), repeat)
    return Rate(path, len(items), tokens, seconds)


def best_batched_pass(path: str, fmt: ChatFormat, tokenizer: Any, items: Sequence[Conversation], repeat: int) -> Rate:
    """tooltrain's dataset-build path: ``tokenize_many`` encodes a chunk's text runs in one backend call."""

    def one_pass() -> int:
        return sum(
            len(t.input_ids)
            for first in range(0, len(items), BATCH)
            for t in tokenize_many(fmt, items[first : first + BATCH], tokenizer)
        )

    seconds, tokens = best_of(one_pass, repeat)
    return Rate(path, len(items), tokens, seconds)


def warm_up(
    conversations: Sequence[Conversation],
    hf: Sequence[Any],
    tooltrain: Callable[[Conversation], Row],
    trl: Callable[[Any], Row] | None,
) -> tuple[list[int], int]:
    """One untimed pass through both paths: which conversations both handle (their indices), and on how many their
    input_ids agree (the parity the format's tests check, seen on this data)."""
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


@dataclass
class Comparison:
    """Both paths on the conversations both handle: tooltrain one at a time, tooltrain batched, then trl's."""

    rates: list[Rate]
    kept: int  # conversations both paths handle
    identical: int  # of those, how many get the same input_ids from both


def compare_paths(
    name: str,
    fmt: ChatFormat,
    tokenizer: Any,
    conversations: list[Conversation],
    reference: Reference | None,
    repeat: int,
) -> Comparison:
    """``tooltrain NAME`` (one conversation at a time), ``tooltrain NAME batched`` (the build's ``tokenize_many``)
    and trl's path (when there is a reference), after one untimed warm-up that decides which conversations count;
    no rate when none is left."""
    from train.formats.hf import to_hf_messages

    tooltrain = tooltrain_path(fmt, tokenizer)
    trl = trl_path(reference, tokenizer) if reference is not None else None
    hf = [to_hf_messages(conv) for conv in conversations]
    keep, identical = warm_up(conversations, hf, tooltrain, trl)
    chosen = [conversations[i] for i in keep]
    if not chosen:
        return Comparison([], 0, 0)
    rates = [
        best_pass(f"tooltrain {name}", tooltrain, chosen, repeat),
        best_batched_pass(f"tooltrain {name} batched", fmt, tokenizer, chosen, repeat),
    ]
    if reference is not None and trl is not None:
        rates.append(best_pass(reference.label, trl, [hf[i] for i in keep], repeat))
    return Comparison(rates, len(chosen), identical)


def build_path_rates(
    fmt: ChatFormat, tokenizer: Any, conversations: list[Conversation], reference: Reference | None, repeat: int
) -> tuple[list[Rate], int]:
    """The build path's rate (``tokenize_many``, chunk by chunk, labelled ``tooltrain FORMAT``) and trl's, on the
    conversations both handle; how many were left out. The warm-up is one ``tokenize_many`` over them all."""
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
    rates = [best_batched_pass(f"tooltrain {fmt.name}", fmt, tokenizer, chosen, repeat)]
    if trl is not None:
        rates.append(best_pass(reference.label, trl, [hf for _, hf in keep], repeat))
    return rates, len(conversations) - len(chosen)
