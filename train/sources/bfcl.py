"""Berkeley Function Calling Leaderboard (BFCL) question files, with their possible answers.

INPUTS: ``BFCL_<version>_<category>.json`` (JSON Lines of questions), then optionally its
``possible_answer/`` file. Both the v2 files (``question`` is a list of messages) and the v3/v4
files of PyPI's ``bfcl-eval`` (``question`` is a list of turns, each a list of messages) are read.
The category (``simple``, ``live_multiple``, ``simple_python``...) and version come from the file
name; ``meta`` carries them with ``source: "bfcl"``.

Tools. BFCL types are Python/Java/JavaScript names, not JSON Schema; ``json_schema`` converts
them recursively (``dict``/``HashMap`` -> object, ``float``/``double`` -> number, ``tuple``/
``ArrayList`` -> array, ``String`` -> string, ``any`` -> no type constraint, ...). Every other
keyword (enum, default, required, description) is kept as written, except that an ``enum`` of
plain values on an array-typed parameter moves into its ``items`` (where BFCL means it). The
exact original function list stays in ``meta["bfcl_functions"]`` for scorers that need BFCL's
own types. In the Java and JavaScript categories the tools are built from the docs as BFCL prompts them (every
parameter a string "in string representation", ``bfcl_languages.prompt_functions``).

Gold answers. With an answer file, every question must have an answer with the same ``id`` and
every answer a question (either miss is a ``Rejected``). ``ground_truth`` is
``[{function: {arg: [acceptable values]}}]``: one assistant message carries one tool call per
entry (several entries = parallel calls), each argument taking its first acceptable value that is
not ``""`` and omitted when ``""`` is the only one (``""`` is BFCL's "may be omitted");
``["", None]`` omits the argument too (null would contradict its type); in the Java and JavaScript
categories each value is written as the string BFCL's checker reads back to it (``"true"``, ``"5L"``,
``"new int[]{1, 2}"``: ``bfcl_languages.string_value``). As in BFCL's checker, a
value of a dict-typed parameter (and each dict in a list-of-dict parameter) is itself a map of
acceptable-value lists when all its values are lists, and is resolved the same way. An argument
whose list of acceptable values is empty can never be matched: Rejected. The whole
``ground_truth`` is kept in ``meta["ground_truth"]``. Executable categories (``exec_*``) carry
their gold in the question file as Python call strings; they are read with ``ast`` (never
executed), positional arguments are named by the function's parameter order, and ``+ - * /``
between number literals is computed (``p=1/6``). Irrelevance-style categories have no answer
file: the conversation ends with the user turn. So does every conversation read without its answer
file (``with_answers`` in ``read``): no assistant turn, nothing to train on, and ``data convert``
says how many such conversations it wrote.

Multi-turn and agentic categories (v3+: ``multi_turn_*``, ``memory``, ``web_search``) name
``involved_classes`` instead of functions; their tools are read from ``multi_turn_func_doc/``
beside the question file, leaving out ``missed_function`` holdouts as BFCL does (they are added
back at a later turn, see ``meta["missed_function"]``). Their gold needs execution against BFCL's
simulated backends (or is a free-text answer), so no assistant turn is built: the user turns are
kept in order with nothing between them, ``meta["question_turns"]`` records how many messages each
turn had (a miss-function turn has none) and ``meta["ground_truth"]`` the per-turn gold.
``MemoryAPI``'s functions depend on the memory backend chosen at evaluation time (kv, vector,
rec_sum), so memory conversations get no tools and list it under ``meta["unresolved_classes"]``.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from train.base.pysyntax import PySyntaxError, parse_call
from train.base.records import (
    CallIds,
    Rejected,
    SourceError,
    check_arity,
    iter_json_records,
    name_and_description,
    read_text,
)
from train.schema import Conversation, Message, SchemaError, Tool, ToolCall
from train.sources.bfcl_languages import PYTHON, category_language, prompt_functions, string_value

# BFCL type name -> JSON Schema type (None: no constraint). Python names, then Java, then JavaScript.
BFCL_TYPES: dict[str, str | None] = {
    "string": "string", "str": "string", "integer": "integer", "int": "integer", "float": "number",
    "number": "number", "boolean": "boolean", "bool": "boolean", "array": "array", "list": "array",
    "tuple": "array", "dict": "object", "object": "object", "any": None, "Any": None, "": None, "null": "null",
    "String": "string", "char": "string", "byte": "integer", "short": "integer", "long": "integer",
    "double": "number", "Array": "array", "ArrayList": "array", "Set": "array", "Queue": "array",
    "Stack": "array", "HashMap": "object", "Hashtable": "object",
    "Boolean": "boolean", "Bigint": "integer",
}  # fmt: skip
_OBJECT_TYPES = {name for name, kind in BFCL_TYPES.items() if kind == "object"}
_ARRAY_TYPES = {name for name, kind in BFCL_TYPES.items() if kind == "array"}
_FILE_NAME = re.compile(r"BFCL_(v\d+)_(.+)")
# involved class -> function doc file in bfcl-eval's data/multi_turn_func_doc/
FUNC_DOC_FILES = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
    "WebSearchAPI": "web_search.json",
}
BACKEND_DEPENDENT_CLASSES = {"MemoryAPI"}


class GoldError(ValueError):
    """A gold answer that cannot become tool calls; the message names the offending field."""


# ---------------------------------------------------------------- tools


def json_schema(node: Any, path: str = "parameters") -> dict[str, Any]:
    """A BFCL parameter schema as JSON Schema (types renamed recursively, other keys kept)."""
    if not isinstance(node, dict):
        raise SchemaError(path, f"expected a schema object, got {type(node).__name__}")
    out = dict(node)
    if "type" in node:
        kind = _json_type(node["type"], f"{path}.type")
        if kind is None:
            del out["type"]
        else:
            out["type"] = kind
    if "properties" in node:
        if not isinstance(node["properties"], dict):
            raise SchemaError(f"{path}.properties", f"expected an object, got {type(node['properties']).__name__}")
        out["properties"] = {
            name: json_schema(sub, f"{path}.properties.{name}") for name, sub in node["properties"].items()
        }
    if "items" in node:
        if isinstance(node["items"], list):  # tuple-style items became prefixItems in Draft 2020-12
            del out["items"]
            out["prefixItems"] = [json_schema(sub, f"{path}.items[{i}]") for i, sub in enumerate(node["items"])]
        else:
            out["items"] = json_schema(node["items"], f"{path}.items")
    if out.get("type") == "array" and _is_scalar_list(node.get("enum")) and "enum" not in out.get("items", {}):
        # BFCL puts a list's allowed item values on the list itself (live data); in JSON Schema
        # that would demand the whole list equal one string, so the enum moves to its items.
        out["items"] = {**out.get("items", {}), "enum": out.pop("enum")}
    if isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = json_schema(node["additionalProperties"], f"{path}.additionalProperties")
    required = node.get("required", [])
    if not (isinstance(required, list) and all(isinstance(r, str) for r in required)):
        raise SchemaError(f"{path}.required", "expected a list of parameter names")
    return out


def _is_scalar_list(value: Any) -> bool:
    return isinstance(value, list) and all(not isinstance(v, (list, dict)) for v in value)


def _json_type(kind: Any, path: str) -> str | list[str] | None:
    if isinstance(kind, list):
        mapped = [_json_type(k, path) for k in kind]
        return None if None in mapped else mapped  # a union with "any" constrains nothing
    if not isinstance(kind, str):
        raise SchemaError(path, f"expected a type name, got {type(kind).__name__}")
    if kind not in BFCL_TYPES:
        raise SchemaError(path, f"unknown BFCL type {kind!r}")
    return BFCL_TYPES[kind]


def tool_from_function(function: Any, path: str) -> Tool:
    if not isinstance(function, dict):
        raise SchemaError(path, f"expected a function object, got {type(function).__name__}")
    name, description = name_and_description(function, path)
    parameters = json_schema(function.get("parameters", {"type": "dict", "properties": {}}), f"{path}.parameters")
    return Tool(name=name, description=description, parameters=parameters)


# ---------------------------------------------------------------- questions


def question_turns(question: Any) -> list[list[Message]]:
    """v2 (messages), v3+ (turns of messages) or chatable (one string) -> turns of messages."""
    if isinstance(question, str):
        return [[Message(role="user", content=question)]]
    if not isinstance(question, list):
        raise SchemaError("question", f"expected a list, got {type(question).__name__}")
    if all(isinstance(turn, list) for turn in question):
        return [[_message(m, f"question[{t}][{i}]") for i, m in enumerate(turn)] for t, turn in enumerate(question)]
    return [[_message(m, f"question[{i}]") for i, m in enumerate(question)]]


def _message(obj: Any, path: str) -> Message:
    if not isinstance(obj, dict):
        raise SchemaError(path, f"expected a message object, got {type(obj).__name__}")
    role, content = obj.get("role"), obj.get("content")
    if role not in ("system", "user", "assistant"):
        raise SchemaError(f"{path}.role", f"expected system, user or assistant, got {role!r}")
    if not isinstance(content, str):
        raise SchemaError(f"{path}.content", f"expected a string, got {type(content).__name__}")
    return Message(role=role, content=content)


class FuncDocs:
    """The multi-turn function docs beside a question file, loaded once per class."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._cache: dict[str, list[Any]] = {}

    def functions(self, cls: str) -> list[Any]:
        if cls not in self._cache:
            if cls not in FUNC_DOC_FILES:
                raise SchemaError("involved_classes", f"unknown class {cls!r}; known: {', '.join(FUNC_DOC_FILES)}")
            path = self.folder / FUNC_DOC_FILES[cls]
            if not path.is_file():
                raise SchemaError("involved_classes", f"no function docs for {cls}: {path} not found")
            docs = []
            for item in iter_json_records(path):
                if isinstance(item, Rejected):
                    raise SchemaError("involved_classes", f"function docs for {cls}: {item.location}: {item.reason}")
                docs.append(item[1])
            self._cache[cls] = docs
        return self._cache[cls]


def agentic_functions(record: dict[str, Any], docs: FuncDocs) -> tuple[list[Any], list[Any], list[str]]:
    """(all functions of the involved classes, those offered at the start, unresolved classes)."""
    classes = record["involved_classes"]
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
        raise SchemaError("involved_classes", "expected a list of class names")
    functions: list[Any] = []
    unresolved = [c for c in classes if c in BACKEND_DEPENDENT_CLASSES]
    for cls in classes:
        if cls not in BACKEND_DEPENDENT_CLASSES:
            functions.extend(docs.functions(cls))
    missed = record.get("missed_function", {})
    if not isinstance(missed, dict) or not all(isinstance(v, list) for v in missed.values()):
        raise SchemaError("missed_function", "expected {turn: [function names]}")
    held_out = {name for names in missed.values() for name in names}
    offered = [f for f in functions if not (isinstance(f, dict) and f.get("name") in held_out)]
    return functions, offered, unresolved


# ---------------------------------------------------------------- gold answers


def first_acceptable(alternatives: Any, where: str) -> tuple[bool, Any]:
    """(present, value): the first acceptable value that is not "", or (False, None) to omit.

    ``["", None]`` (BFCL live data: "omit it or pass null") omits the argument too: omission is
    acceptable, and null would contradict the parameter's type in the tool schema."""
    if not isinstance(alternatives, list):
        raise GoldError(f"{where}: expected a list of acceptable values, got {type(alternatives).__name__}")
    if not alternatives:
        raise GoldError(f"{where}: no acceptable value (empty list)")
    omittable = "" in alternatives
    for value in alternatives:
        if value != "" and not (value is None and omittable):
            return True, value
    return False, None


def resolve_arguments(alternatives: Any, properties: dict[str, Any], where: str) -> dict[str, Any]:
    """{arg: [acceptable...]} -> {arg: value}, recursing into dict-typed values (see module doc)."""
    if not isinstance(alternatives, dict):
        raise GoldError(f"{where}: expected {{argument: [acceptable values]}}, got {type(alternatives).__name__}")
    arguments = {}
    for name, options in alternatives.items():
        present, value = first_acceptable(options, f"{where}.{name}")
        if present:
            spec = properties.get(name) if isinstance(properties.get(name), dict) else {}
            arguments[name] = _resolve_nested(value, spec, f"{where}.{name}")
    return arguments


def _resolve_nested(value: Any, spec: dict[str, Any], where: str) -> Any:
    kind = spec.get("type")
    sub_properties = spec.get("properties") if isinstance(spec.get("properties"), dict) else {}
    if kind in _OBJECT_TYPES and _is_alternatives_map(value):
        return resolve_arguments(value, sub_properties, where)
    items = spec.get("items") if isinstance(spec.get("items"), dict) else {}
    if (
        kind in _ARRAY_TYPES
        and items.get("type") in _OBJECT_TYPES
        and isinstance(value, list)
        and value
        and all(_is_alternatives_map(v) for v in value)
    ):
        item_properties = items.get("properties") if isinstance(items.get("properties"), dict) else {}
        return [resolve_arguments(v, item_properties, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _is_alternatives_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, list) for v in value.values())


def calls_from_possible_answer(ground_truth: list[Any], functions: dict[str, Any]) -> list[ToolCall]:
    calls = []
    for index, entry in enumerate(ground_truth):
        where = f"ground_truth[{index}]"
        if not isinstance(entry, dict) or len(entry) != 1:
            raise GoldError(f"{where}: expected {{function name: {{argument: [acceptable values]}}}}")
        ((name, alternatives),) = entry.items()
        parameters = functions.get(name, {}).get("parameters")
        properties = parameters.get("properties", {}) if isinstance(parameters, dict) else {}
        calls.append(ToolCall(name=name, arguments=resolve_arguments(alternatives, properties, f"{where}.{name}")))
    return calls


def calls_from_python(ground_truth: list[str], functions: dict[str, Any]) -> list[ToolCall]:
    calls = []
    for index, text in enumerate(ground_truth):
        try:
            call = parse_call(text, fold_arithmetic=True)
        except PySyntaxError as err:
            raise GoldError(f"ground_truth[{index}]: {err}") from None
        arguments = dict(call.kwargs)
        if call.args:
            parameters = functions.get(call.name, {}).get("parameters")
            order = list(parameters.get("properties", {})) if isinstance(parameters, dict) else []
            if len(call.args) > len(order):
                raise GoldError(
                    f"ground_truth[{index}]: {len(call.args)} positional argument(s) for {call.name}, "
                    f"whose documentation lists {len(order)} parameter(s)"
                )
            for name, value in zip(order, call.args):
                if name in arguments:
                    raise GoldError(f"ground_truth[{index}]: argument {name!r} given by position and by name")
                arguments[name] = value
        calls.append(ToolCall(name=call.name, arguments=arguments))
    return calls


def gold_calls(ground_truth: Any, functions: list[Any], language: str = PYTHON) -> list[ToolCall]:
    """Tool calls from a possible answer (dicts) or an executable gold (call strings); in the Java and JavaScript
    categories each argument is the string BFCL's checker reads back to its value (``bfcl_languages``)."""
    if not isinstance(ground_truth, list) or not ground_truth:
        raise GoldError("ground_truth: expected a non-empty list")
    by_name = {f["name"]: f for f in functions if isinstance(f, dict) and isinstance(f.get("name"), str)}
    if all(isinstance(entry, str) for entry in ground_truth):
        calls = calls_from_python(ground_truth, by_name)
    else:
        calls = calls_from_possible_answer(ground_truth, by_name)
    ids = CallIds()
    for call in calls:
        call.id = ids.issue(call.name)
        if language != PYTHON:
            parameters = by_name.get(call.name, {}).get("parameters")
            properties = parameters.get("properties", {}) if isinstance(parameters, dict) else {}
            call.arguments = {k: string_value(v, properties.get(k), language) for k, v in call.arguments.items()}
    return calls


# ---------------------------------------------------------------- records


def file_category(path: Path) -> tuple[str, str | None]:
    """``BFCL_v2_live_simple.json`` -> ("live_simple", "v2"); other names -> (stem, None)."""
    match = _FILE_NAME.fullmatch(path.stem)
    return (match.group(2), match.group(1)) if match else (path.stem, None)


def convert(record: dict[str, Any], record_id: str, path: Path, answer: Any | None, docs: FuncDocs) -> Conversation:
    """One question record (and its answer's ground_truth, when given) -> a conversation."""
    if "question" not in record:
        raise SchemaError("record", "missing key 'question'")
    turns = question_turns(record["question"])
    if not any(turns):
        raise SchemaError("question", "no messages")
    category, version = file_category(path)
    meta: dict[str, Any] = {k: v for k, v in record.items() if k not in ("id", "question", "function")}
    meta.update(source="bfcl", bfcl_version=version, category=category)
    agentic = "involved_classes" in record
    if agentic:
        functions, offered, unresolved = agentic_functions(record, docs)
        if unresolved:
            meta["unresolved_classes"] = unresolved
    else:
        functions = record.get("function", [])
        if functions == "":  # chatable: no functions at all
            functions = []
        if not isinstance(functions, list):
            raise SchemaError("function", f"expected a list, got {type(functions).__name__}")
        offered = functions
    language = category_language(category)  # Java/JS: every parameter is a string, as BFCL prompts them
    tools = [tool_from_function(f, f"function[{i}]") for i, f in enumerate(prompt_functions(offered, language))]
    meta["bfcl_functions"] = functions
    messages = [message for turn in turns for message in turn]
    if len(turns) > 1:
        meta["question_turns"] = [len(turn) for turn in turns]
    if answer is not None:
        meta["ground_truth"] = answer
    gold = meta.get("ground_truth")
    if gold is not None and not agentic and not isinstance(gold, str):  # a v4 REST answer is an expected response text
        messages.append(Message(role="assistant", tool_calls=gold_calls(gold, functions, language)))
    return Conversation(id=record_id, messages=messages, tools=tools, meta=meta)


def load_answers(path: Path) -> tuple[dict[str, tuple[str, Any]], list[Rejected]]:
    """id -> (location, ground_truth), and the answer records that are unusable."""
    answers: dict[str, tuple[str, Any]] = {}
    rejected: list[Rejected] = []
    for item in iter_json_records(path):
        if isinstance(item, Rejected):
            rejected.append(item)
            continue
        location, obj = item
        if not isinstance(obj, dict) or not isinstance(obj.get("id"), str) or "ground_truth" not in obj:
            reason = "possible answer: expected an object with a string 'id' and 'ground_truth'"
            rejected.append(Rejected(location, reason, obj))
        elif obj["id"] in answers:
            reason = f"possible answer: duplicate id {obj['id']!r} (first at {answers[obj['id']][0]})"
            rejected.append(Rejected(location, reason, obj))
        else:
            answers[obj["id"]] = (location, obj["ground_truth"])
    return answers, rejected


def _refuse_non_question_file(path: Path) -> None:
    """bfcl-eval ships one pretty-printed JSON object (format_sensitivity) among the question files."""
    with path.open("rb") as fh:
        first_line = fh.readline().strip()
    if first_line == b"{":
        try:
            obj = json.loads(read_text(path))
        except json.JSONDecodeError:
            return  # a truncated first record: reported per line by iter_json_records
        if isinstance(obj, dict) and "question" not in obj:
            keys = ", ".join(list(obj)[:4])
            raise SourceError(
                f"{path}: one JSON object keyed by {keys}..., not BFCL questions (one JSON object per line)"
            )


def func_doc_folder(questions: Path) -> Path:
    """``multi_turn_func_doc/`` beside the question file, or beside one of its two parent folders
    (bfcl-eval keeps retired categories in ``data/unused_datasets/question/``)."""
    candidates = [folder / "multi_turn_func_doc" for folder in list(questions.resolve().parents)[:3]]
    return next((c for c in candidates if c.is_dir()), candidates[0])


def read(inputs: list[Path]) -> Iterator[Conversation | Rejected]:
    check_arity(inputs, ("QUESTIONS", "POSSIBLE_ANSWERS"), optional=1)
    questions = inputs[0]
    for path in inputs:
        if path.is_dir():
            raise SourceError(f"{path}: expected a BFCL JSON Lines file, got a folder")
    _refuse_non_question_file(questions)
    answers, answer_rejects = load_answers(inputs[1]) if len(inputs) == 2 else ({}, [])
    with_answers = len(inputs) == 2
    docs = FuncDocs(func_doc_folder(questions))
    seen: dict[str, str] = {}
    for index, item in enumerate(iter_json_records(questions)):
        if isinstance(item, Rejected):
            yield item
            continue
        location, record = item
        if not isinstance(record, dict):
            yield Rejected(location, f"expected a JSON object, got {type(record).__name__}", record)
            continue
        record_id = record.get("id", f"{questions.stem}-{index}")
        if not isinstance(record_id, str):
            yield Rejected(location, f"id: expected a string, got {type(record_id).__name__}", record)
            continue
        where = f"{location} ({record_id})"
        if record_id in seen:
            yield Rejected(where, f"duplicate id {record_id!r} (first at {seen[record_id]})", record)
            continue
        answer = None
        if with_answers:
            if record_id not in answers:
                yield Rejected(where, f"no possible answer with id {record_id!r} in {inputs[1].name}", record)
                continue
            answer = copy.deepcopy(answers.pop(record_id)[1])
        try:
            conversation = convert(record, record_id, questions, answer, docs)
        except (SchemaError, GoldError) as err:
            yield Rejected(where, str(err), record)
            continue
        except RecursionError:  # a schema or answer nested deeper than any real function needs
            yield Rejected(where, "nested too deeply to convert", record)
            continue
        seen[record_id] = location
        yield conversation
    yield from answer_rejects
    for answer_id, (location, ground_truth) in answers.items():
        reason = f"possible answer {answer_id!r} has no question in {questions.name}"
        yield Rejected(f"{location} ({answer_id})", reason, {"id": answer_id, "ground_truth": ground_truth})
