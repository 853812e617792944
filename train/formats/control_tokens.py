"""The control tokens a format writes, and adding the missing ones to a random-init model's tokenizer.

A model built from a config (``model.source=config``: the tiny recipes) has no vocabulary of its own to keep: its
embedding table is sized by the tokenizer. When the run's format writes control tokens the tokenizer lacks (the
tiny ChatML tokenizer has no ``<think>`` or ``<tool_call>``), every conversation would be refused for want of
them; instead they are added after the tokenizer's own ids, in the order the format first writes them, so
``tooltrain train recipe=tiny model.chat_format=qwen3`` trains. A tokenizer that has them all is left as it is
(the tiny recipes' golden losses do not move). A pretrained model's tokenizer is never changed here.
"""

from __future__ import annotations

from typing import Any

from train.formats.base import ChatFormat
from train.schema import Conversation, Message, Tool, ToolCall


def _probes(reasoning: bool) -> list[Conversation]:
    """Conversations from the richest (parallel calls, results, reasoning) to the plainest: every format renders
    at least the last; the control tokens are those of every probe it renders."""
    think = "r" if reasoning else None
    calls = [ToolCall("probe", {}, id="call0000a"), ToolCall("probe", {}, id="call0000b")]
    results = [Message("tool", "r", tool_call_id=c.id, name="probe") for c in calls]
    rich = [
        Message("system", "s"),
        Message("user", "q"),
        Message("assistant", reasoning_content=think, tool_calls=calls),
        *results,
        Message("assistant", "a", reasoning_content=think),
    ]
    single = [Message("user", "q"), Message("assistant", tool_calls=calls[:1]), results[0], Message("assistant", "a")]
    tools = [Tool(name="probe")]
    return [
        Conversation("control-probe-rich", rich, tools=tools),
        Conversation("control-probe-single", single, tools=tools),
        Conversation("control-probe-text", [Message("user", "q"), Message("assistant", "a")]),
    ]


def format_control_tokens(fmt: ChatFormat) -> list[str]:
    """The control tokens ``fmt`` writes, in the order it first writes them."""
    found: dict[str, None] = {}
    for probe in _probes(fmt.supports_reasoning):
        try:
            segments = fmt.render(probe)
        except ValueError:  # a layout the format refuses (parallel calls in Llama 3.1): the others still count
            continue
        found.update((seg.text, None) for seg in segments if seg.special)
    return list(found)


def add_missing_control_tokens(tokenizer: Any, fmt: ChatFormat) -> list[str]:
    """Adds the control tokens of ``fmt`` that ``tokenizer`` lacks (as special tokens, after its own ids); returns
    them. Only for a model whose embeddings are built from the tokenizer's size (module docstring)."""
    vocab = tokenizer.get_vocab()
    missing = [text for text in format_control_tokens(fmt) if text not in vocab]
    if missing:
        from tokenizers import AddedToken

        tokenizer.add_special_tokens(
            {"additional_special_tokens": [AddedToken(t, special=True, normalized=False) for t in missing]},
            replace_extra_special_tokens=False,
        )
    return missing


__all__ = ["add_missing_control_tokens", "format_control_tokens"]
