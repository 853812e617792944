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

``hermes_text`` is the other direction: the text a call turn writes before its calls (the rendering and the
exported chat templates follow it), its content less one trailing newline, so that the content vLLM's
hermes parser gives back (the text *with* that newline) renders in history as the turn was trained; a call
turn is written as if its content were that text. ``with_hermes_text`` applies it to a whole conversation.
"""

from __future__ import annotations

import dataclasses
import json

from train.schema import Conversation, ToolCall

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"


def hermes_text(content: str | None, has_calls: bool) -> str:
    """The text an assistant turn writes before its calls (``has_calls``), or its whole text (no calls).

    vLLM's hermes parser returns as ``content`` everything before the first ``<tool_call>``, verbatim: the text
    *and* the newline the format writes before a call. A client sends that back as history, so a call turn's
    content is written less one trailing ``\\n``: ``text\\n`` is written as ``text`` is, ``text\\n<tool_call>``.
    Exactly one newline, the one the parser adds, and nothing else: whatever the text, what the parser returns
    renders as it was trained (``text\\n\\n`` is written ``text\\n\\n<tool_call>`` and comes back as
    ``text\\n\\n``); trailing spaces, or a ``\\r`` before the newline, are the author's and kept. The ambiguity
    this leaves: a call turn whose own text ends with a newline is written, and trained, with one newline
    fewer, and ``parse`` reads it back so. A call turn is written as if its content were this text (so the newline
    before the first call is there when the text is not empty); text without calls is written verbatim.
    """
    text = content or ""
    return text.removesuffix("\n") if has_calls else text


def with_hermes_text(conv: Conversation) -> Conversation:
    """``conv`` with each call turn's content as the Hermes formats write it (``hermes_text``): what an official
    template (Qwen2.5's, Qwen3's, which keep the newline) renders as tooltrain does."""
    messages = [
        dataclasses.replace(m, content=hermes_text(m.content, True)) if m.tool_calls and m.content else m
        for m in conv.messages
    ]
    return dataclasses.replace(conv, messages=messages)


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
