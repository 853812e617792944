"""ToolLens (COLT, BEIR layout) -> one ``ToolQuery`` per judged query plus one ``ToolLibrary``.

INPUT: the folder holding ``queries.jsonl``, ``corpus.jsonl`` and ``qrels/{train,test}.tsv``.

Decisions:

* **Tool names.** Every corpus ``title`` is empty and its ``_id`` is a bare number, so each API
  gets a function name built the ToolBench way, ``f"{api_name}_for_{tool_name}"`` lower-cased
  with runs of other characters turned into ``_`` and cut to 64 characters (the OpenAI limit);
  a clash after cutting takes the corpus id as suffix. ``gold_tools`` holds these names, so
  scorers match them against the library; the corpus ids stay in ``meta["gold_corpus_ids"]``
  and in the library's ``meta["corpus"]``.
* **Library.** One tool per corpus record: description = ``api_description``; parameters = a
  JSON Schema built from the packed ``required_params`` / ``optional_params`` lists. The raw
  record (``_id``, ``title``, ``text``, ``metadata``) and the parsed category, tool and API
  names and return schema are kept per tool name in ``meta["corpus"]``. A record whose text
  does not parse still becomes a tool (description = text, no parameters), marked
  ``"unparsed": true``.
* **Queries.** id = the source ``_id``; ``meta["split"]`` is the qrels file that judged it.
  A query with no qrels, or judged in both splits, is rejected with that reason, so read =
  accepted + rejected. A qrels row naming an unknown query is rejected at its tsv line; one
  naming an unknown corpus id keeps the id as the gold name and lists it in
  ``meta["unknown_gold"]`` (the policy of the MetaTool readers). Rows with score <= 0 are not
  relevance judgements (BEIR): their corpus ids go to ``meta["nonrelevant_corpus_ids"]``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from train.base.records import Rejected, SourceError, check_arity, iter_json_records, strict_loads
from train.schema import Record, Tool, ToolLibrary, ToolQuery

SOURCE = "toollens"
SPLITS = ("train", "test")
MAX_NAME = 64
_PACKED = re.compile(
    r"category_name:(?P<category_name>.*?), tool_name:(?P<tool_name>.*?), api_name:(?P<api_name>.*?), "
    r"api_description:(?P<api_description>.*?), required_params: (?P<rest>\[.*)",
    re.DOTALL,
)
# ToolBench/RapidAPI parameter types -> JSON Schema; anything else is a string (the raw type stays in meta).
_TYPES = {
    "STRING": "string",
    "NUMBER": "number",
    "INTEGER": "integer",
    "BOOLEAN": "boolean",
    "ARRAY": "array",
    "OBJECT": "object",
    "ENUM": "string",
    "DATE (YYYY-MM-DD)": "string",
}
_FORMATS = {"DATE (YYYY-MM-DD)": "date"}


@dataclass
class Judgements:
    """A query's qrels: where they came from and which corpus ids they name."""

    first_row: str  # "qrels/<split>.tsv:<line>" of its first row
    splits: list[str] = field(default_factory=list)
    relevant: list[str] = field(default_factory=list)
    nonrelevant: list[str] = field(default_factory=list)


def read(inputs: list[Path]) -> Iterator[Record | Rejected]:
    check_arity(inputs, ("ToolLens folder (queries.jsonl, corpus.jsonl, qrels/)",))
    folder = inputs[0]
    if not folder.is_dir():
        raise SourceError(f"{folder}: expected the ToolLens folder, not a file")
    paths = {"queries": folder / "queries.jsonl", "corpus": folder / "corpus.jsonl"}
    paths.update({split: folder / "qrels" / f"{split}.tsv" for split in SPLITS})
    for path in paths.values():
        if not path.is_file():
            raise SourceError(f"{path}: missing (expected the BEIR layout)")

    names: dict[str, str] = {}  # corpus id -> tool name
    for item in read_corpus(paths["corpus"]):
        if isinstance(item, ToolLibrary):
            names = {info["_id"]: name for name, info in item.meta["corpus"].items()}
        yield item
    judgements: dict[str, Judgements] = {}
    for split in SPLITS:
        yield from read_qrels(paths[split], split, judgements)
    present: set[str] = set()  # every query id queries.jsonl holds, accepted or not
    for item in iter_json_records(paths["queries"]):
        if isinstance(item, Rejected):
            yield item
            continue
        location, obj = item
        query_id = obj.get("_id") if isinstance(obj, dict) else None
        if query_id in present:
            yield Rejected(location, f"duplicate query id {query_id!r}", obj)
            continue
        if isinstance(query_id, str):
            present.add(query_id)
        yield query_from_record(obj, location, judgements, names)
    for query_id, judged in judgements.items():
        if query_id not in present:
            yield Rejected(judged.first_row, f"qrels name query id {query_id!r}, which queries.jsonl lacks", query_id)


# --- corpus -> library ------------------------------------------------------------------------


def read_corpus(path: Path) -> Iterator[ToolLibrary | Rejected]:
    tools: list[Tool] = []
    corpus: dict[str, dict[str, Any]] = {}
    taken: set[str] = set()  # tool names given so far
    corpus_ids: set[str] = set()
    for item in iter_json_records(path):
        if isinstance(item, Rejected):
            yield item
            continue
        location, obj = item
        if not isinstance(obj, dict) or not isinstance(obj.get("_id"), str) or not isinstance(obj.get("text"), str):
            yield Rejected(location, "expected a corpus record with string _id and text", obj)
            continue
        if obj["_id"] in corpus_ids:
            yield Rejected(location, f"duplicate corpus id {obj['_id']!r}", obj)
            continue
        corpus_ids.add(obj["_id"])
        tool, info = tool_from_corpus_record(obj, taken)
        taken.add(tool.name)
        tools.append(tool)
        corpus[tool.name] = info
    yield ToolLibrary(id="toollens", tools=tools, meta={"source": SOURCE, "corpus": corpus})


def tool_from_corpus_record(obj: dict[str, Any], taken: set[str]) -> tuple[Tool, dict[str, Any]]:
    """A corpus record -> (Tool, lossless info for the library meta)."""
    info: dict[str, Any] = {key: obj[key] for key in ("_id", "title", "text", "metadata") if key in obj}
    packed = parse_packed_text(obj["text"])
    if packed is None:
        info["unparsed"] = True
        name = unique_name(f"toollens_{obj['_id']}", obj["_id"], taken)
        return Tool(name=name, description=obj["text"]), info
    info.update({key: packed[key] for key in ("category_name", "tool_name", "api_name", "return_schema")})
    name = unique_name(function_name(packed["api_name"], packed["tool_name"]), obj["_id"], taken)
    parameters = parameters_schema(packed["required_params"], packed["optional_params"])
    return Tool(name=name, description=packed["api_description"], parameters=parameters), info


def parse_packed_text(text: str) -> dict[str, Any] | None:
    """``category_name:…, tool_name:…, api_name:…, api_description:…, required_params: [..],
    optional_params: [..], return_schema: …`` -> its fields (params as lists), or None."""
    match = _PACKED.fullmatch(text)
    if not match:
        return None
    fields = {key: value for key, value in match.groupdict().items() if key != "rest"}
    rest = match["rest"]
    decoder = json.JSONDecoder()
    try:
        fields["required_params"], end = decoder.raw_decode(rest)
        rest = rest[end:].removeprefix(", optional_params: ")
        fields["optional_params"], end = decoder.raw_decode(rest)
    except json.JSONDecodeError:
        return None
    rest = rest[end:]
    if not rest.startswith(", return_schema: "):
        return None
    schema_text = rest.removeprefix(", return_schema: ")
    try:
        fields["return_schema"] = strict_loads(schema_text)
    except (ValueError, RecursionError):  # not standard JSON: kept as the text it is
        fields["return_schema"] = schema_text
    params = (fields["required_params"], fields["optional_params"])
    if not all(isinstance(group, list) for group in params):
        return None
    if not all(isinstance(p, dict) and isinstance(p.get("name"), str) for group in params for p in group):
        return None
    return fields


def parameters_schema(required: list[dict], optional: list[dict]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for param in required + optional:
        raw_type = param.get("type")
        prop: dict[str, Any] = {"type": _TYPES.get(raw_type.upper() if isinstance(raw_type, str) else "", "string")}
        if raw_type in _FORMATS:
            prop["format"] = _FORMATS[raw_type]
        if isinstance(param.get("description"), str) and param["description"]:
            prop["description"] = param["description"]
        if "default" in param and param["default"] not in ("", None):
            prop["default"] = param["default"]
        properties[param["name"]] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    names = [p["name"] for p in required]
    if names:
        schema["required"] = names
    return schema


def function_name(api_name: str, tool_name: str) -> str:
    return f"{_slug(api_name)}_for_{_slug(tool_name)}"


def unique_name(name: str, corpus_id: str, taken: set[str]) -> str:
    """Cut to 64 characters; a clash (after cutting) takes ``_<corpus id>`` as suffix."""
    name = name[:MAX_NAME].rstrip("_")
    if name not in taken:
        return name
    suffix = f"_{_slug(corpus_id) or 'x'}"
    return name[: MAX_NAME - len(suffix)].rstrip("_") + suffix


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


# --- qrels and queries ------------------------------------------------------------------------


def read_qrels(path: Path, split: str, judgements: dict[str, Judgements]) -> Iterator[Rejected]:
    """Fill ``judgements`` from a ``query-id \\t corpus-id \\t score`` file; yield its bad rows."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError as err:
        raise SourceError(f"{path}: cannot read ({err.strerror or err})") from err
    for lineno, raw in enumerate(lines, start=1):
        location = f"{path}:{lineno}"
        try:
            line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError as err:
            yield Rejected(location, f"not UTF-8 at byte {err.start}", raw.decode("utf-8", "replace"))
            continue
        if not line.strip() or (lineno == 1 and line.split("\t")[0] == "query-id"):
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            why = f"expected query-id, corpus-id and score separated by tabs, got {len(fields)} field(s)"
            yield Rejected(location, why, line)
            continue
        query_id, corpus_id, score = (value.strip() for value in fields)
        try:
            relevance = int(score)
        except ValueError:
            yield Rejected(location, f"score {score!r} is not an integer", line)
            continue
        entry = judgements.setdefault(query_id, Judgements(first_row=location))
        if split not in entry.splits:
            entry.splits.append(split)
        (entry.relevant if relevance > 0 else entry.nonrelevant).append(corpus_id)


def query_from_record(
    obj: Any, location: str, judgements: dict[str, Judgements], names: dict[str, str]
) -> ToolQuery | Rejected:
    if not isinstance(obj, dict) or not isinstance(obj.get("_id"), str) or not isinstance(obj.get("text"), str):
        return Rejected(location, "expected a query record with string _id and text", obj)
    query_id = obj["_id"]
    if not obj["text"].strip():
        return Rejected(f"{location} (id {query_id})", "empty query", obj)
    judged = judgements.get(query_id)
    if judged is None or not judged.relevant:
        return Rejected(f"{location} (id {query_id})", "no relevant tool in qrels/train.tsv or qrels/test.tsv", obj)
    if len(judged.splits) > 1:
        return Rejected(f"{location} (id {query_id})", f"judged in both {' and '.join(judged.splits)} qrels", obj)
    gold = [names.get(corpus_id, corpus_id) for corpus_id in judged.relevant]
    meta: dict[str, Any] = {"source": SOURCE, "split": judged.splits[0], "gold_corpus_ids": list(judged.relevant)}
    unknown = [corpus_id for corpus_id in judged.relevant if corpus_id not in names]
    if unknown:
        meta["unknown_gold"] = unknown
    if judged.nonrelevant:
        meta["nonrelevant_corpus_ids"] = list(judged.nonrelevant)
    if obj.get("metadata"):
        meta["metadata"] = obj["metadata"]
    return ToolQuery(id=query_id, query=obj["text"], gold_tools=gold, meta=meta)
