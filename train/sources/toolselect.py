"""ToolSelect, ToolVerifier's training set: pick one tool out of a row's candidates.

INPUTS: ``train.csv`` (one column ``text``), then optionally ``tools.csv`` (``Name``,
``Description``). Each ``text`` is::

    User: <instruction>
    ###
    Tool Choices: <name> = <description>
    <name> = <description>            (2 to 8 candidates; the published rows have 8, 4, 3 or 2)
    ###
    Thought: <reasoning>
    Act: CALLTOOL["<gold tool name>"]

Canonical record: the row's candidates in the row's order are the tools (descriptions as the
row writes them; ToolSelect tools have no parameters), the instruction is the user message, and
the assistant message has the Thought as content and one call to the gold tool with ``{}``
arguments. ``meta`` keeps ``candidates`` (the order), ``gold_tool``, and, with ``tools.csv``,
``description_mismatch`` ({name: tools.csv description} where the row's text differs) and
``not_in_tools_csv`` (candidate names tools.csv lacks); a mismatch is information, not an error.

Three published rows label ``CALLTOOL["Sun"]`` while their candidates and Thought name
"Sun-Rise Time tool": the label was cut at the hyphen. A gold that is not a candidate is matched
to the one candidate whose name cut at its first hyphen equals it (``meta["gold_label"]`` keeps
the written label); no such unique candidate: Rejected. Ids are ``train-<row>`` (0-based).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from train.base.records import Rejected, SourceError, check_arity, read_text
from train.schema import Conversation, Message, SchemaError, Tool, ToolCall

_SECTIONS = "\n###\n"
_ACT = re.compile(r'\AThought: ?(?P<thought>.*)\nAct: CALLTOOL\["(?P<gold>[^"\n]*)"\]\s*\Z', re.DOTALL)


def read_csv(path: Path, columns: tuple[str, ...]) -> list[tuple[int, dict[str, Any]]]:
    """(data row index, row) pairs; a header without the columns is a SourceError."""
    if path.is_dir():
        raise SourceError(f"{path}: expected a CSV file, got a folder")
    reader = csv.DictReader(io.StringIO(read_text(path), newline=""))
    missing = [c for c in columns if c not in (reader.fieldnames or [])]
    if missing:
        present = ", ".join(reader.fieldnames or []) or "none"
        raise SourceError(f"{path}: missing column(s) {', '.join(missing)}; has {present}")
    try:
        return list(enumerate(reader))
    except csv.Error as err:
        raise SourceError(f"{path}: unreadable CSV at line {reader.line_num}: {err}") from None


def parse_text(text: Any) -> tuple[str, list[tuple[str, str]], str, str]:
    """(instruction, [(name, description)], thought, gold label) of one row's ``text``."""
    if not isinstance(text, str):
        raise SchemaError("text", f"expected a string, got {type(text).__name__}")
    sections = text.split(_SECTIONS)
    if len(sections) != 3:
        raise SchemaError("text", f"expected 3 sections separated by '###', got {len(sections)}")
    user, choices, act = sections
    if not user.startswith("User: "):
        raise SchemaError("text", "first section does not start with 'User: '")
    if not choices.startswith("Tool Choices: "):
        raise SchemaError("text", "second section does not start with 'Tool Choices: '")
    candidates = []
    for number, line in enumerate(choices[len("Tool Choices: ") :].split("\n")):
        name, separator, description = line.partition(" = ")
        if not separator or not name.strip():
            raise SchemaError(f"text.choices[{number}]", f"expected '<name> = <description>', got {line[:60]!r}")
        candidates.append((name, description))
    names = [name for name, _ in candidates]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SchemaError("text.choices", f"duplicate candidate(s) {', '.join(map(repr, duplicates))}")
    match = _ACT.match(act)
    if match is None:
        raise SchemaError("text", "third section is not 'Thought: ...' then 'Act: CALLTOOL[\"<tool>\"]'")
    instruction = user[len("User: ") :]
    if not instruction.strip():
        raise SchemaError("text", "empty instruction")
    return instruction, candidates, match.group("thought"), match.group("gold")


def resolve_gold(label: str, names: list[str]) -> str:
    """The candidate a gold label means: itself, or the unique name it is a hyphen-cut prefix of."""
    if label in names:
        return label
    cut = [name for name in names if name.split("-", 1)[0].strip() == label and "-" in name]
    if len(cut) == 1:
        return cut[0]
    raise SchemaError("text.gold", f"CALLTOOL[{label!r}] names no candidate ({', '.join(map(repr, names))})")


def convert(row: dict[str, Any], index: int, stem: str, catalogue: dict[str, str] | None) -> Conversation:
    if None in row:
        raise SchemaError("row", f"{len(row[None])} field(s) more than the header")
    instruction, candidates, thought, label = parse_text(row.get("text"))
    names = [name for name, _ in candidates]
    gold = resolve_gold(label, names)
    meta: dict[str, Any] = {"source": "toolselect", "candidates": names, "gold_tool": gold}
    if gold != label:
        meta["gold_label"] = label
    if catalogue is not None:
        mismatch = {n: catalogue[n] for n, d in candidates if n in catalogue and catalogue[n] != d}
        missing = [n for n in names if n not in catalogue]
        if mismatch:
            meta["description_mismatch"] = mismatch
        if missing:
            meta["not_in_tools_csv"] = missing
    return Conversation(
        id=f"{stem}-{index}",
        tools=[Tool(name=name, description=description) for name, description in candidates],
        messages=[
            Message(role="user", content=instruction),
            Message(role="assistant", content=thought, tool_calls=[ToolCall(name=gold, arguments={}, id="call_0")]),
        ],
        meta=meta,
    )


def load_catalogue(path: Path) -> dict[str, str]:
    catalogue: dict[str, str] = {}
    for index, row in read_csv(path, ("Name", "Description")):
        name, description = row.get("Name"), row.get("Description")
        if not isinstance(name, str) or not isinstance(description, str) or name in catalogue:
            raise SourceError(f"{path}#{index}: expected a unique Name and a Description")
        catalogue[name] = description
    return catalogue


def read(inputs: list[Path]) -> Iterator[Conversation | Rejected]:
    check_arity(inputs, ("TRAIN_CSV", "TOOLS_CSV"), optional=1)
    catalogue = load_catalogue(inputs[1]) if len(inputs) == 2 else None
    train = inputs[0]
    for index, row in read_csv(train, ("text",)):
        try:
            yield convert(row, index, train.stem, catalogue)
        except SchemaError as err:
            yield Rejected(f"{train}#{index}", str(err), row.get("text", row))
