"""International Tool Calling (ITC) samples, with the API records their tools come from.

INPUTS: a samples file, then optionally the API file (JSON array or JSON Lines, layout of the
ITC paper, arXiv 2603.05515, appendices A, F and I; the dataset itself is not public, so the
tests use fixtures written from the paper's examples).

* API record: ``{"tool_name", "tool_description", "home_url", "country", "api_list": [{"name",
  "url", "description", "method", "required_parameters": [{"name", "type", "description",
  "default"}], "optional_parameters": [...]}]}``. Each API becomes one canonical tool named by
  its ``name``; ``rapidapi_parameters`` turns the parameter lists into JSON Schema (types mapped
  case-insensitively, ``"default": ""`` meaning "no default").
* Sample: ``{"system": "...{api_list}...", "conversations": [{"from": "user", "value"},
  {"from": "assistant", "value": "json{\\"Thought\\": ..., \\"Action\\": \\"[api(p='v'), ...]\\"}"},
  {"role": "Tool", "content": {...}}, ...]}``. Assistant answers are ``json{...}`` or
  ``json({...})`` (both appear in the paper); the Thought becomes the message content and the
  Action list becomes tool calls, parsed with ``ast`` in lenient mode (the paper's Actions use
  call names with spaces, quoted argument names and JSON ``true``). ``[]`` is an answer without
  a call. An assistant value that is not a json answer is a plain reply (a final answer after
  tool results). Tool results answer the earliest unanswered call (nested tasks chain calls
  through results). The raw answers stay in ``meta["raw_answers"]``.

Decisions. The system prompt embeds the API list and the json answer format that canonical
``tools`` and ``tool_calls`` replace, so it goes to ``meta["system"]``, not into the messages
(a chat format would otherwise render the tools twice and contradict the call format). A
sample lists no tools of its own: with an API file, its tools are all APIs of every tool record
one of its calls names (ITC prompts each query with the APIs it was generated for, and sibling
APIs stay as distractors). Actions name an API (``latest``) or, for a one-API tool, the tool
(``Google Translate``); such a call is renamed to the API's name, recorded in
``meta["renamed_calls"]``. A call that names no API of the file, or a multi-API tool, is
rejected. Without an API file the conversations have no tools. ``language`` (when present) and
the sample's other fields go to ``meta`` as they are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from train.base.pysyntax import PySyntaxError, parse_call_list
from train.base.records import (
    CallIds,
    Rejected,
    SourceError,
    check_arity,
    iter_json_records,
    name_and_description,
    strict_loads,
)
from train.schema import Conversation, Message, SchemaError, Tool, ToolCall

# first word of a RapidAPI-style type, lower-cased -> JSON Schema type (unknown: no constraint)
PARAMETER_TYPES = {
    "string": "string", "str": "string", "text": "string", "enum": "string", "date": "string",
    "time": "string", "datetime": "string", "geopoint": "string", "file": "string", "url": "string",
    "number": "number", "float": "number", "double": "number", "decimal": "number",
    "integer": "integer", "int": "integer", "long": "integer",
    "boolean": "boolean", "bool": "boolean",
    "array": "array", "list": "array",
    "object": "object", "dict": "object", "json": "object",
}  # fmt: skip
ROLES = {
    "user": "user", "human": "user", "assistant": "assistant", "gpt": "assistant",
    "tool": "tool", "function": "tool", "observation": "tool",
}  # fmt: skip
_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL | re.IGNORECASE)


# ---------------------------------------------------------------- tools


def rapidapi_parameters(required: Any, optional: Any, path: str) -> dict[str, Any]:
    """``required_parameters`` + ``optional_parameters`` lists -> a JSON Schema object."""
    properties: dict[str, Any] = {}
    required_names: list[str] = []
    for group, is_required in ((required, True), (optional, False)):
        key = "required_parameters" if is_required else "optional_parameters"
        if group is None:
            continue
        if not isinstance(group, list):
            raise SchemaError(f"{path}.{key}", f"expected a list, got {type(group).__name__}")
        for index, spec in enumerate(group):
            where = f"{path}.{key}[{index}]"
            name, schema = _parameter(spec, where)
            if name in properties:
                raise SchemaError(f"{where}.name", f"duplicate parameter {name!r}")
            properties[name] = schema
            if is_required:
                required_names.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required_names:
        schema["required"] = required_names
    return schema


def _parameter(spec: Any, where: str) -> tuple[str, dict[str, Any]]:
    if not isinstance(spec, dict):
        raise SchemaError(where, f"expected a parameter object, got {type(spec).__name__}")
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise SchemaError(f"{where}.name", "expected a non-empty string")
    for key in ("type", "description"):
        if key in spec and not isinstance(spec[key], str):
            raise SchemaError(f"{where}.{key}", f"expected a string, got {type(spec[key]).__name__}")
    schema: dict[str, Any] = {}
    words = spec.get("type", "").strip().lower().split()
    if words and words[0] in PARAMETER_TYPES:
        schema["type"] = PARAMETER_TYPES[words[0]]
    if spec.get("description"):
        schema["description"] = spec["description"]
    default = spec.get("default", "")
    if default not in ("", None):  # ITC: "Default value, empty if none"
        schema["default"] = default
    return name, schema


def tools_of_record(record: Any, path: str) -> list[Tool]:
    """One API record (``tool_name`` + ``api_list``) -> one tool per API."""
    if not isinstance(record, dict):
        raise SchemaError(path, f"expected an API record object, got {type(record).__name__}")
    apis = record.get("api_list")
    if not isinstance(apis, list):
        raise SchemaError(f"{path}.api_list", f"expected a list, got {type(apis).__name__}")
    tools = []
    for index, api in enumerate(apis):
        where = f"{path}.api_list[{index}]"
        if not isinstance(api, dict):
            raise SchemaError(where, f"expected an API object, got {type(api).__name__}")
        name, description = name_and_description(api, where)
        parameters = rapidapi_parameters(api.get("required_parameters"), api.get("optional_parameters"), where)
        tools.append(Tool(name=name, description=description, parameters=parameters))
    return tools


def _normalized(name: str) -> str:
    return re.sub(r"[\s_\-]+", "_", name.strip().lower())


class ApiIndex:
    """Every API of the API file, findable by API name or by tool name (normalized)."""

    def __init__(self, records: list[tuple[str, dict[str, Any], list[Tool]]]):
        self.records = records  # (tool_name, record, tools)
        self.by_api: dict[str, list[int]] = {}
        self.by_tool: dict[str, list[int]] = {}
        for position, (tool_name, _, tools) in enumerate(records):
            self.by_tool.setdefault(_normalized(tool_name), []).append(position)
            for tool in tools:
                self.by_api.setdefault(_normalized(tool.name), []).append(position)

    def resolve(self, call_name: str, where: str) -> tuple[int, str]:
        """(record position, API name) that a call name means; SchemaError when none or ambiguous."""
        key = _normalized(call_name)
        owners = sorted(set(self.by_api.get(key, [])))
        if len(owners) == 1:
            return owners[0], next(t.name for t in self.records[owners[0]][2] if _normalized(t.name) == key)
        if len(owners) > 1:
            raise SchemaError(where, f"call {call_name!r} matches APIs of {len(owners)} tools")
        tools = self.by_tool.get(key, [])
        if len(tools) == 1:
            apis = self.records[tools[0]][2]
            if len(apis) == 1:
                return tools[0], apis[0].name
            tool_name = self.records[tools[0]][0]
            raise SchemaError(where, f"call {call_name!r} names tool {tool_name!r}, which has {len(apis)} APIs")
        raise SchemaError(where, f"call {call_name!r} matches no API in the API file")


def load_api_index(path: Path) -> tuple[ApiIndex, list[Rejected]]:
    records, rejected = [], []
    for item in iter_json_records(path):
        if isinstance(item, Rejected):
            rejected.append(item)
            continue
        location, record = item
        try:
            tools = tools_of_record(record, "api")
            tool_name = record.get("tool_name")
            if not isinstance(tool_name, str):
                raise SchemaError("api.tool_name", f"expected a string, got {type(tool_name).__name__}")
        except SchemaError as err:
            rejected.append(Rejected(location, f"API record: {err}", record))
            continue
        records.append((tool_name, record, tools))
    return ApiIndex(records), rejected


# ---------------------------------------------------------------- samples


def parse_answer(value: str, where: str) -> tuple[str, list[Any]] | None:
    """``json{"Thought", "Action"}`` -> (thought, calls); None when the value is plain text."""
    body = value.strip()
    fenced = _FENCE.fullmatch(body)
    if fenced:
        body = fenced.group(1)
    if body[:4].lower() == "json" and body[4:].lstrip()[:1] in ("{", "("):
        body = body[4:].strip()
        if body.startswith("(") and body.endswith(")"):  # json({...})
            body = body[1:-1].strip()
    elif not body.startswith("{"):
        return None
    try:
        answer = strict_loads(body)
    except json.JSONDecodeError as err:
        reason = f"answer is not a json{{Thought, Action}} object: {err.msg} at column {err.colno}"
        raise SchemaError(where, reason) from None
    except (ValueError, RecursionError) as err:  # an integer past the digit limit, absurd nesting
        raise SchemaError(where, f"answer is not a json{{Thought, Action}} object: {err}") from None
    if not isinstance(answer, dict):
        raise SchemaError(where, f"answer: expected an object, got {type(answer).__name__}")
    thought, action = answer.get("Thought"), answer.get("Action")
    if not isinstance(thought, str):
        raise SchemaError(f"{where}.Thought", f"expected a string, got {type(thought).__name__}")
    if not isinstance(action, str):
        raise SchemaError(f"{where}.Action", f"expected a string, got {type(action).__name__}")
    try:
        calls = parse_call_list(action, lenient=True) if action.strip() else []
    except PySyntaxError as err:
        raise SchemaError(f"{where}.Action", str(err)) from None
    return thought, calls


def _turn(entry: Any, where: str) -> tuple[str, Any, str | None]:
    """(role, value, name) of a conversation entry in from/value or role/content form."""
    if not isinstance(entry, dict):
        raise SchemaError(where, f"expected an object, got {type(entry).__name__}")
    speaker = entry.get("from", entry.get("role"))
    value = entry.get("value", entry.get("content"))
    role = ROLES.get(speaker.lower()) if isinstance(speaker, str) else None
    if role is None:
        raise SchemaError(where, f"unknown speaker {speaker!r}; expected user, assistant or tool")
    name = entry.get("name") if isinstance(entry.get("name"), str) else None
    return role, value, name


def convert(sample: Any, index: int, path: Path, apis: ApiIndex | None) -> Conversation:
    if not isinstance(sample, dict):
        raise SchemaError("sample", f"expected an object, got {type(sample).__name__}")
    turns = sample.get("conversations")
    if not isinstance(turns, list) or not turns:
        raise SchemaError("conversations", "expected a non-empty list")
    system = sample.get("system")
    if system is not None and not isinstance(system, str):
        raise SchemaError("system", f"expected a string, got {type(system).__name__}")
    ids = CallIds()
    messages: list[Message] = []
    raw_answers: list[str] = []
    used_records: list[int] = []
    renamed: dict[str, str] = {}
    call_names: dict[str, str] = {}  # call id -> tool name, to name the tool results
    for position, entry in enumerate(turns):
        where = f"conversations[{position}]"
        role, value, name = _turn(entry, where)
        if role == "tool":
            content = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            call_id = ids.answer(name)
            if call_id is None:
                raise SchemaError(where, "tool result answers no earlier call" + (f" to {name!r}" if name else ""))
            messages.append(Message(role="tool", content=content, tool_call_id=call_id, name=call_names[call_id]))
            continue
        if not isinstance(value, str):
            raise SchemaError(f"{where}.value", f"expected a string, got {type(value).__name__}")
        if role == "user":
            messages.append(Message(role="user", content=value))
            continue
        raw_answers.append(value)
        answer = parse_answer(value, f"{where}.value")
        if answer is None:
            messages.append(Message(role="assistant", content=value))
            continue
        thought, calls = answer
        tool_calls = []
        for call in calls:
            if call.args:
                raise SchemaError(f"{where}.value.Action", f"{call.name}: positional arguments have no parameter names")
            call_name = call.name
            if apis is not None:
                record, call_name = apis.resolve(call.name, f"{where}.value.Action")
                used_records.append(record)
                if call_name != call.name:
                    renamed[call.name] = call_name
            tool_calls.append(ToolCall(name=call_name, arguments=call.kwargs, id=ids.issue(call_name)))
            call_names[tool_calls[-1].id] = call_name
        messages.append(Message(role="assistant", content=thought, tool_calls=tool_calls))
    if not any(m.role == "user" for m in messages):
        raise SchemaError("conversations", "no user turn")
    tools = [tool for position in dict.fromkeys(used_records) for tool in apis.records[position][2]] if apis else []
    meta: dict[str, Any] = {k: v for k, v in sample.items() if k not in ("id", "system", "conversations")}
    meta.update(source="itc", raw_answers=raw_answers)
    if system is not None:
        meta["system"] = system
    if renamed:
        meta["renamed_calls"] = renamed
    sample_id = sample.get("id", f"{path.stem}-{index}")
    if not isinstance(sample_id, str):
        raise SchemaError("id", f"expected a string, got {type(sample_id).__name__}")
    return Conversation(id=sample_id, messages=messages, tools=tools, meta=meta)


def read(inputs: list[Path]) -> Iterator[Conversation | Rejected]:
    return read_samples(inputs, convert)


def read_samples(inputs: list[Path], convert_one: Callable[..., Conversation]) -> Iterator[Conversation | Rejected]:
    """ITC's SAMPLES [APIS] inputs, each sample through ``convert_one(sample, index, path, apis)`` (this reader's
    ``convert``, or ``itc_release``'s), a sample it refuses counted as a reject naming its id."""
    check_arity(inputs, ("SAMPLES", "APIS"), optional=1)
    for path in inputs:
        if path.is_dir():
            raise SourceError(f"{path}: expected a JSON or JSON Lines file, got a folder")
    apis, api_rejects = load_api_index(inputs[1]) if len(inputs) == 2 else (None, [])
    for index, item in enumerate(iter_json_records(inputs[0])):
        if isinstance(item, Rejected):
            yield item
            continue
        location, sample = item
        try:
            yield convert_one(sample, index, inputs[0], apis)
        except SchemaError as err:
            sample_id = sample.get("id") if isinstance(sample, dict) else None
            where = f"{location} ({sample_id})" if isinstance(sample_id, str) else location
            yield Rejected(where, str(err), sample)
    yield from api_rejects
