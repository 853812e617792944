"""Few-shot demonstrations for ToolVerifier's parameter generation on SambaNova ToolBench (seed 003, §2.3, §3.3).

The paper generates parameters "through few-shot prompting ... utilizing demonstrations specific to the selected
tool, which are assumed to be provided", three per tool (§3.2-3.3). What ToolBench provides:

* **Weather**: ``weather/Tool_Documentations_weather.xlsx``, sheet ``API``: per tool a ``Name`` and three
  ``Instruction-k`` / ``API-k`` pairs (a ``curl`` line). ``read_weather_xlsx`` reads them (openpyxl); ``Name`` is
  matched to the API name by its set of words ("Weather Forecast City" -> ``forecast_weather_city``), as the
  ToolBench reader matches ``test.csv``'s ``Name``.
* **Cat**: the xlsx holds instructions without answers; **Home** and **Booking**: nothing. For their tools we use
  **leave-one-out from the test set**: the demonstrations of a tool for the case being scored are 3 other test
  cases whose gold tool it is, chosen by a random generator seeded with (seed, tool, case id), so a run is
  reproducible and the case's own gold is never shown (its id and its instruction are excluded).
* One more leak, found in the data: 9 of the 100 Weather test cases are, word for word, one of the xlsx
  demonstrations of their own gold tool. For such a case that demonstration is dropped and the set is topped up
  to 3 with a leave-one-out one, by the same rule.

A demonstration's parameter values are read from its answer: the query parameters, JSON body keys and the image
id in a ``/favourites/<id>`` path of a ``curl`` line (Weather, Cat), or the fields a Home/Booking program sets
(``train.evaluation.pyprogram.run_program``, whose field names are the tool's parameter names); a parameter the
answer does not set is ``None`` (written ``none``, A.6.7). Its API line is the case's ``api_program`` (``test.csv``'s
``api`` column: ToolVerifier's demonstration form, every setter listed) or, for the xlsx, its ``API-k``.

``ToolBenchDemonstrations`` is the pipeline's ``Demonstrations`` callable ``(tool name, item id) -> list``.
"""

from __future__ import annotations

import json
import random
import re
import shlex
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from train.evaluation.pyprogram import ProgramError, run_program
from train.papers.toolverifier.teacher import Demonstration
from train.schema import Conversation, Tool

WEATHER_XLSX = Path("weather") / "Tool_Documentations_weather.xlsx"
XLSX_SHEET = "API"
SHOTS = 3  # §3.2: "three demonstrations for the selected tool"
_FAVOURITE_ID = re.compile(r"/favourites/([^/?]+)$")


class DemonstrationError(ValueError):
    """The demonstrations file cannot be read; the message names the file (and row) and why."""


def _words(name: str) -> frozenset[str]:
    return frozenset(re.findall(r"[a-z0-9]+", name.lower()))


def parameter_names(tool: Tool) -> list[str]:
    properties = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
    return list(properties) if isinstance(properties, dict) else []


# ---------------------------------------------------------------- answers -> parameter values


def _curl_parts(line: str) -> tuple[str, str | None]:
    """(URL, body or None) of a curl command line; ValueError when it has no URL."""
    words = shlex.split(line)
    url, body = None, None
    for index, word in enumerate(words):
        if word in ("-d", "--data", "--data-raw") and index + 1 < len(words):
            body = words[index + 1]
        elif word.startswith(("http://", "https://")):
            url = word
    if url is None:
        raise ValueError(f"no URL in {line[:80]!r}")
    return url, body


def curl_parameters(line: str, names: list[str]) -> dict[str, str | None]:
    """The tool's parameter values a curl line sets: query parameters, JSON body keys, ``/favourites/<id>``."""
    url, body = _curl_parts(line)
    parts = urlsplit(url)
    found: dict[str, str] = dict(parse_qsl(parts.query, keep_blank_values=False))
    if body:
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if isinstance(data, dict):
            found.update({key: str(value) for key, value in data.items()})
    favourite = _FAVOURITE_ID.search(unquote(parts.path))
    if favourite and "image_id" in names:
        found.setdefault("image_id", favourite.group(1))
    return {name: found.get(name) for name in names}


def program_parameters(program: str, task: str, names: list[str]) -> dict[str, str | None]:
    """The tool's parameter values a Home/Booking program sets (its mock API's fields, defaults included)."""
    fields = run_program(program, task)
    return {name: None if fields.get(name) is None else str(fields[name]) for name in names}


def answer_parameters(answer: str, task: str, tool: Tool) -> dict[str, str | None]:
    names = parameter_names(tool)
    if task in ("home", "booking"):
        return program_parameters(answer, task, names)
    return curl_parameters(answer, names)


# ---------------------------------------------------------------- the weather xlsx


def read_weather_xlsx(path: str | Path, tools: Iterable[Tool]) -> dict[str, list[Demonstration]]:
    """Sheet ``API`` of ToolBench's weather documentation -> tool name -> its demonstrations (in sheet order).

    Rows without a ``Name`` are skipped (the sheet has 1000 rows, 9 used); a ``Name`` that matches no tool, an
    instruction without its API line, or an API line without a URL is a ``DemonstrationError`` naming the row."""
    try:
        import openpyxl
    except ImportError:  # a dependency of tooltrain (pyproject); say what to install rather than a traceback
        raise DemonstrationError("reading the weather demonstrations needs openpyxl (pip install openpyxl)") from None
    path = Path(path)
    by_words = {_words(tool.name): tool for tool in tools}
    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as err:  # missing, not an xlsx (a zip) file
        raise DemonstrationError(f"{path}: cannot read it as an xlsx workbook: {err}") from None
    try:
        if XLSX_SHEET not in book.sheetnames:
            raise DemonstrationError(f"{path}: no sheet {XLSX_SHEET!r} (has {', '.join(book.sheetnames)})")
        rows = book[XLSX_SHEET].iter_rows(values_only=True)
        header = [str(cell).strip() if cell is not None else "" for cell in next(rows, ())]
        wanted = ["Name"] + [f"{kind}-{k}" for k in range(1, SHOTS + 1) for kind in ("Instruction", "API")]
        missing = [column for column in wanted if column not in header]
        if missing:
            raise DemonstrationError(f"{path}: sheet {XLSX_SHEET!r} has no column(s) {', '.join(missing)}")
        column = {name: header.index(name) for name in wanted}
        demos: dict[str, list[Demonstration]] = {}
        for number, row in enumerate(rows, start=2):
            cells = {name: row[index] if index < len(row) else None for name, index in column.items()}
            name = cells["Name"]
            if name is None or not str(name).strip():
                continue
            tool = by_words.get(_words(str(name)))
            where = f"{path} sheet {XLSX_SHEET} row {number}"
            if tool is None:
                raise DemonstrationError(f"{where}: Name {name!r} matches none of the {len(by_words)} tools")
            for k in range(1, SHOTS + 1):
                instruction, api = cells[f"Instruction-{k}"], cells[f"API-{k}"]
                if instruction is None and api is None:
                    continue
                if not isinstance(instruction, str) or not isinstance(api, str):
                    raise DemonstrationError(f"{where}: Instruction-{k} and API-{k} must both be text")
                try:
                    values = curl_parameters(api, parameter_names(tool))
                except ValueError as err:
                    raise DemonstrationError(f"{where}: API-{k}: {err}") from None
                demos.setdefault(tool.name, []).append(Demonstration(instruction.strip(), values, api.strip()))
        return demos
    finally:
        book.close()


# ---------------------------------------------------------------- leave-one-out from the test set


@dataclass
class CaseDemo:
    id: str
    demonstration: Demonstration


def case_demonstrations(references: Iterable[Conversation]) -> tuple[dict[str, list[CaseDemo]], list[str]]:
    """Gold tool -> its test cases as demonstrations (in reference order), and the cases that cannot be one
    (``"id: reason"``: a gold answer whose parameters cannot be read)."""
    pool: dict[str, list[CaseDemo]] = {}
    unusable = []
    for conv in references:
        meta = conv.meta or {}
        tools = {tool.name: tool for tool in conv.tools}
        gold, task = meta.get("gold_tool"), meta.get("task")
        completion = meta.get("completion") or [""]
        answer = meta.get("api_program") or completion[0]
        if gold not in tools or not isinstance(answer, str):
            unusable.append(f"{conv.id}: no gold tool among its tools, or no gold answer")
            continue
        try:
            values = answer_parameters(answer, str(task), tools[gold])
        except (ProgramError, ValueError) as err:
            unusable.append(f"{conv.id}: {err}")
            continue
        instruction = conv.messages[0].content or ""
        pool.setdefault(gold, []).append(CaseDemo(conv.id, Demonstration(instruction, values, answer)))
    return pool, unusable


@dataclass
class ToolBenchDemonstrations:
    """``(tool name, item id) -> 3 demonstrations``: the xlsx's for a weather tool (minus the item's own
    instruction, topped up by leave-one-out), else leave-one-out from the test set with a seeded choice."""

    instructions: Mapping[str, str]  # item id -> its instruction (what must never be shown as a demonstration)
    pool: Mapping[str, list[CaseDemo]]
    documented: Mapping[str, list[Demonstration]] = field(default_factory=dict)
    seed: int = 0
    shots: int = SHOTS
    unusable: list[str] = field(default_factory=list)

    def __call__(self, tool: str, item_id: str) -> list[Demonstration]:
        own = self.instructions.get(item_id)
        chosen = [d for d in self.documented.get(tool, []) if d.instruction != own][: self.shots]
        if len(chosen) < self.shots:
            others = [
                c.demonstration
                for c in self.pool.get(tool, [])
                if c.id != item_id and c.demonstration.instruction != own
            ]
            rng = random.Random(f"{self.seed}\0{tool}\0{item_id}")
            chosen += rng.sample(others, min(self.shots - len(chosen), len(others)))
        return chosen

    def describe(self) -> dict[str, Any]:
        """What the report says about where each tool's demonstrations come from."""
        return {
            "shots": self.shots,
            "seed": self.seed,
            "documented": sorted(self.documented),
            "leave_one_out": sorted(set(self.pool) - set(self.documented)),
            "unusable_cases": list(self.unusable),
            "rule": "weather: Tool_Documentations_weather.xlsx sheet API (3 per tool), minus a case's own "
            "instruction, topped up by leave-one-out; cat, home, booking: leave-one-out from the test set "
            f"({self.shots} other cases with the same gold tool, seeded choice; a case is never its own demonstration)",
        }


def toolbench_demonstrations(
    references: Iterable[Conversation], weather_xlsx: str | Path | None = None, seed: int = 0
) -> ToolBenchDemonstrations:
    """The demonstrations for a ToolBench run: the weather xlsx when given (``DemonstrationError`` if it cannot be
    read), leave-one-out from ``references`` (the whole test set: pass all cases, not only the scored ones)."""
    references = list(references)
    pool, unusable = case_demonstrations(references)
    documented: dict[str, list[Demonstration]] = {}
    if weather_xlsx is not None:
        tools = {tool.name: tool for conv in references for tool in conv.tools}
        documented = read_weather_xlsx(weather_xlsx, tools.values())
    instructions = {conv.id: conv.messages[0].content or "" for conv in references if conv.messages}
    return ToolBenchDemonstrations(instructions, pool, documented, seed, SHOTS, unusable)


def find_weather_xlsx(data: Iterable[str | Path]) -> Path | None:
    """The weather xlsx beside the ToolBench data given (the data folder, or its weather task folder)."""
    for path in map(Path, data):
        for candidate in (path / WEATHER_XLSX, path / WEATHER_XLSX.name):
            if candidate.is_file():
                return candidate
    return None


__all__ = [
    "SHOTS",
    "WEATHER_XLSX",
    "CaseDemo",
    "DemonstrationError",
    "ToolBenchDemonstrations",
    "answer_parameters",
    "case_demonstrations",
    "curl_parameters",
    "find_weather_xlsx",
    "program_parameters",
    "read_weather_xlsx",
    "toolbench_demonstrations",
]
