"""NexusRaven evaluation queries (Nexus function-calling benchmark): the V1 raw query files, and the V2 release.

INPUTS: one or more query files (``<dataset>_queries.json``), optionally followed by
``_derived_function_definitions.json`` (recognised by its content: a list of ``{dataset, name,
signature, args, docstring}``); or ONE folder: its V1 query files (with the definitions file) and the
NexusRaven-V2 release it holds, the eight tasks of ToolGT's Nexus columns, read by
``train.sources.nexus_release`` (its docstring gives the layouts). Every gold is a Python call string,
read with ``ast`` and never executed; argument values must be literals (anything else: Rejected),
positional arguments are named by the function's parameter order. V1 ids are ``<file stem>-<index>``.
The V1 files have three layouts:

* cve_cpe / emailrep / virustotal: ``{"query", "reference"}``. cve_cpe references read
  ``r = nvdlib.searchCVE(...)``: as NexusRaven's own standardisation does, the assignment and
  the module prefix are dropped (the call is ``searchCVE``); the reference string stays in
  ``meta["reference"]``. Tools are every definition of the file's dataset (NexusRaven offers all
  of them as context functions); description = the cleaned docstring, parameter types from the
  annotations (none: unconstrained), ``required`` and literal defaults as the definitions say.
  Without the definitions file the conversations have no tools.
* toolalpaca: ``{"turns_1".."turns_5": {instruction, golden_answer, docstring, backup}}``. The
  turns are independent queries about one tool set, each its own conversation
  (``<stem>-<index>-turns_<k>``); an all-null turn slot (170 of 255 in the published file) holds
  nothing and yields nothing. Tools come from the ``docstring`` OPTION blocks: the ``def``
  signature (read textually, since parameters such as ``from`` are not valid Python) gives names
  and annotations, the ``Parameters:`` lines give each parameter's description and
  required/optional, the text before them the tool description. ``golden_answer`` (a JSON list
  of call strings) gives the calls, parsed leniently (``convertCurrency(from="EUR", ...)``).
  NexusRaven's standardised evaluation used only ``turns_1``: ``meta["in_standardized_eval"]``.
* toolllm: ``{Input, Output, Output_Original, ToolName, context: [python stubs]}``. Each stub is
  a ``def`` with a docstring, parsed with ``ast``; its defaults (RapidAPI example values) become
  JSON Schema defaults when literal, and no parameter is required (all have defaults). The gold
  is ``Output``; ``Output_Original``, ``ToolName`` and the stubs stay in ``meta``.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from train.base.pysyntax import PySyntaxError, parse_assigned_call, parse_call
from train.base.records import Rejected, SourceError, check_arity, load_json
from train.schema import Conversation, SchemaError, Tool
from train.sources.nexus_gold import annotation_schema, gold_conversation, literal_default, tool_from_stub
from train.sources.nexus_release import data_files, read_release

_OPTION = re.compile(r"<func_start>(.*?)<func_end>\s*<docstring_start>(.*?)<docstring_end>", re.DOTALL)
_SIGNATURE = re.compile(r"\s*def\s+(\w+)\s*\((.*)\)\s*(?:->[^:]*)?:?\s*", re.DOTALL)
_PARAMETER_LINE = re.compile(r"^\s*(\w+) \(([^)]*)\) (required|optional):[ \t]*(.*)$", re.MULTILINE)


# ---------------------------------------------------------------- shared pieces (the rest: nexus_gold)


def _text(record: dict[str, Any], key: str) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value.strip():
        if isinstance(value, str) or value is None:
            raise SchemaError(key, "expected a non-empty string")
        raise SchemaError(key, f"expected a string, got {type(value).__name__}")
    return value


# ---------------------------------------------------------------- definitions (cve_cpe, emailrep, virustotal)


def is_definitions(data: Any) -> bool:
    head = data[:3] if isinstance(data, list) else []
    return bool(head) and all(isinstance(d, dict) and {"signature", "args"} <= set(d) for d in head)


def tool_from_definition(definition: Any, path: str) -> tuple[str, Tool]:
    """(dataset, tool) of one derived function definition."""
    if not isinstance(definition, dict):
        raise SchemaError(path, f"expected an object, got {type(definition).__name__}")
    dataset, name, args = definition.get("dataset"), definition.get("name"), definition.get("args")
    docstring = definition.get("docstring") or ""
    if not isinstance(dataset, str) or not isinstance(name, str) or not name:
        raise SchemaError(path, "expected string 'dataset' and 'name'")
    if not isinstance(args, list) or not isinstance(docstring, str):
        raise SchemaError(path, "expected a list 'args' and a string 'docstring'")
    properties: dict[str, Any] = {}
    required = []
    for index, arg in enumerate(args):
        where = f"{path}.args[{index}]"
        if not isinstance(arg, dict) or not isinstance(arg.get("name"), str):
            raise SchemaError(where, "expected an object with a string 'name'")
        annotation, default = arg.get("annotation"), arg.get("default")
        if not (annotation is None or isinstance(annotation, str)) or not (default is None or isinstance(default, str)):
            raise SchemaError(where, "annotation and default must be Python source strings or null")
        schema = annotation_schema(annotation)
        has_default, value = literal_default(default)
        if has_default:
            schema["default"] = value
        properties[arg["name"]] = schema
        if arg.get("required") is True:
            required.append(arg["name"])
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return dataset, Tool(name=name, description=inspect.cleandoc(docstring), parameters=parameters)


def load_definitions(path: Path, data: list[Any]) -> tuple[dict[str, list[Tool]], list[Rejected]]:
    by_dataset: dict[str, list[Tool]] = {}
    rejected = []
    for index, definition in enumerate(data):
        try:
            dataset, tool = tool_from_definition(definition, "definition")
        except SchemaError as err:
            rejected.append(Rejected(f"{path}#{index}", str(err), definition))
            continue
        by_dataset.setdefault(dataset, []).append(tool)
    return by_dataset, rejected


def convert_reference(record: dict[str, Any], record_id: str, dataset: str, tools: list[Tool]) -> Conversation:
    query, reference = _text(record, "query"), _text(record, "reference")
    try:
        target, call = parse_assigned_call(reference)
    except PySyntaxError as err:
        raise SchemaError("reference", str(err)) from None
    meta: dict[str, Any] = {"source": "nexusraven", "dataset": dataset, "reference": reference}
    if target is not None:
        meta["assigned_to"] = target
    return gold_conversation(record_id, query, [call], list(tools), meta)


# ---------------------------------------------------------------- toolalpaca


def split_parameters(text: str) -> list[str]:
    """Top-level comma split of a parameter list (annotations may hold commas in brackets)."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char in "([{"
        depth -= char in ")]}"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def tool_from_option(signature: str, doc: str, where: str) -> Tool:
    match = _SIGNATURE.fullmatch(signature)
    if match is None:
        raise SchemaError(where, f"not a 'def name(...)' signature: {signature[:60]!r}")
    documented = {m.group(1): m for m in _PARAMETER_LINE.finditer(doc)}
    properties: dict[str, Any] = {}
    required = []
    for parameter in split_parameters(match.group(2)):
        name, _, rest = parameter.partition(":")
        name, annotation = name.strip(), rest.partition("=")[0].strip() or None
        if not name.isidentifier():
            raise SchemaError(where, f"bad parameter {parameter[:40]!r}")
        line = documented.get(name)
        schema = annotation_schema(annotation or (line.group(2) if line else None))
        if line and line.group(4).strip():
            schema["description"] = line.group(4).strip()
        properties[name] = schema
        if line and line.group(3) == "required":
            required.append(name)
    body = doc.strip().strip('"').strip()
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return Tool(name=match.group(1), description=body.split("\nParameters:")[0].strip(), parameters=parameters)


def toolalpaca_tools(docstring: str) -> list[Tool]:
    options = _OPTION.findall(docstring)
    if not options:
        raise SchemaError("docstring", "no <func_start>...<docstring_end> block")
    return [tool_from_option(signature, doc, f"docstring.option[{i}]") for i, (signature, doc) in enumerate(options)]


def convert_toolalpaca_turn(turn: dict[str, Any], record_id: str, key: str) -> Conversation:
    instruction, docstring, golden = (_text(turn, k) for k in ("instruction", "docstring", "golden_answer"))
    tools = toolalpaca_tools(docstring)
    try:
        gold = json.loads(golden)
    except json.JSONDecodeError as err:
        raise SchemaError("golden_answer", f"not a JSON list: {err.msg} at column {err.colno}") from None
    if not isinstance(gold, list) or not gold or not all(isinstance(g, str) for g in gold):
        raise SchemaError("golden_answer", "expected a non-empty JSON list of call strings")
    calls = []
    for index, text in enumerate(gold):
        try:
            calls.append(parse_call(text, lenient=True))
        except PySyntaxError as err:
            raise SchemaError(f"golden_answer[{index}]", str(err)) from None
    meta = {
        "source": "nexusraven", "dataset": "toolalpaca", "turn": key, "in_standardized_eval": key == "turns_1",
        "golden_answer": golden, "backup": turn.get("backup"),
    }  # fmt: skip
    return gold_conversation(f"{record_id}-{key}", instruction, calls, tools, meta)


def toolalpaca_turns(record: dict[str, Any], record_id: str, location: str) -> Iterator[Conversation | Rejected]:
    keys = sorted(record, key=lambda k: int(k.rsplit("_", 1)[1]) if re.fullmatch(r"turns_\d+", k) else -1)
    for key in keys:
        turn = record[key]
        where = f"{location} ({record_id}-{key})"
        if not re.fullmatch(r"turns_\d+", key):
            yield Rejected(where, f"unexpected key {key!r} beside the turns_<k> slots", turn)
        elif not isinstance(turn, dict):
            yield Rejected(where, f"{key}: expected an object, got {type(turn).__name__}", turn)
        elif all(value is None for value in turn.values()):
            continue  # an empty slot: the published file pads every record to five turns
        else:
            try:
                yield convert_toolalpaca_turn(turn, record_id, key)
            except SchemaError as err:
                yield Rejected(where, f"{key}.{err}", turn)


# ---------------------------------------------------------------- toolllm


def convert_toolllm(record: dict[str, Any], record_id: str) -> Conversation:
    query, output = _text(record, "Input"), _text(record, "Output")
    context = record.get("context")
    if not isinstance(context, list) or not all(isinstance(s, str) for s in context):
        raise SchemaError("context", "expected a list of function stub strings")
    tools = [tool_from_stub(stub, f"context[{i}]") for i, stub in enumerate(context)]
    try:
        call = parse_call(output)
    except PySyntaxError as err:
        raise SchemaError("Output", str(err)) from None
    meta = {
        "source": "nexusraven", "dataset": "toolllm", "tool_name": record.get("ToolName"), "output": output,
        "output_original": record.get("Output_Original"), "context": context,
    }  # fmt: skip
    return gold_conversation(record_id, query, [call], tools, meta)


# ---------------------------------------------------------------- files


def read_queries(path: Path, data: Any, definitions: dict[str, list[Tool]]) -> Iterator[Conversation | Rejected]:
    if not isinstance(data, list):
        raise SourceError(f"{path}: expected a JSON list of queries, got {type(data).__name__}")
    dataset = path.stem.removesuffix("_queries")
    for index, record in enumerate(data):
        location, record_id = f"{path}#{index}", f"{path.stem}-{index}"
        if not isinstance(record, dict):
            yield Rejected(location, f"expected an object, got {type(record).__name__}", record)
            continue
        keys = set(record)
        try:
            if keys & {"query", "reference"}:
                yield convert_reference(record, record_id, dataset, definitions.get(dataset, []))
            elif any(k.startswith("turns_") for k in keys):
                yield from toolalpaca_turns(record, record_id, location)
            elif keys & {"Input", "Output", "context"}:
                yield convert_toolllm(record, record_id)
            else:
                yield Rejected(location, f"unknown record layout with keys {', '.join(sorted(keys)) or 'none'}", record)
        except SchemaError as err:
            yield Rejected(f"{location} ({record_id})", str(err), record)


def read(inputs: list[Path]) -> Iterator[Conversation | Rejected]:
    if not inputs:
        raise SourceError(
            "expected one or more query files, optionally followed by _derived_function_definitions.json, or one folder"
        )
    check_arity(inputs, ("QUERIES",) * len(inputs))
    if len(inputs) == 1 and inputs[0].is_dir():
        yield from read_folder(inputs[0])
        return
    for path in inputs:
        if path.is_dir():
            raise SourceError(f"{path}: expected a JSON file, got a folder (a folder is read alone)")
    loaded = [(path, load_json(path)) for path in inputs]
    definitions: dict[str, list[Tool]] = {}
    definition_rejects: list[Rejected] = []
    if len(loaded) > 1 and is_definitions(loaded[-1][1]):
        definitions, definition_rejects = load_definitions(*loaded.pop())
    for path, data in loaded:
        if is_definitions(data):
            raise SourceError(f"{path}: function definitions must come last, after the query files")
        yield from read_queries(path, data, definitions)
    yield from definition_rejects


def read_folder(folder: Path) -> Iterator[Conversation | Rejected]:
    """A folder: its V1 query files (``*_queries.json``, with ``_derived_function_definitions.json``), then the
    NexusRaven-V2 release it holds (``train.sources.nexus_release``)."""
    files = data_files(folder)
    v1 = [p for p in files if p.name.endswith("_queries.json")]
    definitions = [p for p in files if p.name == "_derived_function_definitions.json"]
    release = [p for p in files if p not in v1 and p not in definitions]
    if not v1 and not release:
        raise SourceError(f"{folder}: no NexusRaven query file (*_queries.json) and no NexusRaven-V2 release file")
    if v1:
        yield from read(v1 + definitions[:1])
    yield from read_release(folder, release + definitions[1:])
