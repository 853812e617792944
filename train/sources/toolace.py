"""ToolACE dialogues -> ``Conversation``.

INPUTS: one or more JSON array or JSON Lines files or tables (Parquet, Arrow, CSV, a ``datasets``
folder: ``train.sources.tables``), read in order. A record::

    {"system": "You are an expert in composing functions. ... Here is a list of functions in JSON
                format that you can invoke:\\n[{...}, {...}]\\nShould you decide to return the
                function call(s), put it in the format of [func1(params_name=params_value, ...)]...",
     "conversations": [{"from": "user"|"assistant"|"tool", "value": str}, ...], "id"?: ...}

Decisions:

* System: the first JSON list of function definitions (a non-empty list of objects with a
  ``name``, found by ``raw_decode`` scanning; the format templates in the prose are not JSON) is
  cut out and becomes the tools. The prose around it is kept, stripped, as the system message:
  it is the instruction the model was trained under (answer with a call list), and chat formats
  render the tools themselves. A system without a function list is kept whole, with no tools.
* Assistant: a value shaped like a call list (``[`` then a name then ``(``) is parsed by
  ``parse_call_list`` into tool calls with ids ``call_0, call_1, ...`` (with ``ast``, never
  evaluated); a broken one rejects the record with the reason. Any other value is text.
* Tool: a JSON list of ``{"name", "results"}``; each item is one tool message, linked to the
  earliest unanswered call of that name, with ``results`` as JSON text (a string result is kept
  as is). An item whose name answers no call keeps ``tool_call_id`` null for validate to report.
* Keys of tool definitions beyond name/description/parameters (ToolACE writes ``"required":
  null`` there) go to ``meta["tool_extra"]``, unmapped record keys to ``meta["extra"]``, unmapped
  turn keys to ``meta["turn_extra"]`` by turn index.
* Parameter schemas say ``"type": "dict"`` where JSON Schema says ``"object"`` (and may use other
  Python type names): ``type`` keywords are renamed to their JSON Schema names at every level
  (``normalize_schema_types``), so the tools are valid JSON Schema; nothing else changes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from train.base.pysyntax import PySyntaxError
from train.base.pysyntax import parse_call_list as parse_python_calls
from train.base.records import Rejected
from train.schema import Conversation, SchemaError
from train.sources._dialogue import (
    Dialogue,
    conversation,
    cut_json_values,
    expect_dict,
    expect_list,
    expect_str,
    extra_fields,
    normalize_schema_types,
    parse_json_string,
    read_records,
    record_id,
    require,
    tools_and_extras,
)

SOURCE = "toolace"
RECORD_KEYS = ("id", "system", "conversations")
ROLES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "gpt": "assistant",
    "tool": "tool",
    "system": "system",
}


def read(inputs: list[Path]) -> Iterator[Conversation | Rejected]:
    return read_records(inputs, conversation_from_toolace)


def conversation_from_toolace(obj: Any, fallback_id: str) -> Conversation:
    obj = expect_dict(obj, "record")
    turns = expect_list(require(obj, "conversations"), "conversations")
    if not turns:
        raise SchemaError("conversations", "empty list of turns")
    dialogue = Dialogue()
    tools: list = []
    meta: dict[str, Any] = {"source": SOURCE}
    if obj.get("system") is not None:
        prose, function_lists = split_system(expect_str(obj["system"], "system"))
        if function_lists:
            specs = [with_json_types(spec) for spec in function_lists[0]]
            tools, tool_extra = tools_and_extras(specs, "system.functions")
            if tool_extra:
                meta["tool_extra"] = tool_extra
        if prose:
            dialogue.say("system", prose)
    turn_extra: dict[str, dict[str, Any]] = {}
    for index, turn in enumerate(turns):
        add_turn(dialogue, expect_dict(turn, f"conversations[{index}]"), f"conversations[{index}]")
        if extra := extra_fields(turn, ("from", "value")):
            turn_extra[str(index)] = extra
    for key, value in (("extra", extra_fields(obj, RECORD_KEYS)), ("turn_extra", turn_extra)):
        if value:
            meta[key] = value
    return conversation(record_id(obj, fallback_id), dialogue.messages, tools, meta)


def split_system(system: str) -> tuple[str, list[list[dict]]]:
    """(prose, [function list]) — at most one list, the first that holds function definitions."""
    return cut_json_values(system, "[", is_function_list, limit=1)


def with_json_types(spec: dict) -> dict:
    """ToolACE writes ``"type": "dict"`` (and other Python names) in parameter schemas."""
    if isinstance(spec.get("parameters"), dict):
        return dict(spec, parameters=normalize_schema_types(spec["parameters"]))
    return spec


def is_function_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(f, dict) and "name" in f for f in value)


def add_turn(dialogue: Dialogue, turn: dict, path: str) -> None:
    role = require(turn, "from", path)
    value = expect_str(require(turn, "value", path), f"{path}.value")
    if not isinstance(role, str) or role not in ROLES:
        raise SchemaError(f"{path}.from", f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    kind = ROLES[role]
    if kind == "assistant" and looks_like_call_list(value):
        try:
            dialogue.call(parse_call_list(value))
        except PySyntaxError as err:
            raise SchemaError(f"{path}.value", f"broken call list: {err}") from err
    elif kind == "tool":
        for name, content in tool_results(value, f"{path}.value"):
            dialogue.result(content, name)
    else:
        dialogue.say(kind, value)


def tool_results(value: str, path: str) -> list[tuple[str, str]]:
    """``[{"name", "results"}, ...]`` -> ``[(name, content)]``; results become JSON text."""
    items = expect_list(parse_json_string(value, path), path)
    if not items:
        raise SchemaError(path, "empty list of tool results")
    out = []
    for index, item in enumerate(items):
        where = f"{path}[{index}]"
        item = expect_dict(item, where)
        unknown = sorted(set(item) - {"name", "results"})
        if unknown:
            raise SchemaError(where, f"unknown key(s) {', '.join(map(repr, unknown))}")
        name = expect_str(require(item, "name", where), f"{where}.name")
        results = require(item, "results", where)
        out.append((name, results if isinstance(results, str) else json.dumps(results, ensure_ascii=False)))
    return out


# ---- the call list ---------------------------------------------------------------------------

# "[" then a name then "(": text shaped like a call list, as opposed to prose that opens with "[".
_LOOKS_LIKE_CALLS = re.compile(r"\s*\[\s*[^()\[\]{},='\"\n]+\(")


def looks_like_call_list(text: str) -> bool:
    return _LOOKS_LIKE_CALLS.match(text) is not None


def parse_call_list(text: str) -> list[tuple[str, dict[str, Any]]]:
    """``[Name(k=v, ...), ...]`` -> ``[(name, {k: v}), ...]`` in order.

    Read by ``pysyntax`` (lenient: ToolACE's names hold spaces and dots, ``Market Trends API``,
    ``finance.get_rate``, and its values may be JSON's ``true/false/null``), then held to four rules
    of ToolACE's format that Python alone would let through:

    1. the calls are a bracketed list: a bare call or a tuple of calls is not the format;
    2. the list is not empty (an assistant turn that calls nothing is text);
    3. every argument is a keyword: a positional one has no parameter name to map to;
    4. strings are JSON strings: ``\\uD83D\\uDE00`` (a surrogate pair, as JSON writes characters beyond
       U+FFFF) is one character, and a lone surrogate, which cannot be written as UTF-8, is refused.

    ``PySyntaxError`` says which rule or what syntax failed.
    """
    if not text.lstrip().startswith("["):
        raise PySyntaxError("expected a call list in [...]")
    calls = parse_python_calls(text, lenient=True)
    if not calls:
        raise PySyntaxError("empty call list")
    parsed = []
    for index, call in enumerate(calls):
        if call.args:
            raise PySyntaxError(f"item {index}: {call.name}: positional arguments are not supported")
        parsed.append((call.name, _json_strings(call.kwargs, f"item {index}: {call.name}")))
    return parsed


def _json_strings(value: Any, where: str) -> Any:
    """``value`` with every string read as JSON reads its escapes: surrogate pairs joined, lone ones refused."""
    if isinstance(value, str):
        if not any("\ud800" <= char <= "\udfff" for char in value):
            return value
        try:
            return value.encode("utf-16", "surrogatepass").decode("utf-16")
        except UnicodeDecodeError:
            raise PySyntaxError(f"{where}: lone surrogate escape in string {value[:40]!r}") from None
    if isinstance(value, list):
        return [_json_strings(item, where) for item in value]
    if isinstance(value, dict):
        return {_json_strings(key, where): _json_strings(item, where) for key, item in value.items()}
    return value
