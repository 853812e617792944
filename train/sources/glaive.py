"""glaive-function-calling-v2 -> ``Conversation``, in either of its two published layouts.

INPUTS: one or more JSON array or JSON Lines files, read in order. The layout is sniffed per
record:

* **ShareGPT** (LLaMA-Factory's ``glaive_toolcall_*_demo.json``): ``{"conversations": [{"from":
  "human"|"gpt"|"function_call"|"observation", "value"}], "tools": "<JSON list>"}`` — converted by
  ``train.sources.sharegpt`` (same decisions; ``meta["layout"] = "sharegpt"``).
* **raw** (the Hugging Face dataset): ``{"system": "SYSTEM: <prose> -\\n{function JSON}\\n\\n{...}",
  "chat": "USER: ...\\n\\n\\nASSISTANT: <functioncall> {\\"name\\": \\"f\\", \\"arguments\\": '{...}'}
  <|endoftext|>\\n\\n\\nFUNCTION RESPONSE: {...}\\n\\n\\nASSISTANT: ... <|endoftext|>"}``
  (``meta["layout"] = "raw"``).

Decisions for the raw layout:

* System: the function objects are found by ``raw_decode`` scanning (a JSON object with a
  ``name``) and become the tools. What remains once they and the ``SYSTEM:`` marker are cut out
  is the prose the source shows the model ("You are a helpful assistant with access to the
  following functions. Use them if required -"); it is kept, stripped, as the system message.
  A record with no functions keeps its whole prose ("... with no access to external functions.").
* Chat: turns start at ``USER:``, ``ASSISTANT:`` or ``FUNCTION RESPONSE:`` at the start of the
  text or after a blank line; a trailing ``<|endoftext|>`` is the generation's end, not text.
* A call is ``<functioncall> {"name": ..., "arguments": '<JSON object>'}``: arguments wrapped in
  single quotes, so the payload as a whole is not JSON. It is parsed as JSON first, then as that
  quoted shape (the quoted part must be a JSON object); nothing is evaluated. Text before
  ``<functioncall>`` in the same turn is the message's content. A payload that fits neither shape
  rejects the record with the turn's index.
* Results link to calls as in the ShareGPT layout (earliest unanswered call, ids call_0, ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from train.base.records import Rejected
from train.schema import Conversation, SchemaError
from train.sources._dialogue import (
    STRICT_JSON,
    Dialogue,
    arguments_object,
    conversation,
    cut_json_values,
    expect_dict,
    expect_str,
    extra_fields,
    parse_json_string,
    read_records,
    record_id,
    tools_and_extras,
)
from train.sources.sharegpt import conversation_from_sharegpt

SOURCE = "glaive"
RAW_KEYS = ("id", "system", "chat")
_TURN_MARKER = re.compile(r"(?:\A|\n\n)[ \t]*(USER|ASSISTANT|FUNCTION RESPONSE):[ \t]?")
_SYSTEM_MARKER = re.compile(r"\A\s*SYSTEM:[ \t]?")
_END = "<|endoftext|>"
_CALL_TAG = "<functioncall>"
# {"name": "<JSON string body>", "arguments": '<anything up to the last quote before the closing brace>'}
_QUOTED_CALL = re.compile(r'\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*\'(.*)\'\s*\}', re.DOTALL)


def read(inputs: list[Path]) -> Iterator[Conversation | Rejected]:
    return read_records(inputs, conversation_from_glaive)


def conversation_from_glaive(obj: Any, fallback_id: str) -> Conversation:
    obj = expect_dict(obj, "record")
    if "conversations" in obj:
        return conversation_from_sharegpt(obj, fallback_id, SOURCE, {"layout": "sharegpt"})
    if "chat" in obj:
        return conversation_from_raw(obj, fallback_id)
    raise SchemaError("", "neither layout: expected 'conversations' (ShareGPT) or 'system' + 'chat' (raw)")


def conversation_from_raw(obj: dict, fallback_id: str) -> Conversation:
    dialogue = Dialogue()
    tools: list = []
    meta: dict[str, Any] = {"source": SOURCE, "layout": "raw"}
    if obj.get("system") is not None:
        prose, specs = split_system(expect_str(obj["system"], "system"))
        tools, tool_extra = tools_and_extras(specs, "system.functions")
        if tool_extra:
            meta["tool_extra"] = tool_extra
        if prose:
            dialogue.say("system", prose)
    for index, (marker, text) in enumerate(split_chat(expect_str(obj["chat"], "chat"))):
        path = f"chat.turns[{index}]"
        if marker == "USER":
            dialogue.say("user", text)
        elif marker == "FUNCTION RESPONSE":
            dialogue.result(text)
        else:
            content, payloads = split_assistant(text)
            calls = [parse_call_payload(payload, f"{path}.functioncall[{n}]") for n, payload in enumerate(payloads)]
            if calls:
                dialogue.call(calls, content)
            else:
                dialogue.say("assistant", content)
    extra = extra_fields(obj, RAW_KEYS)
    if extra:
        meta["extra"] = extra
    return conversation(record_id(obj, fallback_id), dialogue.messages, tools, meta)


def split_system(system: str) -> tuple[str, list[dict]]:
    """(prose, function objects): every JSON object with a ``name`` is cut out of the text."""
    text = _SYSTEM_MARKER.sub("", system, count=1)
    return cut_json_values(text, "{", lambda value: isinstance(value, dict) and "name" in value)


def split_chat(chat: str) -> list[tuple[str, str]]:
    """``[(marker, text)]`` in order; text is stripped and loses a trailing ``<|endoftext|>``."""
    matches = list(_TURN_MARKER.finditer(chat))
    if not matches:
        raise SchemaError("chat", "no USER:, ASSISTANT: or FUNCTION RESPONSE: turn")
    if chat[: matches[0].start()].strip():
        raise SchemaError("chat", f"text before the first turn marker: {chat[:40]!r}")
    turns = []
    for match, following in zip(matches, matches[1:] + [None]):
        text = chat[match.end() : following.start() if following else len(chat)].strip()
        if text.endswith(_END):
            text = text[: -len(_END)].rstrip()
        turns.append((match.group(1), text))
    return turns


def split_assistant(text: str) -> tuple[str | None, list[str]]:
    """(content before the first ``<functioncall>`` or None when empty, call payloads)."""
    content, *payloads = text.split(_CALL_TAG)
    content = content.strip()
    return content or None, [payload.strip() for payload in payloads]


def parse_call_payload(payload: str, path: str) -> tuple[str, dict[str, Any]]:
    """``{"name": "f", "arguments": '{"a": 1}'}`` (or plain JSON) -> (name, arguments)."""
    try:
        call = STRICT_JSON.decode(payload)
    except ValueError:  # not JSON as a whole: the quoted-arguments shape, tried next
        call = None
    if isinstance(call, dict):
        if not isinstance(call.get("name"), str):
            raise SchemaError(path, f"call without a string 'name': {payload[:80]!r}")
        return call["name"], arguments_object(call.get("arguments", {}), f"{path}.arguments")
    match = _QUOTED_CALL.fullmatch(payload)
    if match is None:
        raise SchemaError(path, f'not a call {{"name": ..., "arguments": \'...\'}}: {payload[:80]!r}')
    name = parse_json_string(f'"{match.group(1)}"', f"{path}.name")
    return name, arguments_object(match.group(2), f"{path}.arguments")
