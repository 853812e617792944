"""The ToolSelect builder (ToolVerifier, seed 003, §2.1 and A.4): the selector's training rows, and held-out rows.

Canonical ToolSelect conversations in (reader ``toolselect``: candidates as ``tools``, the instruction as the user
message, the reasoning note as the assistant's content and one ``{}`` call to the gold), rows out, in input order,
for the ``toolselect_text`` format (``train.papers.toolverifier.format``) to render as the paper's text layout.

The paper's "Full Data" (A.4, Figure 4) is the default; each ablation row is one argument:

* ``gold_first=true`` ("No Shuffle", -5 points): the gold is the first candidate, the others in the row's order.
  Otherwise the candidates are shuffled, each row with its own generator seeded by (seed, row id): the gold lands
  at every position, the rows do not depend on each other or on the input order, and a rebuild is byte-identical.
* ``drop_hard=true`` ("No Hard Data", -6 points): drops the hard rows, whose candidates are only the gold and its
  related tools (§2.1.2). The data marks them by their size: an ordinary row has 8 candidates (7 random + the
  gold), a hard one fewer (2, 3 or 4: 73 of the 555 published rows; the paper says 75).
* ``short_notes=true`` ("Short Reasoning", -19 points): the paper cuts the reasoning notes from at most 480 to at
  most 200 Llama-2 tokens. A builder has no model tokenizer, so notes are cut at ``short_note_words`` words (150:
  ~200 Llama-2 tokens at the usual ~1.3 tokens per English word), at the last sentence end within them when
  there is one; notes within the limit are kept whole.

``heldout=N`` keeps N rows out of training for measuring selection accuracy (``heldout.jsonl``). They are chosen
by the seed alone, before any ablation, so every ablation is measured on the same rows; their candidates are
always shuffled (never gold-first), hard ones included, notes whole. A recipe's build yields the training rows
only and reports each held-out row as dropped ("held out").

Each row's ``meta`` adds ``hard`` and ``gold_position`` (0-based) and keeps ``candidates`` in the new order.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

from train.builders import BuilderSpec, OnDrop
from train.schema import Conversation

BUILDER_VERSION = "1"
ORDINARY_CANDIDATES = 8  # 7 random tools + the gold (§2.1.2); a row with fewer is a hard one
_WORD = re.compile(r"\S+")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


@dataclass
class ToolSelectArgs:
    """``data.builder_args`` of a recipe and ``data build toolselect key=value``: one set of arguments."""

    gold_first: bool = False  # A.4 "No Shuffle": the gold always first
    drop_hard: bool = False  # A.4 "No Hard Data"
    short_notes: bool = False  # A.4 "Short Reasoning"
    short_note_words: int = 150  # the cut of short_notes (~200 Llama-2 tokens)
    heldout: int = 0  # rows kept out of training for measuring selection accuracy (heldout.jsonl)

    @classmethod
    def from_args(cls, args: dict[str, Any]) -> ToolSelectArgs:
        options = cls(**args)
        if options.short_note_words < 1:
            raise ValueError(f"toolselect builder: short_note_words must be at least 1, got {options.short_note_words}")
        if options.heldout < 0:
            raise ValueError(f"toolselect builder: heldout must be 0 or more, got {options.heldout}")
        return options


def is_hard(conv: Conversation) -> bool:
    return len(conv.tools) < ORDINARY_CANDIDATES


def gold_of(conv: Conversation) -> str:
    """The gold tool: the reader's ``meta["gold_tool"]``, else the last assistant message's one call."""
    gold = conv.meta.get("gold_tool")
    if isinstance(gold, str):
        return gold
    calls = [call for m in conv.messages if m.role == "assistant" for call in m.tool_calls]
    if len(calls) != 1:
        raise ValueError(f"{conv.id}: expected one gold call, got {len(calls)} (is this a ToolSelect conversation?)")
    return calls[0].name


def shorten(note: str, words: int) -> str:
    """``note`` cut to at most ``words`` words, at the last sentence end within them when there is one."""
    ends = [m.end() for m in _WORD.finditer(note)]
    if len(ends) <= words:
        return note
    kept = note[: ends[words - 1]]  # the note's own characters: a prefix of it, spacing kept
    ends = [m.end() for m in _SENTENCE_END.finditer(kept)]
    return kept[: ends[-1]] if ends else kept


def reorder(conv: Conversation, seed: int, gold_first: bool) -> Conversation:
    """The conversation with its candidates shuffled by (seed, id), or with the gold moved first."""
    gold = gold_of(conv)
    tools = list(conv.tools)
    if gold_first:
        tools.sort(key=lambda tool: tool.name != gold)  # stable: the others keep the row's order
    else:
        random.Random(f"toolselect:{seed}:{conv.id}").shuffle(tools)
    names = [tool.name for tool in tools]
    if gold not in names:
        raise ValueError(f"{conv.id}: the gold {gold!r} is not one of the candidates")
    meta = {**conv.meta, "candidates": names, "gold_position": names.index(gold), "hard": is_hard(conv)}
    return replace(conv, tools=tools, meta=meta)


def heldout_ids(conversations: list[Conversation], seed: int, count: int) -> set[str]:
    if count > len(conversations):
        raise ValueError(f"toolselect builder: heldout={count} but only {len(conversations)} rows were read")
    ids = sorted(conv.id for conv in conversations)
    return set(random.Random(f"toolselect-heldout:{seed}").sample(ids, count))


class ToolSelectBuilder:
    """The build, with its counts (``report``)."""

    def __init__(self, options: ToolSelectArgs, seed: int):
        self.options, self.seed = options, seed
        self.heldout: list[Conversation] = []
        self.dropped: Counter = Counter()
        self.shortened = 0
        self.read = 0

    def build(self, conversations: Iterable[Conversation], on_drop: OnDrop | None = None) -> Iterator[Conversation]:
        options, rows = self.options, list(conversations)
        self.read = len(rows)
        held = heldout_ids(rows, self.seed, options.heldout)
        for conv in rows:
            if conv.id in held:
                self.heldout.append(reorder(conv, self.seed, gold_first=False))
                reason = "held out"
            elif options.drop_hard and is_hard(conv):
                reason = "hard row (drop_hard)"
            else:
                yield self.train_row(conv)
                continue
            self.dropped[reason] += 1
            if on_drop is not None:
                on_drop(reason)

    def train_row(self, conv: Conversation) -> Conversation:
        conv = reorder(conv, self.seed, self.options.gold_first)
        if not self.options.short_notes:
            return conv
        messages = list(conv.messages)
        for index, message in enumerate(messages):
            if message.role == "assistant" and message.content:
                short = shorten(message.content, self.options.short_note_words)
                if short != message.content:
                    self.shortened += 1
                    messages[index] = replace(message, content=short)
        return replace(conv, messages=messages)


def build(
    conversations: Iterable[Conversation], *, seed: int, on_drop: OnDrop | None = None, **args: Any
) -> Iterator[Conversation]:
    """The training rows (what ``data.builder: toolselect`` gives a recipe)."""
    return ToolSelectBuilder(ToolSelectArgs.from_args(args), seed).build(conversations, on_drop)


def summary(rows: list[Conversation]) -> dict[str, Any]:
    positions = Counter(conv.meta["gold_position"] for conv in rows)
    notes = [len((conv.messages[-1].content or "").split()) for conv in rows]
    return {
        "rows": len(rows),
        "hard": sum(conv.meta["hard"] for conv in rows),
        "gold_position": {str(k): positions[k] for k in sorted(positions)},
        "note_words": {"max": max(notes, default=0), "mean": round(sum(notes) / len(notes), 1) if notes else 0},
    }


def files(
    conversations: list[Conversation], options: ToolSelectArgs, seed: int
) -> tuple[dict[str, list], dict[str, Any], list[str]]:
    """(train.jsonl and heldout.jsonl records; the report's counts; the summary lines)."""
    builder = ToolSelectBuilder(options, seed)
    train = list(builder.build(conversations))
    report = {
        "dropped": dict(sorted(builder.dropped.items())),
        "notes_shortened": builder.shortened,
        "train": summary(train),
        "heldout": summary(builder.heldout),
        "options": asdict(options),
    }
    ablations = [name for name in ("gold_first", "drop_hard", "short_notes") if getattr(options, name)]
    lines = [
        (
            f"training rows {len(train)} ({report['train']['hard']} hard), held out {len(builder.heldout)}, "
            f"dropped {sum(builder.dropped.values())}"
        ),
        f"ablations: {', '.join(ablations) or 'none (Full Data)'}; notes shortened {builder.shortened}",
    ]
    return {"train.jsonl": train, "heldout.jsonl": builder.heldout}, report, lines


SPEC = BuilderSpec(
    build=build, args=ToolSelectArgs, version=BUILDER_VERSION, outputs=("train.jsonl", "heldout.jsonl"), files=files
)

__all__ = ["SPEC", "ToolSelectArgs", "build", "files", "shorten"]
