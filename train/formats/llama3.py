"""Llama 3.1 chat formats: the official template, and the Meta-Tool variant with reasoning and parallel calls.

``llama3_1`` renders exactly what Llama 3.1's official chat template renders (trl ships it as
``trl/chat_templates/llama3_1.jinja``; the parity tests compare token ids with it):

* ``<|begin_of_text|>``, then a system block that always carries "Cutting Knowledge Date:
  December 2023" and "Today Date: <date_string>" (default "26 Jul 2024", the template's), preceded
  by "Environment: ipython" when the conversation has tools; the system message follows, trimmed.
* Tool definitions (``json.dumps(tool, indent=4)``) go into the first user message by default
  (the template's ``tools_in_user_message``), or into the system block with
  ``tools_in_user_message=False``.
* A tool call is the whole assistant message: ``{"name": ..., "parameters": {...}}<|eot_id|>``.
  Tool results are ``ipython`` turns whose content is JSON-encoded (the template applies
  ``tojson`` to every string result, so the model sees it quoted).
* Message text is trimmed, as the template trims it.

Two things the official template cannot express raise ``ValueError`` instead of losing data:
more than one call in a turn (the template refuses them), and an assistant turn with both text
and a call (the template silently drops the text, which would drop training text). The Meta-Tool
variant expresses both. Both formats also refuse tools-in-the-user-message for a conversation
whose first non-system message is not a user message (the template would relabel it as user
text, so an assistant turn would silently stop training); ``tools_in_user_message=False`` works.

``llama3_1_metatool`` is the format of Meta-Tool's MT-LLaMA (seed paper, Figures 13-16, A.1):
the same Llama 3.1 prelude ("We adopt the function calling instruction format used in LLaMA"),
but an assistant turn with calls is its reasoning text, then ``<|python_tag|>``, then a JSON
list of ``{"name": ..., "parameters": ...}`` objects (``", "``-separated, non-ASCII kept), with
no separator around the tag (Figures 16, 18). Such a turn ends with ``<|eom_id|>``: in Llama
3.1, ``<|eom_id|>`` ends a message after which the executor runs the calls and the model goes
on, ``<|eot_id|>`` ends the model's turn; so a turn with calls ends in ``<|eom_id|>`` (even when
it is the last message) and a turn without calls in ``<|eot_id|>``. A run of consecutive tool
results is one ``ipython`` turn holding the paper's result list (Figures 12, 15):
``[{"name": ..., "function_id": <index of the answered call in its turn>, "results": ...}]``,
where ``results`` is the tool's output parsed as JSON when it is a JSON object or array, and the
output string otherwise.

``parse`` reads generated assistant text (what follows the assistant header, with or without
the end token). Text without a call marker is content. Text that starts a call (``{"name"`` for
``llama3_1``; ``<|python_tag|>`` for the Meta-Tool variant) must be a well-formed call, or
``parse`` raises ``ValueError`` saying what is wrong: a broken call is reported, not passed off
as an answer. JSON is read with ``json.loads``, never evaluated.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from train.formats.base import NATIVE, ChatFormat, Segment, message_groups, to_json
from train.schema import Conversation, Message, ToolCall

BOS = "<|begin_of_text|>"
START_HEADER = "<|start_header_id|>"
END_HEADER = "<|end_header_id|>"
EOT = "<|eot_id|>"
EOM = "<|eom_id|>"
PYTHON_TAG = "<|python_tag|>"
DEFAULT_DATE = "26 Jul 2024"
KNOWLEDGE_CUTOFF = "Cutting Knowledge Date: December 2023\n"
CALL_FORMAT = (
    'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.'
    "Do not use variables.\n\n"
)
TOOLS_IN_SYSTEM = (
    "You have access to the following functions. To call a function, please respond with JSON for a function call."
)
TOOLS_IN_USER = (
    "Given the following functions, please respond with a JSON for a function call "
    "with its proper arguments that best answers the given prompt.\n\n"
)
_CALL_START = re.compile(r'\{\s*"name"')


def header(role: str) -> list[Segment]:
    return [
        Segment(START_HEADER, "header", special=True),
        Segment(role, "header"),
        Segment(END_HEADER, "header", special=True),
        Segment("\n\n", "header"),
    ]


def tool_definitions(conv: Conversation) -> str:
    return "".join(json.dumps(tool.to_dict(), ensure_ascii=False, indent=4) + "\n\n" for tool in conv.tools)


def call_object(call: ToolCall, message: int) -> list[Segment]:
    """``{"name": "<name>", "parameters": <arguments>}`` split into its trainable parts."""
    return [
        Segment('{"name": "', "call_syntax", message),
        Segment(call.name, "call_name", message),
        Segment('", "parameters": ', "call_syntax", message),
        Segment(to_json(call.arguments), "call_args", message),
        Segment("}", "call_syntax", message),
    ]


def _text(message: Message) -> str:
    return (message.content or "").strip()


class _Llama31Family(ChatFormat):
    """The Llama 3.1 prelude and plain turns; subclasses render call turns and tool results."""

    default_tokenizer: ClassVar[str] = "llama3"

    def __init__(self, tools_in_user_message: bool = True, date_string: str = DEFAULT_DATE, answer_style: str = NATIVE):
        self.tools_in_user_message = tools_in_user_message
        self.date_string = date_string
        self.answer_style = answer_style

    # --- rendering ---------------------------------------------------------------------------

    def render(self, conv: Conversation) -> list[Segment]:
        messages = list(enumerate(conv.messages))
        segments = [Segment(BOS, "header", special=True)]
        system = messages.pop(0) if messages and messages[0][1].role == "system" else None
        segments += self._system_block(conv, system)
        if conv.tools and self.tools_in_user_message:
            segments += self._first_user_with_tools(conv, messages)
            messages = messages[1:]
        for group in message_groups(messages):
            index, message = group[0]
            if message.role == "tool":
                segments += self._tool_results(conv, group)
            elif message.role == "assistant" and message.tool_calls:
                segments += self._call_turn(index, message)
            else:
                part = {"assistant": "text", "user": "user", "system": "system"}[message.role]
                end = Segment(EOT, "end" if message.role == "assistant" else "header", index, special=True)
                segments += [*header(message.role), Segment(_text(message), part, index), end]
        return segments

    def _system_block(self, conv: Conversation, system: tuple[int, Message] | None) -> list[Segment]:
        prelude = ("Environment: ipython\n" if conv.tools else "") + KNOWLEDGE_CUTOFF
        prelude += f"Today Date: {self.date_string}\n\n"
        segments = [*header("system"), Segment(prelude, "system")]
        if conv.tools and not self.tools_in_user_message:
            segments.append(Segment(TOOLS_IN_SYSTEM + CALL_FORMAT + tool_definitions(conv), "tools"))
        if system is not None:
            segments.append(Segment(_text(system[1]), "system", system[0]))
        return [*segments, Segment(EOT, "header", special=True)]

    def _first_user_with_tools(self, conv: Conversation, messages: list[tuple[int, Message]]) -> list[Segment]:
        if not messages:
            raise ValueError(f"{self.name}: tools go into the first user message, but there is no message")
        index, first = messages[0]
        if first.role != "user":
            # The template would relabel this message as user text: an assistant turn would silently stop training.
            raise ValueError(
                f"{self.name}: tools go into the first user message, but message {index} is {first.role!r}; "
                "use tools_in_user_message=False"
            )
        tools = Segment(TOOLS_IN_USER + CALL_FORMAT + tool_definitions(conv), "tools")
        user = Segment(_text(first), "user", index)
        return [*header("user"), tools, user, Segment(EOT, "header", index, special=True)]

    def _call_turn(self, index: int, message: Message) -> list[Segment]:
        raise NotImplementedError

    def _tool_results(self, conv: Conversation, run: list[tuple[int, Message]]) -> list[Segment]:
        raise NotImplementedError

    # --- parsing -----------------------------------------------------------------------------

    @staticmethod
    def _strip_end(text: str) -> str:
        text = text.rstrip()
        for end in (EOT, EOM):
            if text.endswith(end):
                return text[: -len(end)]
        return text


def _call_from_json(obj: Any, where: str) -> ToolCall:
    if not isinstance(obj, dict) or set(obj) != {"name", "parameters"}:
        raise ValueError(f'{where}: expected an object with exactly "name" and "parameters", got {obj!r}')
    if not isinstance(obj["name"], str) or not obj["name"] or not isinstance(obj["parameters"], dict):
        raise ValueError(f'{where}: "name" must be a non-empty string and "parameters" an object, got {obj!r}')
    return ToolCall(name=obj["name"], arguments=obj["parameters"])


def _load_json(text: str, where: str) -> Any:
    """Exactly one JSON value, whitespace around it allowed, nothing else."""
    try:
        value, end = json.JSONDecoder().raw_decode(text, len(text) - len(text.lstrip()))
    except json.JSONDecodeError as err:
        raise ValueError(f"{where}: malformed JSON ({err.msg} at character {err.pos}): {text!r}") from None
    if text[end:].strip():
        raise ValueError(f"{where}: text after the JSON: {text[end:].strip()!r}")
    return value


class Llama31Format(_Llama31Family):
    """Llama 3.1's official format (trl's ``llama3_1.jinja``): one JSON call per assistant turn."""

    name: ClassVar[str] = "llama3_1"

    def _call_turn(self, index: int, message: Message) -> list[Segment]:
        if len(message.tool_calls) != 1:
            raise ValueError(
                f"llama3_1: message {index} has {len(message.tool_calls)} tool calls; the official Llama 3.1 "
                "template allows one call per assistant turn (llama3_1_metatool expresses parallel calls)"
            )
        if _text(message):
            raise ValueError(
                f"llama3_1: message {index} has both text and a tool call; the official Llama 3.1 template "
                "drops the text of a call turn (llama3_1_metatool keeps it)"
            )
        call = call_object(message.tool_calls[0], index)
        return [*header("assistant"), *call, Segment(EOT, "end", index, special=True)]

    def _tool_results(self, conv: Conversation, run: list[tuple[int, Message]]) -> list[Segment]:
        segments: list[Segment] = []
        for index, message in run:
            # The template JSON-encodes string results (``tojson`` on an iterable), quotes included.
            result = Segment(to_json(message.content or ""), "tool_result", index)
            segments += [*header("ipython"), result, Segment(EOT, "header", index, special=True)]
        return segments

    def parse(self, text: str) -> tuple[str | None, list[ToolCall]]:
        body = self._strip_end(text).strip()
        if _CALL_START.match(body):
            return None, [_call_from_json(_load_json(body, "llama3_1 tool call"), "llama3_1 tool call")]
        return body or None, []


class Llama31MetaToolFormat(_Llama31Family):
    """Meta-Tool's MT-LLaMA format: reasoning text, ``<|python_tag|>``, a JSON list of calls, ``<|eom_id|>``."""

    name: ClassVar[str] = "llama3_1_metatool"

    def _call_turn(self, index: int, message: Message) -> list[Segment]:
        calls: list[Segment] = [Segment("[", "call_syntax", index)]
        for position, call in enumerate(message.tool_calls):
            if position:
                calls.append(Segment(", ", "call_syntax", index))
            calls += call_object(call, index)
        calls.append(Segment("]", "call_syntax", index))
        return [
            *header("assistant"),
            Segment(_text(message), "text", index),
            Segment(PYTHON_TAG, "call_syntax", index, special=True),
            *calls,
            Segment(EOM, "end", index, special=True),
        ]

    def _tool_results(self, conv: Conversation, run: list[tuple[int, Message]]) -> list[Segment]:
        answered = _calls_answered(conv, run[0][0])
        results = []
        for position, (_, message) in enumerate(run):
            # Linked by id when the result names its call; otherwise results answer calls in order.
            function_id, call_name = answered.get(message.tool_call_id or "", (position, None))
            name = message.name if message.name is not None else call_name
            results.append({"name": name, "function_id": function_id, "results": _result_value(message.content)})
        first, last = run[0][0], run[-1][0]
        result_list = Segment(to_json(results), "tool_result", first)
        return [*header("ipython"), result_list, Segment(EOT, "header", last, special=True)]

    def parse(self, text: str) -> tuple[str | None, list[ToolCall]]:
        body = self._strip_end(text)
        reasoning, tag, calls_text = body.partition(PYTHON_TAG)
        content = reasoning.strip() or None
        if not tag:
            return content, []
        where = "llama3_1_metatool calls after <|python_tag|>"
        calls = _load_json(calls_text, where)
        if not isinstance(calls, list) or not calls:
            raise ValueError(f"{where}: expected a non-empty JSON list of calls, got {calls!r}")
        return content, [_call_from_json(call, f"{where}, item {i}") for i, call in enumerate(calls)]


def _calls_answered(conv: Conversation, first_result: int) -> dict[str, tuple[int, str]]:
    """call id -> (its position, its name) in the assistant turn right before a run of tool results."""
    previous = conv.messages[first_result - 1] if first_result > 0 else None
    if previous is None or previous.role != "assistant":
        return {}
    return {call.id: (i, call.name) for i, call in enumerate(previous.tool_calls) if call.id is not None}


def _result_value(content: str | None) -> Any:
    """A tool's output as the result list holds it: parsed when it is a JSON object or array."""
    text = content or ""
    if text.strip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass
    return text


__all__ = ["Llama31Format", "Llama31MetaToolFormat"]
