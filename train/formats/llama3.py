"""Llama 3.1's official chat format, and the prelude and plain turns its variants share.

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
and a call (the template silently drops the text, which would drop training text); a variant
layout of the family (``Llama31Family``, a recipe's own format: a subclass with its own call turns and tool
results) may express both. Every member also refuses tools-in-the-user-message for a conversation
whose first non-system message is not a user message (the template would relabel it as user
text, so an assistant turn would silently stop training); ``tools_in_user_message=False`` works.

``parse`` reads generated assistant text (what follows the assistant header, with or without
the end token). Text without a call marker is content. Text that starts a call (``{"name"``) must be a
well-formed call, or ``parse`` raises ``ValueError`` saying what is wrong: a broken call is reported, not passed
off as an answer. JSON is read with ``json.loads``, never evaluated.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from train.formats.base import NATIVE, ChatFormat, Segment, message_groups, to_json
from train.formats.serving import Serving
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


def message_text(message: Message) -> str:
    return (message.content or "").strip()


class Llama31Family(ChatFormat):
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
                segments += [*header(message.role), Segment(message_text(message), part, index), end]
        return segments

    def _system_block(self, conv: Conversation, system: tuple[int, Message] | None) -> list[Segment]:
        prelude = ("Environment: ipython\n" if conv.tools else "") + KNOWLEDGE_CUTOFF
        prelude += f"Today Date: {self.date_string}\n\n"
        segments = [*header("system"), Segment(prelude, "system")]
        if conv.tools and not self.tools_in_user_message:
            segments.append(Segment(TOOLS_IN_SYSTEM + CALL_FORMAT + tool_definitions(conv), "tools"))
        if system is not None:
            segments.append(Segment(message_text(system[1]), "system", system[0]))
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
        user = Segment(message_text(first), "user", index)
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


def call_from_json(obj: Any, where: str) -> ToolCall:
    if not isinstance(obj, dict) or set(obj) != {"name", "parameters"}:
        raise ValueError(f'{where}: expected an object with exactly "name" and "parameters", got {obj!r}')
    if not isinstance(obj["name"], str) or not obj["name"] or not isinstance(obj["parameters"], dict):
        raise ValueError(f'{where}: "name" must be a non-empty string and "parameters" an object, got {obj!r}')
    return ToolCall(name=obj["name"], arguments=obj["parameters"])


def load_json(text: str, where: str) -> Any:
    """Exactly one JSON value, whitespace around it allowed, nothing else."""
    try:
        value, end = json.JSONDecoder().raw_decode(text, len(text) - len(text.lstrip()))
    except json.JSONDecodeError as err:
        raise ValueError(f"{where}: malformed JSON ({err.msg} at character {err.pos}): {text!r}") from None
    if text[end:].strip():
        raise ValueError(f"{where}: text after the JSON: {text[end:].strip()!r}")
    return value


class Llama31Format(Llama31Family):
    """Llama 3.1's official format (trl's ``llama3_1.jinja``): one JSON call per assistant turn."""

    name: ClassVar[str] = "llama3_1"
    serving: ClassVar[Serving] = Serving(
        templates=("common.jinja", "llama3_prelude.jinja", "llama3_1.jinja"),
        variables=("tools_in_user_message", "date_string"),
        vllm_parser="llama3_json",
        sglang_parser="llama3",
        exact=True,
        pinned=("variants",),  # the refusals name the family's registered variants as the format does
        notes=(
            'A call turn is one {"name": ..., "parameters": ...} object; vLLM\'s llama3_json and SGLang\'s llama3 '
            "parsers read name and parameters from it. One call per turn, as the format trained."
        ),
    )

    @property
    def variants(self) -> str:
        """The registered formats that are layouts of this one (their ``variant_of``), comma-separated."""
        from train.formats import variants_of

        return ", ".join(variants_of(self.name))

    def _way_out(self, what: str) -> str:
        """`` (VARIANTS what)``: the registered layouts of the family that a refusal names, or nothing."""
        variants = self.variants
        return f" ({variants} {what})" if variants else ""

    def _call_turn(self, index: int, message: Message) -> list[Segment]:
        if len(message.tool_calls) != 1:
            raise ValueError(
                f"llama3_1: message {index} has {len(message.tool_calls)} tool calls; the official Llama 3.1 "
                "template allows one call per assistant turn" + self._way_out("expresses parallel calls")
            )
        if message_text(message):
            raise ValueError(
                f"llama3_1: message {index} has both text and a tool call; the official Llama 3.1 template "
                "drops the text of a call turn" + self._way_out("keeps it")
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
            return None, [call_from_json(load_json(body, "llama3_1 tool call"), "llama3_1 tool call")]
        return body or None, []


__all__ = ["Llama31Family", "Llama31Format", "call_from_json", "call_object", "header", "load_json", "message_text"]
