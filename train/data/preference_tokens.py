"""Preference pairs as token ids in the run's exact chat format: what TRL's ``DPOTrainer`` trains on (#30 item 3).

A pair (``train.data.preference.PreferencePair``) becomes three id lists:

* ``prompt_ids``: the prompt as inference shows it, tools included and ending with the assistant header (the
  format's ``render_prompt``, tokenized by ``tokenize_prompt``: what ``train.evaluation.generate`` feeds a model);
* ``chosen_ids`` / ``rejected_ids``: the assistant turn as the format trains it, through its end-of-turn token: the
  trained tokens of ``tokenize(prompt + turn)`` after the prompt.

So ``prompt_ids + chosen_ids`` is exactly the format's tokenization of the conversation cut after the chosen turn
(the tokens after its end-of-turn token, a newline some formats write before the next turn, are never trained and
are left out). A pair the format cannot render exactly so raises ``ValueError`` saying why, and
``preference_rows`` counts it as skipped: a prompt that is not a prefix of the whole (a token merged across the
header edge), a turn with untrained tokens inside it (DPO's completion mask trains every completion token), or a
pair longer than ``max_len``. Nothing is truncated: a cut completion would lose the place the two turns differ.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from train.data.preference import KINDS, PreferencePair, pairs
from train.formats.base import ChatFormat, MaskPolicy
from train.formats.tokenize import IGNORE_INDEX, tokenize, tokenize_prompt
from train.schema import Conversation, Message
from train.validate import refusal

LAST_TURN = MaskPolicy(last_turn_only=True)  # only the turn of the pair is trained; the prompt's turns are context


def turn_ids(fmt: ChatFormat, prompt: Conversation, turn: Message, prompt_ids: Sequence[int], tokenizer: Any) -> list:
    """The ids of ``turn`` after ``prompt`` as the format trains it: the whole conversation's tokens after the prompt,
    through the last trained one. ValueError when they are not exactly that (see the module docstring)."""
    whole = dataclasses.replace(prompt, messages=[*prompt.messages, turn])
    tokens = tokenize(fmt, whole, tokenizer, LAST_TURN)
    cut = len(prompt_ids)
    if tokens.input_ids[:cut] != list(prompt_ids):
        raise ValueError("the prompt's tokens are not a prefix of the conversation's (a token crosses the header)")
    trained = [position for position, label in enumerate(tokens.labels) if label != IGNORE_INDEX]
    if not trained or trained[0] != cut:
        raise ValueError("the turn's first token is not trained right after the prompt")
    end = trained[-1] + 1
    if len(trained) != end - cut:
        raise ValueError("the turn has untrained tokens inside it, which DPO's completion mask would train")
    return tokens.input_ids[cut:end]


def tokenized_pair(pair: PreferencePair, fmt: ChatFormat, tokenizer: Any, max_len: int) -> dict[str, Any]:
    """``{id, kind, prompt_ids, chosen_ids, rejected_ids}`` of one pair; ValueError when it cannot be made exactly
    or ``prompt + the longer turn`` exceeds ``max_len`` tokens."""
    prompt_ids = tokenize_prompt(fmt, pair.prompt, len(pair.prompt.messages), tokenizer)
    chosen = turn_ids(fmt, pair.prompt, pair.chosen, prompt_ids, tokenizer)
    rejected = turn_ids(fmt, pair.prompt, pair.rejected, prompt_ids, tokenizer)
    if chosen == rejected:  # two turns that differ in the schema can write the same text (a value printed alike)
        raise ValueError("chosen and rejected render to the same tokens")
    longest = len(prompt_ids) + max(len(chosen), len(rejected))
    if longest > max_len:
        raise ValueError(f"{longest} > {max_len} tokens")
    return {"id": pair.id, "kind": pair.kind, "prompt_ids": prompt_ids, "chosen_ids": chosen, "rejected_ids": rejected}


def preference_rows(
    conversations: Iterable[Conversation],
    fmt: ChatFormat,
    tokenizer: Any,
    max_len: int,
    kinds: Sequence[str] = KINDS,
    seed: int = 0,
    counts: Counter | None = None,
) -> list[dict[str, Any]]:
    """The tokenized pairs of the conversations the build would train (``refusal`` drops the rest, counted as
    ``invalid: <code>``). ``counts`` gets ``pairs`` (the pairs' count of ``train.data.preference.pairs``),
    ``rows`` (the pairs tokenized) and ``dropped: <why>`` for each pair left out (its reason's digits as N)."""
    counts = Counter() if counts is None else counts

    def valid(stream: Iterable[Conversation]) -> Iterable[Conversation]:
        for conv in stream:
            problem = refusal(conv)
            if problem is None:
                yield conv
            else:
                counts["read"] += 1  # read, refused before pairing: read = paired + skipped still holds
                counts[f"skipped: invalid ({problem.code})"] += 1

    rows = []
    for pair in pairs(valid(conversations), kinds, seed, counts):
        counts["pairs"] += 1
        try:
            rows.append(tokenized_pair(pair, fmt, tokenizer, max_len))
        except ValueError as err:
            counts[f"dropped: {''.join('N' if ch.isdigit() else ch for ch in str(err))[:120]}"] += 1
    counts["rows"] += len(rows)
    return rows


__all__ = ["preference_rows", "tokenized_pair", "turn_ids"]
