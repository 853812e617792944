"""Meta-Bench construction from held-out dialogues (seed paper §3.3, A.1, A.8; Figures 10, 14-16).

Each held-out dialogue gets one seeded difficulty and gives up to six reference rows, one gold
assistant turn each, in the layout ``train.papers.metatool.metabench`` scores (a canonical conversation
ending with its gold turn, ``meta.turn`` its index):

=============================== ======= ===================================================
category                        world   the gold turn, and the tools listed
=============================== ======= ===================================================
single_call / multi_call        closed  the first call turn (one call / several); its tools
function_existing               open    the first call turn; meta_tool and its tools
function_missing (retrieve)     open    the meta_tool turn inserted before it (FMD, HR@k);
                                        meta_tool without the invoked tools
function_missing (call)         open    the first call turn, after the meta_tool result
                                        (T-Acc/P-Acc "given the ground truth of retrieved tools")
chat                            closed  the first chat reply (a text answer to a user turn)
chat                            open    the same, with meta_tool listed
=============================== ======= ===================================================

Difficulty (§3.3.1): *simple* rows list no unused tool; *hard* rows keep the dialogue's unused
tools and, when the ordinary tools listed are fewer than ``hard_tool_count`` (5), are padded with
irrelevant tools from the library (tools no turn of the dialogue defines). Which dialogues are hard
is seeded (``hard_fraction``). Following A.1, dialogues with two assistant turns in a row are left
out (the paper filters them from its glaive part). The rows go through the same instruction
(Figure 10), get_user_input and reasoning stages as the training set, so a prompt looks like what
the model was trained on; meta_tool calls are not rewritten here.

Retrieval (function missing): ``meta.gold_tools`` names the tools the meta_tool call should find
and ``meta.pool`` the dialogue's tool pool: its invoked tools plus tools drawn from the library, up
to ``pool_size`` (1,000), shuffled. Pools are stored as names; the library (every distinct tool of
the input dialogues, first definition of a name wins) is written once, as one ``ToolLibrary`` line,
and ``meta.library`` names that file (beside the bench file). ``train.papers.metatool.pool.PoolRetriever`` runs
Algorithm 1 for a model's meta_tool calls over a row's pool: the scorer's ``retrieved`` rankings (HR@k).
"""

from __future__ import annotations

import copy
import random
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from train.papers.metatool.builder import (
    GET_USER_INPUT,
    META_TOOL,
    META_TOOL_DEFINITION,
    BuildReport,
    MetaToolOptions,
    chat_turns,
    closed_world,
    first_definitions,
    open_world,
    split_tools,
    stable_unit,
    with_get_user_input,
    with_instruction,
    with_reasoning,
)
from train.schema import Conversation, Tool, ToolLibrary

LIBRARY_FILE = "library.jsonl"
LIBRARY_ID = "metabench-library"


@dataclass
class BenchOptions:
    pool_size: int = 1000
    hard_tool_count: int = 5
    hard_fraction: float = 0.5

    def __post_init__(self) -> None:
        if self.pool_size < 1 or self.hard_tool_count < 0 or not 0.0 <= self.hard_fraction <= 1.0:
            raise ValueError(
                f"bench options out of range: pool_size={self.pool_size} (>= 1), hard_tool_count="
                f"{self.hard_tool_count} (>= 0), hard_fraction={self.hard_fraction} (in [0, 1])"
            )


@dataclass
class BenchReport:
    dialogues: int = 0
    rows: Counter = field(default_factory=Counter)  # "difficulty/world/category" -> rows
    skipped: Counter = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        def by(position: int) -> dict[str, int]:
            out: Counter = Counter()
            for group, n in self.rows.items():
                out[group.split("/")[position]] += n
            return dict(sorted(out.items()))

        return {
            "dialogues": self.dialogues,
            "rows": sum(self.rows.values()),
            "by_category": by(2),
            "by_difficulty": by(0),
            "by_world": by(1),
            "by_group": dict(sorted(self.rows.items())),
            "skipped": dict(sorted(self.skipped.items())),
        }


def tool_library(conversations: Iterable[Conversation]) -> tuple[list[Tool], int]:
    """Every distinct tool name of the dialogues (first definition wins) and how many later definitions differed."""
    library: dict[str, Tool] = {}
    conflicts = 0
    for conv in conversations:
        for tool in conv.tools:
            if tool.name in (META_TOOL, GET_USER_INPUT):
                continue
            known = library.setdefault(tool.name, tool)
            conflicts += known is not tool and known.to_dict() != tool.to_dict()
    return list(library.values()), conflicts


def library_record(tools: list[Tool]) -> ToolLibrary:
    return ToolLibrary(id=LIBRARY_ID, tools=tools, meta={"tools": len(tools), "source": "metabench"})


def consecutive_assistant(conv: Conversation) -> bool:
    return any(a.role == b.role == "assistant" for a, b in zip(conv.messages, conv.messages[1:]))


def _sample(rng: random.Random, library: list[Tool], excluded: set[str], count: int) -> list[Tool]:
    """``count`` library tools not named in ``excluded``, in a seeded order (fewer when the library is small)."""
    draw = rng.sample(range(len(library)), min(len(library), count + len(excluded)))
    return [library[i] for i in draw if library[i].name not in excluded][:count]


class MetaBenchBuilder:
    """Meta-Bench rows from held-out dialogues, with a report of rows per category/difficulty/world."""

    def __init__(self, options: MetaToolOptions, bench: BenchOptions, seed: int, teacher: Any):
        self.options, self.bench, self.seed, self.teacher = options, bench, seed, teacher
        self.report = BenchReport()
        self.stages = BuildReport()  # the reasoning stage's counts and teacher fallbacks on bench rows

    def build(self, dialogues: Iterable[Conversation], library: list[Tool]) -> Iterator[Conversation]:
        for conv in dialogues:
            reason = self.unusable(conv)
            if reason:
                self.report.skipped[reason] += 1
                continue
            self.report.dialogues += 1
            for row in self.rows(conv, library):
                meta = row.meta
                self.report.rows[f"{meta['difficulty']}/{meta['world']}/{meta['category']}"] += 1
                yield row

    @staticmethod
    def unusable(conv: Conversation) -> str | None:
        if consecutive_assistant(conv):
            return "two assistant turns in a row (left out of Meta-Bench, A.1)"
        first_call = next((i for i, m in enumerate(conv.messages) if m.role == "assistant" and m.tool_calls), None)
        if first_call is None and not chat_turns(conv):
            return "no call turn and no chat reply to score"
        return None

    def rows(self, conv: Conversation, library: list[Tool]) -> list[Conversation]:
        difficulty = "hard" if stable_unit(self.seed, "difficulty", conv.id) < self.bench.hard_fraction else "simple"
        invoked, unused = split_tools(conv)
        own = {t.name for t in conv.tools}
        rng = random.Random(f"{self.seed}\x00bench\x00{conv.id}")
        distractors = _sample(rng, library, own, self.bench.hard_tool_count) if difficulty == "hard" else []

        def listed(with_invoked: bool) -> list[Tool]:
            tools = list(invoked if with_invoked else [])
            if difficulty == "hard":
                tools += unused
                tools += distractors[: max(0, self.bench.hard_tool_count - len(tools))]
            return tools

        def row(name: str, messages: list, tools: list[Tool], category: str, world: str, **extra: Any) -> Conversation:
            meta = {
                "category": category,
                "difficulty": difficulty,
                "world": world,
                "dialogue": conv.id,
                "source": conv.meta.get("source"),
            }
            if self.options.instruction:
                meta["instruction"] = "fig10"
            meta.update(extra)
            return self.finish(Conversation(id=f"{conv.id}/{name}", messages=messages, tools=tools, meta=meta), conv)

        out: list[Conversation] = []
        opened = open_world(conv)
        first_call = next((i for i, m in enumerate(conv.messages) if m.role == "assistant" and m.tool_calls), None)
        if first_call is not None:
            calls = conv.messages[first_call].tool_calls
            closed = closed_world(conv).messages[: first_call + 1]
            single = "single_call" if len(calls) == 1 else "multi_call"
            out.append(row(f"{single}/closed", closed, listed(True), single, "closed"))
            out.append(
                row(
                    "function_existing/open",
                    closed_world(conv).messages[: first_call + 1],
                    [META_TOOL_DEFINITION, *listed(True)],
                    "function_existing",
                    "open",
                )
            )
            meta_turn = min(opened.new_tools)
            gold = opened.new_tools[meta_turn]
            pool = self.pool(rng, library, gold, [t.name for t in invoked])
            open_tools = [META_TOOL_DEFINITION, *listed(False)]
            out.append(
                row(
                    "function_missing/open/retrieve",
                    opened.conversation.messages[: meta_turn + 1],
                    open_tools,
                    "function_missing",
                    "open",
                    gold_tools=gold,
                    pool=pool,
                    library=LIBRARY_FILE,
                )
            )
            call_turn = opened.positions[first_call]
            out.append(
                row(
                    "function_missing/open/call",
                    opened.conversation.messages[: call_turn + 1],
                    open_tools,
                    "function_missing",
                    "open",
                )
            )
        chats = chat_turns(conv)
        if chats:
            out.append(row("chat/closed", closed_world(conv).messages[: chats[0] + 1], listed(True), "chat", "closed"))
            position = opened.positions[chats[0]]
            out.append(
                row(
                    "chat/open",
                    opened.conversation.messages[: position + 1],
                    [META_TOOL_DEFINITION, *listed(False)],
                    "chat",
                    "open",
                )
            )
        return out

    def pool(self, rng: random.Random, library: list[Tool], gold: list[str], invoked: list[str]) -> list[str]:
        """The dialogue's invoked tools (gold first among them) plus library tools, up to pool_size, shuffled."""
        members = list(dict.fromkeys([*gold, *invoked]))
        members += [t.name for t in _sample(rng, library, set(members), max(0, self.bench.pool_size - len(members)))]
        rng.shuffle(members)
        return members

    def finish(self, row: Conversation, dialogue: Conversation) -> Conversation:
        """Instruction, get_user_input and reasoning, as in training; ``meta.turn`` is the gold turn."""
        row.tools = first_definitions(copy.deepcopy(row.tools))
        if self.options.instruction:
            row = with_instruction(row)
        if self.options.get_user_input:
            row, _ = with_get_user_input(row)
        if self.options.reasoning:
            definitions = {t.name: t for t in first_definitions(dialogue.tools)}
            row = with_reasoning(row, self.teacher, definitions, self.stages)
        row.meta["turn"] = len(row.messages) - 1
        return row


__all__ = [
    "LIBRARY_FILE",
    "BenchOptions",
    "BenchReport",
    "MetaBenchBuilder",
    "consecutive_assistant",
    "library_record",
    "tool_library",
]
