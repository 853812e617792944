"""ChatML with Hermes-style tool calling: SmolLM2 (the demo model) and other ChatML models.

Every turn is ``<|im_start|>ROLE\\nBODY<|im_end|>\\n``. With no tools, the rendering is exactly
SmolLM2's own chat template: when the conversation has no system message, the template opens with
SmolLM2's default system prompt, and so does this format (``default_system``; a subclass for a
ChatML model without one sets it to None).

Tools follow the Hermes convention (NousResearch Hermes 2 Pro; Qwen2.5 uses the same tags):

* the definitions go at the end of the system turn, one JSON object per line between ``<tools>``
  and ``</tools>``, followed by an instruction showing the call syntax (our own wording);
* a call is ``<tool_call>\\n{"name": NAME, "arguments": {...}}\\n</tool_call>``; several calls are
  separated by ``\\n`` and follow the assistant's text (if any) after a ``\\n``; a text that ends with
  ``\\n`` is written less that newline (``train.formats.hermes.hermes_text``: vLLM's hermes parser hands it back);
* tool results go in a ``tool`` turn, as Hermes 2 Pro does (Qwen2.5 uses ``user`` instead): one turn
  per run of consecutive tool messages, each result as ``<tool_response>\\nCONTENT\\n</tool_response>``,
  joined by ``\\n``. Only the content is written, as both references do; results follow call order.

JSON is written as HF chat templates' ``tojson`` writes it: ``ensure_ascii=False``, separators
``", "`` and ``": "``, keys in their given order.

Injection: ``<|im_start|>``/``<|im_end|>`` are control tokens, and text anywhere in a conversation
is encoded with control-token parsing off, so a user who types ``<|im_end|>`` gets characters, not
the end of their turn. ``<tool_call>``, by contrast, is not a token of SmolLM2's vocabulary: it is
plain text, and a user or tool result containing ``<tool_call>...</tool_call>`` is indistinguishable,
token for token, from a real call. This family cannot tell them apart; formats whose tokenizers
make the tags control tokens (Qwen2.5) can.
"""

from __future__ import annotations

from typing import ClassVar

from train.formats.base import NATIVE, ChatFormat, Segment, message_groups, to_json
from train.formats.hermes import CALL_CLOSE, CALL_OPEN, ToolCallParseError, hermes_text, parse_hermes
from train.formats.serving import HERMES_NOTES, Serving
from train.schema import Conversation, Message, ToolCall

START, END = "<|im_start|>", "<|im_end|>"
SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

TOOLS_PREAMBLE = (
    "\n\n# Tools\n\nYou may call functions to help with the user's request. "
    "Their signatures are listed as JSON, one per line, inside <tools></tools> XML tags:\n<tools>"
)
TOOLS_INSTRUCTION = (
    "\n</tools>\n\nTo call a function, reply with a JSON object holding its name and arguments "
    "inside <tool_call></tool_call> XML tags:\n"
    '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


class ChatMLFormat(ChatFormat):
    name = "chatml"
    serving: ClassVar[Serving] = Serving(
        templates=("common.jinja", "chatml.jinja"),
        variables=("default_system",),
        vllm_parser="hermes",
        sglang_parser="qwen25",
        exact=True,
        notes=HERMES_NOTES + " <tool_call> is plain text in SmolLM2's vocabulary; the parsers match the text.",
    )
    default_tokenizer = "smollm2"
    default_system: ClassVar[str | None] = SMOLLM2_SYSTEM

    def __init__(self, answer_style: str = NATIVE):
        self.answer_style = answer_style

    # ---- rendering -------------------------------------------------------------------------

    def render(self, conv: Conversation) -> list[Segment]:
        messages = conv.messages
        segments = self.system_turn(conv)
        first = 1 if messages and messages[0].role == "system" else 0
        for group in message_groups(list(enumerate(messages))[first:]):
            index, message = group[0]
            if message.role == "tool":
                segments += tool_turn(group)
            elif message.role == "assistant":
                segments += assistant_turn(message, index)
            else:  # user, or a system message later in the conversation: a plain turn
                segments += plain_turn(message.role, message.content or "", message.role, index)
        return segments

    def system_turn(self, conv: Conversation) -> list[Segment]:
        messages = conv.messages
        if messages and messages[0].role == "system":
            text, index = messages[0].content or "", 0
        elif self.default_system is not None:
            text, index = self.default_system, -1
        elif conv.tools:
            text, index = "", -1
        else:
            return []
        segments = [
            Segment(START, "header", index, special=True),
            Segment("system\n", "header", index),
            Segment(text, "system", index),
        ]
        if conv.tools:
            lines = "".join("\n" + to_json(tool.to_dict()) for tool in conv.tools)
            segments.append(Segment(TOOLS_PREAMBLE + lines + TOOLS_INSTRUCTION, "tools", index))
        return segments + [Segment(END, "header", index, special=True), Segment("\n", "header", index)]

    # ---- parsing ---------------------------------------------------------------------------

    def parse(self, text: str) -> tuple[str | None, list[ToolCall]]:
        """Assistant text -> (content, calls): the Hermes parser (``train.formats.hermes``), or a text answer."""
        return parse_hermes(text, END)


# ---- turns ---------------------------------------------------------------------------------


def plain_turn(role: str, text: str, part: str, index: int) -> list[Segment]:
    return [
        Segment(START, "header", index, special=True),
        Segment(role + "\n", "header", index),
        Segment(text, part, index),  # type: ignore[arg-type]  # part is a role name that is a Part
        Segment(END, "header", index, special=True),
        Segment("\n", "header", index),
    ]


def assistant_turn(message: Message, index: int) -> list[Segment]:
    segments = [Segment(START, "header", index, special=True), Segment("assistant\n", "header", index)]
    # less the newline before a call that vLLM's hermes parser hands back in the content (hermes_text)
    text = hermes_text(message.content, bool(message.tool_calls))
    if text:
        segments.append(Segment(text, "text", index))
    for n, call in enumerate(message.tool_calls):
        separator = "\n" if (n or text) else ""
        name = to_json(call.name)  # a quoted JSON string: valid JSON whatever the name holds
        segments += [
            Segment(separator + CALL_OPEN + '\n{"name": "', "call_syntax", index),
            Segment(name[1:-1], "call_name", index),
            Segment('", "arguments": ', "call_syntax", index),
            Segment(to_json(call.arguments), "call_args", index),
            Segment("}\n" + CALL_CLOSE, "call_syntax", index),
        ]
    return segments + [Segment(END, "end", index, special=True), Segment("\n", "header", index)]


def tool_turn(run: list[tuple[int, Message]]) -> list[Segment]:
    first = run[0][0]
    segments = [Segment(START, "header", first, special=True), Segment("tool\n", "header", first)]
    for n, (i, message) in enumerate(run):
        segments += [
            Segment(("\n" if n else "") + "<tool_response>\n", "header", i),
            Segment(message.content or "", "tool_result", i),
            Segment("\n</tool_response>", "header", i),
        ]
    last = run[-1][0]
    return segments + [Segment(END, "header", last, special=True), Segment("\n", "header", last)]


__all__ = ["ChatMLFormat", "ToolCallParseError"]
