"""Harmony's tool definitions: JSON Schema written as the TypeScript-like ``namespace functions { ... }``.

The layout is openai-harmony's (0.0.8, the renderer gpt-oss was released with): each tool is its description
as ``// `` lines, then ``type NAME = (_: {...}) => any;``; an object lists its properties one per line with
``// description`` above, ``?`` after optional names and ``, // default: ...`` after defaults; strings with an
enum become ``"a" | "b"``, integers ``number``, arrays ``T[]``, ``oneOf`` one ``| variant`` line each, and
any schema it has no rule for ``any``. tests/formats/test_harmony.py holds this to openai-harmony's own output
on every tool of the parity corpus and the real glaive and BFCL conversations.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from train.schema import Tool


def rust_lines(text: str) -> list[str]:
    """``str::lines`` as Rust splits: at ``\\n`` only (a trailing ``\\r`` dropped), no empty last line."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _get(schema: Any, key: str) -> Any:
    return schema.get(key) if isinstance(schema, dict) else None


def _json(value: Any) -> str:
    """A JSON value as serde_json's ``Display`` writes it: compact, non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _is_enum(schema: Any) -> bool:
    values = _get(schema, "enum")
    return isinstance(values, list) and bool(values)


def _default_text(schema: Any) -> str:
    """The ``default: ...`` comment of a schema with a default: a plain string quoted, an enum's bare."""
    default = schema["default"]
    if isinstance(default, str):
        return f'default: "{default}"' if not _is_enum(schema) else f"default: {default}"
    return f"default: {_json(default)}"


def _nullable(schema: Any, text: str) -> str:
    return f"{text} | null" if _get(schema, "nullable") is True and "null" not in text else text


def _variant_comments(variant: Any, skip_description: bool = False, property_description: Any = None) -> str:
    comments = []
    description = _get(variant, "description")
    if not skip_description and isinstance(description, str) and description != property_description:
        comments.append(description)
    if isinstance(variant, dict) and "default" in variant:
        comments.append(_default_text(variant))
    return f" // {' '.join(comments)}" if comments else ""


def to_typescript(schema: Any, indent: str = "") -> str:
    """One JSON Schema as harmony's TypeScript-like type."""
    one_of = _get(schema, "oneOf")
    if isinstance(one_of, list):
        out = ""
        for variant in one_of:
            out += f"\n{indent} | " + _nullable(variant, to_typescript(variant, indent + "   "))
            out += _variant_comments(variant)
        return out
    kind = _get(schema, "type")
    if isinstance(kind, list):
        names = ["number" if k == "integer" else k for k in kind if isinstance(k, str)]
        if names:
            return " | ".join(names)
    if not isinstance(kind, str):
        return "any"
    if kind == "object":
        return _object(schema, indent)
    if kind == "string":
        values = _get(schema, "enum")
        quoted = [f'"{v}"' for v in values if isinstance(v, str)] if isinstance(values, list) else []
        return " | ".join(quoted) if quoted else "string"
    if kind in ("number", "integer"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "array":
        return f"{to_typescript(schema['items'], indent)}[]" if "items" in schema else "Array<any>"
    return "any"


def _object(schema: dict, indent: str) -> str:
    description = _get(schema, "description")
    out = f"{indent}// {description}\n" if isinstance(description, str) else ""
    out += "{\n"
    properties = _get(schema, "properties")
    required_list = _get(schema, "required")
    required = {r for r in required_list if isinstance(r, str)} if isinstance(required_list, list) else set()
    for key, value in properties.items() if isinstance(properties, dict) else ():
        out += _property(key, value, key in required, indent)
    return out + f"{indent}}}"


def _property(key: str, value: Any, required: bool, indent: str) -> str:
    out = ""
    title = _get(value, "title")
    if isinstance(title, str):
        out += f"{indent}// {title}\n{indent}//\n"
    one_of = _get(value, "oneOf")
    description = _get(value, "description")
    if one_of is None and isinstance(description, str):
        out += f"{indent}// {description}\n"
    examples = _get(value, "examples")
    if isinstance(examples, list) and examples:
        out += f"{indent}// Examples:\n" + "".join(f'{indent}// - "{e}"\n' for e in examples if isinstance(e, str))
    mark = "" if required else "?"
    if isinstance(one_of, list):
        return out + _one_of_property(key, mark, value, one_of, indent)
    out += f"{indent}{key}{mark}: " + _nullable(value, to_typescript(value, indent + "    ")) + ","
    if one_of is None and isinstance(value, dict) and "default" in value:
        out += " // " + _default_text(value)
    return out + "\n"


def _one_of_property(key: str, mark: str, value: dict, variants: list, indent: str) -> str:
    out = ""
    description = value.get("description")
    description = description if isinstance(description, str) else None
    # the property's description is written once: above it, unless the first variant says the same
    above = description is not None and (not variants or _get(variants[0], "description") != description)
    if above:
        out += f"{indent}// {description}\n"
    if "default" in value:
        out += f"{indent}// {_default_text(value)}\n"
    out += f"{indent}{key}{mark}:\n"
    for position, variant in enumerate(variants):
        out += f"{indent} | " + _nullable(variant, to_typescript(variant, indent + "   "))
        out += _variant_comments(variant, skip_description=position == 0 and above, property_description=description)
        out += "\n"
    return out + f"{indent},\n"


def functions_namespace(tools: Sequence[Tool]) -> str:
    """The ``# Tools`` section of the developer message for function tools."""
    lines = ["## functions\n", "namespace functions {\n"]
    for tool in tools:
        lines += [f"// {line}" for line in rust_lines(tool.description)]
        lines.append(f"type {tool.name} = (_: {to_typescript(tool.parameters)}) => any;\n")
    lines.append("} // namespace functions")
    return "# Tools\n\n" + "\n".join(lines)


__all__ = ["functions_namespace", "rust_lines", "to_typescript"]
