"""The Hermes ``<tool_call>`` parser, shared by the ChatML-family formats (chatml, qwen2_5).

Both write a call as ``<tool_call>\\n{"name": NAME, "arguments": {...}}\\n</tool_call>`` after the
assistant's text (if any) and a ``\\n``; they differ only in whether the tags are control tokens,
which does not matter once the ids are decoded back to text.

``parse_hermes`` reads generated assistant text (what follows ``<|im_start|>assistant\\n``, with or
without the end-of-turn token). The content is the text before the first ``<tool_call>``, verbatim
but for the one ``\\n`` the rendering puts before a call (None when only whitespace). After it,
only whitespace and further blocks may follow; each block holds exactly one JSON object with a
non-empty string ``name`` and an object ``arguments``, whitespace around it free. Anything else
raises ``ToolCallParseError`` naming the problem, rather than guessing: a malformed call is
counted wrong, not repaired. JSON is read with ``json``, never evaluated.
"""

from __future__ import annotations

import json

from train.schema import ToolCall

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"


class ToolCallParseError(ValueError):
    """Generated text has a malformed ``<tool_call>`` block. The message says which call and why."""


def parse_hermes(text: str, end_of_turn: str) -> tuple[str | None, list[ToolCall]]:
    """Assistant text -> (content, calls); a trailing ``end_of_turn`` (a kept stop token) is dropped."""
    ended = text.rstrip()
    body = ended[: -len(end_of_turn)] if ended.endswith(end_of_turn) else text
    first = body.find(CALL_OPEN)
    if first < 0:
        return (body if body.strip() else None), []
    content = body[:first]
    content = content.removesuffix("\n")  # the newline the rendering puts before a call
    calls: list[ToolCall] = []
    position = first
    while (position := _skip_space(body, position)) < len(body):
        if not body.startswith(CALL_OPEN, position):
            raise ToolCallParseError(f"text after tool call {len(calls)}: {body[position : position + 40]!r}")
        call, position = _read_block(body, position + len(CALL_OPEN), len(calls) + 1)
        calls.append(call)
    return (content if content.strip() else None), calls


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position].isspace():
        position += 1
    return position


def _read_block(text: str, position: int, number: int) -> tuple[ToolCall, int]:
    """The call in the block whose JSON starts at ``position`` (call ``number``, from 1), and where the block ends."""
    try:
        # raw_decode reads exactly one JSON value: a "</tool_call>" inside an argument string is harmless
        obj, position = json.JSONDecoder().raw_decode(text, _skip_space(text, position))
    except json.JSONDecodeError as err:
        raise ToolCallParseError(f"tool call {number}: invalid JSON: {err.msg} at char {err.pos}") from None
    if not isinstance(obj, dict) or set(obj) != {"name", "arguments"}:
        raise ToolCallParseError(f"tool call {number}: expected a JSON object with keys 'name' and 'arguments'")
    if not isinstance(obj["name"], str) or not obj["name"]:
        raise ToolCallParseError(f"tool call {number}: 'name' must be a non-empty string")
    if not isinstance(obj["arguments"], dict):
        raise ToolCallParseError(f"tool call {number}: 'arguments' must be a JSON object")
    position = _skip_space(text, position)
    if not text.startswith(CALL_CLOSE, position):
        raise ToolCallParseError(f"tool call {number}: missing {CALL_CLOSE}")
    return ToolCall(name=obj["name"], arguments=obj["arguments"]), position + len(CALL_CLOSE)
