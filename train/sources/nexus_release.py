"""The NexusRaven-V2 function-calling benchmark as released on the Hugging Face Hub: its eight tasks, read from a
local folder, each named as ToolGT's Table 2 / Table 7 names it (seed 004).

The release (``nexusflowai/NexusRaven-V2`` ``evaluation_notebook/``, its README's dataset list)
-------------------------------------------------------------------------------------------------
Each task's queries are their own Hub dataset, one ``train`` split; ``TASKS`` lists them. Rows are ``{"Input",
"Output"}`` (the gold a Python call string; ``Output`` may be a list of strings, joined as the notebooks join it),
except ``Nexusflow/vt_multiapi``: ``{"generated_question", "fncall": [call strings]}``, which holds two tasks, the
rows with one call (VT-nested, 49 in the notebooks) and those with several (VT-parallel, 21; the calls run one
after the other, ``"; ".join``). NVDLibrary's golds read ``r = nvdlib.searchCVE(...)`` (the notebook strips
``r = nvdlib.``; the call read here is ``searchCVE``). ``Nexusflow/CVECPEAPIBenchmark`` is one CSV,
``cvecpe_multiapis_nested.csv``; the others are parquet. The functions a task offers are the config of
``Nexusflow/Function_Call_Definitions`` that ``TASKS`` names, rows ``{"function_calls", "descriptions"}``: the
signature as written after ``def`` and the docstring (the notebooks' prompt is ``def {function_calls}:`` and the
docstring). Golds nest calls (``summarize_cvecpes(searchCPE(...))``): ``train.sources.nexus_calls``.

The folder
----------
One folder holding what a user downloaded, in any of these shapes, mixed freely:

* the Hub repositories as ``huggingface-cli download REPO --repo-type dataset --local-dir FOLDER/<name>`` writes
  them (``NVDLibraryBenchmark/data/train-*.parquet``, ``Function_Call_Definitions/Places/train-*.parquet``,
  the Hub's ``refs/convert/parquet`` shape ``<config>/train/0000.parquet`` too), or as ``huggingface_hub``'s cache
  holds them (``datasets--Nexusflow--<name>/snapshots/<commit>/...``);
* camel's ``NexusBenchmark.download`` folders (``NVDLibrary/``, ``PlacesAPI/``, ``VirusTotal-NestedCalls/`` ...:
  the two VT folders each hold all of ``vt_multiapi`` and take only their own rows);
* ``datasets``' ``save_to_disk`` folders (Arrow stream files) or exports to ``.jsonl`` / ``.json``, one per task,
  named by the task (``Climate.jsonl``), or one file of every task whose rows carry a ``task`` (or ``dataset``)
  column naming it.

A file's task is the first name on its path, from the file's own name up, that names one (``TASKS``' aliases, case
and punctuation ignored); under a ``Function_Call_Definitions`` folder the first config name below it is the config.
``dataset_info.json``, ``state.json`` and ``dataset_dict.json`` (``datasets``' bookkeeping), README and hidden files
are not data. Each row of a data file no name places (and that has no task column), a row without a query or a
gold, a gold that is not call syntax and a row of a task already read from another folder (a second copy; a task's
rows come from the first folder, by path, that holds any) are each one ``Rejected`` with the reason.

Conversations are ``<task>-<n>``, numbered in reading order (files by path, rows in file order; shards follow on):
the query, then one assistant turn with the gold calls in the order the stubs record them (a nested call's value
``None``, as the stub returns; the nesting stays in ``meta["reference"]``), positional arguments named by the
function's parameters. Tools come from the task's definitions; without them a task's conversations have no tools.
``meta``: ``source`` nexusraven, ``release`` v2, ``dataset`` (the task), ``reference`` (the gold text as the
notebook runs it), ``hub_dataset``.
"""

from __future__ import annotations

import csv
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from train.base.pysyntax import PySyntaxError
from train.base.records import Rejected, SourceError, iter_json_records
from train.schema import Conversation, SchemaError, Tool
from train.sources.nexus_calls import flatten_calls
from train.sources.nexus_gold import gold_conversation, tool_from_stub


@dataclass(frozen=True)
class ReleaseTask:
    label: str  # as ToolGT's Table 7 heads its column (the nexus scorer's TOOLGT_NEXUS_TASKS keys)
    hub: str  # the Hub dataset of its queries
    definitions: str  # its config of Nexusflow/Function_Call_Definitions
    calls: str  # "any", or for vt_multiapi's rows: "one" (nested) | "several" (parallel)
    aliases: tuple[str, ...]  # other folder / file names that name it, normalised (see ``normal``)


TASKS = (
    ReleaseTask("NVDLibrary", "Nexusflow/NVDLibraryBenchmark", "CVECPE", "any", ("nvdlibrarybenchmark",)),
    ReleaseTask("VirusTotal", "Nexusflow/VirusTotalBenchmark", "VirusTotal", "any", ("virustotalbenchmark",)),
    ReleaseTask("Places", "Nexusflow/PlacesAPIBenchmark", "Places", "any", ("placesapibenchmark", "placesapi")),
    ReleaseTask("Climate", "Nexusflow/ClimateAPIBenchmark", "Climate", "any", ("climateapibenchmark", "climateapi")),
    ReleaseTask("OTX", "Nexusflow/OTXAPIBenchmark", "OTX", "any", ("otxapibenchmark", "otxapi")),
    ReleaseTask(
        "VT-nested", "Nexusflow/vt_multiapi", "VT_Multi (Nested)", "one",
        ("virustotalnestedcalls", "vtmultinested", "vtmultiapisnested", "vtn"),  # vtn: Table 7's "VT (N)"
    ),
    ReleaseTask(
        "VT-parallel", "Nexusflow/vt_multiapi", "VT_Multi (Parallel)", "several",
        ("virustotalparallelcalls", "vtmultiparallel", "vtmultiapisdisconnected", "vtp"),  # vtp: "VT (P)"
    ),
    ReleaseTask(
        "CVECPE", "Nexusflow/CVECPEAPIBenchmark", "CVECPE_Multi (Nested)", "any",
        ("cvecpeapibenchmark", "nvdlibrarynestedcalls", "cvecpemultiapisnested", "cvecpemultiapis",
         "cvecpemultinested"),
    ),
)  # fmt: skip
VT_MULTI = ("vtmultiapi", "vtmultiapis")  # Nexusflow/vt_multiapi (and VT_MultiAPIs): both VT tasks, by call count
DEFINITIONS = "functioncalldefinitions"
DATA_SUFFIXES = (".parquet", ".arrow", ".csv", ".jsonl", ".json")
BOOKKEEPING = ("dataset_info.json", "state.json", "dataset_dict.json")
TASK_COLUMNS = ("task", "dataset")
HUB_CACHE = "datasetsnexusflow"  # huggingface_hub's cache names a repo's folder datasets--Nexusflow--<name>


def normal(name: str) -> str:
    """``VirusTotal-NestedCalls`` -> ``virustotalnestedcalls``: names compared without case or punctuation."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


_BY_NAME = {normal(name): task for task in TASKS for name in (task.label, *task.aliases)}
_BY_CONFIG = {normal(task.definitions): task.definitions for task in TASKS}


def task_named(name: Any) -> ReleaseTask | None:
    return _BY_NAME.get(normal(name)) if isinstance(name, str) else None


# ---------------------------------------------------------------- where a file belongs


@dataclass(frozen=True)
class Place:
    """What a file holds: a task's queries (``tasks``: one, or vt_multiapi's two) or a definitions config."""

    tasks: tuple[ReleaseTask, ...] = ()
    config: str | None = None


def place(relative: Path) -> Place | None:
    """The task(s) or definitions config a file's path names (module docstring), or None."""
    names = [*relative.parent.parts, relative.stem]
    keys = [normal(name).removeprefix(HUB_CACHE) for name in names]
    if DEFINITIONS in keys:
        config = next((key for key in keys[keys.index(DEFINITIONS) + 1 :] if key in _BY_CONFIG), None)
        return Place(config=_BY_CONFIG[config]) if config else None
    for key in reversed(keys):
        if key in _BY_NAME:
            return Place(tasks=(_BY_NAME[key],))
        if key in VT_MULTI:
            return Place(tasks=tuple(task for task in TASKS if task.calls != "any"))
    return None


def data_files(folder: Path) -> list[Path]:
    """The data files under ``folder``, sorted, without bookkeeping, README or hidden files and folders."""
    found = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts) or path.name in BOOKKEEPING:
            continue
        if path.is_file() and path.suffix.lower() in DATA_SUFFIXES:
            found.append(path)
    return found


# ---------------------------------------------------------------- rows of a file


def file_rows(path: Path) -> Iterator[tuple[str, Any] | Rejected]:
    """``(location, row)`` for each row of a parquet, Arrow, CSV or JSON (Lines) file; broken rows are Rejected."""
    suffix = path.suffix.lower()
    if suffix in (".json", ".jsonl"):
        yield from iter_json_records(path)
    elif suffix == ".csv":
        yield from _csv_rows(path)
    else:
        for index, row in enumerate(_arrow_table(path).to_pylist()):
            yield f"{path}#{index}", row


def _arrow_table(path: Path) -> Any:
    import pyarrow as pa  # a dependency of ``datasets``; imported only when a release folder holds such files
    import pyarrow.parquet as pq

    try:
        if path.suffix.lower() == ".parquet":
            return pq.read_table(path)
        with pa.memory_map(str(path)) as source:  # datasets' save_to_disk writes the Arrow stream format
            try:
                return pa.ipc.open_stream(source).read_all()
            except pa.ArrowInvalid:
                source.seek(0)
                return pa.ipc.open_file(source).read_all()
    except (OSError, pa.ArrowException) as err:
        raise SourceError(f"{path}: not a readable {path.suffix[1:]} file ({err})") from None


def _csv_rows(path: Path) -> Iterator[tuple[str, Any] | Rejected]:
    try:
        handle = path.open(encoding="utf-8-sig", errors="strict", newline="")
    except OSError as err:
        raise SourceError(f"{path}: cannot read ({err.strerror or err})") from err
    with handle:
        try:
            rows = csv.reader(handle)
            header = next(rows, None) or []
            for index, row in enumerate(rows):
                location = f"{path}#{index}"
                if not any(field.strip() for field in row):
                    continue  # a blank line is not a row
                if len(row) != len(header):
                    yield Rejected(location, f"row has {len(row)} field(s), the header has {len(header)}", row)
                else:
                    yield location, dict(zip(header, row))
        except (csv.Error, UnicodeDecodeError) as err:
            yield Rejected(f"{path}", f"CSV unreadable after line {rows.line_num}: {err}; the rest is not read")


# ---------------------------------------------------------------- definitions


def tool_from_definition(row: Any) -> Tool:
    """A ``Function_Call_Definitions`` row: the signature read with ``ast`` as ``def {function_calls}: ...``."""
    if not isinstance(row, dict):
        raise SchemaError("definition", f"expected an object, got {type(row).__name__}")
    signature, description = row.get("function_calls"), row.get("descriptions")
    if not isinstance(signature, str) or not signature.strip() or not isinstance(description, (str, type(None))):
        raise SchemaError("definition", "expected a string 'function_calls' and a string 'descriptions'")
    tool = tool_from_stub(f"def {signature.strip().removesuffix(':')}:\n    pass\n", "function_calls")
    return replace(tool, description=inspect.cleandoc(description or ""))


def read_definitions(paths: dict[str, list[Path]]) -> tuple[dict[str, list[Tool]], list[Rejected]]:
    """Config -> its tools, and the rows that are not a definition."""
    tools: dict[str, list[Tool]] = {}
    rejected = []
    for config, files in paths.items():
        for path in files:
            for item in file_rows(path):
                if isinstance(item, Rejected):
                    rejected.append(item)
                    continue
                location, row = item
                try:
                    tools.setdefault(config, []).append(tool_from_definition(row))
                except SchemaError as err:
                    rejected.append(Rejected(location, str(err), row))
    return tools, rejected


# ---------------------------------------------------------------- queries


def query_and_gold(row: dict[str, Any]) -> tuple[str, str, int]:
    """(query, gold text as the notebook runs it, number of top-level calls the row lists)."""
    query = row.get("Input", row.get("generated_question"))
    if not isinstance(query, str) or not query.strip():
        raise SchemaError("Input", "expected a non-empty query ('Input' or 'generated_question')")
    if "fncall" in row:
        calls = row["fncall"]
        calls = [calls] if isinstance(calls, str) else calls
        if not isinstance(calls, list) or not calls or not all(isinstance(c, str) for c in calls):
            raise SchemaError("fncall", "expected a non-empty list of call strings")
        return query, "; ".join(c.strip() for c in calls), len(calls)
    output = row.get("Output")
    if isinstance(output, list) and output and all(isinstance(part, str) for part in output):
        output = "".join(output)  # as the notebooks join it
    if not isinstance(output, str) or not output.strip():
        raise SchemaError("Output", "expected the gold call as a non-empty string")
    return query, output.strip(), 1


def row_task(row: dict[str, Any], placed: tuple[ReleaseTask, ...], count: int) -> ReleaseTask | None:
    """The task a row belongs to: its ``task`` column, else its file's; vt_multiapi rows by their call count.
    None: the row belongs to the other VT task (a folder holding all of vt_multiapi for one of them)."""
    named = next((row[c] for c in TASK_COLUMNS if isinstance(row.get(c), str)), None)
    if named is not None:
        task = task_named(named)
        if task is None:
            raise SchemaError("task", f"{named!r} is not a NexusRaven-V2 task; valid: {', '.join(TASK_LABELS)}")
        placed = (task,)
    if all(task.calls == "any" for task in placed):
        return placed[0] if placed else None
    wanted = "one" if count == 1 else "several"
    return next((task for task in placed if task.calls == wanted), None)


def convert_row(row: Any, placed: tuple[ReleaseTask, ...]) -> tuple[ReleaseTask, str, str] | None:
    """(task, query, gold text) of a row, or None when it belongs to the other VT task; SchemaError when unusable."""
    if not isinstance(row, dict):
        raise SchemaError("row", f"expected an object, got {type(row).__name__}")
    if "python_function_name" in row:  # Nexusflow/NexusRaven_API_evaluation's standardized_queries: the V1 set
        raise SchemaError("row", "a NexusRaven V1 standardized query; read the V1 *_queries.json files instead")
    query, gold, count = query_and_gold(row)
    task = row_task(row, placed, count)
    if task is None and not placed:
        raise SchemaError("task", f"no task: neither the path nor a {'/'.join(TASK_COLUMNS)} column names one")
    return None if task is None else (task, query, gold)


def conversation(task: ReleaseTask, number: int, query: str, gold: str, tools: dict[str, list[Tool]]) -> Conversation:
    try:
        calls = flatten_calls(gold)
    except PySyntaxError as err:
        raise SchemaError("Output", str(err)) from None
    meta = {"source": "nexusraven", "release": "v2", "dataset": task.label, "reference": gold, "hub_dataset": task.hub}
    return gold_conversation(f"{task.label}-{number}", query, calls, list(tools.get(task.definitions, [])), meta)


def read_release(folder: Path, files: list[Path]) -> Iterator[Conversation | Rejected]:
    """Every task's conversations from ``files`` (under ``folder``), then the rejected definition rows.

    A task's rows come from one folder, the first (by path) that holds any: its shards are read in order and
    numbered on; the same task found in another folder (a second copy) is rejected row by row."""
    definition_files: dict[str, list[Path]] = {}
    query_files: list[tuple[Path, tuple[ReleaseTask, ...]]] = []
    for path in files:
        placed = place(path.relative_to(folder))
        if placed is not None and placed.config is not None:
            definition_files.setdefault(placed.config, []).append(path)
        else:
            query_files.append((path, placed.tasks if placed else ()))
    tools, definition_rejects = read_definitions(definition_files)
    owner: dict[str, Path] = {}  # task label -> the folder its rows come from
    numbers: dict[str, int] = {}
    for path, placed in query_files:
        for item in file_rows(path):
            if isinstance(item, Rejected):
                yield item
                continue
            location, row = item
            try:
                found = convert_row(row, placed)
                if found is None:
                    continue
                task, query, gold = found
                if owner.setdefault(task.label, path.parent) != path.parent:
                    raise SchemaError("task", f"{task.label} was already read from {owner[task.label]}")
                number = numbers.get(task.label, 0)
                yield conversation(task, number, query, gold, tools)
                numbers[task.label] = number + 1
            except SchemaError as err:
                yield Rejected(location, str(err), row)
    yield from definition_rejects


TASK_LABELS = tuple(task.label for task in TASKS)

__all__ = ["TASKS", "TASK_LABELS", "ReleaseTask", "data_files", "place", "read_release", "task_named"]
