"""Salesforce xLAM / APIGen function-calling records -> ``Conversation``.

INPUTS: one or more JSON array or JSON Lines files or tables (Parquet, Arrow, CSV, a ``datasets``
folder: ``train.sources.tables``), read in order. A record::

    {"id"?: int | str, "query": str, "tools": "<JSON list of {name, description, parameters}>",
     "answers": "<JSON list of {name, arguments}>"}

becomes a user message (the query) and one assistant message whose tool calls are the answers
in order (ids ``call_0, call_1, ...``; parallel calls when there are several). xLAM has no tool
results and no final answer, so the conversation ends on the call turn (an SFT target).

Decisions:

* xLAM ``parameters`` are not JSON Schema: ``{"city": {"description", "type": "str, optional",
  "default": ""}}``. They become ``{"type": "object", "properties": {...}, "required": [...]}``:
  each property keeps its description and default, its Python type name maps to a JSON Schema
  type (``str`` string, ``int`` integer, ``float`` number, ``bool`` boolean, ``List[...]`` /
  ``list`` / ``tuple`` array with ``items`` when the element type maps, ``Dict`` / ``dict``
  object; anything else has no ``type``, i.e. any value), and a parameter is required unless its
  type string says ``optional`` or ``default=...`` after the type (``"int, default=100"``). The
  published type strings are kept in ``meta["xlam_types"]`` (``{"<tool index>": {"param":
  "str, optional"}}``), so nothing is lost. Parameters already written as a JSON Schema object
  (``"type": "object"``) are kept as they are.
* ``answers`` must be a non-empty list: an empty one (an irrelevance sample: "call nothing")
  has no assistant turn to express it and is rejected with that reason.
* ``arguments`` may be an object or a JSON string of one. Unmapped record keys go to
  ``meta["extra"]``; keys of tool definitions beyond name/description/parameters to
  ``meta["tool_extra"]``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from train.base.records import Rejected
from train.schema import Conversation, SchemaError
from train.sources._dialogue import (
    PYTHON_TYPE_NAMES,
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
    require,
    tools_and_extras,
)

SOURCE = "xlam"
RECORD_KEYS = ("id", "query", "tools", "answers")
JSON_TYPES = ("string", "integer", "number", "boolean", "object", "array", "null")
SCALAR_TYPES = {**PYTHON_TYPE_NAMES, **{name: name for name in JSON_TYPES}}
_CONTAINER = re.compile(r"(?i)(list|tuple|set|dict)(?:\[(.*)\])?")


def read(inputs: list[Path]) -> Iterator[Conversation | Rejected]:
    return read_records(inputs, conversation_from_xlam)


def conversation_from_xlam(obj: Any, fallback_id: str) -> Conversation:
    obj = expect_dict(obj, "record")
    query = expect_str(require(obj, "query"), "query")
    specs = expect_list(json_field(obj, "tools"), "tools")
    answers = expect_list(json_field(obj, "answers"), "answers")
    if not answers:
        raise SchemaError("answers", "empty list: no call to make, and xLAM has no text answer to train instead")
    xlam_types: dict[str, dict[str, str]] = {}
    converted = []
    for index, spec in enumerate(specs):
        spec = expect_dict(spec, f"tools[{index}]")
        if "parameters" in spec and not is_json_schema(spec["parameters"]):
            schema, types = schema_from_xlam(spec["parameters"], f"tools[{index}].parameters")
            spec = dict(spec, parameters=schema)
            if types:
                xlam_types[str(index)] = types
        converted.append(spec)
    tools, tool_extra = tools_and_extras(converted, "tools")
    dialogue = Dialogue()
    dialogue.say("user", query)
    dialogue.call([answer_call(answer, f"answers[{index}]") for index, answer in enumerate(answers)])
    meta: dict[str, Any] = {"source": SOURCE}
    extras = {"xlam_types": xlam_types, "tool_extra": tool_extra, "extra": extra_fields(obj, RECORD_KEYS)}
    meta.update({key: value for key, value in extras.items() if value})
    return conversation(record_id(obj, fallback_id), dialogue.messages, tools, meta)


def json_field(obj: dict, key: str) -> Any:
    """xLAM stores ``tools`` and ``answers`` as JSON strings; already-decoded lists are accepted."""
    value = require(obj, key)
    return parse_json_string(value, key) if isinstance(value, str) else value


def answer_call(answer: Any, path: str) -> tuple[str, dict[str, Any]]:
    answer = expect_dict(answer, path)
    name = expect_str(require(answer, "name", path), f"{path}.name")
    return name, arguments_object(answer.get("arguments", {}), f"{path}.arguments")


def is_json_schema(parameters: Any) -> bool:
    return isinstance(parameters, dict) and parameters.get("type") == "object"


def schema_from_xlam(parameters: Any, path: str) -> tuple[dict[str, Any], dict[str, str]]:
    """xLAM ``{param: {description, type, default}}`` -> (JSON Schema object, {param: type string})."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    types: dict[str, str] = {}
    for name, spec in expect_dict(parameters, path).items():
        spec = expect_dict(spec, f"{path}.{name}")
        published = spec.get("type")
        if published is not None:
            types[name] = expect_str(published, f"{path}.{name}.type")
        prop: dict[str, Any] = {}
        for key, value in spec.items():  # the JSON type takes the published type's place
            prop.update(json_type(value) if key == "type" else {key: value})
        if published is None or not any(word in split_type(published)[1].lower() for word in ("optional", "default")):
            required.append(name)
        properties[name] = prop
    return {"type": "object", "properties": properties, "required": required}, types


def split_type(published: str) -> tuple[str, str]:
    """``"Dict[str, int], optional"`` -> ``("Dict[str, int]", "optional")``: the first top-level comma."""
    depth = 0
    for index, char in enumerate(published):
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        elif char == "," and depth == 0:
            return published[:index].strip(), published[index + 1 :].strip()
    return published.strip(), ""


def json_type(published: str) -> dict[str, Any]:
    """``"List[int], optional"`` -> ``{"type": "array", "items": {"type": "integer"}}``; ``{}`` when unknown."""
    base, _ = split_type(published)
    if base.lower() in SCALAR_TYPES:
        return {"type": SCALAR_TYPES[base.lower()]}
    container = _CONTAINER.fullmatch(base)
    if container is None:
        return {}
    kind, inner = container.group(1).lower(), container.group(2)
    if kind == "dict":
        return {"type": "object"}
    out: dict[str, Any] = {"type": "array"}
    element = json_type(inner) if inner and not split_type(inner)[1] else {}
    if element:
        out["items"] = element
    return out
