"""Canonical conversation -> the ``(messages, tools)`` pair ``tokenizer.apply_chat_template`` takes.

This is how tooltrain hands a conversation to an official Hugging Face chat template (the parity
tests, benchmarks that prompt a model through its own template). The mapping keeps every field a
template reads and drops what would change a template's branch by mere presence:

* ``tool_calls`` appears only on assistant messages that have calls: Llama 3.1's template treats
  *any* ``tool_calls`` key, even an empty list, as a call turn.
* An assistant message with calls and no text has no ``content`` key (templates test
  ``message.content`` for truthiness); every other message has a string ``content`` (``None``
  becomes ``""``, since templates concatenate it).
* ``tools`` is ``None`` when the conversation has none: Llama 3.1's template switches to its
  tool prompt for any non-``None`` value, including ``[]``.
* Arguments stay dicts (templates serialize them with ``tojson``); tool results keep
  ``tool_call_id`` and ``name``.
"""

from __future__ import annotations

import copy
from typing import Any

from train.schema import Conversation, Message


def _hf_message(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role}
    if message.reasoning_content is not None:  # Qwen3's template reads it (other templates ignore the key)
        out["reasoning_content"] = message.reasoning_content
    if message.tool_calls:
        if message.content is not None:
            out["content"] = message.content
        out["tool_calls"] = [call.to_dict() for call in message.tool_calls]
    else:
        out["content"] = message.content if message.content is not None else ""
    if message.role == "tool":
        if message.tool_call_id is not None:
            out["tool_call_id"] = message.tool_call_id
        if message.name is not None:
            out["name"] = message.name
    return out


def to_hf_messages(conv: Conversation) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """``(messages, tools)`` for ``tokenizer.apply_chat_template(messages, tools=tools)``.

    The result shares no object with ``conv``: a caller may change it freely.
    """
    messages = [_hf_message(m) for m in conv.messages]
    tools = [tool.to_dict() for tool in conv.tools] or None
    return copy.deepcopy(messages), copy.deepcopy(tools)


__all__ = ["to_hf_messages"]
