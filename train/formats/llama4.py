"""Llama 4 Instruct (Scout, Maverick) with tools, token for token against llama-models' reference ChatFormat.

The reference is ``llama_models.llama4.chat_format.ChatFormat.encode_dialog_prompt`` (llama-models 0.3.0) with
its default ``ToolPromptFormat.json``. What it writes:

* ``<|begin_of_text|>``, then per message ``<|header_start|>ROLE<|header_end|>`` and ``"\\n\\n"``, the content,
  then ``<|eot|>``; a tool result's role is ``ipython`` and it ends with ``<|eom|>``, and so does an assistant
  turn with calls (the model hands over to the executor).
* An assistant turn is its text, then each call as ``json.dumps({"type": "function", "name": NAME,
  "parameters": ARGUMENTS})`` (ASCII-escaped, ``", "`` / ``": "``), one object after another with nothing between
  them: parallel calls are objects side by side.
* Every piece (the role, the ``"\\n\\n"``, the content, each call) is encoded on its own: the segments say so
  with ``new_run``, so a call's ``{`` never merges with the text before it.

Tool definitions: the reference ChatFormat leaves them to the caller's system prompt. This format writes them
into the first system message (one is added when the conversation has none): the system text, a blank line,
``TOOLS_PROMPT`` and the tool list as ``json.dumps(..., indent=4)``. The parity test hands the reference that
same system text.

Refused (``Llama4FormatError``): tool or call names Llama 4 reserves for its built-in tools (the reference
rewrites those calls as ``brave_search.call(query=...)`` etc.), and ``reasoning_content`` (this format writes no
reasoning; Llama 4's reasoning tokens are not part of its tool format).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from train.formats.base import NATIVE, ChatFormat, Segment
from train.formats.serving import Serving
from train.schema import Conversation, Message, ToolCall

BOS = "<|begin_of_text|>"
HEADER_START, HEADER_END = "<|header_start|>", "<|header_end|>"
EOT, EOM = "<|eot|>", "<|eom|>"
ROLE_NAMES = {"system": "system", "user": "user", "assistant": "assistant", "tool": "ipython"}
BUILTIN_TOOLS = frozenset({"brave_search", "wolfram_alpha", "photogen", "code_interpreter"})
TOOLS_PROMPT = (
    "You have access to the following functions. To call a function, respond with a JSON object "
    '{"type": "function", "name": function name, "parameters": dictionary of argument name and its value}; '
    "for several calls, write one object after another.\n\n"
)


class Llama4FormatError(ValueError):
    """The conversation cannot be written in the Llama 4 format. The message says why."""


class Llama4ParseError(ValueError):
    """Generated text has a malformed call. The message says why."""


def check_llama4_conversation(conv: Conversation) -> None:
    for tool in conv.tools:
        if tool.name in BUILTIN_TOOLS:
            raise Llama4FormatError(f"tools: {tool.name!r} is a Llama 4 built-in tool name, written another way")
    for index, message in enumerate(conv.messages):
        for call in message.tool_calls:
            if call.name in BUILTIN_TOOLS:
                raise Llama4FormatError(
                    f"messages[{index}]: {call.name!r} is a Llama 4 built-in tool; the reference writes its calls "
                    f"as {call.name}.call(...), not JSON"
                )
        if message.role in ("user", "system", "tool") and message.content is None:
            raise Llama4FormatError(f"messages[{index}]: a {message.role} message needs content")


def tools_text(conv: Conversation) -> str:
    return TOOLS_PROMPT + json.dumps([tool.to_dict() for tool in conv.tools], ensure_ascii=False, indent=4)


def system_with_tools(conv: Conversation) -> list[tuple[int, Message]]:
    """The messages to write, with the tool definitions folded into the first system message."""
    items = list(enumerate(conv.messages))
    if not conv.tools:
        return items
    if items and items[0][1].role == "system":
        index, first = items[0]
        text = (first.content + "\n\n" if first.content else "") + tools_text(conv)
        return [(index, Message(role="system", content=text))] + items[1:]
    return [(-1, Message(role="system", content=tools_text(conv)))] + items


def call_segments(call: ToolCall, index: int) -> list[Segment]:
    """One call as the reference's json tool format writes it; joined, ``json.dumps({type, name, parameters})``."""
    return [
        Segment('{"type": "function", "name": ', "call_syntax", index, new_run=True),
        Segment(json.dumps(call.name), "call_name", index),
        Segment(', "parameters": ', "call_syntax", index),
        Segment(json.dumps(call.arguments), "call_args", index),
        Segment("}", "call_syntax", index),
    ]


def render_llama4(conv: Conversation) -> list[Segment]:
    check_llama4_conversation(conv)
    segments = [Segment(BOS, "header", special=True)]
    for index, message in system_with_tools(conv):
        segments += [
            Segment(HEADER_START, "header", index, special=True),
            Segment(ROLE_NAMES[message.role], "header", index, new_run=True),
            Segment(HEADER_END, "header", index, special=True),
            Segment("\n\n", "header", index, new_run=True),
        ]
        if message.role == "assistant":
            if message.content:
                segments.append(Segment(message.content, "text", index, new_run=True))
            for call in message.tool_calls:
                segments += call_segments(call, index)
            segments.append(Segment(EOM if message.tool_calls else EOT, "end", index, special=True))
            continue
        part = {"system": "system", "user": "user", "tool": "tool_result"}[message.role]
        if message.content:
            segments.append(Segment(message.content, part if index >= 0 else "tools", index, new_run=True))
        segments.append(Segment(EOM if message.role == "tool" else EOT, "header", index, special=True))
    return segments


def parse_llama4(text: str) -> tuple[str | None, list[ToolCall]]:
    """Generated assistant text -> (content, calls). Never evaluates.

    The calls are the longest tail of the text that is a run of ``{"type": "function", "name", "parameters"}``
    objects (whitespace between them allowed); the text before them is the content. An optional ``<|eot|>`` or
    ``<|eom|>`` at the end is dropped. A tail that starts like a call and does not decode raises.
    """
    body = text.strip()
    for end in (EOT, EOM):
        if body.endswith(end):
            body = body[: -len(end)].rstrip()
    start = body.find('{"type": "function"')
    while start != -1:
        calls = _calls_from(body[start:])
        if calls is not None:
            return body[:start] or None, calls
        start = body.find('{"type": "function"', start + 1)
    if body.rstrip().endswith("}") and '"type": "function"' in body:
        raise Llama4ParseError("the text ends with something like a call that is not a JSON call object")
    return body or None, []


def _calls_from(tail: str) -> list[ToolCall] | None:
    decoder = json.JSONDecoder()
    calls, position = [], 0
    while position < len(tail):
        try:
            value, end = decoder.raw_decode(tail, position)
        except json.JSONDecodeError:
            return None
        call = _call(value)
        if call is None:
            return None
        calls.append(call)
        position = end
        while position < len(tail) and tail[position].isspace():
            position += 1
    return calls


def _call(value: Any) -> ToolCall | None:
    if not isinstance(value, dict) or set(value) - {"type", "name", "parameters"} or value.get("type") != "function":
        return None
    name, arguments = value.get("name"), value.get("parameters", {})
    if not isinstance(name, str) or not name or not isinstance(arguments, dict):
        return None
    return ToolCall(name=name, arguments=arguments)


class Llama4Format(ChatFormat):
    """Llama 4 Instruct: ``<|header_start|>`` headers, JSON calls, ``<|eom|>`` after a call turn."""

    name = "llama4"
    serving: ClassVar[Serving] = Serving(
        templates=("common.jinja", "llama4.jinja"),
        variables=(),
        vllm_parser="llama4_json",
        sglang_parser="llama3",
        exact=False,
        notes=(
            'A call is {"type": "function", "name": ..., "parameters": ...}; vLLM\'s llama4_json (its llama3_json '
            "parser under Llama 4's name) reads name and parameters from a turn that is one call. Parallel calls are "
            "objects side by side with no separator, as llama-models writes them, which it is not known to split "
            "(not run here: no vLLM offline), and text before a call is not a call. SGLang's llama3 detector reads the "
            "same JSON objects (read from its sources, not run). Exact: tooltrain's own parse "
            "(train.formats.get_format('llama4').parse) on the raw completion."
        ),
    )
    default_tokenizer = "llama4"

    def __init__(self, answer_style: str = NATIVE):
        self.answer_style = answer_style

    def render(self, conv: Conversation) -> list[Segment]:
        return render_llama4(conv)

    def parse(self, text: str) -> tuple[str | None, list[ToolCall]]:
        return parse_llama4(text)


__all__ = [
    "BUILTIN_TOOLS",
    "TOOLS_PROMPT",
    "Llama4Format",
    "Llama4FormatError",
    "Llama4ParseError",
    "check_llama4_conversation",
    "parse_llama4",
    "render_llama4",
    "system_with_tools",
]
