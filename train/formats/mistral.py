"""Mistral's instruct format with tools: Mistral 7B v0.3 (SentencePiece) and Mistral Nemo (tekken).

The reference is mistral-common's ``InstructTokenizerV3`` behind
``MistralTokenizer.from_file(..., mode=ValidationMode.finetuning).encode_chat_completion``; both
vocabularies use it, so the two formats differ only in their tokenizer. What it does (1.13.1):

* Normalizing: every system message's text (non-empty ones, joined by ``"\\n\\n"``) becomes one
  system prompt, written at the start of the **last** user turn: ``SYSTEM\\n\\nUSER``. Consecutive
  user messages merge into one turn, and so do consecutive assistant messages (text joined by
  ``"\\n\\n"``, calls concatenated). A conversation whose first turn is not a user turn gets an
  empty one.
* ``<s>`` opens the sequence. A user turn is ``[INST]TEXT[/INST]``; the last one is preceded by
  ``[AVAILABLE_TOOLS]JSON[/AVAILABLE_TOOLS]`` when there are tools (JSON of the OpenAI-style tool
  list: ``type``, then ``function`` with ``name``, ``description``, ``parameters``).
* An assistant turn is its text with trailing spaces removed, or ``[TOOL_CALLS]`` and the JSON
  list ``[{"name", "arguments", "id"}, ...]``; either is followed by ``</s>``. A turn cannot carry
  both text and calls.
* A tool result is ``[TOOL_RESULTS]{"content": VALUE, "call_id": ID}[/TOOL_RESULTS]``, where VALUE
  is the result parsed as JSON when it is JSON (the text itself otherwise; ``{}`` when empty).
* All JSON is ``json.dumps(..., ensure_ascii=False)``: separators ``", "``/``": "``, key order kept.
* Every text piece is encoded on its own (for v3, each gets SentencePiece's dummy ``▁`` prefix).
  Each such piece sits between two control tokens, so the base class's text runs are exactly
  those pieces: ``merge_text_runs`` stays True, which also lets a tool-call list be labelled
  name / arguments / syntax and still be encoded as the single string the reference encodes.

Call ids must be 9 ASCII letters or digits. Ids that are not (``call_0``, or none at all) are
replaced by ``mistral_call_id(conversation id, call position)``, and tool results follow their
call's new id (``with_mistral_call_ids``); feed that conversation to mistral-common to compare.

Conversations the reference refuses raise ``MistralFormatError`` with the reason: see
``check_mistral_conversation``. Injection: ``[INST]``, ``[TOOL_CALLS]`` etc. are control tokens,
and text is encoded with control-token parsing off, so user text ``[INST]`` stays characters.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from train.formats.base import NATIVE, ChatFormat, Segment, to_json
from train.formats.serving import MISTRAL_NOTES, Serving
from train.schema import Conversation, Message, ToolCall

BOS, EOS = "<s>", "</s>"
INST, END_INST = "[INST]", "[/INST]"
TOOLS, END_TOOLS = "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]"
RESULTS, END_RESULTS = "[TOOL_RESULTS]", "[/TOOL_RESULTS]"
TOOL_CALLS = "[TOOL_CALLS]"
JOIN = "\n\n"  # mistral-common's separator between merged messages and before the user text

CALL_ID = re.compile(r"^[a-zA-Z0-9]{9}$")
FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


class MistralFormatError(ValueError):
    """The conversation cannot be written in Mistral's format (mistral-common refuses it too)."""


class MistralParseError(ValueError):
    """Generated text has a malformed ``[TOOL_CALLS]`` list. The message says why."""


# ---- call ids ------------------------------------------------------------------------------


def mistral_call_id(conversation_id: str, position: int) -> str:
    """A stable 9-character base62 id for the ``position``-th call (0-based) of a conversation."""
    digest = int.from_bytes(hashlib.sha256(f"{conversation_id}\0{position}".encode()).digest()[:8], "big")
    chars = []
    for _ in range(9):
        digest, digit = divmod(digest, 62)
        chars.append(_BASE62[digit])
    return "".join(chars)


def with_mistral_call_ids(conv: Conversation) -> Conversation:
    """A copy of ``conv`` whose call ids are all valid Mistral ids, tool results relinked.

    Valid ids are kept. A tool result names its call by the source id (the latest call with that
    id, as sources reuse ``call_0`` across turns) or, without an id, answers the earliest
    unanswered call of its tool. A result that matches no call raises ``MistralFormatError``.
    """
    out = copy.deepcopy(conv)
    latest: dict[str, str] = {}  # source id -> Mistral id, most recent call wins
    pending: list[tuple[str, str]] = []  # (Mistral id, tool name) of unanswered calls
    position = 0
    for index, message in enumerate(out.messages):
        if message.role == "assistant":
            for call in message.tool_calls:
                new_id = call.id if call.id and CALL_ID.match(call.id) else mistral_call_id(conv.id, position)
                position += 1
                if call.id is not None:
                    latest[call.id] = new_id
                call.id = new_id
                pending.append((new_id, call.name))
        elif message.role == "tool":
            message.tool_call_id = _answered_call(message, latest, pending, index)
    return out


def _answered_call(message: Message, latest: dict[str, str], pending: list[tuple[str, str]], index: int) -> str:
    source_id = message.tool_call_id
    if source_id is not None:
        new_id = latest.get(source_id)
        if new_id is None:
            if not CALL_ID.match(source_id):
                raise MistralFormatError(f"messages[{index}]: tool result for unknown call id {source_id!r}")
            new_id = source_id  # a well-formed id the reference accepts as it is
    else:
        match = next((p for p in pending if message.name is None or p[1] == message.name), None)
        if match is None:
            raise MistralFormatError(f"messages[{index}]: tool result has no call id and answers no pending call")
        new_id = match[0]
    pending[:] = [p for p in pending if p[0] != new_id]
    return new_id


# ---- what the reference accepts ------------------------------------------------------------


def check_mistral_conversation(conv: Conversation, *, allow_text_and_calls: bool = False) -> None:
    """Raise ``MistralFormatError`` for what mistral-common's v3 finetuning path refuses.

    ``allow_text_and_calls``: v7's validator lets one assistant turn carry both (``mistral_v7``).

    Mirrors ``MistralRequestValidatorV3`` (finetuning mode) and the encoder: the conversation ends
    with an assistant turn; no assistant turn has both text and calls, nor neither; a tool result
    follows an assistant turn or another result; each assistant turn's calls are all answered
    before the next assistant turn, and there are never more results than calls; a system message
    follows no assistant turn or tool result (it may sit between user turns); user, system and
    tool messages have content; function names match ``[a-zA-Z0-9_-]{1,64}``; tool parameters are
    valid JSON Schema (draft 7). Stricter than the reference in one place: a conversation may not
    open with a tool result (the reference lets one through unlinked).
    """
    messages = conv.messages
    if not messages:
        raise MistralFormatError("conversation has no messages")
    if messages[-1].role != "assistant":
        raise MistralFormatError(
            f"Mistral finetuning needs the conversation to end with an assistant turn, not {messages[-1].role!r}"
        )
    if len(messages) == 1:
        raise MistralFormatError("Mistral finetuning needs a user turn before the assistant turn")
    if messages[0].role == "tool":
        raise MistralFormatError("messages[0]: a conversation cannot open with a tool result")
    for tool in conv.tools:
        _check_name(tool.name, "tools")
        _check_schema(tool.name, tool.parameters)
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if message.role in ("user", "system", "tool") and message.content is None:
            raise MistralFormatError(f"{where}: a {message.role} message needs content")
        if message.role == "assistant":
            if message.content and message.tool_calls and not allow_text_and_calls:
                raise MistralFormatError(
                    f"{where}: an assistant turn with both text and tool calls cannot be written in Mistral's "
                    "format (mistral-common: 'Assistant message must have either content or tool_calls, but not both')"
                )
            if not message.content and not message.tool_calls:
                raise MistralFormatError(f"{where}: an assistant turn needs text or tool calls")
            for call in message.tool_calls:
                _check_name(call.name, where)
        previous = messages[index - 1].role if index > 0 else None
        if message.role == "tool":
            if previous not in (None, "assistant", "tool"):
                raise MistralFormatError(f"{where}: a tool result must follow a tool call, not a {previous!r} message")
            if message.name is not None:
                _check_name(message.name, where)
        if message.role == "system" and previous in ("assistant", "tool"):
            raise MistralFormatError(
                f"{where}: a system message may open the conversation or follow a user message, not a {previous!r} one"
            )
    _check_answered(messages)


def _check_name(name: str, where: str) -> None:
    if not FUNCTION_NAME.match(name):
        raise MistralFormatError(f"{where}: function name {name!r} must be 1-64 of a-z, A-Z, 0-9, _ and -")


def _check_schema(name: str, parameters: dict[str, Any]) -> None:
    import jsonschema

    try:
        jsonschema.Draft7Validator.check_schema(parameters)
    except jsonschema.exceptions.SchemaError as err:
        raise MistralFormatError(f"tools: {name!r} parameters are not a valid JSON Schema: {err.message}") from err


def _check_answered(messages: list[Message]) -> None:
    # Counted as the reference counts: results since the last assistant turn against its calls.
    expected = 0
    for index, message in enumerate(messages[1:], start=1):
        if message.role == "tool":
            expected -= 1
        elif message.role == "assistant":
            if expected != 0:
                raise MistralFormatError(
                    f"messages[{index}]: the previous assistant turn's calls and their results differ in number"
                )
            expected = len(message.tool_calls)
    if expected < 0:
        raise MistralFormatError("more tool results than tool calls at the end of the conversation")


# ---- normalizing into turns ----------------------------------------------------------------


@dataclass
class Turn:
    """One reference message after normalization: merged same-role messages, system prompt removed."""

    role: str  # user, assistant or tool
    texts: list[tuple[str, int]] = field(default_factory=list)  # (text, message index), non-empty
    calls: list[tuple[ToolCall, int]] = field(default_factory=list)
    message: int = -1  # the (first) message this turn comes from; -1 for an inserted empty turn


def mistral_turns(conv: Conversation) -> tuple[list[tuple[str, int]], list[Turn]]:
    """(system prompt pieces, turns) as mistral-common's ``InstructRequestNormalizer`` builds them."""
    system = [(m.content, i) for i, m in enumerate(conv.messages) if m.role == "system" and m.content]
    turns: list[Turn] = []
    previous_role = None
    for index, message in enumerate(conv.messages):
        role = message.role
        if role == "system":
            previous_role = role  # it separates user runs even though it leaves no turn
            continue
        if role == previous_role and role in ("user", "assistant"):
            turn = turns[-1]
        else:
            turn = Turn(role=role, message=index)
            turns.append(turn)
        if message.content:
            turn.texts.append((message.content, index))
        turn.calls.extend((call, index) for call in message.tool_calls)
        previous_role = role
    if not turns or turns[0].role != "user":
        turns.insert(0, Turn(role="user"))
    for turn in turns:
        if turn.role == "assistant" and turn.texts and turn.calls:
            raise MistralFormatError(
                f"messages[{turn.message}]: consecutive assistant messages merge into one turn with both "
                "text and tool calls, which Mistral's format cannot write"
            )
    return system, turns


def _joined(pieces: list[tuple[str, int]], part: str) -> list[Segment]:
    segments: list[Segment] = []
    for text, index in pieces:
        if segments:
            segments.append(Segment(JOIN, part, index))
        segments.append(Segment(text, part, index))
    return segments


def _rstrip_spaces(segments: list[Segment]) -> list[Segment]:
    # The reference encodes content.rstrip(" ") for assistant text.
    out = list(segments)
    while out:
        last = out.pop()
        stripped = last.text.rstrip(" ")
        if stripped:
            out.append(Segment(stripped, last.part, last.message))
            break
    return out


# ---- rendering -----------------------------------------------------------------------------


def tools_json(conv: Conversation) -> str:
    return to_json([tool.to_dict() for tool in conv.tools])


def tool_result_value(content: str) -> Any:
    """The value the reference writes for a tool result: parsed JSON, else the text; empty -> {}."""
    if not content:
        return {}
    try:
        return json.loads(content)
    except json.JSONDecodeError:
        return content


def call_segments(calls: list[tuple[ToolCall, int]]) -> list[Segment]:
    """``[TOOL_CALLS]`` and the JSON list, split into syntax / name / arguments parts.

    Joined, the texts equal ``to_json([{"name", "arguments", "id"}, ...])``.
    """
    segments: list[Segment] = []
    for position, (call, index) in enumerate(calls):
        # Round trip through JSON as the reference does (its FunctionCall keeps arguments as text).
        arguments = json.loads(json.dumps(call.arguments))
        opening = ("[" if position == 0 else ", ") + '{"name": '
        segments += [
            Segment(opening, "call_syntax", index),
            Segment(to_json(call.name), "call_name", index),
            Segment(', "arguments": ', "call_syntax", index),
            Segment(to_json(arguments), "call_args", index),
            Segment(f', "id": {to_json(call.id)}}}', "call_syntax", index),
        ]
    segments.append(Segment("]", "call_syntax", calls[-1][1]))
    return segments


def render_mistral(conv: Conversation) -> list[Segment]:
    """Conversation -> segments in mistral-common's v3 layout (see the module docstring)."""
    check_mistral_conversation(conv)
    conv = with_mistral_call_ids(conv)
    system, turns = mistral_turns(conv)
    last_user = max(i for i, turn in enumerate(turns) if turn.role == "user")
    segments = [Segment(BOS, "header", special=True)]
    for position, turn in enumerate(turns):
        if turn.role == "user":
            if position == last_user and conv.tools:
                segments += [
                    Segment(TOOLS, "header", special=True),
                    Segment(tools_json(conv), "tools"),
                    Segment(END_TOOLS, "header", special=True),
                ]
            segments.append(Segment(INST, "header", turn.message, special=True))
            if position == last_user and system:
                segments += _joined(system, "system") + [Segment(JOIN, "system", system[-1][1])]
            segments += _joined(turn.texts, "user")
            segments.append(Segment(END_INST, "header", turn.message, special=True))
        elif turn.role == "assistant":
            if turn.calls:
                segments.append(Segment(TOOL_CALLS, "call_syntax", turn.message, special=True))
                segments += call_segments(turn.calls)
                end_index = turn.calls[-1][1]
            else:
                segments += _rstrip_spaces(_joined(turn.texts, "text"))
                end_index = turn.texts[-1][1]
            segments.append(Segment(EOS, "end", end_index, special=True))
        else:
            message = conv.messages[turn.message]
            result = {"content": tool_result_value(message.content or ""), "call_id": message.tool_call_id}
            segments += [
                Segment(RESULTS, "header", turn.message, special=True),
                Segment(to_json(result), "tool_result", turn.message),
                Segment(END_RESULTS, "header", turn.message, special=True),
            ]
    return segments


# ---- parsing generated text ----------------------------------------------------------------


def parse_mistral(text: str) -> tuple[str | None, list[ToolCall]]:
    """Generated assistant text -> (content, calls).

    Accepts decoded text with or without its control tokens: an optional ``</s>`` at the end, and
    ``[TOOL_CALLS]`` followed by a JSON list of ``{"name", "arguments"[, "id"]}`` objects
    (arguments an object, or a string holding one). Text before ``[TOOL_CALLS]`` is returned as
    content. Anything after the list but whitespace raises ``MistralParseError``. Never evaluates.
    """
    body = text.strip()
    if body.endswith(EOS):
        body = body[: -len(EOS)].rstrip()
    if TOOL_CALLS not in body:
        return body or None, []
    before, _, after = body.partition(TOOL_CALLS)
    try:
        value, end = json.JSONDecoder().raw_decode(after.lstrip())
    except json.JSONDecodeError as err:
        raise MistralParseError(f"the text after {TOOL_CALLS} is not JSON: {err}") from err
    if after.lstrip()[end:].strip():
        raise MistralParseError(f"unexpected text after the {TOOL_CALLS} list: {after.lstrip()[end:].strip()[:40]!r}")
    if not isinstance(value, list) or not value:
        raise MistralParseError(f"{TOOL_CALLS} must be followed by a non-empty JSON list of calls")
    calls = [_parse_call(item, i) for i, item in enumerate(value)]
    return before.strip() or None, calls


def _parse_call(item: Any, position: int) -> ToolCall:
    where = f"call {position}"
    if not isinstance(item, dict):
        raise MistralParseError(f"{where}: expected an object, got {type(item).__name__}")
    unknown = sorted(set(item) - {"name", "arguments", "id"})
    if unknown:
        raise MistralParseError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise MistralParseError(f"{where}: 'name' must be a non-empty string")
    arguments = item.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as err:
            raise MistralParseError(f"{where}: 'arguments' is a string that is not JSON: {err}") from err
    if not isinstance(arguments, dict):
        raise MistralParseError(f"{where}: 'arguments' must be an object, got {type(arguments).__name__}")
    call_id = item.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise MistralParseError(f"{where}: 'id' must be a string")
    return ToolCall(name=name, arguments=arguments, id=call_id)


# ---- the formats ---------------------------------------------------------------------------


class MistralV3Format(ChatFormat):
    """Mistral 7B Instruct v0.3 (SentencePiece vocabulary, ``[TOOL_CALLS]`` = 5)."""

    name = "mistral_v3"
    # the two Mistral formats differ only in their tokenizer: one template and parser serve both
    serving: ClassVar[Serving] = Serving(
        templates=("common.jinja", "mistral.jinja"),
        variables=(),
        vllm_parser="mistral",
        sglang_parser="mistral",
        exact=True,
        notes=MISTRAL_NOTES,
    )
    default_tokenizer = "mistral_v3"
    # the native layout and its parser (mistral_v7 swaps them in)
    render_native = staticmethod(render_mistral)
    parse_native = staticmethod(parse_mistral)

    def __init__(self, answer_style: str = NATIVE):
        self.answer_style = answer_style

    def render(self, conv: Conversation) -> list[Segment]:
        return self.render_native(conv)

    def parse(self, text: str) -> tuple[str | None, list[ToolCall]]:
        return self.parse_native(text)


class MistralNemoFormat(MistralV3Format):
    """Mistral Nemo (tekken vocabulary, ``[TOOL_CALLS]`` = 9): the same layout, no dummy prefix."""

    name = "mistral_nemo"
    default_tokenizer = "mistral_tekken"


__all__ = [
    "MistralFormatError",
    "MistralNemoFormat",
    "MistralParseError",
    "MistralV3Format",
    "check_mistral_conversation",
    "mistral_call_id",
    "mistral_turns",
    "parse_mistral",
    "render_mistral",
    "with_mistral_call_ids",
]
