"""OpenAI chat-format records (fine-tuning JSONL and exported chats) -> ``Conversation``.

INPUTS: one or more JSON array or JSON Lines files or tables (Parquet, Arrow, CSV, a ``datasets``
folder: ``train.sources.tables``), read in order. A record::

    {"messages": [...], "tools"?: [{"type": "function", "function": {...}}], "functions"?: [...],
     "id"?: str | int, ...}

Decisions:

* ``tool_calls[].function.arguments`` written as a JSON string is decoded; a string that is not
  a JSON object rejects the record, naming the message and call. A call without an ``id``
  gets ``call_0, call_1, ...``.
* Legacy ``functions`` (bare function definitions) are tools after ``tools``. A legacy assistant
  ``function_call`` becomes one tool call with an issued id, and a ``{"role": "function", "name",
  "content"}`` result becomes a tool message answering the earliest unanswered call of that name.
* A tool message without ``tool_call_id`` answers the earliest unanswered id-less call (of its
  ``name`` when it has one); a tool message without ``name`` gets the name of the call it answers.
* A canonical record reads back as itself: its ``meta`` is kept (``source`` is set only when it
  has none), so converted files can be read again.
* Call markup in ``content`` strings (``train.sources.call_markup``): Hermes/Qwen ``<tool_call>`` blocks
  (and Llama 3.1 ``<|python_tag|>``, Mistral ``[TOOL_CALLS]``) in an assistant message without
  ``tool_calls`` become its calls (with issued ids); a tool message that is one ``<tool_response>`` block
  is its body (a ``{"name", "content"}`` body names the tool); a ``<tools>`` block in a system message
  gives tools (after ``tools``/``functions``, by name) and is taken out of it, a system message left
  empty is dropped (the original text is kept in ``meta["call_markup"]``). Markup that cannot be read,
  of a layout not parsed, beside ``tool_calls``, or several results in one tool message rejects the
  record naming it. User text is never parsed.
* Keys a canonical message has no place for (``weight``, ``refusal``, ...) go to
  ``meta["message_extra"]`` by message index; unmapped top-level keys (``parallel_tool_calls``,
  ...) go to ``meta["extra"]``; extra keys of tool definitions (``strict``) go to
  ``meta["tool_extra"]``. Everything else must already be canonical: it goes through
  ``Conversation.from_dict``, whose error names the path (``messages[2].role: ...``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from train.base.records import CallIds, Rejected
from train.schema import Conversation, SchemaError
from train.sources._dialogue import (
    arguments_object,
    conversation,
    expect_dict,
    expect_list,
    extra_fields,
    read_records,
    record_id,
    require,
    require_str,
    tools_and_extras,
    value_or,
)
from train.sources.call_markup import RecordMarkup

SOURCE = "openai"
_MESSAGE_PATH = re.compile(r"messages\[(\d+)\]")
RECORD_KEYS = ("id", "messages", "tools", "functions", "meta")
MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name", "function_call")


def read(inputs: list[Path]) -> Iterator[Conversation | Rejected]:
    return read_records(inputs, conversation_from_openai)


def conversation_from_openai(obj: Any, fallback_id: str) -> Conversation:
    obj = expect_dict(obj, "record")
    if "messages" not in obj:
        raise SchemaError("", "missing key 'messages'")
    raw_messages = expect_list(obj["messages"], "messages")
    tools, tool_extra = tools_and_extras(value_or(obj, "tools", []), "tools")
    legacy, legacy_extra = tools_and_extras(value_or(obj, "functions", []), "functions")
    tool_extra.update({str(len(tools) + int(index)): extra for index, extra in legacy_extra.items()})
    ids = CallIds()
    call_names: dict[str, str] = {}
    markup = RecordMarkup()
    messages, message_extra, source_index = [], {}, []
    for index, message in enumerate(raw_messages):
        path = f"messages[{index}]"
        message = expect_dict(message, path)
        out = canonical_message(message, path, ids, call_names, markup)
        if out is not None:
            messages.append(out)
            source_index.append(index)
        extra = extra_fields(message, MESSAGE_KEYS)
        if extra:
            message_extra[str(index)] = extra
    tools += legacy
    prompted, prompted_extra = tools_and_extras(markup.new_specs([t.name for t in tools]), "system prompt <tools>")
    tool_extra.update({str(len(tools) + int(index)): extra for index, extra in prompted_extra.items()})
    meta: dict[str, Any] = {"source": SOURCE, **expect_dict(value_or(obj, "meta", {}), "meta")}
    extras = {"extra": extra_fields(obj, RECORD_KEYS), "message_extra": message_extra, "tool_extra": tool_extra}
    meta.update({key: value for key, value in extras.items() if value})
    meta.update(markup.meta())
    try:
        return conversation(record_id(obj, fallback_id), messages, tools + prompted, meta)
    except SchemaError as err:  # the path in the source: messages map one to one, less dropped system prompts
        path = _MESSAGE_PATH.sub(lambda m: f"messages[{source_index[int(m.group(1))]}]", err.path, count=1)
        raise SchemaError(path.removeprefix("record."), err.reason) from err


def canonical_message(
    message: dict, path: str, ids: CallIds, call_names: dict[str, str], markup: RecordMarkup | None = None
) -> dict[str, Any] | None:
    """The message's canonical keys, with calls decoded and results linked; structure is checked later.
    None: a system message that was only a tool section (its tools are in ``markup``)."""
    out = {key: message[key] for key in ("role", "content", "tool_calls", "tool_call_id", "name") if key in message}
    role = message.get("role")
    if isinstance(out.get("content"), str) and not read_markup(out, path, ids, markup or RecordMarkup()):
        return None
    if role == "assistant":
        raw_calls = expect_list(value_or(out, "tool_calls", []), f"{path}.tool_calls")  # or read from markup
        calls = [canonical_call(call, f"{path}.tool_calls[{n}]", ids) for n, call in enumerate(raw_calls)]
        if message.get("function_call") is not None:
            calls.append(legacy_call(message["function_call"], f"{path}.function_call", ids))
        call_names.update({call["id"]: call["function"]["name"] for call in calls if isinstance(call["id"], str)})
        out.pop("tool_calls", None)
        if calls:
            out["tool_calls"] = calls
    elif role == "function":
        name = require_str(message, "name", path)
        out.update(role="tool", tool_call_id=ids.answer(name), name=name)
    elif "function_call" in message:
        raise SchemaError(f"{path}.function_call", f"only assistant messages carry calls, not {role!r}")
    if role == "tool" and out.get("tool_call_id") is None:
        out["tool_call_id"] = ids.answer(out.get("name") if isinstance(out.get("name"), str) else None)
    linked = out.get("tool_call_id")
    if role == "tool" and "name" not in out and isinstance(linked, str) and linked in call_names:
        out["name"] = call_names[linked]
    return out


def read_markup(out: dict[str, Any], path: str, ids: CallIds, markup: RecordMarkup) -> bool:
    """Call markup in ``out["content"]`` moved to its canonical place (in ``out``); False: drop the message."""
    role, text, where = out.get("role"), out["content"], f"{path}.content"
    if role == "system":
        out["content"] = markup.system(text, where)
        return out["content"] is not None
    if role == "assistant" and (found := markup.assistant(text, where)) is not None:
        if out.get("tool_calls"):
            raise SchemaError(where, "call markup in the content of a message with tool_calls: which are its calls?")
        content, calls = found
        out["content"] = content
        out["tool_calls"] = [
            {"id": ids.issue(name), "type": "function", "function": {"name": name, "arguments": arguments}}
            for name, arguments in calls
        ]
    elif role == "tool" and (results := markup.results(text, where)) is not None:
        if len(results) != 1:
            raise SchemaError(
                where, f"{len(results)} <tool_response> blocks in one tool message: write one message each"
            )
        name, out["content"] = results[0]
        if name is not None and out.get("name") is None:
            out["name"] = name
    return True


def canonical_call(call: Any, path: str, ids: CallIds) -> dict[str, Any]:
    call = expect_dict(call, path)
    function = expect_dict(require(call, "function", path), f"{path}.function")
    name = require_str(function, "name", f"{path}.function")
    arguments = arguments_object(function.get("arguments", {}), f"{path}.function.arguments")
    out = dict(call, function=dict(function, arguments=arguments))
    if out.get("id") is None:
        out["id"] = ids.issue(name)
    return out


def legacy_call(function_call: Any, path: str, ids: CallIds) -> dict[str, Any]:
    function_call = expect_dict(function_call, path)
    name = require_str(function_call, "name", path)
    arguments = arguments_object(function_call.get("arguments", {}), f"{path}.arguments")
    return {"id": ids.issue(name), "type": "function", "function": {"name": name, "arguments": arguments}}
