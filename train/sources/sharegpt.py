"""ShareGPT-style tool dialogues (LLaMA-Factory's ``sharegpt`` layout) -> ``Conversation``.

INPUTS: one or more JSON array or JSON Lines files or tables (Parquet, Arrow, CSV, a ``datasets``
folder: ``train.sources.tables``), read in order. A record::

    {"conversations" | "messages": [{"from" | "role": ..., "value" | "content": str}, ...],
     "system"?: str, "tools"?: "<JSON list of function definitions>" | [...], "id"?: str | int}

Roles: ``human``/``user``, ``gpt``/``assistant``, ``system``, ``function_call`` (a JSON string
``{"name", "arguments"}`` or a list of them; ``arguments`` an object or a JSON string of one) and
``observation``/``tool``/``function`` (a tool result; an optional turn ``name`` says whose).

Decisions:

* Consecutive ``function_call`` turns are one assistant message with parallel calls; a ``gpt``
  turn directly followed by ``function_call`` turns is one assistant message with text and calls
  (see ``Dialogue``). Calls get ids ``call_0, call_1, ...``; each observation answers the
  earliest unanswered call (of its ``name`` when the turn has one) and carries that call's name.
* An observation with no call to answer (glaive's zh demo has two, after a ``gpt`` turn whose
  call was translated into prose) stays a tool message with no ``tool_call_id``: the text is
  what the source says; ``train.validate`` reports the orphan.
* Call markup in the text (``train.sources.call_markup``): Hermes/Qwen ``<tool_call>`` JSON blocks (and
  Llama 3.1 ``<|python_tag|>``, Mistral ``[TOOL_CALLS]``) in a ``gpt`` turn become its tool calls, the
  text around them its content; ``<tool_response>`` blocks in a tool turn become one tool message each
  (a ``{"name", "content"}`` body names the tool); a ``<tools>`` block in the system prompt gives the
  tools (after the record's own ``tools``, by name) and leaves the system prompt with its tool section
  taken out (the original is kept in ``meta["call_markup"]``). Markup that cannot be read, or of a layout
  not parsed, rejects the record naming it. User text is never parsed.
* Unmapped top-level keys go to ``meta["extra"]``; unmapped keys of a turn go to
  ``meta["turn_extra"]`` by turn index; keys a tool definition has beyond name, description
  and parameters go to ``meta["tool_extra"]`` by tool index. An empty ``system`` is no message.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from train.base.records import Rejected
from train.schema import Conversation, SchemaError
from train.sources._dialogue import (
    Dialogue,
    arguments_object,
    conversation,
    expect_dict,
    expect_list,
    expect_str,
    extra_fields,
    parse_json_string,
    read_records,
    record_id,
    tools_and_extras,
    tools_from_text,
)
from train.sources.call_markup import RecordMarkup

SOURCE = "sharegpt"
ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "system": "system",
    "function_call": "call",
    "observation": "result",
    "tool": "result",
    "function": "result",
}
RECORD_KEYS = ("id", "conversations", "messages", "system", "tools")
TURN_KEYS = ("from", "role", "value", "content", "name")


def read(inputs: list[Path]) -> Iterator[Conversation | Rejected]:
    return read_records(inputs, lambda obj, fallback: conversation_from_sharegpt(obj, fallback, SOURCE))


def conversation_from_sharegpt(
    obj: Any, fallback_id: str, source: str, meta: dict[str, Any] | None = None
) -> Conversation:
    """One ShareGPT record -> Conversation; ``meta`` starts as ``{"source": source, **meta}``."""
    obj = expect_dict(obj, "record")
    if ("conversations" in obj) == ("messages" in obj):
        raise SchemaError("", "expected exactly one of 'conversations' and 'messages'")
    turns_key = "conversations" if "conversations" in obj else "messages"
    turns = expect_list(obj[turns_key], turns_key)
    if not turns:
        raise SchemaError(turns_key, "empty list of turns")
    out_meta: dict[str, Any] = {"source": source, **(meta or {})}
    tools, tool_extra = record_tools(obj.get("tools"))
    dialogue = Dialogue()
    markup = RecordMarkup()
    system = obj.get("system")
    if system is not None and expect_str(system, "system"):
        system = markup.system(system, "system")
        if system:
            dialogue.say("system", system)
    turn_extra: dict[str, dict[str, Any]] = {}
    for index, turn in enumerate(turns):
        path = f"{turns_key}[{index}]"
        add_turn(dialogue, expect_dict(turn, path), path, markup)
        extra = extra_fields(turn, TURN_KEYS)
        if extra:
            turn_extra[str(index)] = extra
    extra = extra_fields(obj, RECORD_KEYS)
    if extra:
        out_meta["extra"] = extra
    if turn_extra:
        out_meta["turn_extra"] = turn_extra
    prompted, prompted_extra = tools_and_extras(markup.new_specs([t.name for t in tools]), "system prompt <tools>")
    tool_extra.update({str(len(tools) + int(index)): extra for index, extra in prompted_extra.items()})
    tools += prompted
    if tool_extra:
        out_meta["tool_extra"] = tool_extra
    out_meta.update(markup.meta())
    return conversation(record_id(obj, fallback_id), dialogue.messages, tools, out_meta)


def record_tools(value: Any) -> tuple[list, dict]:
    if value is None:
        return [], {}
    specs = tools_from_text(value, "tools") if isinstance(value, str) else value
    return tools_and_extras(specs, "tools")


def add_turn(dialogue: Dialogue, turn: dict, path: str, markup: RecordMarkup | None = None) -> None:
    role_key = "from" if "from" in turn else "role"
    text_key = "value" if "value" in turn else "content"
    if role_key not in turn:
        raise SchemaError(path, "missing key 'from' (or 'role')")
    if text_key not in turn:
        raise SchemaError(path, "missing key 'value' (or 'content')")
    role = turn[role_key]
    if not isinstance(role, str) or role not in ROLES:
        raise SchemaError(f"{path}.{role_key}", f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    kind = ROLES[role]
    name = turn.get("name")
    if name is not None:
        expect_str(name, f"{path}.name")
    where = f"{path}.{text_key}"
    if kind == "call":
        dialogue.call(parse_function_call(turn[text_key], where))
        return
    text = expect_str(turn[text_key], where)
    markup = markup or RecordMarkup()
    if kind == "result":
        results = markup.results(text, where)
        for result_name, content in results if results is not None else [(None, text)]:
            dialogue.result(content, result_name or name)
    elif kind == "assistant" and (found := markup.assistant(text, where)) is not None:
        dialogue.call(found[1], found[0])
    elif kind == "system":
        kept = markup.system(text, where)  # None: the turn was only the tool section
        if kept is not None:
            dialogue.say("system", kept)
    else:
        dialogue.say(kind, text)


def parse_function_call(value: Any, path: str) -> list[tuple[str, dict[str, Any]]]:
    """A ``function_call`` value: JSON ``{"name", "arguments"}`` or a list of them (parallel calls)."""
    decoded = parse_json_string(value, path) if isinstance(value, str) else value
    items = decoded if isinstance(decoded, list) else [decoded]
    if not items:
        raise SchemaError(path, "empty list of calls")
    calls = []
    for index, item in enumerate(items):
        where = f"{path}[{index}]" if isinstance(decoded, list) else path
        item = expect_dict(item, where)
        unknown = sorted(set(item) - {"name", "arguments"})
        if unknown:
            raise SchemaError(where, f"unknown key(s) in call: {', '.join(map(repr, unknown))}")
        if "name" not in item:
            raise SchemaError(where, "call has no 'name'")
        name = expect_str(item["name"], f"{where}.name")
        calls.append((name, arguments_object(item.get("arguments", {}), f"{where}.arguments")))
    return calls
