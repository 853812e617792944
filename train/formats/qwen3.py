"""Qwen3's chat format, exactly as its official templates render it (trl's ``qwen3.jinja`` and
``qwen3_instruct_2507.jinja``), with ``Message.reasoning_content`` as the ``<think>`` block.

ChatML turns (``<|im_start|>{role}\\n{content}<|im_end|>\\n``) as Qwen2.5, with these differences:

* No default system prompt. With tools, the system turn is the system message's text and ``\\n\\n`` (when
  there is one), then the ``# Tools`` block; without tools, a system turn only when there is a system message.
* ``<tool_response>``/``</tool_response>`` are control tokens in Qwen3's vocabulary, as are ``<think>``
  and ``</think>``; a run of tool results is one ``user`` turn, as in Qwen2.5.
* The history rule. The *last query* is the last user message that is not a wrapped tool result (its text
  does not both start with ``<tool_response>`` and end with ``</tool_response>``). An assistant turn after it
  is written ``<think>\\n{reasoning, newlines stripped}\\n</think>\\n\\n{content, leading newlines stripped}``
  when it has reasoning or is the conversation's last message (an empty block then); every other assistant
  turn is its content alone: reasoning before the last query is dropped, exactly as the template drops it.
* A call turn's content is written less one trailing ``\\n`` (``train.formats.hermes.hermes_text``: vLLM's hermes
  parser hands it back in the content); the official templates keep it.

``mode`` picks the reference:

* ``thinking`` (default): ``qwen3.jinja``; the generation prompt is ``<|im_start|>assistant\\n`` and the
  model writes the ``<think>`` block itself, so the block is trained (part "reasoning"), empty or not.
* ``non_thinking``: ``qwen3.jinja`` with ``enable_thinking=False``; the generation prompt ends with an empty
  ``<think>\\n\\n</think>\\n\\n``, so that block is prompt (masked) and only the answer is trained. The ids
  are the template's, the same as ``thinking`` gives; reasoning is refused (this mode does not train it).
* ``instruct_2507``: ``qwen3_instruct_2507.jinja``, the non-thinking Qwen3-*-Instruct-2507 models: no
  ``<think>`` block anywhere; reasoning is refused.

Refused (ValueError, a counted reject): reasoning outside ``thinking``; in the two ``qwen3.jinja`` modes,
``<think>``/``</think>`` inside an assistant's content or reasoning (the template would re-read content
holding ``</think>`` as reasoning, and a tag inside the reasoning would end the block early).

``parse`` reads the ``<think>`` block off the front (``parse_with_reasoning`` returns it) and the calls with
the Hermes parser (``train.formats.hermes``).
"""

from __future__ import annotations

from typing import ClassVar

from train.formats.base import NATIVE, ChatFormat, Segment, message_groups, to_json
from train.formats.hermes import CALL_CLOSE, CALL_OPEN, ToolCallParseError, hermes_text, parse_hermes
from train.formats.qwen2_5 import (
    CALL_EXAMPLE,
    IM_END,
    IM_START,
    TOOLS_INTRO,
    TOOLS_OUTRO,
    control,
    turn_end,
    turn_start,
)
from train.formats.serving import HERMES_NOTES, Serving
from train.schema import Conversation, Message, ToolCall

THINK, THINK_END = "<think>", "</think>"
RESPONSE, RESPONSE_END = "<tool_response>", "</tool_response>"
THINKING, NON_THINKING, INSTRUCT_2507 = "thinking", "non_thinking", "instruct_2507"
MODES = (THINKING, NON_THINKING, INSTRUCT_2507)


def last_query_index(messages: list[Message]) -> int:
    """The template's ``ns.last_query_index``: the last user message that is not a wrapped tool result, else
    the last message. (A user message without text counts: the HF mapping gives it ``""``, a string.)"""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        text = message.content or ""
        if message.role == "user" and not (text.startswith(RESPONSE) and text.endswith(RESPONSE_END)):
            return index
    return len(messages) - 1


class Qwen3Format(ChatFormat):
    """Qwen3 (hybrid thinking) and Qwen3-Instruct-2507, with Hermes-style ``<tool_call>`` blocks."""

    name: ClassVar[str] = "qwen3"
    serving: ClassVar[Serving] = Serving(
        templates=("common.jinja", "qwen3.jinja"),
        variables=("mode",),
        vllm_parser="hermes",
        sglang_parser="qwen25",
        exact=True,
        notes=HERMES_NOTES
        + " The <think> block is read off by vLLM's qwen3 reasoning parser (--reasoning-parser qwen3; SGLang's is "
        "qwen3 too) into reasoning_content; a client that sends it back in history gets it rendered as trained.",
        reasoning_parser="qwen3",
    )
    default_tokenizer: ClassVar[str] = "qwen3"
    supports_reasoning: ClassVar[bool] = True
    rewrites_history: ClassVar[bool] = True  # <think> is dropped before the last user query: data.turns=auto expands
    OPTION_CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {**ChatFormat.OPTION_CHOICES, "mode": MODES}

    def __init__(self, mode: str = THINKING, answer_style: str = NATIVE):
        if mode not in MODES:
            raise ValueError(f"qwen3: mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        self.answer_style = answer_style

    @property
    def thinks(self) -> bool:
        """Whether the template has the ``<think>`` machinery (both qwen3.jinja modes)."""
        return self.mode != INSTRUCT_2507

    # --- rendering ---------------------------------------------------------------------------

    def render(self, conv: Conversation) -> list[Segment]:
        messages = conv.messages
        last_query = last_query_index(messages)
        has_system = bool(messages) and messages[0].role == "system"
        segments = self._system_turn(conv, has_system)
        indexed = list(enumerate(messages))[1 if has_system else 0 :]
        for group in message_groups(indexed):
            index, message = group[0]
            if message.role == "tool":
                segments += self._tool_results(group)
            elif message.role == "assistant":
                think = self.thinks and index > last_query
                last = index == len(messages) - 1
                segments += self._assistant_turn(index, message, think and (last or bool(message.reasoning_content)))
            else:
                part = "user" if message.role == "user" else "system"
                segments += [*turn_start(message.role, index), Segment(message.content or "", part, index)]
                segments += turn_end(index)
        return segments

    def check(self, conv: Conversation) -> None:
        """Reasoning only in thinking mode; no think tags in message text (run before ``render``, in every answer
        style)."""
        for index, message in enumerate(conv.messages):
            if message.role != "assistant":
                continue
            if message.reasoning_content and self.mode != THINKING:
                raise ValueError(
                    f"messages[{index}] carries reasoning_content, which qwen3 mode={self.mode} does not train; "
                    "use mode=thinking"
                )
            if not self.thinks:
                continue
            for field, text in (("content", message.content), ("reasoning_content", message.reasoning_content)):
                if text and (THINK in text or THINK_END in text):
                    raise ValueError(
                        f"messages[{index}].{field} holds {THINK!r} or {THINK_END!r}, which the qwen3 template "
                        "reads as the reasoning block's tags; put reasoning in reasoning_content, without tags"
                    )

    def _system_turn(self, conv: Conversation, has_system: bool) -> list[Segment]:
        system_text = (conv.messages[0].content or "") if has_system else None
        if not conv.tools:
            if system_text is None:
                return []
            return [*turn_start("system", 0), Segment(system_text, "system", 0), *turn_end(0)]
        segments = turn_start("system", 0 if has_system else -1)
        if system_text is not None:
            segments += [Segment(system_text, "system", 0), Segment("\n\n", "header", 0)]
        definitions = "".join("\n" + to_json(tool.to_dict()) for tool in conv.tools)
        segments += [
            Segment(TOOLS_INTRO.removeprefix("\n\n") + definitions + TOOLS_OUTRO, "tools"),
            control(CALL_OPEN, "tools"),
            control(CALL_CLOSE, "tools"),
            Segment(" XML tags:\n", "tools"),
            control(CALL_OPEN, "tools"),
            Segment(CALL_EXAMPLE, "tools"),
            control(CALL_CLOSE, "tools"),
        ]
        return [*segments, *turn_end()]

    def _assistant_turn(self, index: int, message: Message, think: bool) -> list[Segment]:
        segments = turn_start("assistant", index)
        # less the newline before a call that vLLM's hermes parser hands back in the content (hermes_text)
        content = hermes_text(message.content, bool(message.tool_calls))
        if think:
            # trained in thinking mode (the model writes the block); in non_thinking mode the generation
            # prompt ends with the (empty) block, so it is prompt
            part = "reasoning" if self.mode == THINKING else "header"
            reasoning = (message.reasoning_content or "").strip("\n")
            segments += [
                control(THINK, part, index),
                Segment("\n" + reasoning + "\n", part, index),
                control(THINK_END, part, index),
                Segment("\n\n", part, index),
                Segment(content.lstrip("\n"), "text", index),
            ]
        else:
            segments.append(Segment(content, "text", index))
        for position, call in enumerate(message.tool_calls):
            if position or content:  # the template tests the content before its newlines are stripped
                segments.append(Segment("\n", "call_syntax", index))
            segments += [
                control(CALL_OPEN, "call_syntax", index),
                Segment('\n{"name": "', "call_syntax", index),
                Segment(call.name, "call_name", index),
                Segment('", "arguments": ', "call_syntax", index),
                Segment(to_json(call.arguments), "call_args", index),
                Segment("}\n", "call_syntax", index),
                control(CALL_CLOSE, "call_syntax", index),
            ]
        return [*segments, control(IM_END, "end", index), Segment("\n", "header", index)]

    def _tool_results(self, run: list[tuple[int, Message]]) -> list[Segment]:
        segments = [control(IM_START, message=run[0][0]), Segment("user", "header", run[0][0])]
        for index, message in run:
            segments += [
                Segment("\n", "header", index),
                control(RESPONSE, message=index),
                Segment("\n", "header", index),
                Segment(message.content or "", "tool_result", index),
                Segment("\n", "header", index),
                control(RESPONSE_END, message=index),
            ]
        return [*segments, *turn_end(run[-1][0])]

    def render_prompt(self, conv: Conversation, message_index: int) -> list[Segment]:
        """The official generation prompt: ``messages[:message_index]`` rendered as a conversation of their own,
        then ``<|im_start|>assistant\n`` (and the empty ``<think>`` block in non_thinking mode).

        Not the prefix of the whole conversation's rendering where the turn before is an assistant turn: the
        template writes that turn, then the last message, with an empty ``<think>`` block (history rewriting)."""
        super().render_prompt(conv, message_index)  # the checks: an assistant turn, a conversation we can render
        prefix = Conversation(conv.id, conv.messages[:message_index], tools=conv.tools, meta=conv.meta)
        segments = [*self.render(prefix), *turn_start("assistant", message_index)]
        if self.mode == NON_THINKING:
            block = [control(THINK), Segment("\n\n", "header"), control(THINK_END), Segment("\n\n", "header")]
            segments += [Segment(s.text, s.part, message_index, s.special) for s in block]
        return segments

    # --- parsing -----------------------------------------------------------------------------

    def parse(self, text: str) -> tuple[str | None, list[ToolCall]]:
        """Generated assistant text -> (content, calls); the ``<think>`` block is read off and set aside."""
        return parse_hermes(self.split_reasoning_block(text)[1], IM_END)

    def parse_with_reasoning(self, text: str) -> tuple[str | None, str | None, list[ToolCall]]:
        """Generated assistant text -> (reasoning, content, calls): the ``<think>`` block's text
        (``split_reasoning_block``), then what ``parse`` reads from the answer in the format's answer style."""
        reasoning, _ = self.split_reasoning_block(text)
        content, calls = self.parse(text)
        return reasoning, content, calls

    def split_reasoning_block(self, text: str) -> tuple[str | None, str]:
        """(reasoning, answer): the reasoning is what a leading ``<think>`` block holds (newlines around it
        stripped; None when empty or absent). In non_thinking mode the block was prompt, so the text starts at the
        answer; a completion that opens ``<think>`` and never closes it ran out while reasoning:
        ``ToolCallParseError``."""
        reasoning, answer = None, text
        if self.thinks and THINK_END in text:
            before, _, answer = text.partition(THINK_END)
            head = before.lstrip()
            if head.startswith(THINK):
                head = head[len(THINK) :]
            elif head.strip():
                raise ToolCallParseError(f"text before {THINK!r}: {before[:40]!r}")
            reasoning = head.strip("\n") or None
            answer = answer.lstrip("\n")
        elif self.thinks and text.lstrip().startswith(THINK):
            raise ToolCallParseError(f"the reasoning block is never closed with {THINK_END!r}")
        return reasoning, answer


__all__ = ["MODES", "Qwen3Format", "last_query_index"]
