"""MetaTool (ToolE) tool-selection queries -> ``ToolQuery`` records plus one ``ToolLibrary``.

INPUTS: the query file, then the tool file.

Query files (layout told apart by suffix, then per record by its keys):

* ``all_clean_data.csv`` — columns ``Query,Tool`` (quoted multi-line fields), one gold tool a row.
* ``multi_tool_query_golden.json`` (and PTR's ``*_QT.json``) — ``[{"query", "tool": [names]}]``.
* Task files ``Task1.json`` / ``Task2-Subtask3.json`` / ``Task2-Subtask4.json`` —
  ``[{thought_prompt, action_prompt, query, tool, [label], [index]}]``. Gold is ``tool`` (a name
  or a list); MetaTool writes ``"None"`` for "no tool fits", and Task1's negative queries
  (``label == "negative"``) have no tool: both become an empty gold list. Prompts, label and
  index are kept in ``meta``.

Tool files: ``plugin_des.json`` / ``big_tool_des.json`` (``{name: description}``) or
``plugin_info.json`` (``[{name_for_model, name_for_human, description_for_model,
description_for_human}]``; the human-facing fields go to the library's meta).

Decisions:

* A gold name absent from the tool file is a *warning*, not a reject: the query keeps its gold
  set as published and lists the strays in ``meta["unknown_gold"]`` (the right tool file for
  a Task file is the user's choice; scorers can see what no selector could pick).
* A tool-file entry that cannot become a tool (wrong type, duplicate name) is yielded as a
  ``Rejected`` naming ``toolfile#name``; the first definition of a duplicated name wins.
* A JSON array broken part-way (truncated, undecodable bytes) keeps every record before the
  break and rejects the rest with the line and column; only a file that is not an array at all
  is a ``SourceError``.

ids are ``f"{query_file.stem}-{index}"`` (index = 0-based record or data-row position).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from train.base.records import (
    REST_LOST,
    UNDECODABLE,
    Rejected,
    SourceError,
    check_arity,
    iter_json_array,
    load_json,
    printable,
)
from train.schema import Record, Tool, ToolLibrary, ToolQuery

SOURCE = "metatool"
# Keys a Task record may carry besides query/tool; they are copied into meta under their own names.
TASK_KEYS = ("thought_prompt", "action_prompt", "label", "index")
PLUGIN_HUMAN_KEYS = ("name_for_human", "description_for_human")


def read(inputs: list[Path]) -> Iterator[Record | Rejected]:
    check_arity(inputs, ("query file", "tool file"))
    yield from read_query_dataset(inputs[0], inputs[1], source=SOURCE)


def read_query_dataset(query_path: Path, tool_path: Path, source: str) -> Iterator[Record | Rejected]:
    """Tool rejects first, then the library, then one ToolQuery or Rejected per query record."""
    library = None
    for item in read_tool_file(tool_path, source):
        if isinstance(item, ToolLibrary):
            library = item
        yield item
    known = {tool.name for tool in library.tools} if library else set()
    records = iter_csv_rows(query_path) if query_path.suffix.lower() == ".csv" else iter_json_array(query_path)
    for index, item in enumerate(records):
        if isinstance(item, Rejected):
            yield item
            continue
        location, obj = item
        yield query_from_record(obj, f"{query_path.stem}-{index}", location, known, source)


# --- query records ----------------------------------------------------------------------------


def query_from_record(obj: Any, record_id: str, location: str, known: set[str], source: str) -> ToolQuery | Rejected:
    """One ``{query, tool, ...}`` record -> ToolQuery; any structural problem -> Rejected."""
    if not isinstance(obj, dict):
        return Rejected(location, f"expected an object with query and tool, got {type(obj).__name__}", obj)
    query = obj.get("query")
    if not isinstance(query, str):
        why = "missing 'query'" if "query" not in obj else f"query: expected a string, got {type(query).__name__}"
        return Rejected(location, why, obj)
    if not query.strip():
        return Rejected(location, "empty query", obj)
    try:
        gold = gold_from_record(obj)
    except ValueError as err:
        return Rejected(location, str(err), obj)
    meta: dict[str, Any] = {"source": source}
    meta.update({key: obj[key] for key in TASK_KEYS if key in obj})
    extra = {key: value for key, value in obj.items() if key not in ("query", "tool", *TASK_KEYS)}
    if extra:
        meta["extra"] = extra
    unknown = [name for name in gold if name not in known]
    if unknown:
        meta["unknown_gold"] = unknown
    return ToolQuery(id=record_id, query=query, gold_tools=gold, meta=meta)


def gold_from_record(obj: dict) -> list[str]:
    """The gold tool names of a record, as published; ValueError says why there are none usable."""
    is_task = any(key in obj for key in TASK_KEYS)
    tool = obj.get("tool")
    if tool is None:
        label = obj.get("label")
        if label == "negative":
            return []
        raise ValueError("missing 'tool'" if label is None else f"label {label!r} but no 'tool'")
    if isinstance(tool, str):
        gold = [] if tool == "None" and is_task else [tool]
    elif isinstance(tool, list) and all(isinstance(name, str) for name in tool):
        gold = list(tool)
    else:
        raise ValueError(f"tool: expected a name or a list of names, got {_describe(tool)}")
    if any(not name.strip() for name in gold):
        raise ValueError("tool: empty tool name")
    if not gold and not is_task:
        raise ValueError("empty gold tool list")
    return gold


def _describe(value: Any) -> str:
    if isinstance(value, list):
        kinds = sorted({type(v).__name__ for v in value if not isinstance(v, str)})
        return f"a list containing {'/'.join(kinds)}"
    return type(value).__name__


# --- tool files -------------------------------------------------------------------------------


def read_tool_file(path: Path, source: str) -> Iterator[ToolLibrary | Rejected]:
    """``{name: description}`` or plugin_info's list -> Rejected per bad entry, then one ToolLibrary."""
    try:
        data = load_json(path)
    except ValueError as err:  # load_json turns syntax errors into SourceError, not an integer past the digit limit
        raise SourceError(f"{path}: invalid JSON: {err}") from err
    meta: dict[str, Any] = {"source": source, "file": path.name}
    if isinstance(data, list):
        meta["plugins"] = {}  # name -> the human-facing fields plugin_info carries beside the tool
    tools: list[Tool] = []
    seen: dict[str, str] = {}  # name -> location of its first definition
    for entry in _tool_entries(path, data):
        if isinstance(entry, Rejected):
            yield entry
            continue
        location, name, description, plugin = entry
        problem = _tool_problem(name, description, seen)
        if problem:
            yield Rejected(location, problem, plugin or {name: description})
            continue
        seen[name] = location
        tools.append(Tool(name=name, description=description))
        if plugin:
            meta["plugins"][name] = {key: plugin[key] for key in PLUGIN_HUMAN_KEYS if key in plugin}
    yield ToolLibrary(id=path.stem, tools=tools, meta=meta)


def _tool_entries(path: Path, data: Any) -> Iterator[tuple[str, Any, Any, dict] | Rejected]:
    """``(location, name, description, plugin_info entry or {})`` per tool-file entry."""
    if isinstance(data, dict):
        for name, description in data.items():
            yield f"{path}#{name}", name, description, {}
    elif isinstance(data, list):
        for index, entry in enumerate(data):
            location = f"{path}#{index}"
            if isinstance(entry, dict) and "name_for_model" in entry and "description_for_model" in entry:
                yield location, entry["name_for_model"], entry["description_for_model"], entry
            else:
                why = "expected a plugin_info entry with name_for_model and description_for_model"
                yield Rejected(location, why, entry)
    else:
        kind = type(data).__name__
        raise SourceError(f"{path}: expected a {{name: description}} object or a plugin_info list, got {kind}")


def _tool_problem(name: Any, description: Any, seen: dict[str, str]) -> str | None:
    if not isinstance(name, str) or not name.strip():
        return f"tool name: expected a non-empty string, got {name!r}"
    if not isinstance(description, str):
        return f"description of tool {name!r}: expected a string, got {type(description).__name__}"
    if name in seen:
        return f"duplicate tool name {name!r} (first defined at {seen[name]}); the first definition is kept"
    return None


# --- file layouts -----------------------------------------------------------------------------


def iter_csv_rows(path: Path, columns: tuple[str, str] = ("Query", "Tool")) -> Iterator[tuple[str, Any] | Rejected]:
    """``(path#index, {"query", "tool"})`` per data row of a ``Query,Tool`` CSV (index from 0)."""
    try:
        handle = path.open(encoding="utf-8-sig", errors="surrogateescape", newline="")
    except OSError as err:
        raise SourceError(f"{path}: cannot read ({err.strerror or err})") from err
    with handle:
        rows = csv.reader(handle)
        header = next(rows, None)
        missing = [name for name in columns if header is None or name not in header]
        if missing:
            raise SourceError(f"{path}: missing column(s) {', '.join(missing)}; header is {header!r}")
        query_at, tool_at = (header.index(name) for name in columns)
        index = 0
        while True:
            try:
                row = next(rows)
            except StopIteration:
                return
            except csv.Error as err:
                yield Rejected(f"{path}#{index}", f"CSV error at line {rows.line_num}: {err}; {REST_LOST}")
                return
            if not any(field.strip() for field in row):
                continue  # a blank line is not a record
            location = f"{path}#{index}"
            index += 1
            if len(row) != len(header):
                yield Rejected(location, f"row has {len(row)} field(s), the header has {len(header)}", printable(row))
            elif any(UNDECODABLE.search(field) for field in row):
                why = f"not UTF-8: undecodable bytes in the row ending at line {rows.line_num}"
                yield Rejected(location, why, printable(row))
            else:
                yield location, {"query": row[query_at], "tool": row[tool_at]}
