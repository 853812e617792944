"""The canonical records every tool-use corpus converts into.

Three kinds of record travel through tooltrain as JSON Lines:

* ``Conversation`` — a tool conversation in the OpenAI/HF convention::

      {"id", "tools": [{"type": "function", "function": {"name", "description", "parameters"}}],
       "messages": [...], "meta": {...}}

  Assistant messages carry optional ``reasoning_content`` (reasoning before the answer), ``content``
  and ``tool_calls`` (``[{"id", "type": "function", "function": {"name", "arguments": {...}}}]``, arguments are
  objects, never JSON strings). Tool results are ``{"role": "tool", "tool_call_id", "name", "content"}``.
* ``ToolQuery`` — ``{"id", "query", "gold_tools": [...], "meta"}`` for retrieval and
  recommendation datasets.
* ``ToolLibrary`` — ``{"id", "tools": [...], "meta"}``: a named set of tool definitions.

``from_dict`` checks *structure* (types and required keys at every level, tool names not empty) and raises
``SchemaError`` naming the path of the offending field. Whether the conversation makes sense
for its tools (undefined tools, schema violations, unanswered calls) is ``train.validate``'s job.
The mapping dict -> record -> dict is lossless for every valid record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

ROLES = ("system", "user", "assistant", "tool")
Role = Literal["system", "user", "assistant", "tool"]


class SchemaError(ValueError):
    """A record does not have the canonical structure. ``path`` locates the field."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason


def _expect(value: Any, kind: type | tuple[type, ...], path: str) -> Any:
    # bool is a subclass of int; a schema never wants True where it asked for a number.
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
        names = "/".join(k.__name__ for k in _as_tuple(kind))
        raise SchemaError(path, f"expected {names}, got {type(value).__name__}")
    return value


def _get(obj: dict, key: str, default: Any) -> Any:
    """An absent or null field takes its default; any other falsy value is kept (and type-checked)."""
    value = obj.get(key)
    return default if value is None else value


def _name(value: Any, path: str) -> str:
    """A tool's name: a call to "" or a tool named "" can be neither written nor called."""
    if not _expect(value, str, path).strip():
        raise SchemaError(path, f"a tool name cannot be empty, got {value!r}")
    return value


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _expect_keys(obj: dict, path: str, required: tuple[str, ...], allowed: tuple[str, ...]) -> None:
    for key in required:
        if key not in obj:
            raise SchemaError(path, f"missing key {key!r}")
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        raise SchemaError(path, f"unknown key(s) {', '.join(map(repr, unknown))}")


@dataclass
class Tool:
    """One function definition. ``parameters`` is a JSON Schema object (checked by validate)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    @classmethod
    def from_dict(cls, obj: Any, path: str = "tool") -> Tool:
        _expect(obj, dict, path)
        _expect_keys(obj, path, ("type", "function"), ("type", "function"))
        if obj["type"] != "function":
            raise SchemaError(f"{path}.type", f"expected 'function', got {obj['type']!r}")
        fn = _expect(obj["function"], dict, f"{path}.function")
        _expect_keys(fn, f"{path}.function", ("name",), ("name", "description", "parameters"))
        name = _name(fn["name"], f"{path}.function.name")
        description = _expect(fn.get("description", ""), str, f"{path}.function.description")
        parameters = _expect(
            fn.get("parameters", {"type": "object", "properties": {}}), dict, f"{path}.function.parameters"
        )
        return cls(name=name, description=description, parameters=parameters)


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id} if self.id is not None else {}
        out["type"] = "function"
        out["function"] = {"name": self.name, "arguments": self.arguments}
        return out

    @classmethod
    def from_dict(cls, obj: Any, path: str = "tool_call") -> ToolCall:
        _expect(obj, dict, path)
        _expect_keys(obj, path, ("function",), ("id", "type", "function"))
        if obj.get("type", "function") != "function":
            raise SchemaError(f"{path}.type", f"expected 'function', got {obj['type']!r}")
        call_id = obj.get("id")
        if call_id is not None:
            _expect(call_id, str, f"{path}.id")
        fn = _expect(obj["function"], dict, f"{path}.function")
        _expect_keys(fn, f"{path}.function", ("name",), ("name", "arguments"))
        name = _name(fn["name"], f"{path}.function.name")
        arguments = fn.get("arguments", {})
        if isinstance(arguments, str):
            raise SchemaError(f"{path}.function.arguments", "arguments must be an object, not a JSON string")
        _expect(arguments, dict, f"{path}.function.arguments")
        return cls(name=name, arguments=arguments, id=call_id)


@dataclass
class Message:
    role: Role
    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None  # role == "tool" only
    name: str | None = None  # role == "tool": the tool that produced this result
    # role == "assistant": the reasoning written before the answer (Qwen3's <think>, Harmony's analysis
    # channel). Its own field, as HF chat templates take it, so a format that has no place for it can refuse it.
    reasoning_content: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role}
        if self.reasoning_content is not None:
            out["reasoning_content"] = self.reasoning_content
        if self.content is not None or not self.tool_calls:
            out["content"] = self.content
        if self.tool_calls:
            out["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out

    @classmethod
    def from_dict(cls, obj: Any, path: str = "message") -> Message:
        _expect(obj, dict, path)
        _expect_keys(
            obj, path, ("role",), ("role", "content", "reasoning_content", "tool_calls", "tool_call_id", "name")
        )
        role = obj["role"]
        if role not in ROLES:
            raise SchemaError(f"{path}.role", f"expected one of {', '.join(ROLES)}, got {role!r}")
        content = obj.get("content")
        if content is not None:
            _expect(content, str, f"{path}.content")
        raw_calls = _expect(_get(obj, "tool_calls", []), list, f"{path}.tool_calls")
        if raw_calls and role != "assistant":
            raise SchemaError(f"{path}.tool_calls", f"only assistant messages carry tool calls, not {role!r}")
        calls = [ToolCall.from_dict(c, f"{path}.tool_calls[{i}]") for i, c in enumerate(raw_calls)]
        reasoning = obj.get("reasoning_content")
        if reasoning is not None:
            _expect(reasoning, str, f"{path}.reasoning_content")
            if role != "assistant":
                raise SchemaError(f"{path}.reasoning_content", f"only assistant messages carry reasoning, not {role!r}")
        tool_call_id = obj.get("tool_call_id")
        name = obj.get("name")
        if role == "tool":
            if tool_call_id is not None:
                _expect(tool_call_id, str, f"{path}.tool_call_id")
            if name is not None:
                _expect(name, str, f"{path}.name")
        elif tool_call_id is not None:
            raise SchemaError(f"{path}.tool_call_id", f"only tool messages carry tool_call_id, not {role!r}")
        elif name is not None:
            _expect(name, str, f"{path}.name")
        return cls(
            role=role,
            content=content,
            tool_calls=calls,
            tool_call_id=tool_call_id,
            name=name,
            reasoning_content=reasoning,
        )


def _meta(obj: dict, path: str) -> dict[str, Any]:
    return _expect(_get(obj, "meta", {}), dict, f"{path}.meta")


def _tools(obj: dict, path: str) -> list[Tool]:
    raw = _expect(_get(obj, "tools", []), list, f"{path}.tools")
    return [Tool.from_dict(t, f"{path}.tools[{i}]") for i, t in enumerate(raw)]


@dataclass
class Conversation:
    id: str
    messages: list[Message]
    tools: list[Tool] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    kind = "conversation"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tools": [t.to_dict() for t in self.tools],
            "messages": [m.to_dict() for m in self.messages],
            "meta": self.meta,
        }

    @classmethod
    def from_dict(cls, obj: Any, path: str = "conversation") -> Conversation:
        _expect(obj, dict, path)
        _expect_keys(obj, path, ("id", "messages"), ("id", "tools", "messages", "meta"))
        raw_messages = _expect(obj["messages"], list, f"{path}.messages")
        return cls(
            id=_expect(obj["id"], str, f"{path}.id"),
            messages=[Message.from_dict(m, f"{path}.messages[{i}]") for i, m in enumerate(raw_messages)],
            tools=_tools(obj, path),
            meta=_meta(obj, path),
        )

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)


@dataclass
class ToolQuery:
    id: str
    query: str
    gold_tools: list[str]
    meta: dict[str, Any] = field(default_factory=dict)

    kind = "tool_query"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "query": self.query, "gold_tools": self.gold_tools, "meta": self.meta}

    @classmethod
    def from_dict(cls, obj: Any, path: str = "tool_query") -> ToolQuery:
        _expect(obj, dict, path)
        _expect_keys(obj, path, ("id", "query", "gold_tools"), ("id", "query", "gold_tools", "meta"))
        gold = _expect(obj["gold_tools"], list, f"{path}.gold_tools")
        for i, name in enumerate(gold):
            _expect(name, str, f"{path}.gold_tools[{i}]")
        return cls(
            id=_expect(obj["id"], str, f"{path}.id"),
            query=_expect(obj["query"], str, f"{path}.query"),
            gold_tools=list(gold),
            meta=_meta(obj, path),
        )


@dataclass
class ToolLibrary:
    id: str
    tools: list[Tool]
    meta: dict[str, Any] = field(default_factory=dict)

    kind = "tool_library"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "tools": [t.to_dict() for t in self.tools], "meta": self.meta}

    @classmethod
    def from_dict(cls, obj: Any, path: str = "tool_library") -> ToolLibrary:
        _expect(obj, dict, path)
        _expect_keys(obj, path, ("id", "tools"), ("id", "tools", "meta"))
        return cls(id=_expect(obj["id"], str, f"{path}.id"), tools=_tools(obj, path), meta=_meta(obj, path))


Record = Conversation | ToolQuery | ToolLibrary


def record_from_dict(obj: Any, path: str = "record") -> Record:
    """Parse any canonical record, telling the kinds apart by their keys."""
    _expect(obj, dict, path)
    if "messages" in obj:
        return Conversation.from_dict(obj, path)
    if "query" in obj or "gold_tools" in obj:
        return ToolQuery.from_dict(obj, path)
    if "tools" in obj:
        return ToolLibrary.from_dict(obj, path)
    raise SchemaError(path, "not a conversation (messages), tool query (query, gold_tools) or tool library (tools)")


def dumps(record: Record) -> str:
    """One JSON Lines line. Non-ASCII stays readable; key order is stable for byte-identical rebuilds."""
    return json.dumps(record.to_dict(), ensure_ascii=False, separators=(", ", ": "))
