"""One BFCL multi-turn entry played with a model: turns, steps, executed calls, tool results.

As bfcl-eval 2026.3.23 runs a function-calling model (``base_handler.inference_multi_turn_FC``): the user turns
come one at a time; in each, the model answers (the chat format renders the conversation so far with the tools
offered and parses the answer); its calls run against the entry's environments (``execute``) and each result goes
back as a tool message, in call order; the turn ends when an answer has no call (text, or an answer the format
could not parse) and the next user turn follows. A turn with more than ``max_steps`` answers with calls
(BFCL's ``MAXIMUM_STEP_LIMIT``, 20) ends the entry there: the record has fewer turns than the gold, which BFCL
scores as a forced termination. A missing-function turn (``missed_function``: turn -> names) adds the held-out
functions' tools and, having no user message of its own, says BFCL's ``DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC``.
A prompt the format cannot render, or one over the task's token bound, ends the entry as an inference error
(BFCL: an exception in inference fails the entry).

The record's ``result`` is what ``check`` scores: per turn, per step, ``[{name: {arg: value}}]`` (the error text
for an answer that did not parse).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from train.base.records import CallIds
from train.evaluation.bfcl.multi_turn.execute import Call, Environments
from train.schema import Conversation, Message, Tool


@dataclass
class EpisodeRecord:
    """What one entry's episode leaves: the scored ``result`` and, per step, what the model wrote."""

    result: list[list[Any]] | str
    steps: list[dict[str, Any]] = field(default_factory=list)  # {"turn", "text", "error", "new_tokens", ...}
    force_terminated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"result": self.result, "steps": self.steps, "force_terminated": self.force_terminated}

    @property
    def well_formed(self) -> bool:
        """Every answer rendered and parsed."""
        return isinstance(self.result, list) and all(step["error"] is None for step in self.steps)

    @classmethod
    def summarize(cls, records: Sequence[EpisodeRecord]) -> dict[str, int]:
        """The generation counts ``eval run`` prints and writes: the episodes, each of their answers, the answers that
        failed (``prompt`` / ``parse``), and the episodes a step budget ended."""
        answers = [step for record in records for step in record.steps]
        return {
            "episodes": len(records),
            "answers": len(answers),
            "prompt_errors": sum(1 for a in answers if (a.get("error") or "").startswith("prompt")),
            "parse_errors": sum(1 for a in answers if (a.get("error") or "").startswith("parse")),
            "force_terminated": sum(1 for record in records if record.force_terminated),
        }


def user_turns(conv: Conversation) -> list[list[Message]]:
    """The conversation's messages cut into BFCL's user turns (``meta.question_turns``; one turn without it)."""
    counts = conv.meta.get("question_turns") or [len(conv.messages)]
    turns, start = [], 0
    for count in counts:
        turns.append(conv.messages[start : start + count])
        start += count
    return turns


def held_out_tools(conv: Conversation) -> dict[int, list[Tool]]:
    """Turn index -> the tools BFCL adds at that turn (``missed_function``), built as the reader builds tools."""
    from train.sources.bfcl import tool_from_function

    by_name = {f["name"]: f for f in conv.meta.get("bfcl_functions") or [] if isinstance(f, dict) and "name" in f}
    missed = conv.meta.get("missed_function") or {}
    return {
        int(turn): [tool_from_function(by_name[name], f"missed_function[{turn}]") for name in names]
        for turn, names in missed.items()
    }


class MultiTurnEpisode:
    """``prompt()`` -> the next answer to write (None when over); ``take(generation)`` -> the model's answer."""

    def __init__(self, conv: Conversation, environments: Environments, max_steps: int, added_turn_prompt: str) -> None:
        self.conv, self.environments, self.max_steps = conv, environments, max_steps
        self.added_turn_prompt = added_turn_prompt
        self.turns = user_turns(conv)
        self.added = held_out_tools(conv)
        self.tools = list(conv.tools)
        self.history: list[Message] = []
        self.result: list[list[Any]] = []
        self.steps: list[dict[str, Any]] = []
        self.ids = CallIds()
        self.error: str | None = None
        self.forced = False
        self.turn = -1
        self.calling_steps = 0
        self.next_turn()

    @property
    def done(self) -> bool:
        return self.error is not None or self.forced or self.turn >= len(self.turns)

    def next_turn(self) -> None:
        self.turn += 1
        self.calling_steps = 0
        if self.turn >= len(self.turns):
            return
        messages = self.turns[self.turn]
        if self.turn in self.added:
            self.tools += self.added[self.turn]
            messages = [Message(role="user", content=self.added_turn_prompt)]
        self.history += messages
        self.result.append([])

    def prompt(self) -> tuple[Conversation, int] | None:
        if self.done:
            return None
        conv = Conversation(id=self.conv.id, messages=list(self.history), tools=list(self.tools), meta=self.conv.meta)
        return conv, len(self.history)

    def take(self, generation: Any) -> None:
        step = {"turn": self.turn, "text": generation.text, "error": generation.error}
        self.steps.append({**step, "prompt_tokens": generation.prompt_tokens, "new_tokens": generation.new_tokens})
        if generation.text is None:  # no prompt: the format could not render it, or it was over the bound
            self.error = f"Error during inference: {generation.error}"
            return
        if generation.error is not None:  # an answer the format cannot read: BFCL's decode failure ends the turn
            self.history.append(Message(role="assistant", content=generation.text))
            self.result[-1].append(generation.error)
            self.next_turn()
            return
        calls = list(generation.tool_calls)
        for call in calls:
            call.id = call.id or self.ids.issue(call.name)
        # the reasoning too: Qwen3 and Harmony keep it in history within a user turn, as the model wrote it
        reasoning = generation.reasoning
        self.history.append(
            Message(role="assistant", content=generation.content, tool_calls=calls, reasoning_content=reasoning)
        )
        self.result[-1].append([{call.name: call.arguments} for call in calls])
        if not calls:
            self.next_turn()
            return
        for call in calls:
            content = self.environments.execute(Call(call.name, [], copy.deepcopy(call.arguments)))
            self.history.append(Message(role="tool", tool_call_id=call.id, name=call.name, content=content))
        self.calling_steps += 1
        if self.calling_steps > self.max_steps:
            self.forced = True

    def record(self) -> EpisodeRecord:
        result: list[list[Any]] | str = self.error if self.error is not None else self.result
        return EpisodeRecord(result=result, steps=self.steps, force_terminated=self.forced)


__all__ = ["EpisodeRecord", "MultiTurnEpisode", "held_out_tools", "user_turns"]
