"""DeepSeek-V3 with tools, token for token against its official chat template (trl's ``deepseekv3.jinja``).

What the template writes: ``<｜begin▁of▁sentence｜>``, every system message's text (joined by ``"\\n\\n"``) right
after it, then ``<｜User｜>TEXT`` per user message and ``<｜Assistant｜>TEXT<｜end▁of▁sentence｜>`` per answer. A call
turn is ``<｜Assistant｜>[TEXT]<｜tool▁calls▁begin｜>`` then per call
``<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\nARGUMENTS\\n```<｜tool▁call▁end｜>`` (a ``"\\n"`` between
calls), then ``<｜tool▁calls▁end｜><｜end▁of▁sentence｜>``. Tool results are
``<｜tool▁outputs▁begin｜>`` + ``<｜tool▁output▁begin｜>TEXT<｜tool▁output▁end｜>`` each, and the answer after them
opens with ``<｜tool▁outputs▁end｜>`` instead of ``<｜Assistant｜>``. Arguments are ``json.dumps`` of the object
(``ensure_ascii=False``): the template writes the string it is given.

The template writes no tool definitions. This format puts them into the system prompt (``TOOLS_PROMPT`` and the
tool list as indented JSON after the system text and a blank line); the parity test hands the template that
same system text.

Refused (``DeepSeekV3FormatError``), each where the template would write something the model never sees at
inference or cannot read back: a second assistant turn with calls (the template's ``is_first`` flag is never
reset, so it drops that turn's ``<｜Assistant｜><｜tool▁calls▁begin｜>``); tool results that do not directly follow
the call turn (they would lose ``<｜tool▁outputs▁begin｜>``); tool results followed by a user message (the template
writes no ``<｜tool▁outputs▁end｜>`` there); assistant text holding ``</think>`` (the template keeps only what
follows it); ``reasoning_content`` (V3 has no reasoning); messages without the content the template needs.
"""

from __future__ import annotations

import json
import re
from typing import ClassVar

from train.formats.base import NATIVE, ChatFormat, Segment, to_json
from train.formats.serving import Serving
from train.schema import Conversation, ToolCall

BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
USER, ASSISTANT = "<｜User｜>", "<｜Assistant｜>"
CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
OUTPUTS_BEGIN, OUTPUTS_END = "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>"
OUTPUT_BEGIN, OUTPUT_END = "<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>"
TOOLS_PROMPT = (
    "You have access to the following tools. To call one, write the tool-call block with the tool's name and its "
    "arguments as JSON in a json code block.\n\n"
)
_CALL = re.compile(
    re.escape(CALL_BEGIN)
    + r"function"
    + re.escape(SEP)
    + r"(?P<name>[^\n]*)\n```json\n(?P<args>.*?)\n```"
    + re.escape(CALL_END),
    re.DOTALL,
)


class DeepSeekV3FormatError(ValueError):
    """The conversation cannot be written in DeepSeek-V3's format. The message says why."""


class DeepSeekV3ParseError(ValueError):
    """Generated text has a malformed call block. The message says why."""


def check_deepseek_v3_conversation(conv: Conversation) -> None:
    call_turns = 0
    previous = None  # role of the previous non-system message
    for index, message in enumerate(conv.messages):
        where = f"messages[{index}]"
        if message.role in ("user", "system", "tool") and message.content is None:
            raise DeepSeekV3FormatError(f"{where}: a {message.role} message needs content")
        if message.role == "assistant":
            if message.tool_calls:
                call_turns += 1
                if call_turns > 1:
                    raise DeepSeekV3FormatError(
                        f"{where}: a second assistant turn with tool calls; DeepSeek-V3's template writes it without "
                        "<｜Assistant｜><｜tool▁calls▁begin｜> (its is_first flag is never reset)"
                    )
            elif message.content is None:
                raise DeepSeekV3FormatError(f"{where}: an assistant turn needs text or tool calls")
            if message.content and "</think>" in message.content:
                raise DeepSeekV3FormatError(
                    f"{where}: assistant text holds '</think>'; the template keeps only what follows"
                )
        if message.role == "tool" and previous not in ("tool", "assistant-calls"):
            raise DeepSeekV3FormatError(
                f"{where}: a tool result must follow the call turn or another result (DeepSeek-V3's template opens "
                "<｜tool▁outputs▁begin｜> once per conversation)"
            )
        if message.role == "user" and previous == "tool":
            raise DeepSeekV3FormatError(
                f"{where}: a user message after tool results; the template writes no <｜tool▁outputs▁end｜> there"
            )
        if message.role != "system":
            previous = "assistant-calls" if message.role == "assistant" and message.tool_calls else message.role


def system_prompt(conv: Conversation) -> str:
    """The text after BOS: the system messages joined by a blank line, then the tool definitions."""
    text = "\n\n".join(m.content or "" for m in conv.messages if m.role == "system")
    if conv.tools:
        tools = json.dumps([tool.to_dict() for tool in conv.tools], ensure_ascii=False, indent=4)
        text = (text + "\n\n" if text else "") + TOOLS_PROMPT + tools
    return text


def _call_segments(calls: list[ToolCall], index: int) -> list[Segment]:
    segments = [Segment(CALLS_BEGIN, "call_syntax", index, special=True)]
    for position, call in enumerate(calls):
        if position:
            segments.append(Segment("\n", "call_syntax", index))
        segments += [
            Segment(CALL_BEGIN, "call_syntax", index, special=True),
            Segment("function", "call_syntax", index),
            Segment(SEP, "call_syntax", index, special=True),
            Segment(call.name, "call_name", index),
            Segment("\n```json\n", "call_syntax", index),
            Segment(to_json(call.arguments), "call_args", index),
            Segment("\n```", "call_syntax", index),
            Segment(CALL_END, "call_syntax", index, special=True),
        ]
    segments.append(Segment(CALLS_END, "call_syntax", index, special=True))
    return segments


def render_deepseek_v3(conv: Conversation) -> list[Segment]:
    check_deepseek_v3_conversation(conv)
    segments = [Segment(BOS, "header", special=True)]
    prompt = system_prompt(conv)
    if prompt:
        first_system = next((i for i, m in enumerate(conv.messages) if m.role == "system"), -1)
        segments.append(Segment(prompt, "system" if first_system >= 0 else "tools", first_system))
    after_tool = False
    first_output = True
    for index, message in enumerate(conv.messages):
        if message.role == "user":
            segments += [Segment(USER, "header", index, special=True), Segment(message.content or "", "user", index)]
            after_tool = False
        elif message.role == "assistant":
            opener = OUTPUTS_END if after_tool and not message.tool_calls else ASSISTANT
            segments.append(Segment(opener, "header", index, special=True))
            if message.content:
                segments.append(Segment(message.content, "text", index))
            if message.tool_calls:
                segments += _call_segments(message.tool_calls, index)
            segments.append(Segment(EOS, "end", index, special=True))
            after_tool = False
        elif message.role == "tool":
            if first_output:
                segments.append(Segment(OUTPUTS_BEGIN, "header", index, special=True))
                first_output = False
            segments += [
                Segment(OUTPUT_BEGIN, "header", index, special=True),
                Segment(message.content or "", "tool_result", index),
                Segment(OUTPUT_END, "header", index, special=True),
            ]
            after_tool = True
    if after_tool:
        segments.append(Segment(OUTPUTS_END, "header", len(conv.messages) - 1, special=True))
    return segments


def parse_deepseek_v3(text: str) -> tuple[str | None, list[ToolCall]]:
    """Generated assistant text -> (content, calls). Never evaluates.

    Drops an opening ``<｜Assistant｜>`` / ``<｜tool▁outputs▁end｜>`` and a closing ``<｜end▁of▁sentence｜>``; the text
    before ``<｜tool▁calls▁begin｜>`` is the content, then each call block up to ``<｜tool▁calls▁end｜>``.
    """
    body = text
    for opener in (ASSISTANT, OUTPUTS_END):
        body = body.removeprefix(opener)
    body = body.removesuffix(EOS)
    if CALLS_BEGIN not in body:
        return body or None, []
    content, _, rest = body.partition(CALLS_BEGIN)
    block, ended, after = rest.partition(CALLS_END)
    if not ended or after.strip():
        raise DeepSeekV3ParseError(f"the call list must end with {CALLS_END} and nothing after it")
    calls, position = [], 0
    for match in _CALL.finditer(block):
        if block[position : match.start()] not in ("", "\n"):
            raise DeepSeekV3ParseError(f"unexpected text between calls: {block[position : match.start()][:40]!r}")
        try:
            arguments = json.loads(match.group("args"))
        except json.JSONDecodeError as err:
            raise DeepSeekV3ParseError(f"call {len(calls)}: arguments are not JSON: {err}") from err
        if not isinstance(arguments, dict):
            raise DeepSeekV3ParseError(f"call {len(calls)}: arguments must be an object")
        calls.append(ToolCall(name=match.group("name"), arguments=arguments))
        position = match.end()
    if not calls or block[position:]:
        raise DeepSeekV3ParseError("the call list holds no well-formed call block")
    return content or None, calls


class DeepSeekV3Format(ChatFormat):
    """DeepSeek-V3 (and V3-0324) chat with tools, as its official template writes it."""

    name = "deepseek_v3"
    serving: ClassVar[Serving] = Serving(
        templates=("common.jinja", "deepseek_v3.jinja"),
        variables=(),
        vllm_parser="deepseek_v3",
        sglang_parser="deepseekv3",
        exact=True,
        notes=(
            "vLLM's deepseek_v3 and SGLang's deepseekv3 parsers read each tool-call block (function, the tool "
            "separator, NAME, then the arguments in a json code block) between the tool-calls begin and end tokens, "
            "as the format writes them (read from their sources, not run here); the text before the block is the "
            "content. The control tokens must reach the parser (they are not special in DeepSeek's tokenizer)."
        ),
    )
    default_tokenizer = "deepseek_v4"  # the DeepSeek tokenizer that ships offline (docs/formats.md: V3 vs V4)

    def __init__(self, answer_style: str = NATIVE):
        self.answer_style = answer_style

    def render(self, conv: Conversation) -> list[Segment]:
        return render_deepseek_v3(conv)

    def parse(self, text: str) -> tuple[str | None, list[ToolCall]]:
        return parse_deepseek_v3(text)


__all__ = [
    "TOOLS_PROMPT",
    "DeepSeekV3Format",
    "DeepSeekV3FormatError",
    "DeepSeekV3ParseError",
    "check_deepseek_v3_conversation",
    "parse_deepseek_v3",
    "render_deepseek_v3",
    "system_prompt",
]
