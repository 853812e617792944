"""Per-target-turn expansion: each trained assistant turn in the context inference shows it.

Some templates rewrite history: Qwen3 drops the ``<think>`` block of every assistant turn before the
last user query, Harmony drops earlier analysis. Rendering a conversation once and training every
assistant turn then trains turn i in a context the model never sees when it writes turn i (the
later user query has already erased reasoning that was there when it was written). Expansion
renders, for each trained assistant turn i, the conversation's ``messages[:i+1]`` (the format
applies its own history rule to that prefix, exactly as at inference) and trains only turn i.

Prefix merging: where the rendering of an earlier target's sample is a token prefix of a later
one's (the format did not rewrite that history), the two are one sample training both turns, so a
shared prefix is paid once. A format that never rewrites history therefore yields exactly the
sample the whole-conversation rendering gives (same ids, same labels). What is not done: samples
that share a prefix but diverge later (Qwen3's before and after a new user query) are separate rows,
and their common prefix is computed twice; sharing it would take tree attention, which the engine
does not have.

Nothing here knows a family: the format is used only for ``render`` and ``merge_text_runs``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from train.formats.base import ChatFormat, MaskPolicy, Segment, call_turns, mask_segments, trained_segments
from train.formats.tokenize import TRAIN_ASSISTANT, Tokenized, tokenize_segments
from train.schema import Conversation

#: ``data.turns``: ``whole`` renders a conversation once and trains every assistant turn in it; ``per_turn``
#: expands it (this module); ``auto`` is ``per_turn`` for a format whose ``rewrites_history`` is set, else ``whole``.
TURN_MODES = ("auto", "whole", "per_turn")


def resolve_turns(mode: str, fmt: ChatFormat | type[ChatFormat]) -> str:
    """``auto`` -> the mode the format needs; ``whole`` and ``per_turn`` stay. ValueError for another name."""
    if mode not in TURN_MODES:
        raise ValueError(f"data.turns must be one of {', '.join(TURN_MODES)}, got {mode!r}")
    if mode == "auto":
        return "per_turn" if getattr(fmt, "rewrites_history", False) else "whole"
    return mode


@dataclass(frozen=True)
class Sample:
    """One expanded sample: a rendering and the assistant messages it trains (indices into the conversation)."""

    segments: tuple[Segment, ...]
    targets: frozenset[int]


def target_turns(segments: Sequence[Segment], policy: MaskPolicy) -> list[int]:
    """The assistant messages the policy trains in a rendering, in order."""
    trained = trained_segments(segments, policy)
    return sorted({seg.message for seg, t in zip(segments, trained) if t and seg.message >= 0})


def _prefix(conv: Conversation, end: int) -> Conversation:
    return Conversation(conv.id, list(conv.messages[:end]), tools=conv.tools, meta=conv.meta)


def _extends(shorter: Sequence[Segment], longer: Sequence[Segment], merge_runs: bool) -> bool | None:
    """True: ``shorter``'s segments begin ``longer`` and its tokens are a prefix of ``longer``'s; False: not a
    prefix; None: a segment prefix whose last text run continues in ``longer`` (the tokens must be compared:
    a run is encoded as one string, so the boundary's tokens may differ)."""
    n = len(shorter)
    if n > len(longer) or tuple(longer[:n]) != tuple(shorter):
        return False
    if n == len(longer) or not merge_runs or shorter[-1].special or longer[n].special:
        return True
    following = next((seg for seg in longer[n:] if seg.special or seg.text), None)
    return True if following is None or following.special else None


def plan_samples(fmt: ChatFormat, conv: Conversation, policy: MaskPolicy, same_tokens: Any = None) -> list[Sample]:
    """The samples of ``conv``: one per trained assistant turn, merged where one rendering extends another.

    ``same_tokens(shorter, longer)`` decides the rare case where the segments are a prefix but a text run
    crosses the boundary (tokens compared); without it such samples stay apart. The format's ``ValueError``
    (a prefix it cannot express) propagates.
    """
    whole = fmt.render(conv)
    targets = target_turns(whole, policy)
    # each target's own context, then the whole conversation (trailing messages after the last target are
    # kept where they extend it, as the unexpanded sample keeps them)
    candidates = [(tuple(fmt.render(_prefix(conv, i + 1))), frozenset({i})) for i in targets]
    candidates.append((tuple(whole), frozenset()))
    samples: list[Sample] = []
    for segments, wanted in candidates:
        if samples:
            extends = _extends(samples[-1].segments, segments, fmt.merge_text_runs)
            if extends is None:
                extends = bool(same_tokens and same_tokens(samples[-1].segments, segments))
            if extends:
                samples[-1] = Sample(segments, samples[-1].targets | wanted)
                continue
        if wanted:
            samples.append(Sample(segments, wanted))
    return samples


def sample_masks(sample: Sample, policy: MaskPolicy, conv: Conversation) -> tuple[list[bool], list[float]]:
    """Trained flags and loss weights of a sample's segments: the one masking rule (``trained_segments``,
    every turn), narrowed to the sample's target turns."""
    every_turn = replace(policy, last_turn_only=False)
    trained = [
        t and seg.message in sample.targets
        for seg, t in zip(sample.segments, trained_segments(sample.segments, every_turn))
    ]
    weights = mask_segments(sample.segments, every_turn, call_turns(conv))
    return trained, [w if t else 0.0 for w, t in zip(weights, trained)]


def expand(
    fmt: ChatFormat, conv: Conversation, tokenizer: Any, policy: MaskPolicy = TRAIN_ASSISTANT
) -> list[Tokenized]:
    """``conv`` as expanded samples' ids, labels and weights, in turn order (the format's ValueError when it
    cannot express the conversation or one of its prefixes)."""
    return [tokens for _, _, tokens in expand_planned(fmt, conv, tokenizer, policy)]


def expand_planned(
    fmt: ChatFormat, conv: Conversation, tokenizer: Any, policy: MaskPolicy = TRAIN_ASSISTANT
) -> list[tuple[Sample, list[bool], Tokenized]]:
    """``expand``, each sample with its plan and its segments' trained flags (what the mask checks read)."""
    merge = fmt.merge_text_runs
    untrained: dict[tuple[Segment, ...], list[int]] = {}

    def ids(segments: tuple[Segment, ...]) -> list[int]:
        if segments not in untrained:
            zeros = [0.0] * len(segments)
            untrained[segments] = tokenize_segments(
                segments, [False] * len(segments), zeros, tokenizer, merge
            ).input_ids
        return untrained[segments]

    def same_tokens(shorter: tuple[Segment, ...], longer: tuple[Segment, ...]) -> bool:
        head = ids(shorter)
        return ids(longer)[: len(head)] == head

    planned = []
    for sample in plan_samples(fmt, conv, policy, same_tokens):
        trained, weights = sample_masks(sample, policy, conv)
        planned.append((sample, trained, tokenize_segments(sample.segments, trained, weights, tokenizer, merge)))
    return planned


def expand_many(
    fmt: ChatFormat, convs: Sequence[Conversation], tokenizer: Any, policy: MaskPolicy = TRAIN_ASSISTANT
) -> list[list[tuple[Sample, list[bool], Tokenized]] | ValueError]:
    """``expand_planned`` for each conversation; one that cannot be expressed yields its ValueError in its place."""
    results: list[list[tuple[Sample, list[bool], Tokenized]] | ValueError] = []
    for conv in convs:
        try:
            results.append(expand_planned(fmt, conv, tokenizer, policy))
        except ValueError as err:
            results.append(err)
    return results


__all__ = [
    "TURN_MODES",
    "Sample",
    "expand",
    "expand_many",
    "expand_planned",
    "plan_samples",
    "resolve_turns",
    "sample_masks",
]
