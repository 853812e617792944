"""ToolGT's stage-3 rules and the decontamination index.

* ``equivalent``: a regenerated call list is AST-equivalent to the gold (§2.3, "Manual Verification") when the same
  calls are made, in any order, each with the same arguments in any order, an optional argument passed at its
  schema default counting as not passed; positional arguments are named by the schema's parameter order; 1 and
  1.0 are the same number, True is not 1. Strings compare exactly: the paper's AST check is not BFCL's lenient one.
* ``leaks``: a reasoning that says it knows the answer ("ground truth", "the answer is"; any case) is dropped.
* ``EvalIndex``: normalised queries and call sets of BFCL-v2 / Nexus eval items, read through the registered
  ``bfcl`` and ``nexus`` readers from ``SOURCE:PATH`` specs (a file or a folder; ``pkg://train/...`` names one the
  package ships, as ``data.sources`` inputs do), so training samples that match one are dropped and counted.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

from train.base.pysyntax import PyCall
from train.schema import Conversation, Tool, ToolCall
from train.sources import Rejected, SourceError, get_reader

LEAK_PHRASES = ("ground truth", "the answer is")


def leaks(reasoning: str) -> str | None:
    """The leaking phrase a reasoning contains, else None."""
    lowered = reasoning.lower()
    return next((phrase for phrase in LEAK_PHRASES if phrase in lowered), None)


def _number(value: Any) -> Any:
    """JSON values with int-valued floats as ints, recursively (bools stay bools)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_number(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _number(v) for k, v in value.items()}
    return value


def _canonical(name: str, arguments: dict[str, Any], tool: Tool | None) -> str:
    properties = (tool.parameters.get("properties") or {}) if tool else {}
    required = set((tool.parameters.get("required") or []) if tool else [])
    kept = {}
    for key, value in arguments.items():
        spec = properties.get(key) if isinstance(properties.get(key), dict) else {}
        if (
            key not in required
            and "default" in spec
            and _number(spec["default"]) == _number(value)
            and type(_number(spec["default"])) is type(_number(value))
        ):
            continue  # an optional argument at its default changes nothing
        kept[key] = _number(value)
    return json.dumps([name, kept], sort_keys=True, ensure_ascii=False)


def named_arguments(call: PyCall, tool: Tool | None) -> dict[str, Any] | None:
    """The call's arguments by name (positional ones by the schema's order); None when they cannot be named."""
    arguments = dict(call.kwargs)
    if call.args:
        order = list((tool.parameters.get("properties") or {}) if tool else [])
        if len(call.args) > len(order):
            return None
        for name, value in zip(order, call.args, strict=False):
            if name in arguments:
                return None
            arguments[name] = value
    return arguments


def equivalent(candidate: list[PyCall], gold: list[ToolCall], tools: dict[str, Tool]) -> bool:
    """AST equivalence of a regenerated call list and the gold (see the module docstring)."""
    if len(candidate) != len(gold):
        return False
    mine = []
    for call in candidate:
        arguments = named_arguments(call, tools.get(call.name))
        if arguments is None:
            return False
        mine.append(_canonical(call.name, arguments, tools.get(call.name)))
    theirs = [_canonical(call.name, call.arguments, tools.get(call.name)) for call in gold]
    return Counter(mine) == Counter(theirs)


# ---------------------------------------------------------------- decontamination


def normal_query(text: str) -> str:
    """Lower case, letters and digits only, single spaces: what counts as the same query."""
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text.lower()).split())


def call_set(calls: list[ToolCall]) -> str:
    """A call set's key: its calls in any order, arguments in any order, 1 == 1.0."""
    return json.dumps(sorted(_canonical(c.name, c.arguments, None) for c in calls), ensure_ascii=False)


def user_query(conv: Conversation) -> str:
    return "\n".join(m.content or "" for m in conv.messages if m.role == "user")


def local_path(location: str) -> Path:
    """``pkg://train/assets/x`` -> that file or folder inside the installed package (the toolgt_tiny recipe's eval
    rows); anything else as is."""
    if location.startswith("pkg://"):
        package, _, inner = location[len("pkg://") :].partition("/")
        return Path(str(resources.files(package) / inner))
    return Path(location).expanduser()


def eval_files(source: str, path: Path) -> list[list[Path]]:
    """The reader inputs a ``SOURCE:PATH`` spec names: one list per reader call."""
    if path.is_file():
        answer = path.parent / "possible_answer" / path.name
        return [[path, answer] if source == "bfcl" and answer.is_file() else [path]]
    if not path.is_dir():
        raise SourceError(f"toolgt builder: decontaminate: {path} is neither a file nor a folder")
    if source == "bfcl":
        return [
            [q, q.parent / "possible_answer" / q.name] if (q.parent / "possible_answer" / q.name).is_file() else [q]
            for q in sorted(path.glob("BFCL_*.json"))
        ]
    if source == "nexus":  # the nexus reader takes a folder: NexusRaven V1's files, V2's release, or both
        return [[path]]
    definitions = path / "_derived_function_definitions.json"
    queries = sorted(path.glob("*_queries.json"))
    return [[*queries, *([definitions] if definitions.is_file() else [])]] if queries else []


class EvalIndex:
    """Normalised queries and call sets of the eval items the specs name (``bfcl:PATH,nexus:PATH``).

    A spec or an eval file that cannot be read is a ``SourceError`` (an input problem): it is raised while the data
    is built, where a training run reports SourceError as one ``error:`` line (exit 2), as ``data build`` does."""

    def __init__(self, specs: str):
        self.specs = [s.strip() for s in specs.split(",") if s.strip()]
        self.queries: set[str] = set()
        self.calls: set[str] = set()
        self.items = 0
        self.rejected = 0
        for spec in self.specs:
            source, colon, location = spec.partition(":")
            if not colon or source not in ("bfcl", "nexus") or not location:
                raise SourceError(f"toolgt builder: decontaminate: {spec!r} is not bfcl:PATH or nexus:PATH")
            for paths in eval_files(source, local_path(location)):
                try:
                    items = list(get_reader(source)(paths))
                except SourceError as err:
                    raise SourceError(f"toolgt builder: decontaminate: {err}") from None
                for item in items:
                    if isinstance(item, Rejected):
                        self.rejected += 1
                    elif isinstance(item, Conversation):
                        self.add(item)

    def add(self, conv: Conversation) -> None:
        self.items += 1
        query = normal_query(user_query(conv))
        if query:
            self.queries.add(query)
        calls = [c for m in conv.messages if m.role == "assistant" for c in (m.tool_calls or [])]
        if calls:
            self.calls.add(call_set(calls))

    def match(self, query: str, gold: list[ToolCall]) -> str | None:
        """``query`` or ``calls`` when the sample matches an eval item (the query is checked first), else None."""
        if normal_query(query) in self.queries:
            return "query"
        if call_set(gold) in self.calls:
            return "calls"
        return None

    def report(self) -> dict[str, Any]:
        return {"checked": self.specs, "eval_items": self.items, "eval_rejected": self.rejected}


__all__ = ["LEAK_PHRASES", "EvalIndex", "call_set", "equivalent", "leaks", "named_arguments", "normal_query"]
