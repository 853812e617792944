"""Qwen2.5's chat format, exactly as its official template renders it (trl's ``qwen2_5.jinja``).

* ChatML turns: ``<|im_start|>{role}\\n{content}<|im_end|>\\n``; content is kept verbatim.
* The system turn is the conversation's system message or, when it has none, "You are Qwen,
  created by Alibaba Cloud. You are a helpful assistant." With tools it continues with the
  ``# Tools`` block: one ``json.dumps(tool)`` line per tool inside ``<tools></tools>`` and the
  instructions for ``<tool_call>`` tags (the literal ``<tool_call>``/``</tool_call>`` in that
  text are Qwen2.5's added tokens, so they are control ids there too, as in the reference).
* An assistant turn is its text (less one trailing ``\\n`` when calls follow: ``train.formats.hermes.hermes_text``;
  the official template keeps it), then per call ``\\n<tool_call>\\n{"name": ..., "arguments":
  ...}\\n</tool_call>`` (parallel calls are several blocks), then ``<|im_end|>``. The ``\\n``
  right after ``assistant`` is the header (the generation prompt ends with it).
* Tool results are ``\\n<tool_response>\\n{content}\\n</tool_response>`` blocks; a run of
  consecutive results is one ``user`` turn.

Text is encoded with *no* added token matched (``train.formats.tokenize.encode_texts``): in Qwen2.5
``<tool_call>`` and ``</tool_call>`` are added tokens but not special ones, so
``split_special_tokens`` alone would still turn a user's literal ``<tool_call>`` into the control id.

``parse`` is the Hermes parser ChatML uses too (``train.formats.hermes``): a malformed call
raises ``ToolCallParseError`` (a ``ValueError``) naming the problem, never passed off as an answer.
"""

from __future__ import annotations

from typing import ClassVar

from train.formats.base import NATIVE, ChatFormat, Segment, message_groups, to_json
from train.formats.hermes import CALL_CLOSE as TOOL_CALL_END
from train.formats.hermes import CALL_OPEN as TOOL_CALL
from train.formats.hermes import hermes_text, parse_hermes
from train.formats.serving import HERMES_NOTES, Serving
from train.schema import Conversation, Message, ToolCall

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
TOOLS_INTRO = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_OUTRO = "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
CALL_EXAMPLE = '\n{"name": <function-name>, "arguments": <args-json-object>}\n'


def control(token: str, part: str = "header", message: int = -1) -> Segment:
    return Segment(token, part, message, special=True)


def turn_start(role: str, message: int = -1) -> list[Segment]:
    return [control(IM_START, message=message), Segment(f"{role}\n", "header", message)]


def turn_end(message: int = -1) -> list[Segment]:
    return [control(IM_END, message=message), Segment("\n", "header", message)]


class Qwen25Format(ChatFormat):
    """Qwen2.5 Instruct's format with Hermes-style ``<tool_call>`` blocks."""

    name: ClassVar[str] = "qwen2_5"
    serving: ClassVar[Serving] = Serving(
        templates=("common.jinja", "qwen2_5.jinja"),
        variables=(),
        vllm_parser="hermes",
        sglang_parser="qwen25",
        exact=True,
        notes=HERMES_NOTES,
    )
    default_tokenizer: ClassVar[str] = "qwen2_5"

    def __init__(self, answer_style: str = NATIVE):
        self.answer_style = answer_style

    # --- rendering ---------------------------------------------------------------------------

    def render(self, conv: Conversation) -> list[Segment]:
        messages = list(enumerate(conv.messages))
        system = messages.pop(0) if messages and messages[0][1].role == "system" else None
        segments = self._system_turn(conv, system)
        for group in message_groups(messages):
            index, message = group[0]
            if message.role == "tool":
                segments += self._tool_results(group)
            elif message.role == "assistant":
                segments += self._assistant_turn(index, message)
            else:
                part = "user" if message.role == "user" else "system"
                segments += [*turn_start(message.role, index), Segment(message.content or "", part, index)]
                segments += turn_end(index)
        return segments

    def _system_turn(self, conv: Conversation, system: tuple[int, Message] | None) -> list[Segment]:
        if system is None:
            prompt = Segment(DEFAULT_SYSTEM, "system")
        else:
            prompt = Segment(system[1].content or "", "system", system[0])
        segments = [*turn_start("system"), prompt]
        if conv.tools:
            definitions = "".join("\n" + to_json(tool.to_dict()) for tool in conv.tools)
            segments += [
                Segment(TOOLS_INTRO + definitions + TOOLS_OUTRO, "tools"),
                control(TOOL_CALL, "tools"),
                control(TOOL_CALL_END, "tools"),
                Segment(" XML tags:\n", "tools"),
                control(TOOL_CALL, "tools"),
                Segment(CALL_EXAMPLE, "tools"),
                control(TOOL_CALL_END, "tools"),
            ]
        return [*segments, *turn_end()]

    def _assistant_turn(self, index: int, message: Message) -> list[Segment]:
        segments = [*turn_start("assistant", index)]
        # less the newline before a call that vLLM's hermes parser hands back in the content (hermes_text)
        text = hermes_text(message.content, bool(message.tool_calls))
        segments.append(Segment(text, "text", index))
        for position, call in enumerate(message.tool_calls):
            if position or text:
                segments.append(Segment("\n", "call_syntax", index))
            segments += [
                control(TOOL_CALL, "call_syntax", index),
                Segment('\n{"name": "', "call_syntax", index),
                Segment(call.name, "call_name", index),
                Segment('", "arguments": ', "call_syntax", index),
                Segment(to_json(call.arguments), "call_args", index),
                Segment("}\n", "call_syntax", index),
                control(TOOL_CALL_END, "call_syntax", index),
            ]
        return [*segments, control(IM_END, "end", index), Segment("\n", "header", index)]

    def _tool_results(self, run: list[tuple[int, Message]]) -> list[Segment]:
        # One user turn for the whole run; each result adds its own leading newline.
        segments = [control(IM_START, message=run[0][0]), Segment("user", "header", run[0][0])]
        for index, message in run:
            segments += [
                Segment("\n<tool_response>\n", "header", index),
                Segment(message.content or "", "tool_result", index),
                Segment("\n</tool_response>", "header", index),
            ]
        return [*segments, *turn_end(run[-1][0])]

    # --- parsing -----------------------------------------------------------------------------

    def parse(self, text: str) -> tuple[str | None, list[ToolCall]]:
        return parse_hermes(text, IM_END)


__all__ = ["Qwen25Format"]
