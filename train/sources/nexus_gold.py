"""Pieces both NexusRaven readers share (``nexus``: the V1 files, ``nexus_release``: the V2 release): JSON Schema
types from Python annotations, literal defaults, tools from Python function stubs, and the gold conversation (the
query, then one assistant turn making the gold calls, positional arguments named by the tool's parameters)."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from train.base.pysyntax import PyCall
from train.base.records import CallIds
from train.schema import Conversation, Message, SchemaError, Tool, ToolCall

_ANNOTATIONS = {
    "str": "string", "int": "integer", "float": "number", "bool": "boolean", "dict": "object",
    "list": "array", "tuple": "array", "enum": "string", "datetime": "string", "date": "string",
}  # fmt: skip


def annotation_schema(annotation: str | None) -> dict[str, Any]:
    """``str`` -> {"type": "string"}, ``list[dict]`` -> array of objects; unknown -> {}."""
    match = re.fullmatch(r"\s*(\w+)\s*(?:\[(.+)\])?\s*", annotation or "")
    kind = _ANNOTATIONS.get(match.group(1).lower()) if match else None
    if kind is None:
        return {}
    schema: dict[str, Any] = {"type": kind}
    if kind == "array" and match.group(2):
        items = annotation_schema(match.group(2))
        if items:
            schema["items"] = items
    return schema


def literal_default(source: str | None) -> tuple[bool, Any]:
    """(has default, value) from the Python source of a default; non-literal defaults are dropped."""
    if source is None:
        return False, None
    try:
        value = ast.literal_eval(source)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False, None
    return True, value


def calls_with_names(calls: list[PyCall], parameter_order: dict[str, list[str]]) -> list[ToolCall]:
    """Canonical calls (ids call_0...) with positional arguments named by the tool's parameters."""
    ids, out = CallIds(), []
    for call in calls:
        name = call.short_name
        arguments = dict(call.kwargs)
        if call.args:
            order = parameter_order.get(name)
            if order is None or len(call.args) > len(order):
                known = "unknown" if order is None else len(order)
                reason = f"{len(call.args)} positional argument(s) for {name}, whose parameters are {known}"
                raise SchemaError("gold", reason)
            for parameter, value in zip(order, call.args):
                if parameter in arguments:
                    raise SchemaError("gold", f"{name}: argument {parameter!r} given by position and by name")
                arguments[parameter] = value
        out.append(ToolCall(name=name, arguments=arguments, id=ids.issue(name)))
    return out


def gold_conversation(
    record_id: str, query: str, calls: list[PyCall], tools: list[Tool], meta: dict[str, Any]
) -> Conversation:
    """The query, then one assistant turn making the gold calls (parallel when several)."""
    order = {tool.name: list(tool.parameters.get("properties", {})) for tool in tools}
    answer = Message(role="assistant", tool_calls=calls_with_names(calls, order))
    messages = [Message(role="user", content=query), answer]
    return Conversation(id=record_id, messages=messages, tools=tools, meta=meta)


def tool_from_stub(stub: str, where: str) -> Tool:
    try:
        module = ast.parse(stub)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        raise SchemaError(where, f"not valid Python: {getattr(err, 'msg', err)}") from None
    function = module.body[0] if module.body else None
    if not isinstance(function, ast.FunctionDef):
        raise SchemaError(where, "expected a function definition")
    args = function.args.posonlyargs + function.args.args
    defaults = [None] * (len(args) - len(function.args.defaults)) + list(function.args.defaults)
    properties: dict[str, Any] = {}
    required = []
    for arg, default in zip(args, defaults):
        schema = annotation_schema(ast.unparse(arg.annotation) if arg.annotation else None)
        if default is None:
            required.append(arg.arg)
        else:
            has_default, value = literal_default(ast.unparse(default))
            if has_default:
                schema["default"] = value
        properties[arg.arg] = schema
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return Tool(name=function.name, description=ast.get_docstring(function) or "", parameters=parameters)


__all__ = ["annotation_schema", "calls_with_names", "gold_conversation", "literal_default", "tool_from_stub"]
