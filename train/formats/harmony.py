"""gpt-oss's Harmony format, exactly as openai-harmony's renderer writes it (``HARMONY_GPT_OSS``).

Every message is ``<|start|>{header}<|message|>{content}<|end|>``; a header names the author, optionally a
recipient (`` to=...``), a channel (``<|channel|>analysis|commentary|final``) and a content type.

* **system**: the fixed Harmony system message: model identity, ``Knowledge cutoff``, ``Current date``
  (left out when ``current_date`` is empty, as openai-harmony's ``SystemContent.new()`` does; gpt-oss's
  Jinja template writes today's date, which no training set should), ``Reasoning: {effort}``, the valid
  channels, and with tools the line that sends function calls to the commentary channel. Options:
  ``model_identity``, ``reasoning_effort`` (low / medium / high), ``knowledge_cutoff``, ``current_date``.
* **developer**: the conversation's system message as ``# Instructions``, then the tools as a
  ``namespace functions`` of TypeScript-like types (``train.formats.harmony_tools``); left out when there
  is neither.
* **assistant**: ``reasoning_content`` on the ``analysis`` channel; text with tool calls on ``commentary``
  (a preamble, as vLLM maps it); each call its own message ``assistant to=functions.NAME<|channel|>commentary
  <|constrain|>json<|message|>{args}<|call|>`` (the renderer puts the recipient in the header before the
  channel; gpt-oss itself often writes it after the channel: ``parse`` reads both); a text answer on
  ``final``, ending ``<|return|>`` when it is the conversation's last message, ``<|end|>`` in history.
* **tool results**: ``functions.NAME to=assistant<|channel|>commentary<|message|>{content}<|end|>``, the
  name from the result's ``name`` or the call its ``tool_call_id`` answers.

**Parallel calls.** Harmony has one call per message and gpt-oss stops at each ``<|call|>``. A canonical
turn with several calls renders as consecutive call messages, then the results in their order: what vLLM
(``parse_chat_input_to_harmony_message``) and openai-harmony render for such a history. The second call's
``<|start|>assistant`` follows a ``<|call|>``, which the serving engine writes, so it is a header (masked).

**History rule.** A model writing assistant message ``t`` sees earlier reasoning only after the last final
answer before ``t`` (vLLM's ``auto_drop_analysis_messages``: the analysis of everything up to that answer is
dropped). ``render`` applies this with ``t`` the conversation's last assistant message, so the last turn is
trained in the context inference shows it. openai-harmony's own ``auto_drop_analysis`` differs (it drops
analysis before the *first* final message, and only when the conversation ends in one, so it also drops the
trained turn's own reasoning); docs/formats.md says more.

**Masks.** Everything the model writes after the prompt's ``<|start|>assistant`` is trained, including the
``<|start|>assistant`` of a message that follows its own ``<|end|>`` (a final answer after its analysis). A
final answer in history ends ``<|end|>`` there, a token the model never writes (it writes ``<|return|>``),
so that token is masked.

``parse`` reads a completion (the text after the prompt's ``<|start|>assistant``) into (content, calls); the
reasoning of the analysis channel is not content. Refusals (``ValueError``): a system message after the
first message, a tool name that cannot be a recipient (empty after strip, or holding whitespace or ``<|``),
a tool result whose tool cannot be told, and an assistant turn with reasoning but neither answer nor call.
"""

from __future__ import annotations

import json
import re
from typing import ClassVar

from train.formats.base import NATIVE, ChatFormat, Segment, to_json
from train.formats.harmony_tools import functions_namespace
from train.formats.serving import Serving
from train.schema import Conversation, Message, ToolCall

START, END, MESSAGE, CHANNEL = "<|start|>", "<|end|>", "<|message|>", "<|channel|>"
RETURN, CALL, CONSTRAIN = "<|return|>", "<|call|>", "<|constrain|>"
DEFAULT_IDENTITY = "You are ChatGPT, a large language model trained by OpenAI."
REASONING_EFFORTS = ("low", "medium", "high")
CHANNELS_LINE = "# Valid channels: analysis, commentary, final. Channel must be included for every message."
FUNCTIONS_LINE = "\nCalls to these tools must go to the commentary channel: 'functions'."


def control(token: str, part: str = "header", message: int = -1) -> Segment:
    return Segment(token, part, message, special=True)


def check_recipient_name(name: str) -> None:
    if not name.strip() or re.search(r"\s|<\|", name):
        raise ValueError(f"harmony: tool name {name!r} cannot be a recipient (to=functions.NAME ends at a space)")


def kept_reasoning(messages: list[Message]) -> set[int]:
    """Indices of the assistant messages whose reasoning is rendered (the module's history rule)."""
    assistants = [i for i, m in enumerate(messages) if m.role == "assistant"]
    if not assistants:
        return set()
    target = assistants[-1]
    finals = [i for i in assistants if i < target and not messages[i].tool_calls]
    cut = finals[-1] if finals else -1
    return {i for i in assistants if i > cut and messages[i].reasoning_content is not None}


class HarmonyFormat(ChatFormat):
    """gpt-oss's Harmony format with analysis / commentary / final channels."""

    name: ClassVar[str] = "harmony"
    serving: ClassVar[Serving] = Serving(
        templates=("common.jinja", "harmony.jinja"),
        variables=("model_identity", "reasoning_effort", "knowledge_cutoff", "current_date"),
        vllm_parser="openai",
        sglang_parser="gpt-oss",
        exact=True,
        notes=(
            "vLLM's openai tool parser and openai_gptoss reasoning parser read Harmony's channels: analysis is the "
            "reasoning, each to=functions.NAME message on commentary a call, final the content (names taken from "
            "vLLM's sources; vLLM was not run here). vLLM serves gpt-oss through openai-harmony's own renderer, "
            "whose history rule differs from this template's (docs/formats.md, harmony); SGLang's parser is "
            "gpt-oss. Exact: tooltrain's own parse (train.formats.get_format('harmony').parse) on the raw completion."
        ),
        reasoning_parser="openai_gptoss",
    )
    default_tokenizer: ClassVar[str] = "o200k_harmony"
    supports_reasoning: ClassVar[bool] = True  # the analysis channel
    rewrites_history: ClassVar[bool] = True  # earlier analysis is dropped, a final in history ends <|end|>
    OPTION_CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {
        **ChatFormat.OPTION_CHOICES,
        "reasoning_effort": REASONING_EFFORTS,
    }

    def __init__(
        self,
        model_identity: str = DEFAULT_IDENTITY,
        reasoning_effort: str = "medium",
        knowledge_cutoff: str = "2024-06",
        current_date: str = "",
        answer_style: str = NATIVE,
    ):
        self.model_identity = model_identity
        self.reasoning_effort = reasoning_effort
        self.knowledge_cutoff = knowledge_cutoff
        self.current_date = current_date
        self.answer_style = answer_style

    # --- rendering ---------------------------------------------------------------------------

    def render(self, conv: Conversation) -> list[Segment]:
        messages = conv.messages
        for tool in conv.tools:
            check_recipient_name(tool.name)
        segments = self._system_message(bool(conv.tools))
        has_system = bool(messages) and messages[0].role == "system"
        if has_system or conv.tools:
            segments += self._developer_message(conv, has_system)
        keep = kept_reasoning(messages)
        last = len(messages) - 1
        call_names: dict[str, str] = {}
        pending: list[str] = []  # names of calls not yet answered, in order
        for index, message in enumerate(messages):
            if message.role == "system":
                if index:
                    raise ValueError(f"harmony: messages[{index}] is a system message after the first message")
            elif message.role == "user":
                segments += self._plain("user", message.content or "", "user", index)
            elif message.role == "assistant":
                for call in message.tool_calls:
                    check_recipient_name(call.name)
                    if call.id is not None:
                        call_names[call.id] = call.name
                pending = [call.name for call in message.tool_calls]
                segments += self._assistant_turn(index, message, index in keep, index == last)
            else:
                name = message.name or call_names.get(message.tool_call_id or "") or (pending[0] if pending else None)
                if name is None:
                    raise ValueError(f"harmony: messages[{index}] is a tool result whose tool cannot be told")
                if name in pending:
                    pending.remove(name)
                check_recipient_name(name)
                segments += self._plain(f"functions.{name} to=assistant", message.content or "", "tool_result", index)
        return segments

    def _plain(self, header: str, text: str, part: str, index: int, channel: str = "commentary") -> list[Segment]:
        segments = [control(START, message=index), Segment(header, "header", index)]
        if part == "tool_result":
            segments += [control(CHANNEL, message=index), Segment(channel, "header", index)]
        return [*segments, control(MESSAGE, message=index), Segment(text, part, index), control(END, message=index)]

    def _system_message(self, has_tools: bool) -> list[Segment]:
        top = [self.model_identity, f"Knowledge cutoff: {self.knowledge_cutoff}"]
        if self.current_date:
            top.append(f"Current date: {self.current_date}")
        text = "\n".join(top) + f"\n\nReasoning: {self.reasoning_effort}\n\n" + CHANNELS_LINE
        text += FUNCTIONS_LINE if has_tools else ""
        return [control(START), Segment("system", "header"), control(MESSAGE), Segment(text, "system"), control(END)]

    def _developer_message(self, conv: Conversation, has_system: bool) -> list[Segment]:
        segments = [control(START), Segment("developer", "header"), control(MESSAGE)]
        if has_system:
            segments.append(Segment("# Instructions\n\n" + (conv.messages[0].content or ""), "system", 0))
        if conv.tools:
            segments.append(Segment(("\n\n" if has_system else "") + functions_namespace(conv.tools), "tools"))
        return [*segments, control(END)]

    def _assistant_turn(self, index: int, message: Message, keep_reasoning: bool, last: bool) -> list[Segment]:
        # The prompt ends "<|start|>assistant": the first message's start is the prompt's; a later one's start
        # is trained after the model's own <|end|>, masked after <|call|> (the engine answers, then re-prompts).
        segments: list[Segment] = []
        follows: str | None = None  # the end token of the previous message of this turn

        def open_message() -> None:
            part = "text" if follows == END else "header"
            segments.extend([control(START, part, index), Segment("assistant", part, index)])

        if message.reasoning_content is not None and keep_reasoning:
            open_message()
            segments += self._channel_body("analysis", message.reasoning_content, index)
            follows = END
        if message.tool_calls:
            if message.content:
                open_message()
                segments += self._channel_body("commentary", message.content, index)
                follows = END
            for call in message.tool_calls:
                open_message()
                segments += [
                    Segment(" to=functions.", "call_syntax", index),
                    Segment(call.name, "call_name", index),
                    control(CHANNEL, "call_syntax", index),
                    Segment("commentary ", "call_syntax", index),
                    control(CONSTRAIN, "call_syntax", index),
                    Segment("json", "call_syntax", index),
                    control(MESSAGE, "call_syntax", index),
                    Segment(to_json(call.arguments), "call_args", index),
                    control(CALL, "end", index),
                ]
                follows = CALL
            return segments
        if message.reasoning_content is not None and message.content is None:
            raise ValueError(f"harmony: messages[{index}] has reasoning but neither an answer nor a call")
        open_message()
        segments += self._channel_body("final", message.content or "", index, RETURN if last else None)
        return segments

    @staticmethod
    def _channel_body(channel: str, text: str, index: int, end: str | None = END) -> list[Segment]:
        # a final answer in history ends <|end|>, which the model never writes (it writes <|return|>): masked
        end_segment = (
            control(END, "header", index) if end is None else control(end, "end" if end != END else "text", index)
        )
        return [
            control(CHANNEL, "text", index),
            Segment(channel, "text", index),
            control(MESSAGE, "text", index),
            Segment(text, "text", index),
            end_segment,
        ]

    # --- parsing -----------------------------------------------------------------------------

    def parse(self, text: str) -> tuple[str | None, list[ToolCall]]:
        return parse_harmony(text)

    def reasoning_of(self, text: str) -> str | None:
        """The bodies of the completion's analysis messages (the reasoning the analysis channel carries)."""
        bodies = [m.group("body") for m in _MESSAGE.finditer(text) if _channel_of(m.group("header")) == "analysis"]
        return "".join(bodies) or None


_MESSAGE = re.compile(
    r"(?:<\|start\|>)?(?P<header>.*?)<\|message\|>(?P<body>.*?)(?P<end><\|end\|>|<\|call\|>|<\|return\|>|$)", re.DOTALL
)
_RECIPIENT = re.compile(r"\bto=(?P<to>[^\s<]+)")
_CHANNEL = re.compile(r"<\|channel\|>(?P<channel>\w+)")


def _channel_of(header: str) -> str | None:
    channel = _CHANNEL.search(header)
    return channel.group("channel") if channel else None


def parse_harmony(text: str) -> tuple[str | None, list[ToolCall]]:
    """A completion (after ``<|start|>assistant``) -> (final or preamble text, calls); ValueError when a call's
    arguments are not a JSON object or a message names a recipient outside ``functions``."""
    content_parts: list[str] = []
    calls: list[ToolCall] = []
    position = 0
    while position < len(text):
        match = _MESSAGE.match(text, position)
        if match is None or match.end() == position:
            raise ValueError(f"harmony: no <|message|> in {text[position : position + 60]!r}")
        header, body = match.group("header"), match.group("body")
        position = match.end()
        recipient = _RECIPIENT.search(header)
        channel = _CHANNEL.search(header)
        channel_name = channel.group("channel") if channel else None
        if recipient:
            target = recipient.group("to")
            if not target.startswith("functions."):
                raise ValueError(f"harmony: call {len(calls) + 1}: recipient {target!r} is not a function")
            try:
                arguments = json.loads(body)
            except json.JSONDecodeError as err:
                raise ValueError(f"harmony: call {len(calls) + 1}: invalid JSON arguments: {err}") from None
            if not isinstance(arguments, dict):
                raise ValueError(f"harmony: call {len(calls) + 1}: arguments must be a JSON object")
            calls.append(ToolCall(name=target[len("functions.") :], arguments=arguments))
        elif channel_name in ("final", "commentary"):
            content_parts.append(body)
        if not match.group("end"):
            break
    content = "".join(content_parts)
    return (content if content.strip() else None), calls


__all__ = ["HarmonyFormat", "kept_reasoning", "parse_harmony"]
