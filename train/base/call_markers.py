"""Which text holds tool-call markup: the markers, and the ``data validate`` check built on them.

In the base layer, apart from ``train.sources.call_markup`` (which parses the markup), because it needs nothing
but ``re`` and the schema, so ``train.validate``, below the readers, can use it: the check there and the readers'
parsing recognise exactly the same markup. User text is never looked at: markup there is what the
user typed, and stays text (as control tokens do).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from train.schema import Conversation

CODE = "call-markup-in-text"  # the validate.py check's stable code

PYTHON_TAG = "<|python_tag|>"
TOOL_CALLS = "[TOOL_CALLS]"
# Markers of layouts recognised but not parsed (train.sources.call_markup): a record carrying one is refused.
OTHER_MARKERS = (
    "<functioncall>",  # glaive (its own reader parses it)
    "<function_call>",
    "<function=",  # Llama 3.1's custom-tool format
    "<｜tool▁calls▁begin｜>",  # DeepSeek V3/R1
    "<|tool_calls_section_begin|>",  # Kimi K2
    "<|action_start|>",  # InternLM2
    "✿FUNCTION✿",  # Qwen-Agent
    "<start_function_call>",  # FunctionGemma
    "<|tool_call_start|>",  # LFM2
)


class Block(NamedTuple):
    """``text[start:end]`` is ``<tag>body</tag>``."""

    start: int
    end: int
    body: str


def blocks(text: str, tag: str) -> list[Block]:
    """Every ``<tag>…</tag>`` in ``text``, in order; an opener with no closer after it ends the search.

    ``str.find``, not a regex: ``<tag>(.*?)</tag>`` rescans the rest of the text from every opener that has
    no closer, a quadratic stall on a long record.
    """
    opener, closer = f"<{tag}>", f"</{tag}>"
    found, position = [], 0
    while (start := text.find(opener, position)) >= 0:
        body_end = text.find(closer, start + len(opener))
        if body_end < 0:
            break
        position = body_end + len(closer)
        found.append(Block(start, position, text[start + len(opener) : body_end]))
    return found


def without(text: str, spans: list[Block]) -> str:
    """``text`` with the blocks cut out."""
    pieces, position = [], 0
    for block in spans:
        pieces.append(text[position : block.start])
        position = block.end
    return "".join(pieces) + text[position:]


def tool_blocks(text: str) -> list[Block]:
    """The ``<tools>`` blocks with something inside: ``<tools> </tools>`` is prose naming the tag."""
    return [block for block in blocks(text, "tools") if block.body.strip()]


def assistant_marker(text: str) -> str | None:
    """The first call marker in assistant text, parsed layout or not; None when there is none."""
    for marker in ("<tool_call>", "</tool_call>", PYTHON_TAG, TOOL_CALLS, *OTHER_MARKERS):
        if marker in text:
            return marker
    return None


def markup_findings(conv: Conversation) -> Iterator[tuple[str, str, str]]:
    """``(code, where, reason)`` for call markup still in a canonical record's text: a reader kept it as text.

    Assistant content with a call marker, tool content in ``<tool_response>`` and a system prompt with a
    ``<tools>`` block are rendered as text by every format, beside (not as) the calls and tools it means.
    User text is not looked at: it is what the user typed.
    """
    for index, message in enumerate(conv.messages):
        text = message.content if isinstance(message.content, str) else ""
        where = f"messages[{index}].content"
        if message.role == "assistant" and (marker := assistant_marker(text)):
            yield CODE, where, f"assistant text holds call markup {marker!r}: a call kept as text, not in tool_calls"
        elif message.role == "tool" and "<tool_response>" in text:
            yield CODE, where, "tool text holds <tool_response> markup: the format wraps results itself"
        elif message.role == "system" and tool_blocks(text):
            yield CODE, where, "the system prompt holds a <tools> block: tools belong in the record's tools"


__all__ = [
    "CODE",
    "OTHER_MARKERS",
    "PYTHON_TAG",
    "TOOL_CALLS",
    "Block",
    "assistant_marker",
    "blocks",
    "markup_findings",
    "tool_blocks",
    "without",
]
