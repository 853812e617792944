"""Mistral's v7 instruct format with tools (Mistral Large 2411, Mistral Small 2501 / 24B).

The reference is mistral-common's ``InstructTokenizerV7`` behind
``MistralTokenizer.from_file(..., mode=ValidationMode.finetuning).encode_chat_completion``. It keeps
v3's ``[INST]``, ``[AVAILABLE_TOOLS]`` and ``[TOOL_CALLS]`` list, and changes three things (1.13.1):

* A system message is written where it stands, ``[SYSTEM_PROMPT]TEXT[/SYSTEM_PROMPT]``, one per
  message (v3 merged them into the last user turn). A conversation may open with one; one that opens
  with an assistant turn gets no empty user turn (v7's normalizer: ``_system_prompt_in_begin``).
* An assistant turn may carry text and calls: ``TEXT[TOOL_CALLS][{...}]</s>`` (text right-stripped of
  spaces, as in v3). Consecutive assistant messages still merge (text joined by ``"\\n\\n"``).
* A tool result is ``[TOOL_RESULTS]CALL_ID[TOOL_CONTENT]TEXT[/TOOL_RESULTS]``: the result text as it
  is (no JSON re-writing), one block per result.

Call ids are handled as in v3 (``with_mistral_call_ids``), and so is everything the v3 finetuning
validator refuses, except the one rule v7 drops (text and calls in one turn). Vocabularies: the
SentencePiece v7 model mistral-common ships (``mistral_v7`` tokenizer, Mistral Large 2411), or a tekken
v7 ``tekken.json`` the user points ``model.tokenizer=`` at (Mistral Small 2501; no such file ships with
mistral-common 1.13.1). Both name the control tokens by the same strings.

No reasoning: a turn with ``reasoning_content`` is refused (``MistralFormatError``); v7 has no slot for
it, and dropping it would train on a turn the data did not hold.
"""

from __future__ import annotations

from typing import ClassVar

from train.formats.base import Segment, to_json
from train.formats.mistral import (
    BOS,
    END_INST,
    END_RESULTS,
    END_TOOLS,
    EOS,
    INST,
    JOIN,
    RESULTS,
    TOOL_CALLS,
    TOOLS,
    MistralV3Format,
    Turn,
    _joined,
    _rstrip_spaces,
    call_segments,
    check_mistral_conversation,
    parse_mistral,
    with_mistral_call_ids,
)
from train.formats.serving import MISTRAL_NOTES, Serving
from train.schema import Conversation, ToolCall

SYSTEM, END_SYSTEM = "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]"
TOOL_CONTENT = "[TOOL_CONTENT]"


def check_v7_conversation(conv: Conversation) -> None:
    """Raise ``MistralFormatError`` for what mistral-common's v7 finetuning path refuses: v3's rules but text and
    calls in one turn. (Reasoning, which v7 cannot write, is refused before every render: ``ChatFormat``.)"""
    check_mistral_conversation(conv, allow_text_and_calls=True)


def v7_turns(conv: Conversation) -> list[Turn]:
    """Turns as ``InstructRequestNormalizerV7`` builds them: system messages stay, one turn each;
    consecutive user (or assistant) messages merge; tool results stay one per message."""
    turns: list[Turn] = []
    previous_role = None
    for index, message in enumerate(conv.messages):
        role = message.role
        if role == previous_role and role in ("user", "assistant"):
            turn = turns[-1]
        else:
            turn = Turn(role=role, message=index)
            turns.append(turn)
        if message.content:
            turn.texts.append((message.content, index))
        turn.calls.extend((call, index) for call in message.tool_calls)
        previous_role = role
    return turns


def render_mistral_v7(conv: Conversation) -> list[Segment]:
    """Conversation -> segments in mistral-common's v7 layout (see the module docstring)."""
    check_v7_conversation(conv)
    conv = with_mistral_call_ids(conv)
    turns = v7_turns(conv)
    last_user = max((i for i, turn in enumerate(turns) if turn.role == "user"), default=None)
    segments = [Segment(BOS, "header", special=True)]
    for position, turn in enumerate(turns):
        if turn.role == "system":
            segments.append(Segment(SYSTEM, "header", turn.message, special=True))
            segments += [Segment(text, "system", index) for text, index in turn.texts]
            segments.append(Segment(END_SYSTEM, "header", turn.message, special=True))
        elif turn.role == "user":
            if position == last_user and conv.tools:
                segments += [
                    Segment(TOOLS, "header", special=True),
                    Segment(to_json([tool.to_dict() for tool in conv.tools]), "tools"),
                    Segment(END_TOOLS, "header", special=True),
                ]
            segments.append(Segment(INST, "header", turn.message, special=True))
            segments += _joined(turn.texts, "user")
            segments.append(Segment(END_INST, "header", turn.message, special=True))
        elif turn.role == "assistant":
            segments += _rstrip_spaces(_joined(turn.texts, "text"))
            if turn.calls:
                segments.append(Segment(TOOL_CALLS, "call_syntax", turn.calls[0][1], special=True))
                segments += call_segments(turn.calls)
            end_index = max(index for _, index in turn.texts + turn.calls)
            segments.append(Segment(EOS, "end", end_index, special=True))
        else:
            message = conv.messages[turn.message]
            segments += [
                Segment(RESULTS, "header", turn.message, special=True),
                Segment(message.tool_call_id or "", "header", turn.message),
                Segment(TOOL_CONTENT, "header", turn.message, special=True),
            ]
            if message.content:
                segments.append(Segment(message.content, "tool_result", turn.message))
            segments.append(Segment(END_RESULTS, "header", turn.message, special=True))
    return segments


def parse_mistral_v7(text: str) -> tuple[str | None, list[ToolCall]]:
    """Generated assistant text -> (content, calls): v3's parser, which already keeps the text before
    ``[TOOL_CALLS]`` as content (v7 writes both in one turn)."""
    return parse_mistral(text)


class MistralV7Format(MistralV3Format):
    """Mistral v7 (SentencePiece v7 by default; a tekken v7 ``tekken.json`` through ``model.tokenizer``): v3's
    class with v7's layout and parser."""

    name = "mistral_v7"
    serving: ClassVar[Serving] = Serving(
        templates=("common.jinja", "mistral_v7.jinja"),
        variables=(),
        vllm_parser="mistral",
        sglang_parser="mistral",
        exact=True,
        notes=MISTRAL_NOTES
        + " v7 turns may hold text before [TOOL_CALLS]; vLLM's mistral parser returns it as the content.",
    )
    default_tokenizer = "mistral_v7"
    render_native = staticmethod(render_mistral_v7)
    parse_native = staticmethod(parse_mistral_v7)


__all__ = [
    "END_SYSTEM",
    "JOIN",
    "SYSTEM",
    "TOOL_CONTENT",
    "MistralV7Format",
    "check_v7_conversation",
    "parse_mistral_v7",
    "render_mistral_v7",
    "v7_turns",
]
