"""ToolSelect's plain-completion layout (ToolVerifier, seed 003, §2.1, Figure 2) for a base model trained on raw text.

Registered as the chat format ``toolselect_text`` (``train.formats.FORMATS``); its chat template is
``toolselect_text.jinja`` beside this module.

Llama-2-70B, the paper's selector, is a base model: no chat template, no role tokens. A sample is the text of a
ToolSelect row (``train.csv``), byte for byte::

    User: <instruction>
    ###
    Tool Choices: <name> = <description>
    <name> = <description>
    ###
    Thought: <reasoning note>
    Act: CALLTOOL["<name>"]

with the tokenizer's BOS in front (``bos_token``, ``<s>`` for Llama-2; ``""`` for none) and its EOS after the Act
(``eos_token``, ``</s>`` for Llama-2). Between the lines: exactly one newline, no trailing newline; the candidates in
the conversation's tool order (the builder shuffles them); the Act quotes the name with double quotes, as the
dataset does (Figure 2's bare ``CALLTOOL[CarFinder()]`` is the illustration, not the data).

The mask (§2.1.2): "the user instruction and tool list in each sample have masked labels". The trained span is
``Thought: …\\nAct: CALLTOOL["<name>"]`` and the EOS. The EOS is our decision, not the paper's words: a base model
learns where a sample ends only from a trained end-of-text token; without it the tuned model runs on past the Act
into a new ``User:`` block, and the selector's one answer is the first Act (the usual practice when tuning a base
model on completions, e.g. Alpaca's and trl's). Everything before ``Thought:`` (BOS, instruction, tool list, the
``###`` separators) is masked: the format marks it header/user/tools and ``train.formats.base`` masks those.

Only what the layout can hold renders: one user message then one assistant message (the Thought as its content, at
most one call, with no arguments); tools without a newline in their name or description, no ``"`` in a called name.
Anything else is a ``ValueError`` naming why (a conversation is never silently cut to fit).

``parse`` reads a generation back with the dataset's own grammar (``train.sources.toolselect``): the Thought and
the first ``Act: CALLTOOL["<name>"]`` line (what follows it, e.g. a base model running on, is ignored), the call
with ``{}`` arguments. Text that is not in that layout comes back as content with no call, so the ToolSelect scorer
(``train.evaluation.toolselect``) applies its lenient reading (single quotes, ``CALLTOOL[Name()]``) to it.
"""

from __future__ import annotations

import re
from typing import ClassVar

from train.formats.base import ChatFormat, Segment
from train.formats.serving import Serving
from train.schema import Conversation, ToolCall
from train.sources.toolselect import parse_text as parse_row_text

USER, SECTION, CHOICES = "User: ", "\n###\n", "Tool Choices: "
THOUGHT, ACT_OPEN, ACT_CLOSE = "Thought: ", '\nAct: CALLTOOL["', '"]'
# The first Act line ends the answer: cut there so a model that runs on still parses.
_FIRST_ACT = re.compile(r'\nAct: CALLTOOL\["[^"\n]*"\]')


class ToolSelectTextFormat(ChatFormat):
    name = "toolselect_text"
    any_tokenizer: ClassVar[bool] = True  # plain text: written with whatever tokenizer the model folder brings
    # No vLLM / SGLang parser reads CALLTOOL["<name>"]: the selector is served without one (an empty parser name)
    # and its completion read by tooltrain's own parse (this class's).
    serving: ClassVar[Serving] = Serving(
        templates=("common.jinja", "train.papers.toolverifier:toolselect_text.jinja"),
        variables=(),
        vllm_parser="",
        sglang_parser="",
        exact=False,
        notes=(
            "No server parser reads this format: the answer is plain text, 'Thought: ...' then "
            "'Act: CALLTOOL[\"<name>\"]', never an OpenAI tool call, so the server runs without a tool-call "
            "parser and the client reads the Act with tooltrain's parse "
            "(train.formats.get_format('toolselect_text').parse) on the completion text. The template renders "
            "only what the layout holds (one user message, the candidates as tools, one answer with at most one "
            "call without arguments) and raises on anything else with the format's reason."
        ),
        pinned=("bos_token", "eos_token"),
    )
    default_tokenizer = "meta-llama/Llama-2-70b-hf"  # the paper's base model (hub access or a local copy)

    def __init__(self, bos_token: str = "<s>", eos_token: str = "</s>"):
        self.bos_token, self.eos_token = bos_token, eos_token

    def render(self, conv: Conversation) -> list[Segment]:
        messages = conv.messages
        if [m.role for m in messages] != ["user", "assistant"]:
            roles = ", ".join(m.role for m in messages) or "none"
            raise ValueError(f"{self.name}: expected one user then one assistant message, got {roles}")
        if not conv.tools:
            raise ValueError(f"{self.name}: no tool choices (the conversation has no tools)")
        lines = []
        for tool in conv.tools:
            if "\n" in tool.name + tool.description or " = " in tool.name:
                raise ValueError(f"{self.name}: tool {tool.name!r} cannot be one 'name = description' line")
            lines.append(f"{tool.name} = {tool.description}")
        user, answer = messages
        segments = [Segment(self.bos_token, "header", -1, special=True)] if self.bos_token else []
        segments += [
            Segment(USER, "header", 0),
            Segment(user.content or "", "user", 0),
            Segment(SECTION + CHOICES, "header", -1),
            Segment("\n".join(lines), "tools", -1),
            Segment(SECTION, "header", -1),
            Segment(THOUGHT, "call_syntax", 1),
            Segment(answer.content or "", "text", 1),
        ]
        if len(answer.tool_calls) > 1:
            raise ValueError(f"{self.name}: message 1 has {len(answer.tool_calls)} calls; the layout has one Act")
        for call in answer.tool_calls:
            if call.arguments:
                raise ValueError(f"{self.name}: the call to {call.name!r} has arguments; CALLTOOL takes none")
            if '"' in call.name or "\n" in call.name:
                raise ValueError(f'{self.name}: tool name {call.name!r} cannot be quoted in CALLTOOL["..."]')
            segments += [
                Segment(ACT_OPEN, "call_syntax", 1),
                Segment(call.name, "call_name", 1),
                Segment(ACT_CLOSE, "call_syntax", 1),
            ]
        if self.eos_token:
            segments.append(Segment(self.eos_token, "end", 1, special=True))
        return segments

    def end_of_turn_texts(self) -> tuple[str, ...]:
        """The EOS ends a sample (generation stops there); none when the format writes none."""
        return (self.eos_token,) if self.eos_token else ()

    def parse(self, text: str) -> tuple[str | None, list[ToolCall]]:
        """Generated text (after ``###\\n``) -> (Thought, [the Act's call]); (text, []) when not in the layout."""
        answer = text.split(self.eos_token, 1)[0] if self.eos_token else text
        first = _FIRST_ACT.search(answer)
        if first is None:
            return answer, []
        try:  # the dataset's grammar, on a stand-in row around the answer
            _, _, thought, name = parse_row_text(f"{USER}-{SECTION}{CHOICES}- = -{SECTION}{answer[: first.end()]}")
        except ValueError:
            return answer, []
        return thought, [ToolCall(name=name, arguments={}, id="call_0")]


__all__ = ["ToolSelectTextFormat"]
