"""What every reward reads: the completion as the chat format parsed it, and the reference conversation.

A reward is a pure function ``reward(completion, reference) -> float``:

* ``completion``: the model's answer *as the chat format parsed it*, the same object evaluation scores: a
  ``train.evaluation.generate.Generation`` (``content``, ``tool_calls``, ``error``, ``text``, ``answer_text``), or
  ``parse_completion(fmt, text)`` for a text the policy sampled (GRPO feeds the format's own parse, so the reward
  sees exactly the calls evaluation would). A parse failure is ``error`` set and no calls, never an exception.
* ``reference``: the canonical conversation the prompt came from (a ``Conversation`` or its dict). Its messages
  before the gold turn are the prompt context, its ``tools`` what was offered, its gold turn the expected answer
  (``gold_turn``: ``meta.turn``, else the last assistant message, as ``Task.target`` reads it) and its ``meta``
  what a benchmark's reader kept (BFCL's ``category``, ``bfcl_functions``, ``ground_truth``).

Nothing here is a scorer: each reward calls its benchmark's own checker (``bfcl``, ``itc``) or restates a paper's
reward (``toolrl``).
"""

from __future__ import annotations

from typing import Any

from train.evaluation.generate import Generation, parse_output
from train.evaluation.task_base import Task
from train.schema import Conversation, Message, ToolCall


def parse_completion(fmt: Any, text: str) -> Generation:
    """A sampled completion (its text without the end-of-turn token) read by the chat format, as ``generate``
    reads a model's output: content and calls, or the parse error; and the answer after the reasoning block when
    the format reads answers as text (``answer_style``), which BFCL's Java/JavaScript categories decode."""
    content, calls, error = parse_output(fmt, text)
    answer_text = fmt.split_reasoning_block(text)[1] if fmt.text_answers else None
    return Generation(text=text, content=content, tool_calls=calls, error=error, answer_text=answer_text)


def completion_of(content: str | None = None, calls: list[ToolCall] | None = None, error: str | None = None):
    """A parsed completion built by hand (tests, a caller that parsed calls its own way)."""
    text = None if error is None and content is None and not calls else (content or "")
    return Generation(text=text, content=content, tool_calls=list(calls or []), error=error)


def as_conversation(reference: Conversation | dict[str, Any]) -> Conversation:
    """The reference as a ``Conversation`` (a dict is read with the schema's own checks)."""
    return reference if isinstance(reference, Conversation) else Conversation.from_dict(reference, "reference")


def gold_turn(conv: Conversation) -> Message | None:
    """The reference's gold assistant turn (``meta.turn``, else the last assistant message); None when the
    conversation ends before one (a prompt-only reference, BFCL's irrelevance questions)."""
    try:
        return conv.messages[Task().target(conv)]
    except ValueError:
        if "turn" in conv.meta:  # a meta.turn that names no assistant message is the reference's error
            raise
        return None


def gold_calls(conv: Conversation) -> list[ToolCall]:
    """The gold turn's calls ([] for a text answer); ValueError when the reference has no gold turn."""
    turn = gold_turn(conv)
    if turn is None:
        raise ValueError(f"reference {conv.id!r} has no gold assistant turn")
    return list(turn.tool_calls)


def is_parsed(completion: Any) -> bool:
    """The chat format read the completion without error (and something was generated)."""
    return completion.text is not None and completion.error is None


def has_text(completion: Any) -> bool:
    return isinstance(completion.content, str) and completion.content.strip() != ""


__all__ = [
    "as_conversation",
    "completion_of",
    "gold_calls",
    "gold_turn",
    "has_text",
    "is_parsed",
    "parse_completion",
]
