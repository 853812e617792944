"""A conversation rendered the way ``tooltrain data render`` writes and shows it (the verb reads, writes and prints).

* ``rendered_record``: the output line, ``{"id", "input_ids", "labels"}`` (+ ``"weights"`` when the mask policy
  weights any part, + ``"text"`` on request), with the ``Tokenized`` it came from;
* ``trained_runs``: the conversation as runs of consecutive trained or masked tokens, each run decoded whole;
* ``part_segments`` and ``part_runs``: which trained part (reasoning, text, call name, arguments, call syntax, end)
  each character of those runs belongs to, as ``data.part_weights`` names the parts.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from train.formats import MaskPolicy, Tokenized
from train.formats.base import ChatFormat, Segment, call_turns, weight_part
from train.formats.tokenize import tokenize
from train.schema import Conversation


def rendered_record(
    conv: Conversation, fmt: ChatFormat, tokenizer: Any, policy: MaskPolicy, with_text: bool
) -> tuple[dict[str, Any], Tokenized]:
    """One output line (raises ValueError when the format cannot express the conversation)."""
    tokens = tokenize(fmt, conv, tokenizer, policy)
    record: dict[str, Any] = {"id": conv.id, **tokens.to_dict()}
    if policy.weights:
        record["weights"] = tokens.weights
    if with_text:
        record["text"] = fmt.render_text(conv)
    return record, tokens


def part_segments(fmt: ChatFormat, conv: Conversation) -> list[Segment]:
    """The rendered segments, each marked with the weight part it trains (a call turn's text is "reasoning", as
    ``data.part_weights`` names it)."""
    calls = call_turns(conv)
    return [replace(s, part=weight_part(s, calls)) for s in fmt.render(conv)]


def trained_runs(tokens: Tokenized, tokenizer: Any) -> list[tuple[str, bool]]:
    """The conversation as (text, trained) runs of consecutive tokens.

    Decoding whole runs (not token by token) keeps multi-byte characters intact: a character's
    bytes never straddle a trained/masked edge, because no token does.
    """
    runs: list[tuple[str, bool]] = []
    start = 0
    labels = tokens.labels
    for end in range(1, len(labels) + 1):
        if end == len(labels) or (labels[end] != -100) != (labels[start] != -100):
            ids = tokens.input_ids[start:end]
            text = tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
            runs.append((text, labels[start] != -100))
            start = end
    return runs


def part_runs(runs: list[tuple[str, bool]], segments: list[Segment]) -> list[tuple[str, bool, str | None]]:
    """``trained_runs`` split where the part changes: (text, trained, part). The parts come from the segments'
    characters, so only when the decoded runs spell the rendered text exactly (a byte-level tokenizer); else
    each run keeps part None (coloured as trained or masked only)."""
    if "".join(text for text, _ in runs) != "".join(seg.text for seg in segments):
        return [(text, trained, None) for text, trained in runs]
    part_of = [seg.part for seg in segments for _ in seg.text]
    out: list[tuple[str, bool, str | None]] = []
    position = 0
    for text, trained in runs:
        start = 0
        for k in range(1, len(text) + 1):
            if k == len(text) or part_of[position + k] != part_of[position + start]:
                out.append((text[start:k], trained, part_of[position + start]))
                start = k
        position += len(text)
    return out
