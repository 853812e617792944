"""Segments -> token ids, labels and loss weights: the stage after a format's render and mask.

A format (``train.formats.<family>``) renders a conversation into ``Segment``s and
``train.formats.base`` decides which of them are trained; this module turns that into the ids
and labels a model trains on. Nothing here knows a family: the format is passed in only for its
``render`` and its ``merge_text_runs`` flag.

The format's control tokens (``special=True`` segments) are kept apart from text: they map
straight to their ids, and all other text is encoded with special-token parsing off, so a user who
writes ``<|eot_id|>`` gets the characters, never the control id. Runs of consecutive text segments
are encoded as one string (exactly what a chat template does: added tokens are the only places a
template's string is split), and each token takes its label from the characters it covers.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from train.formats.base import ChatFormat, MaskPolicy, Segment, call_turns, mask_segments, trained_segments
from train.schema import Conversation

TRAIN_ASSISTANT = MaskPolicy()  # the default policy: every assistant turn trained (one shared, frozen instance)

IGNORE_INDEX = -100  # the label of a masked token: the loss skips it (torch's cross_entropy default)


@dataclass
class Tokenized:
    input_ids: list[int]
    labels: list[int]  # unshifted: input_ids where trained, IGNORE_INDEX elsewhere
    weights: list[float]  # per-token loss weight (0.0 where masked)

    def to_dict(self) -> dict[str, Any]:
        return {"input_ids": self.input_ids, "labels": self.labels}


class SpanError(ValueError):
    """A token covers both trained and masked characters: the mask cannot be derived exactly."""


def tokenize(fmt: ChatFormat, conv: Conversation, tokenizer: Any, policy: MaskPolicy = TRAIN_ASSISTANT) -> Tokenized:
    """One conversation as ids, labels and weights; the format's ``ValueError`` when it cannot express it."""
    result = tokenize_many(fmt, [conv], tokenizer, policy)[0]
    if isinstance(result, Exception):
        raise result
    return result


def tokenize_many(
    fmt: ChatFormat, convs: Sequence[Conversation], tokenizer: Any, policy: MaskPolicy = TRAIN_ASSISTANT
) -> list[Tokenized | ValueError]:
    """Tokenize many conversations with one batched encode of all their text runs.

    A conversation the format cannot express yields its ``ValueError`` in its place.
    """
    prepared: list[tuple[list[Segment], list[tuple[str, Any]]] | ValueError] = []
    texts: list[str] = []
    for conv in convs:
        try:
            segments = fmt.render(conv)
        except ValueError as err:
            prepared.append(err)
            continue
        plan, run_texts = _plan_runs(segments, fmt.merge_text_runs)
        prepared.append((segments, plan))
        texts.extend(run_texts)
    encoded = iter(encode_texts(tokenizer, texts) if texts else [])
    results: list[Tokenized | ValueError] = []
    for conv, item in zip(convs, prepared):
        if isinstance(item, ValueError):
            results.append(item)
            continue
        segments, plan = item
        trained = trained_segments(segments, policy)
        weights = mask_segments(segments, policy, call_turns(conv))
        try:
            results.append(_assemble(plan, segments, trained, weights, encoded, tokenizer))
        except ValueError as err:
            # keep the iterator aligned: skip the encodings of this conversation's remaining runs
            remaining = sum(1 for kind, _ in plan if kind == "run") - getattr(err, "runs_done", 0)
            for _ in range(remaining):
                next(encoded)
            results.append(err)
    return results


def tokenize_prompt(fmt: ChatFormat, conv: Conversation, message_index: int, tokenizer: Any) -> list[int]:
    """``fmt.render_prompt`` as token ids (control tokens as their ids, text encoded as in training)."""
    segments = fmt.render_prompt(conv, message_index)
    untrained = [False] * len(segments)
    return tokenize_segments(segments, untrained, [0.0] * len(segments), tokenizer, fmt.merge_text_runs).input_ids


def tokenize_segments(
    segments: Sequence[Segment], trained: Sequence[bool], weights: Sequence[float], tokenizer: Any, merge: bool = True
) -> Tokenized:
    """Segments -> ids, labels and per-token weights (one conversation)."""
    plan, texts = _plan_runs(segments, merge)
    return _assemble(plan, segments, trained, weights, iter(encode_texts(tokenizer, texts) if texts else []), tokenizer)


def encode_texts(tokenizer: Any, texts: list[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
    """Plain text runs -> ids and character offsets, with no added token matched.

    The tokenizer's own pipeline (normalizer, pre-tokenizer, model) minus its added-token list:
    a user who writes ``<|eot_id|>`` or Qwen's ``<tool_call>`` gets those characters, never the
    control id. One batched backend call per conversation.
    """
    encodings = _plain_backend(tokenizer).encode_batch(texts, add_special_tokens=False)
    return [(list(e.ids), [tuple(o) for o in e.offsets]) for e in encodings]


def encode_text(tokenizer: Any, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    return encode_texts(tokenizer, [text])[0]


_PLAIN_BACKENDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _plain_backend(tokenizer: Any) -> Any:
    """A backend tokenizer sharing ``tokenizer``'s model but knowing none of its added tokens."""
    plain = _PLAIN_BACKENDS.get(tokenizer)
    if plain is None:
        from tokenizers import Tokenizer

        backend = tokenizer.backend_tokenizer
        plain = Tokenizer(backend.model)
        plain.normalizer = backend.normalizer
        plain.pre_tokenizer = backend.pre_tokenizer
        _PLAIN_BACKENDS[tokenizer] = plain
    return plain


_SPECIAL_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _special_id(tokenizer: Any, text: str) -> int:
    known = _SPECIAL_IDS.setdefault(tokenizer, {})
    if text not in known:
        token_id = tokenizer.convert_tokens_to_ids(text)
        if token_id is None or token_id == getattr(tokenizer, "unk_token_id", None) and text != tokenizer.unk_token:
            raise ValueError(f"tokenizer has no control token {text!r}")
        known[text] = token_id
    return known[text]


def _plan_runs(segments: Sequence[Segment], merge: bool) -> tuple[list[tuple[str, Any]], list[str]]:
    """("special", index) or ("run", [indices]) in order, and the text of each run."""
    plan: list[tuple[str, Any]] = []
    for index, seg in enumerate(segments):
        if seg.special:
            plan.append(("special", index))
        elif seg.text:
            if merge and plan and plan[-1][0] == "run" and not seg.new_run:
                plan[-1][1].append(index)
            else:
                plan.append(("run", [index]))
    texts = ["".join(segments[i].text for i in members) for kind, members in plan if kind == "run"]
    return plan, texts


def _assemble(plan, segments, trained, weights, encoded, tokenizer) -> Tokenized:
    """Control-token ids and encoded runs, in order, with each token's label and weight.

    A text token takes the flags of the segments its characters cover. A token covering trained
    and masked text is an error unless it is whitespace merged across a header/content edge
    (trained, as the model must produce it).
    """
    ids: list[int] = []
    token_trained: list[bool] = []
    token_weights: list[float] = []
    runs_done = 0
    for kind, item in plan:
        if kind == "special":
            try:
                ids.append(_special_id(tokenizer, segments[item].text))
            except ValueError as err:
                err.runs_done = runs_done  # type: ignore[attr-defined]
                raise
            token_trained.append(trained[item])
            token_weights.append(weights[item])
            continue
        run_ids, offsets = next(encoded)
        runs_done += 1
        try:
            flags, token_w = _token_flags(segments, item, trained, weights, offsets)
        except SpanError as err:
            err.runs_done = runs_done  # type: ignore[attr-defined]
            raise
        ids.extend(run_ids)
        token_trained.extend(flags)
        token_weights.extend(token_w)
    labels = [tok if t and w > 0 else IGNORE_INDEX for tok, t, w in zip(ids, token_trained, token_weights)]
    weights = [w if t else 0.0 for t, w in zip(token_trained, token_weights)]
    return Tokenized(input_ids=ids, labels=labels, weights=weights)


def _token_flags(
    segments: Sequence[Segment], members: list[int], trained: Sequence[bool], weights: Sequence[float], offsets: list
) -> tuple[list[bool], list[float]]:
    """(trained, weight) of each token of one text run, from the segments its characters cover."""
    if not offsets:
        return [], []
    ends = np.fromiter(itertools.accumulate(len(segments[i].text) for i in members), dtype=np.int64, count=len(members))
    spans = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    last_index = len(members) - 1
    first = np.minimum(np.searchsorted(ends, spans[:, 0], side="right"), last_index)
    last = np.minimum(np.searchsorted(ends, np.maximum(spans[:, 1] - 1, spans[:, 0]), side="right"), last_index)
    seg_trained = np.array([trained[i] for i in members], dtype=bool)
    seg_weight = np.array([weights[i] for i in members], dtype=np.float64)
    flags = seg_trained[first]
    token_w = seg_weight[first]
    for t in np.nonzero(first != last)[0]:  # tokens crossing a segment edge: rare, checked one by one
        covered = range(first[t], last[t] + 1)
        mixed = {bool(seg_trained[k]) for k in covered}
        if len(mixed) > 1:
            text = "".join(segments[i].text for i in members)
            piece = text[spans[t, 0] : spans[t, 1]]
            # whitespace merged across a header/content edge is trained: the model must produce it
            if not piece.isspace():
                raise SpanError(f"token {piece!r} spans trained and masked text")
        flags[t] = True in mixed
        token_w[t] = max(seg_weight[k] for k in covered)
    return flags.tolist(), token_w.tolist()
