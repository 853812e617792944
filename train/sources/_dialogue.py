"""What the dialogue readers (glaive, sharegpt, openai, toolace, xlam) share.

* ``read_records`` — the read loop: every input file in order, one ``Conversation`` or
  ``Rejected`` per source record, so read = accepted + rejected.
* ``Dialogue`` — builds the message list turn by turn: it merges a call turn into the assistant
  message just before it (parallel calls, text then calls), issues ``CallIds`` and links each
  tool result to the earliest unanswered call.
* small checked accessors (``expect_str``, ``record_id``, ``tools_and_extras``, ``extra_fields``)
  whose ``SchemaError`` names the path *in the source record*, so a reject says where to look.
* JSON found inside text: ``parse_json_string`` (``_common``; strict: no NaN/Infinity) for string fields,
  ``cut_json_values`` for function definitions embedded in a system prompt, and
  ``normalize_schema_types`` for schemas written with Python type names (``"dict"``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from train.base.records import (
    STRICT_JSON,
    CallIds,
    Rejected,
    SourceError,
    parse_json_string,
    tool_from_spec,
)
from train.schema import Conversation, SchemaError, Tool
from train.sources.tables import is_saved_dataset, iter_rows

# A converter turns one source object into a Conversation, raising SchemaError when it cannot.
Converter = Callable[[Any, str], Conversation]
TOOL_KEYS = ("name", "description", "parameters")


def read_records(inputs: list[Path], convert: Converter) -> Iterator[Conversation | Rejected]:
    """Each input is a JSON array or JSON Lines file, or a table (Parquet, Arrow, CSV, a ``datasets`` folder:
    ``train.sources.tables``); they are read in the order given.

    ``convert(obj, fallback_id)`` gets ``f"{path.stem}-{index}"`` (index = 0-based record position
    in the file, counting undecodable lines) for sources without their own id.
    """
    if not inputs:
        raise SourceError("expected one or more JSON or JSON Lines files, got 0 inputs")
    for path in inputs:
        if path.is_dir() and not is_saved_dataset(path):
            raise SourceError(f"{path}: is a folder; expected a data file or a folder saved by datasets (save_to_disk)")
        for index, item in enumerate(iter_rows(path)):
            if isinstance(item, Rejected):
                yield item
                continue
            location, obj = item
            try:
                yield convert(obj, f"{path.stem}-{index}")
            except SchemaError as err:
                yield Rejected(_with_id(location, obj), str(err), obj)
            except RecursionError:
                yield Rejected(_with_id(location, obj), "record nested too deeply", obj)


def _with_id(location: str, obj: Any) -> str:
    own = obj.get("id") if isinstance(obj, dict) else None
    return f"{location} (id {own})" if isinstance(own, (str, int)) and not isinstance(own, bool) else location


# --- checked accessors -----------------------------------------------------------------------


def expect_dict(value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        raise SchemaError(path, f"expected an object, got {type(value).__name__}")
    return value


def expect_list(value: Any, path: str) -> list:
    if not isinstance(value, list):
        raise SchemaError(path, f"expected a list, got {type(value).__name__}")
    return value


def expect_str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise SchemaError(path, f"expected a string, got {type(value).__name__}")
    return value


def require(obj: dict, key: str, path: str = "") -> Any:
    if key not in obj:
        raise SchemaError(path, f"missing key {key!r}")
    return obj[key]


def value_or(obj: dict, key: str, default: Any) -> Any:
    """An absent or null field takes its default; a falsy wrong type ("", 0) is kept to be rejected."""
    value = obj.get(key)
    return default if value is None else value


def require_str(obj: dict, key: str, path: str) -> str:
    return expect_str(require(obj, key, path), f"{path}.{key}" if path else key)


def record_id(obj: dict, fallback: str) -> str:
    """The source's own id (a string or an integer) when it has one, else the positional id."""
    if "id" not in obj or obj["id"] is None:
        return fallback
    own = obj["id"]
    if isinstance(own, bool) or not isinstance(own, (str, int)):
        raise SchemaError("id", f"expected a string or integer, got {type(own).__name__}")
    return str(own)


def extra_fields(obj: dict, known: tuple[str, ...]) -> dict[str, Any]:
    """Top-level keys a reader does not map, kept verbatim so conversion loses nothing."""
    return {key: value for key, value in obj.items() if key not in known}


def arguments_object(value: Any, path: str) -> dict[str, Any]:
    """Call arguments as an object; sources often store them as a JSON string."""
    if isinstance(value, str):
        value = parse_json_string(value, path)
        if not isinstance(value, dict):
            raise SchemaError(path, f"arguments string is JSON {type(value).__name__}, not an object")
    return expect_dict(value, path)


def tools_and_extras(specs: Any, path: str) -> tuple[list[Tool], dict[str, dict[str, Any]]]:
    """Tools from a list of function definitions (bare or ``{"type": "function", "function"}``).

    Keys a canonical tool has no place for (``"required": null`` beside ``parameters``,
    OpenAI's ``"strict"``) come back per tool position as ``{"0": {...}}`` for ``meta``.
    """
    tools: list[Tool] = []
    extras: dict[str, dict[str, Any]] = {}
    for index, spec in enumerate(expect_list(specs, path)):
        where = f"{path}[{index}]"
        spec = expect_dict(spec, where)
        function = spec
        extra: dict[str, Any] = {}
        if spec.get("type", "function") != "function":
            raise SchemaError(f"{where}.type", f"expected 'function', got {spec['type']!r}")
        if isinstance(spec.get("function"), dict):
            function = spec["function"]
            extra.update(extra_fields(spec, ("type", "function")))
        extra.update(extra_fields(function, TOOL_KEYS))
        tools.append(tool_from_spec({k: function[k] for k in TOOL_KEYS if k in function}, where))
        if extra:
            extras[str(index)] = extra
    return tools, extras


# Python-style type names some sources write in JSON Schemas, and the JSON Schema names they mean.
PYTHON_TYPE_NAMES = {
    "dict": "object",
    "float": "number",
    "int": "integer",
    "str": "string",
    "bool": "boolean",
    "list": "array",
    "tuple": "array",
}
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMAS = ("items", "additionalProperties", "not", "contains")


def normalize_schema_types(schema: Any) -> Any:
    """A copy of a JSON Schema with Python type names (``"dict"``, ``"float"``, ...) renamed.

    Only ``type`` keywords change, at every level a sub-schema can sit; property *names* and
    everything else are kept. The meaning is the same, and the result is a schema validators accept.
    """
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    kind = out.get("type")
    if isinstance(kind, str):
        out["type"] = PYTHON_TYPE_NAMES.get(kind, kind)
    elif isinstance(kind, list):
        out["type"] = [PYTHON_TYPE_NAMES.get(k, k) if isinstance(k, str) else k for k in kind]
    for key in _SUBSCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: normalize_schema_types(sub) for name, sub in out[key].items()}
    for key in _SUBSCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [normalize_schema_types(sub) for sub in out[key]]
    for key in _SUBSCHEMAS:
        if key in out:
            sub = out[key]
            is_list = isinstance(sub, list)
            out[key] = [normalize_schema_types(s) for s in sub] if is_list else normalize_schema_types(sub)
    return out


def cut_json_values(
    text: str, opener: str, wanted: Callable[[Any], bool], limit: int | None = None
) -> tuple[str, list]:
    """(text without them, values): JSON values starting at ``opener`` that ``wanted`` accepts.

    Sources embed function definitions in prose; ``raw_decode`` at each opener finds them without
    guessing where the JSON ends. Values not wanted stay part of the prose.
    """
    values: list = []
    pieces: list[str] = []
    start = position = 0
    while (limit is None or len(values) < limit) and (position := text.find(opener, position)) != -1:
        try:
            value, end = STRICT_JSON.raw_decode(text, position)
        except (ValueError, RecursionError):
            position += 1
            continue
        if wanted(value):
            values.append(value)
            pieces.append(text[start:position])
            start = end
        position = end
    pieces.append(text[start:])
    return "".join(pieces).strip(), values


def tools_from_text(text: str, path: str) -> Any:
    """A ``tools`` field stored as a JSON string; an empty string means no tools."""
    return [] if not text.strip() else parse_json_string(text, path)


# --- building the message list ---------------------------------------------------------------


class Dialogue:
    """Canonical message dicts, appended in source order.

    A call turn with no text of its own joins the assistant message right before it, so
    consecutive call turns become one message with parallel calls, and an assistant text turn
    followed by a call turn becomes one message with content and calls (the order a model writes
    them). A tool result links to the earliest unanswered call (of its name
    when the source names it); a result with no call to answer keeps ``tool_call_id`` null and is
    left for ``train.validate`` to judge.
    """

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._ids = CallIds()
        self._names: dict[str, str] = {}

    def say(self, role: str, content: str | None) -> None:
        self.messages.append({"role": role, "content": content})

    def call(self, calls: list[tuple[str, dict[str, Any]]], content: str | None = None) -> None:
        tool_calls = []
        for name, arguments in calls:
            call_id = self._ids.issue(name)
            self._names[call_id] = name
            tool_calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
        last = self.messages[-1] if self.messages else None
        if content is None and last is not None and last["role"] == "assistant":
            last.setdefault("tool_calls", []).extend(tool_calls)
        else:
            self.messages.append({"role": "assistant", "content": content, "tool_calls": tool_calls})

    def result(self, content: str, name: str | None = None) -> None:
        call_id = self._ids.answer(name)
        if call_id is None and name is None:
            self.messages.append({"role": "tool", "content": content})
            return
        if name is None:
            name = self._names[call_id]
        self.messages.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": content})


def conversation(conv_id: str, messages: list[dict], tools: list[Tool], meta: dict[str, Any]) -> Conversation:
    """The finished record, through ``Conversation.from_dict`` so its structure is checked once more."""
    if not messages:
        raise SchemaError("", "no messages")
    return Conversation.from_dict(
        {"id": conv_id, "tools": [tool.to_dict() for tool in tools], "messages": messages, "meta": meta}, "record"
    )
