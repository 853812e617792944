"""DeepSeek-Coder Instruct's chat format, exactly as its official chat template renders it.

The template is the ``chat_template`` of ``deepseek-ai/deepseek-coder-1.3b-instruct``'s (and 6.7b's)
``tokenizer_config.json``, rendered the way transformers renders chat templates (``trim_blocks``,
``lstrip_blocks``); ``tests/formats/test_deepseek_coder.py`` keeps a copy and checks this format against it:

* ``<｜begin▁of▁sentence｜>`` (BOS), then, when the conversation has *no* system message anywhere, the default
  system prompt ``DEFAULT_SYSTEM`` (it ends with a newline and has no final full stop, as in the template);
* a system message is its content alone, written where it stands, with nothing after it: the next
  ``### Instruction:`` follows it on the same line unless the content ends with a newline (the template's
  own layout, kept for parity; a system prompt written for this format should end with ``\\n``);
* a user turn is ``### Instruction:\\n{content}\\n``; an assistant turn is ``### Response:\\n{content}\\n<|EOT|>\\n``;
  the generation prompt is ``### Response:\\n``.

Loss mask: the assistant's content, the ``\\n`` before ``<|EOT|>`` and ``<|EOT|>`` itself train (the model
must learn to end its turn); the ``### Response:\\n`` header, the newline after ``<|EOT|>``, BOS, system and
user text are masked. ``<|EOT|>`` is the end-of-turn token of both instruct models a recipe tunes:
deepseek-coder-1.3b-instruct (id 32021, its ``eos_token``) and deepseek-coder-7b-instruct-v1.5 (id 100015, the
``eos_token_id`` of its ``generation_config.json``); the ids come from the tokenizer, so one format serves both.

Tools: DeepSeek-Coder has no tool-call syntax and no tool-result turn (its template writes every non-user,
non-system message as a ``### Response:``). Rather than invent one the model never saw, the native style
refuses a conversation with tools, tool calls or tool results (``ValueError`` naming the message and the way
out); ``answer_style=toolgt_text`` puts the tools into the system prompt and the calls into the answer text
(``train.formats.text_answers``), and a recipe whose data already is text (the APIs in the system
prompt, a JSON answer) renders as is. ``parse`` therefore reads text only: the answer up to ``<|EOT|>``.

Text is encoded with no added token matched (``train.formats.tokenize``): a user who types ``<|EOT|>`` gets
characters, not the end of a turn.
"""

from __future__ import annotations

from typing import ClassVar

from train.formats.base import NATIVE, ChatFormat, Segment
from train.formats.serving import Serving
from train.schema import Conversation, ToolCall

BOS = "<｜begin▁of▁sentence｜>"
EOT = "<|EOT|>"
DEFAULT_SYSTEM = (
    "You are an AI programming assistant, utilizing the Deepseek Coder model, developed by Deepseek Company, "
    "and you only answer questions related to computer science. For politically sensitive questions, security "
    "and privacy issues, and other non-computer science questions, you will refuse to answer\n"
)
INSTRUCTION, RESPONSE = "### Instruction:\n", "### Response:\n"
_WAY_OUT = "use answer_style=toolgt_text (tools in the system prompt, calls as answer text)"


class DeepSeekCoderFormat(ChatFormat):
    """DeepSeek-Coder Instruct (1.3b/6.7b/33b-instruct, 7b-instruct-v1.5): ``### Instruction:`` / ``### Response:``."""

    name: ClassVar[str] = "deepseek_coder"
    serving: ClassVar[Serving] = Serving(
        templates=("common.jinja", "deepseek_coder.jinja"),
        variables=(),
        vllm_parser="",  # no tool syntax, so no tool-call parser: served as plain chat
        sglang_parser="",
        exact=True,
        notes=(
            "No tool syntax: the template refuses tools, tool calls and tool results as the format does, and the "
            "servers run without a tool-call parser. A model tuned on text answers (answer_style=toolgt_text, or a "
            "recipe whose data is text) answers in its message content; read it with the recipe's own parser."
        ),
    )
    default_tokenizer: ClassVar[str] = "deepseek-ai/deepseek-coder-1.3b-instruct"

    def __init__(self, answer_style: str = NATIVE):
        self.answer_style = answer_style

    def render(self, conv: Conversation) -> list[Segment]:
        refusal = self.refusal(conv)
        if refusal:
            raise ValueError(refusal)
        segments = [Segment(BOS, "header", -1, special=True)]
        if not any(m.role == "system" for m in conv.messages):
            segments.append(Segment(DEFAULT_SYSTEM, "system", -1))
        for index, message in enumerate(conv.messages):
            content = message.content or ""
            if message.role == "system":
                segments.append(Segment(content, "system", index))
            elif message.role == "user":
                segments += [
                    Segment(INSTRUCTION, "header", index),
                    Segment(content, "user", index),
                    Segment("\n", "header", index),
                ]
            else:  # assistant (refusal() let no other role through)
                segments += [
                    Segment(RESPONSE, "header", index),
                    Segment(content, "text", index),
                    Segment("\n", "end", index),  # the model writes it before <|EOT|>: trained with it
                    Segment(EOT, "end", index, special=True),
                    Segment("\n", "header", index),
                ]
        return segments

    def refusal(self, conv: Conversation) -> str | None:
        """Why the native style cannot render ``conv`` (the first reason, in conversation order), or None."""
        if conv.tools:
            return f"{self.name}: the conversation has tools and DeepSeek-Coder has no tool syntax; {_WAY_OUT}"
        for index, message in enumerate(conv.messages):
            if message.role == "tool":
                return f"{self.name}: messages[{index}] is a tool result and DeepSeek-Coder has no tool turn"
            if message.role == "assistant" and message.tool_calls:
                return (
                    f"{self.name}: messages[{index}] has tool calls and DeepSeek-Coder has no tool syntax; {_WAY_OUT}"
                )
            if message.role not in ("system", "user", "assistant"):
                return f"{self.name}: messages[{index}] has role {message.role!r}; it knows system, user, assistant"
        return None

    def end_of_turn_texts(self) -> tuple[str, ...]:
        return (EOT,)  # the base class probes with a tool call, which this format refuses

    def parse(self, text: str) -> tuple[str | None, list[ToolCall]]:
        """Generated text -> (the answer up to ``<|EOT|>`` without the newline before it, no calls)."""
        answer = text.split(EOT, 1)[0]
        return answer.removesuffix("\n"), []


__all__ = ["BOS", "DEFAULT_SYSTEM", "EOT", "DeepSeekCoderFormat"]
