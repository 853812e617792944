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
from train.formats.byte_bpe import ByteBPE, byte_bpe_for
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
    fmt: ChatFormat,
    convs: Sequence[Conversation],
    tokenizer: Any,
    policy: MaskPolicy = TRAIN_ASSISTANT,
    fast: bool = True,
) -> list[Tokenized | ValueError]:
    """Tokenize many conversations; a conversation the format cannot express yields its ``ValueError``.

    With a tokenizer ``train.formats.byte_bpe`` can reproduce (Llama 3, Qwen2.5), text runs are
    encoded by tiktoken and each conversation's labels come from one pass over its tokens' byte
    spans (``_assemble_bytes``); otherwise, or with ``fast=False`` (the reference the tests compare
    with), all text runs are encoded in one batched ``tokenizers`` call and labelled from their
    character offsets. Both give the same ids, labels and weights.
    """
    bpe = byte_bpe_for(tokenizer) if fast else None
    if bpe is None:
        return _tokenize_batched(fmt, convs, tokenizer, policy)
    results: list[Tokenized | ValueError] = []
    seen: dict[str, list[int] | None] = {}  # run text -> its ids, for this call only (no state between calls)
    for conv in convs:
        try:
            segments = fmt.render(conv)
        except ValueError as err:
            results.append(err)
            continue
        weights = mask_segments(segments, policy, call_turns(conv))
        tokens = _assemble_bytes(segments, weights, bpe, tokenizer, fmt.merge_text_runs, policy, seen)
        if tokens is None:  # a case the byte path leaves to the reference: an NFC change, an error to word
            try:
                trained = trained_segments(segments, policy)
                tokens = tokenize_segments(segments, trained, weights, tokenizer, fmt.merge_text_runs)
            except ValueError as err:
                tokens = err
        results.append(tokens)
    return results


def _tokenize_batched(
    fmt: ChatFormat, convs: Sequence[Conversation], tokenizer: Any, policy: MaskPolicy
) -> list[Tokenized | ValueError]:
    """The reference path: one batched ``tokenizers`` encode of all the conversations' text runs."""
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


def _assemble_bytes(
    segments: Sequence[Segment],
    weights: Sequence[float],
    bpe: ByteBPE,
    tokenizer: Any,
    merge: bool,
    policy: MaskPolicy,
    seen: dict[str, list[int] | None],
) -> Tokenized | None:
    """``_assemble`` over bytes: the segments' texts, in order, are one byte string; each token (a control
    token, or a BPE token of a text run) covers a span of it and takes the weight of the segments that
    span covers, found for all tokens at once. None for what the reference path decides and words: a run
    the normalizer would change, a control token the tokenizer lacks, a token across trained and masked
    text that is not whitespace.

    A segment's weight (``mask_segments``) is 0.0 wherever it is not trained, so a token's label is its
    id exactly where its weight is above 0, and its weight is the weight: the reference's
    ``trained and weight > 0`` and ``weight if trained`` without the flags.
    """
    ids: list[int] = []
    controls: list[tuple[int, int]] = []  # (token position, byte length) of each control token
    segment_bytes: list[int] = []
    run: list[str] = []
    for seg in segments:
        text = seg.text
        size = len(text) if text.isascii() else len(text.encode("utf-8"))
        segment_bytes.append(size)
        if seg.special:
            if run and not _encode_run(bpe, run, ids, seen):
                return None
            try:
                controls.append((len(ids), size))
                ids.append(_special_id(tokenizer, text))
            except ValueError:
                return None
        elif text:
            if seg.new_run and run and not _encode_run(bpe, run, ids, seen):  # the reference encodes it apart
                return None
            run.append(text)
            if not merge and not _encode_run(bpe, run, ids, seen):
                return None
    if run and not _encode_run(bpe, run, ids, seen):
        return None
    if not ids:
        return Tokenized(input_ids=[], labels=[], weights=[])
    token_ids = np.array(ids, dtype=np.int64)
    token_bytes = bpe.byte_lengths[np.minimum(token_ids, len(bpe.byte_lengths) - 1)]
    if controls:
        at, length = zip(*controls)
        token_bytes[list(at)] = length
    token_ends = np.cumsum(token_bytes)
    segment_ends = np.cumsum(segment_bytes)
    if token_ends[-1] != segment_ends[-1]:  # the tokens do not tile the text: leave it to the reference
        return None
    # side="right" never lands on an empty segment: a token belongs to the segments that hold its bytes
    first = np.searchsorted(segment_ends, token_ends - token_bytes, side="right")
    last = np.searchsorted(segment_ends, token_ends - 1, side="right")
    token_w = np.array(weights, dtype=np.float64)[first]
    crossing = np.nonzero(first != last)[0]  # tokens across a segment edge: rare, checked one by one
    trained = trained_segments(segments, policy) if len(crossing) else []
    for t in crossing:
        covered = [k for k in range(first[t], last[t] + 1) if segment_bytes[k]]
        mixed = len({trained[k] for k in covered}) > 1
        if mixed and not _token_text(segments, token_ends[t] - token_bytes[t], token_ends[t]).isspace():
            return None  # the reference raises the SpanError
        token_w[t] = max(weights[k] for k in covered)
    labels = np.where(token_w > 0, token_ids, IGNORE_INDEX)
    return Tokenized(input_ids=ids, labels=labels.tolist(), weights=token_w.tolist())


def _encode_run(bpe: ByteBPE, run: list[str], ids: list[int], seen: dict[str, list[int] | None]) -> bool:
    """Encode the run's text onto ``ids`` and empty the run; False when the byte path cannot encode it.
    ``seen``: the runs already encoded in this call (headers, system preludes, tool blocks repeat)."""
    text = "".join(run)
    run.clear()
    try:
        encoded = seen[text]
    except KeyError:
        encoded = seen[text] = bpe.encode(text)
    if encoded is None:
        return False
    ids.extend(encoded)
    return True


def _token_text(segments: Sequence[Segment], start: int, end: int) -> str:
    """The characters a token's bytes touch (whole characters, as the tokenizer's offsets give them)."""
    data = "".join(seg.text for seg in segments).encode("utf-8")
    while start > 0 and data[start] & 0xC0 == 0x80:
        start -= 1
    while end < len(data) and data[end] & 0xC0 == 0x80:
        end += 1
    return data[start:end].decode("utf-8")
