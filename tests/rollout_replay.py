"""A gold conversation replayed through ``train.evaluation.rollout.play`` by a scripted policy (the token-identity
test of #30 item 2, tests/evaluation/test_rollout_identity.py).

* ``Replay``: an episode (``task_base.Episode``) that plays a gold conversation: each ``prompt()`` is the gold
  history up to the next gold assistant turn (the user turns and tool results in between come from the gold
  conversation, as a task's environment would answer); ``take()`` keeps the parsed answer.
* ``ScriptedPolicy``: a backend that, shown a prompt's ids, returns exactly the ids the format trains for the gold
  turn that follows that prompt (through its end-of-turn token), then padding, as a batched ``generate`` returns
  the rows that stopped early. A prompt it was not scripted for is a test failure (the rollout showed the model a
  prompt inference would not).
* ``script``: the gold turns' prompts (``tokenize_prompt``: what inference shows) and turn ids (the trained tokens
  of the format's tokenization of the prefix plus the turn, as the DPO helper ``preference_tokens.turn_ids`` cuts
  them; on the reference encoding path, which gives the same ids without building a tiktoken copy of a 128k-200k
  vocabulary per test process).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from train.data.preference_tokens import LAST_TURN
from train.evaluation.generate import Generation
from train.formats.base import ChatFormat
from train.formats.tokenize import IGNORE_INDEX, tokenize_many, tokenize_prompt
from train.schema import Conversation, Message


def prefix(conv: Conversation, end: int) -> Conversation:
    return Conversation(conv.id, list(conv.messages[:end]), tools=conv.tools, meta=conv.meta)


def assistant_turns(conv: Conversation) -> list[int]:
    return [i for i, m in enumerate(conv.messages) if m.role == "assistant"]


def turn_ids(fmt: ChatFormat, conv: Conversation, index: int, prompt: Sequence[int], tokenizer: Any) -> list[int]:
    """The ids the format trains for ``conv.messages[index]`` after ``prompt``: its tokenization of the messages
    through that turn, the turn alone trained, from the prompt's end through the last trained token. ValueError
    when the prompt is not a prefix of it or the turn has untrained tokens inside it (a single sampled turn
    trains every id it holds)."""
    tokens = tokenize_many(fmt, [prefix(conv, index + 1)], tokenizer, LAST_TURN, fast=False)[0]
    if isinstance(tokens, ValueError):
        raise tokens
    cut = len(prompt)
    trained = [position for position, label in enumerate(tokens.labels) if label != IGNORE_INDEX]
    if tokens.input_ids[:cut] != list(prompt) or not trained or trained[0] != cut:
        raise ValueError("the prompt is not the tokens before the turn's first trained token")
    if len(trained) != trained[-1] + 1 - cut:
        raise ValueError("the turn has untrained tokens inside it")
    return tokens.input_ids[cut : trained[-1] + 1]


@dataclass
class Turn:
    index: int  # the gold assistant message
    prompt: list[int]  # what inference shows before it
    ids: list[int]  # what the format trains for it, through its end-of-turn token


def script(fmt: ChatFormat, conv: Conversation, tokenizer: Any, indices: Sequence[int] | None = None) -> list[Turn]:
    """The gold turns ``indices`` (default: every assistant turn) as prompts and turn ids; the format's
    ValueError when it cannot express one."""
    turns = []
    for index in assistant_turns(conv) if indices is None else indices:
        prompt = tokenize_prompt(fmt, conv, index, tokenizer)
        ids = turn_ids(fmt, conv, index, prompt, tokenizer)
        turns.append(Turn(index, prompt, ids))
    return turns


class Replay:
    """The episode of a gold conversation: its assistant turns ``indices`` written in order, each after the gold
    history before it. ``record()``: the generations, one per turn.

    ``from_parse``: the earlier assistant turns in that history are what the model's answers parse to (content and
    calls, the calls keeping the gold ids their results answer), as a task's episode writes them
    (``bfcl.multi_turn.episode``), instead of the gold messages."""

    def __init__(self, conv: Conversation, indices: Sequence[int] | None = None, from_parse: bool = False) -> None:
        self.conv, self.from_parse = conv, from_parse
        self.indices = list(assistant_turns(conv) if indices is None else indices)
        self.generations: list[Generation] = []

    def prompt(self) -> tuple[Conversation, int] | None:
        if len(self.generations) == len(self.indices):
            return None
        index = self.indices[len(self.generations)]
        if not self.from_parse:
            return prefix(self.conv, index), index
        messages = list(self.conv.messages[:index])
        for position, generation in zip(self.indices, self.generations):
            gold = messages[position]
            calls = [replace(call, id=g.id) for call, g in zip(generation.tool_calls, gold.tool_calls)]
            reasoning = generation.reasoning  # as a task's episode writes it (bfcl multi_turn.episode)
            messages[position] = Message(
                role="assistant", content=generation.content, tool_calls=calls, reasoning_content=reasoning
            )
        return Conversation(self.conv.id, messages, tools=self.conv.tools, meta=self.conv.meta), index

    def take(self, generation: Generation) -> None:
        self.generations.append(generation)

    def record(self) -> list[Generation]:
        return self.generations


@dataclass
class ScriptedPolicy:
    """A backend (``generate.Backend``) answering each scripted prompt with its turn's ids and ``padding``."""

    turns: dict[tuple[int, ...], list[int]] = field(default_factory=dict)
    padding: list[int] = field(default_factory=list)
    seen: list[list[int]] = field(default_factory=list)  # every prompt it was shown, in order
    calls: int = 0  # backend calls (rounds)

    def fits(self, turns: Sequence[Turn]) -> bool:
        """Whether no prompt of ``turns`` is scripted here with another answer."""
        return all(self.turns.get(tuple(turn.prompt), turn.ids) == turn.ids for turn in turns)

    def add(self, turns: Sequence[Turn]) -> None:
        assert self.fits(turns), "two gold turns after the same prompt"
        for turn in turns:
            self.turns[tuple(turn.prompt)] = turn.ids

    def __call__(self, prompts: list[list[int]], max_new_tokens: int, stop_ids: list[int]) -> list[list[int]]:
        self.calls += 1
        out = []
        for ids in prompts:
            self.seen.append(list(ids))
            assert tuple(ids) in self.turns, "a prompt that is not a gold prefix's inference prompt"
            out.append(self.turns[tuple(ids)] + self.padding)
        return out


def play_scripted(
    fmt: ChatFormat,
    tokenizer: Any,
    episodes: Sequence[tuple[Any, Sequence[Turn]]],
    padding: Sequence[int],
    max_len: int = 100_000,
) -> tuple[list[Any], list[tuple[ScriptedPolicy, list[int]]]]:
    """``play`` of the episodes, each with the turns its policy answers: in as few batches as keep every scripted
    prompt's answer one (two fixture conversations may open alike and answer otherwise). The rollouts in the
    episodes' order, and the batches: each one's policy (what it was shown) and its episodes' positions."""
    from train.evaluation.rollout import play

    batches: list[tuple[ScriptedPolicy, list[int]]] = []
    for position, (_, turns) in enumerate(episodes):
        batch = next((b for b in batches if b[0].fits(turns)), None)
        if batch is None:
            batches.append(batch := (ScriptedPolicy(padding=list(padding)), []))
        batch[0].add(turns)
        batch[1].append(position)
    rollouts: list[Any] = [None] * len(episodes)
    for policy, positions in batches:
        played = play([episodes[p][0] for p in positions], fmt, tokenizer, policy, 4096, max_len)
        for position, rollout in zip(positions, played):
            rollouts[position] = rollout
    return rollouts, batches


__all__ = ["Replay", "ScriptedPolicy", "Turn", "assistant_turns", "play_scripted", "prefix", "script", "turn_ids"]
