"""Call rules: each call names a defined tool (``undefined-tool``; retrieved tools count, ``open_world``), its arguments
are valid against that tool's schema (``arguments-schema``, ``pattern-timeout``: all pattern matching of one record
shares one time budget) and no two calls share an id (``duplicate-call-id``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import jsonschema
import referencing.exceptions

from train.base.json_schema import REGEX_BUDGET_S, PatternFault, regex_budget
from train.schema import Conversation, Message, ToolCall
from train.validate.findings import Finding, json_path
from train.validate.open_world import Definition, definitions
from train.validate.tools import cached_schema_fault, canonical, validator


@dataclass(frozen=True)
class CallRef:
    message: int
    index: int
    call: ToolCall

    @property
    def where(self) -> str:
        return f"messages[{self.message}].tool_calls[{self.index}]"


def iter_calls(messages: list[Message]) -> Iterator[CallRef]:
    for m, msg in enumerate(messages):
        for c, call in enumerate(msg.tool_calls):
            yield CallRef(m, c, call)


def _first_tools(defined: list[Definition]) -> dict[str, Definition]:
    out: dict[str, Definition] = {}
    for found in defined:
        out.setdefault(found.tool.name, found)
    return out


def check_undefined_tools(conv: Conversation, defined: list[Definition] | None = None) -> Iterator[Finding]:
    """undefined-tool: a call to a tool the conversation neither lists nor got from a retrieval call's result."""
    first = _first_tools(definitions(conv) if defined is None else defined)
    for ref in iter_calls(conv.messages):
        if ref.call.name not in first:
            known = ", ".join(list(first)[:10]) + (", ..." if len(first) > 10 else "")
            tail = f"defined: {known}" if first else "the conversation defines no tools"
            yield "undefined-tool", f"{ref.where}.function.name", f"{ref.call.name!r} is not a defined tool ({tail})"


def check_arguments(conv: Conversation, defined: list[Definition] | None = None) -> Iterator[Finding]:
    """arguments-schema: each JSON Schema violation of a call's arguments, at its JSON path.
    A schema that only fails when applied (unresolvable $ref) is reported as invalid-tool-schema; a
    pattern that runs out of the record's regex budget is a pattern-timeout (the call is not checked)."""
    first = _first_tools(definitions(conv) if defined is None else defined)
    broken: set[int] = set()
    deadline = time.monotonic() + REGEX_BUDGET_S  # one budget for the whole record
    for ref in iter_calls(conv.messages):
        found = first.get(ref.call.name)
        if found is None:
            continue
        key = canonical(found.tool.parameters)
        if key is None or found.index in broken or cached_schema_fault(key):
            continue
        base = f"{ref.where}.function.arguments"
        try:
            with regex_budget(deadline):
                errors = sorted(validator(key).iter_errors(ref.call.arguments), key=_error_order)
        except referencing.exceptions.Unresolvable as err:
            broken.add(found.index)
            yield "invalid-tool-schema", found.where(), f"{found.label}: unresolvable $ref ({err})"
            continue
        except PatternFault as fault:
            if not fault.timeout:
                broken.add(found.index)
                yield "invalid-tool-schema", found.where(), f"{found.label}: {fault.detail}"
                continue
            where = json_path(base, path_to(ref.call.arguments, fault.subject) or [])
            parameter = where.removeprefix(base).lstrip(".") or "the arguments"
            yield (
                "pattern-timeout",
                where,
                (
                    f"{found.label}: checking {parameter} against pattern {fault.pattern!r} ran out of the "
                    f"{REGEX_BUDGET_S:g} s regex budget of a record (catastrophic backtracking?); not checked"
                ),
            )
            continue
        except RecursionError:
            yield "arguments-schema", base, "arguments nested too deeply to check"
            continue
        for error in errors:
            yield "arguments-schema", json_path(base, error.absolute_path), error.message


def path_to(value: Any, target: Any) -> list[str | int] | None:
    """The path of the first string (a value or a key) that *is* ``target`` inside ``value``; for a key,
    the path of the object holding it. Iterative, like ``iter_strings``."""
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        item, path = stack.pop()
        if item is target:
            return path
        if isinstance(item, dict):
            if any(key is target for key in item):
                return path
            stack.extend((sub, [*path, key]) for key, sub in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((sub, [*path, i]) for i, sub in reversed(list(enumerate(item))))
    return None


def _error_order(error: jsonschema.ValidationError) -> tuple:
    # By location (indexes numerically), then message: stable whatever the schema's key order.
    where = tuple((0, seg, "") if isinstance(seg, int) else (1, 0, seg) for seg in error.absolute_path)
    return where, error.message


def check_duplicate_call_ids(messages: list[Message]) -> Iterator[Finding]:
    """duplicate-call-id: two calls sharing an id, so a result cannot say which one it answers."""
    seen: dict[str, str] = {}
    for ref in iter_calls(messages):
        call_id = ref.call.id
        if call_id is None:
            continue
        if call_id in seen:
            yield "duplicate-call-id", f"{ref.where}.id", f"id {call_id!r} is already used by {seen[call_id]}"
        else:
            seen[call_id] = ref.where
