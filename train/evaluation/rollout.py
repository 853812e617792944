"""Rollouts: episodes the policy plays by sampling, kept as the exact ids it sampled (what GRPO trains, #30 item 2).

An episode is a ``task_base.Episode``: one turn to write (``OneTurn``), or an interaction where the task answers
between the model's turns (tool results, the next user turn: BFCL multi-turn). ``play`` drives every episode to its
end, as ``generate.run_episodes`` does for evaluation, and keeps each one's ``Trace``:

* ``prompt_ids``: the episode's first prompt as inference shows it (the format's ``render_prompt``, tokenized as in
  training: ``tokenize_prompt``);
* ``completion_ids``: each turn's sampled ids through its end-of-turn token, exactly as sampled (never decoded and
  encoded again), and between two turns the ids the format writes for what came in between (tool results, the next
  assistant header), cut from the format's render of the longer history;
* ``env_mask``: 1 on sampled ids (trained), 0 on the ids in between (masked, as SFT masks tool results).

Every turn is sampled from the format's render of its history as inference shows it. When that render begins with
the trace (the format shows the history exactly as it was sampled), the trace goes on. When it does not, the trace
is closed there (``closed`` says why): the format rewrote history (Qwen3 drops an empty ``<think>`` block from a call
turn once a tool result follows, and earlier reasoning at a new user query; Harmony drops earlier analysis), or the
model wrote a turn otherwise than the format writes its parse (other whitespace inside a call), so a deployed model
would see it rewritten. The later turns are still played (the reward judges the whole episode) but not trained:
TRL's GRPOTrainer trains one sequence per rollout, and a turn sampled after a rewritten history belongs to another
sequence. ``Trace.turns_trained`` and ``turns_played`` count this.

Nothing here knows a trainer: ``play`` takes a ``generate.Backend`` (ids in, ids out).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from train.evaluation.generate import Backend, Generation, prompt_ids, read_output, stop_token_ids
from train.formats.base import ChatFormat
from train.schema import Conversation


@dataclass
class Trace:
    """One rollout's ids: what GRPO trains (see the module docstring)."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)  # per completion id: 1 sampled (trained), 0 in between
    closed: str | None = None  # why the trained sequence ended before the episode did; None: it holds every turn
    turns_played: int = 0
    turns_trained: int = 0

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    def continue_with(self, ids: Sequence[int], max_len: int) -> None:
        """The next turn's prompt ``ids``: the ids past the trace are appended (masked) when ``ids`` begins with
        the trace; otherwise, or past ``max_len``, the trace is closed."""
        if self.closed is not None:
            return
        held = self.ids
        if list(ids[: len(held)]) != held:
            self.closed = "history shown otherwise than sampled"
        elif len(ids) > max_len:
            self.closed = f"over {max_len} tokens"
        else:
            between = list(ids[len(held) :])
            self.completion_ids += between
            self.env_mask += [0] * len(between)

    def take(self, sampled: Sequence[int], max_len: int) -> None:
        """A turn's sampled ids: trained while the trace is open and within ``max_len``. A turn past ``max_len``
        closes the trace, and the ids in between that led up to it go too: the trace ends with its last trained
        id, as the format's tokenization cut after that turn does (nothing is computed for context no turn uses)."""
        self.turns_played += 1
        if self.closed is None and len(self.prompt_ids) + len(self.completion_ids) + len(sampled) > max_len:
            self.closed = f"over {max_len} tokens"
            while self.env_mask and self.env_mask[-1] == 0:
                self.env_mask.pop()
                self.completion_ids.pop()
        if self.closed is not None:
            return
        self.completion_ids += list(sampled)
        self.env_mask += [1] * len(sampled)
        self.turns_trained += 1


@dataclass
class Rollout:
    trace: Trace
    record: Any  # the episode's record: a Generation for one turn, the task's episode record otherwise


class OneTurn:
    """The episode of one turn: ``conv``'s message ``index`` written once; its record is the ``Generation``."""

    def __init__(self, conv: Conversation, index: int) -> None:
        self.conv, self.index = conv, index
        self.generation: Generation | None = None

    def prompt(self) -> tuple[Conversation, int] | None:
        return None if self.generation is not None else (self.conv, self.index)

    def take(self, generation: Generation) -> None:
        self.generation = generation

    def record(self) -> Generation:
        assert self.generation is not None, "record() before the turn was played"
        return self.generation


def play(
    episodes: Sequence[Any],
    fmt: ChatFormat,
    tokenizer: Any,
    backend: Backend,
    max_new_tokens: int,
    max_len: int,
) -> list[Rollout]:
    """Every episode played to its end by sampling from ``backend``; their traces and records, in order.

    Each round, every unfinished episode's next prompt goes into one backend call. An episode whose first prompt
    the format cannot render is the caller's error (``ValueError``: the rows are built from prompts that render);
    a later prompt that cannot render ends its episode as in evaluation (a failed generation) and closes its trace.
    """
    stop_ids = stop_token_ids(fmt, tokenizer)
    traces: list[Trace | None] = [None] * len(episodes)
    while True:
        pending = [(i, prompt) for i, episode in enumerate(episodes) if (prompt := episode.prompt()) is not None]
        if not pending:
            break
        asked: list[tuple[int, list[int]]] = []
        for i, (conv, index) in pending:
            ids, error = prompt_ids(fmt, tokenizer, conv, index)
            trace = traces[i]
            if ids is None:
                if trace is None:
                    raise ValueError(f"{conv.id}: the first prompt does not render ({error})")
                trace.closed = trace.closed or error
                episodes[i].take(Generation(text=None, error=error))
                continue
            if trace is None:
                traces[i] = Trace(list(ids))
            else:
                trace.continue_with(ids, max_len)
            asked.append((i, ids))
        outputs = backend([ids for _, ids in asked], max_new_tokens, stop_ids) if asked else []
        for (i, ids), new_ids in zip(asked, outputs):
            generation, sampled = read_output(fmt, tokenizer, ids, new_ids, stop_ids)
            traces[i].take(sampled, max_len)
            episodes[i].take(generation)
    return [Rollout(trace, episode.record()) for trace, episode in zip(traces, episodes)]


__all__ = ["OneTurn", "Rollout", "Trace", "play"]
