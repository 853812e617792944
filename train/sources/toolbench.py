"""SambaNova ToolBench tasks (Weather, Cat, Home, Booking) as ToolVerifier evaluates them.

INPUT: the folder holding ``sambanova.json`` and one sub-folder per task (``booking``, ``cat``,
``home``, ``weather``), or a single task folder (``sambanova.json`` is then read from its
parent). Each task folder holds ``test.jsonl`` (``prompt``, ``completion``, optional
``compare_string_only``) and ``test.csv`` (``Instruction``, ``api``, ``Name``[,
``compare_string_only``]); row *i* of one is test case *i* of the other, and the reader checks
that on every row (same instruction text, same ``compare_string_only``), rejecting a case whose
rows disagree or lack a partner.

Tool granularity: ``sambanova.json`` is one tool record whose ``api_list`` holds 17 APIs (9
weather, 6 cat, ``booking``, ``home_search``). ToolVerifier selects among exactly these 17, so
each API is one canonical tool (``train.sources.itc.rapidapi_parameters`` gives the JSON
Schema), and every conversation carries all 17. ``test.csv``'s ``Name`` is the gold tool in its
documentation spelling ("Weather Forecast City", "Home search"); it is matched to the API name
(``forecast_weather_city``) by its set of words, which is unique for all 17 tools.

No assistant turn: the golds are programs in another action space than the tools' parameters.
Weather and cat golds are ``curl`` command lines whose URL templates the tool file does not
carry (``url`` is empty); home and booking golds are ``API.set_*``/``API.select_*`` setter
programs over ``Loc(...)`` and ``Date(m, d, y)`` values, scored by SambaNova by executing them
(or by string comparison when ``compare_string_only``). Turning either into arguments of the
17 tools would take mappings invented here (URL parsing, setter-to-parameter names, date
formats), so the golds stay verbatim in ``meta``: ``completion`` (the programs ``test.py``
scores), ``api_program`` (``test.csv``'s ``api`` column: the same program with every setter,
``'None'`` defaults included), ``gold_tool`` and ``gold_tool_label``, ``compare_string_only``
and ``task``. Ids are ``<task>/test-<row>``.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from train.base.records import Rejected, SourceError, check_arity, iter_json_records, load_json, read_text
from train.schema import Conversation, Message, SchemaError, Tool
from train.sources.itc import tools_of_record

TOOLS_FILE = "sambanova.json"
CSV_COLUMNS = ("Instruction", "api", "Name")
GoldIndex = dict[frozenset[str], str]  # the words of a tool name -> the tool name


def load_tools(path: Path) -> list[Tool]:
    if not path.is_file():
        raise SourceError(f"{path}: not found (the 17 ToolBench tools)")
    try:
        return tools_of_record(load_json(path), "sambanova")
    except SchemaError as err:
        raise SourceError(f"{path}: {err}") from None


def _words(name: str) -> frozenset[str]:
    return frozenset(re.findall(r"[a-z0-9]+", name.lower()))


def gold_tool_index(tools: list[Tool]) -> GoldIndex:
    """Word set -> API name; two tools with the same words would make ``Name`` ambiguous."""
    index: dict[frozenset[str], str] = {}
    for tool in tools:
        key = _words(tool.name)
        if key in index:
            raise SourceError(f"tools {index[key]!r} and {tool.name!r} have the same words: Name would be ambiguous")
        index[key] = tool.name
    return index


def task_folders(folder: Path) -> tuple[list[Path], Path]:
    """(task folders in name order, tools file) for the data folder or one task folder."""
    if not folder.is_dir():
        raise SourceError(f"{folder}: expected the ToolBench folder or one task folder, got a file")
    if (folder / "test.jsonl").is_file():
        return [folder], folder.parent / TOOLS_FILE
    tasks = sorted(p for p in folder.iterdir() if (p / "test.jsonl").is_file())
    if not tasks:
        raise SourceError(f"{folder}: no task folder with a test.jsonl")
    return tasks, folder / TOOLS_FILE


def read_csv_rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        raise SourceError(f"{path}: not found (gold tool names)")
    reader = csv.DictReader(io.StringIO(read_text(path), newline=""))
    missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise SourceError(f"{path}: missing column(s) {', '.join(missing)}; has {', '.join(reader.fieldnames or [])}")
    try:
        return list(reader)
    except csv.Error as err:
        raise SourceError(f"{path}: unreadable CSV at line {reader.line_num}: {err}") from None


def convert(
    case: Any, row: dict[str, Any], task: str, index: int, tools: list[Tool], gold_index: GoldIndex
) -> Conversation:
    if not isinstance(case, dict):
        raise SchemaError("test case", f"expected an object, got {type(case).__name__}")
    prompt, completion = case.get("prompt"), case.get("completion")
    if not isinstance(prompt, str) or not prompt.strip():
        raise SchemaError("prompt", "expected a non-empty string")
    if not isinstance(completion, list) or not completion or not all(isinstance(c, str) for c in completion):
        raise SchemaError("completion", "expected a non-empty list of program strings")
    compare_string_only = case.get("compare_string_only", False)
    if not isinstance(compare_string_only, bool):
        raise SchemaError("compare_string_only", f"expected a boolean, got {type(compare_string_only).__name__}")
    if None in row:
        raise SchemaError("test.csv", f"row has {len(row[None])} field(s) more than the header")
    if None in row.values():
        raise SchemaError("test.csv", "row has fewer fields than the header")
    if row["Instruction"] != prompt:
        instruction = row["Instruction"]
        raise SchemaError("test.csv", f"Instruction {instruction[:60]!r} does not match the prompt {prompt[:60]!r}")
    if "compare_string_only" in row and row["compare_string_only"] != str(compare_string_only):
        written = row["compare_string_only"]
        raise SchemaError("test.csv", f"compare_string_only {written!r} does not match {compare_string_only!r}")
    gold = gold_index.get(_words(row["Name"]))
    if gold is None:
        raise SchemaError("test.csv.Name", f"{row['Name']!r} matches none of the {len(tools)} tools")
    meta = {
        "source": "toolbench_sambanova",
        "task": task,
        "gold_tool": gold,
        "gold_tool_label": row["Name"],
        "completion": completion,
        "api_program": row["api"],
        "compare_string_only": compare_string_only,
    }
    messages = [Message(role="user", content=prompt)]
    return Conversation(id=f"{task}/test-{index}", messages=messages, tools=list(tools), meta=meta)


def read_task(folder: Path, tools: list[Tool], gold_index: GoldIndex) -> Iterator[Conversation | Rejected]:
    rows = read_csv_rows(folder / "test.csv")
    index = -1
    for index, item in enumerate(iter_json_records(folder / "test.jsonl")):
        if isinstance(item, Rejected):
            yield item
            continue
        location, case = item
        if index >= len(rows):
            yield Rejected(location, f"no row {index} in test.csv ({len(rows)} rows)", case)
            continue
        try:
            yield convert(case, rows[index], folder.name, index, tools, gold_index)
        except SchemaError as err:
            raw = {"test.jsonl": case, "test.csv": rows[index]}
            yield Rejected(f"{location} ({folder.name}/test-{index})", str(err), raw)
    for extra in range(index + 1, len(rows)):
        reason = f"test.csv row {extra} has no test case in test.jsonl"
        yield Rejected(f"{folder / 'test.csv'}#{extra}", reason, rows[extra])


def read(inputs: list[Path]) -> Iterator[Conversation | Rejected]:
    check_arity(inputs, ("FOLDER",))
    tasks, tools_file = task_folders(inputs[0])
    tools = load_tools(tools_file)
    gold_index = gold_tool_index(tools)
    for folder in tasks:
        yield from read_task(folder, tools, gold_index)
