"""Tool-definition rules: one definition per name (``duplicate-tool``) and parameters that are a JSON Schema for an
object (``invalid-tool-schema``). Schemas are checked and compiled once per distinct schema (cached by their
canonical JSON), so the calls of a million records to one tool cost one check."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import jsonschema

from train.base.json_schema import LOCAL_ONLY, BoundedValidator, reference_fault
from train.schema import Tool
from train.validate.findings import Finding
from train.validate.open_world import Definition


@lru_cache(maxsize=4096)
def cached_schema_fault(canonical_schema: str) -> tuple[list[str | int], str] | None:
    """Why a parameters schema (given as canonical JSON, so it can be cached) is unusable."""
    schema = json.loads(canonical_schema)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
        outside = reference_fault(schema) if isinstance(schema, dict) else None
    except jsonschema.SchemaError as err:
        return list(err.absolute_path), f"not a valid JSON Schema: {err.message}"
    except RecursionError:
        return [], "schema nested too deeply to check"
    if outside:
        return [], outside
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind != "object":
        got = "no top-level type" if kind is None else f"top-level type {kind!r}"
        return (["type"] if kind is not None else []), f"{got}, expected 'object'"
    return None


@lru_cache(maxsize=4096)
def validator(canonical_schema: str) -> jsonschema.Draft202012Validator:
    return BoundedValidator(json.loads(canonical_schema), registry=LOCAL_ONLY)


def canonical(schema: dict[str, Any]) -> str | None:
    try:
        return json.dumps(schema, sort_keys=True, ensure_ascii=False)
    except (RecursionError, ValueError):
        return None


def schema_fault(parameters: dict[str, Any]) -> tuple[list[str | int], str] | None:
    key = canonical(parameters)
    return ([], "schema nested too deeply to check") if key is None else cached_schema_fault(key)


def check_duplicate_tools(tools: list[Tool]) -> Iterator[Finding]:
    """duplicate-tool: two definitions under one name (which one would a call mean?)."""
    first: dict[str, int] = {}
    for i, tool in enumerate(tools):
        if tool.name in first:
            yield (
                "duplicate-tool",
                f"tools[{i}].function.name",
                f"{tool.name!r} is already defined at tools[{first[tool.name]}]",
            )
        else:
            first[tool.name] = i


def check_tool_schemas(tools: list[Tool] | list[Definition]) -> Iterator[Finding]:
    """invalid-tool-schema: parameters that are not a JSON Schema for an object."""
    for i, item in enumerate(tools):
        found = item if isinstance(item, Definition) else Definition(item, i)
        fault = schema_fault(found.tool.parameters)
        if fault:
            segments, reason = fault
            yield "invalid-tool-schema", found.where(segments), f"{found.label}: {reason}"
