"""Recipe data builders: pure, seeded transformations of a canonical conversation stream.

A builder is ``build(conversations, *, seed, on_drop=None, **args) -> Iterator[Conversation]``:
deterministic given its seed and arguments (a rebuild is byte-identical), it reads canonical
conversations and yields the recipe's training conversations. ``on_drop(reason)`` is called once
for every conversation it reads and does not yield, so a caller's accounting still adds up
(read = yielded + dropped). Its arguments are ONE dataclass: a recipe fills it from ``data.builder_args``
(checked when the config is composed), ``tooltrain data build NAME ... key=value`` from the command line.
A recipe names its builder in ``data.builder``; name and arguments are part of the dataset cache key.

``BUILDERS`` is the one list of them (``train.registry``); ``data.builder`` and ``data build`` also take
``module:attr`` naming a ``BuilderSpec`` of your own (``docs/extending.md``).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from train.registry import Registry
from train.schema import Conversation

Builder = Callable[..., Iterator[Conversation]]
OnDrop = Callable[[str], None]


@dataclass(frozen=True)
class BuilderSpec:
    """One builder: its function, its arguments dataclass (a ``from_args(dict)`` classmethod, when it has one,
    validates beyond the field names), its version (part of the dataset cache key: bump it when a seed's output
    changes), and what ``tooltrain data build`` writes: ``outputs`` (file names besides report.json) and
    ``files(conversations, args, seed) -> ({file name: records}, report dict, summary lines)`` (the command
    prints ``read N: <first line>, rejected R``, then the others); without ``files`` the command writes the
    builder's conversations as train.jsonl."""

    build: Builder
    args: type
    version: str = "0"
    outputs: tuple[str, ...] = ("train.jsonl",)
    files: Callable[..., tuple[dict[str, list], dict[str, Any], list[str]]] | None = None


BUILDERS: Registry[BuilderSpec] = Registry("data builder", "builders", lambda obj: isinstance(obj, BuilderSpec))
# imported on first use (a teacher, a retriever)
BUILDERS.register("metatool", "train.papers.metatool.builder_spec:SPEC")
BUILDERS.register("toolgt", "train.papers.toolgt.builder_spec:SPEC")  # ToolGT template-guided reasoning (seed 004)
BUILDERS.register("toolselect", "train.papers.toolverifier.builder:SPEC")  # ToolVerifier selector data (seed 003)
BUILDERS.register("itc", "train.papers.itc.builder_spec:SPEC")  # International Tool Calling tasks (seed 002)


def get_builder(name: str) -> Builder:
    return BUILDERS.get(name).build


def version(name: str) -> str:
    """The builder's version (part of the dataset cache key): bumped when a seed's output changes."""
    return str(BUILDERS.get(name).version)


def make_args(name: str, args: dict[str, Any] | None = None) -> Any:
    """``args`` as the builder's dataclass; ValueError naming the valid keys when one is unknown."""
    cls = BUILDERS.get(name).args
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(args or {}) - set(known))
    if unknown:
        raise ValueError(f"{name} builder: unknown argument(s) {unknown}; valid: {', '.join(sorted(known))}")
    hints = typing.get_type_hints(cls)
    for key, value in (args or {}).items():  # scalar fields are typed: a recipe's YAML is checked as the CLI is
        kind = hints[key]
        if kind in (bool, int, float, str) and not _fits(value, kind):
            raise ValueError(f"{name} builder: {key} must be {kind.__name__}, got {value!r}")
    from_args = getattr(cls, "from_args", None)
    return from_args(dict(args or {})) if from_args is not None else cls(**dict(args or {}))


def _fits(value: Any, kind: type) -> bool:
    if isinstance(value, bool) or kind is bool:  # a bool is an int in Python: keep them apart
        return isinstance(value, bool) and kind is bool
    return isinstance(value, (int, float)) if kind is float else isinstance(value, kind)


def parse_args(name: str, specs: list[str]) -> dict[str, Any]:
    """``key=value`` words -> builder arguments typed by the dataclass's fields (``teacher.kind=http`` sets a key
    of a mapping field); ValueError naming the valid keys, or the expected type."""
    cls = BUILDERS.get(name).args
    hints = typing.get_type_hints(cls)
    fields = {f.name: hints[f.name] for f in dataclasses.fields(cls)}
    parsed: dict[str, Any] = {}
    for spec in specs:
        key, _, text = spec.partition("=")
        head, dot, sub = key.partition(".")
        if head not in fields:
            raise ValueError(f"{name} builder: unknown argument {head!r}; valid: {', '.join(sorted(fields))}")
        kind = typing.get_origin(fields[head]) or fields[head]
        if kind is dict:
            if not dot:
                raise ValueError(f"{name} builder: {head} is a mapping: give {head}.KEY=VALUE")
            parsed.setdefault(head, {})[sub] = _scalar(text)
            continue
        if dot:
            raise ValueError(f"{name} builder: {head} is not a mapping (got {spec!r})")
        parsed[head] = _typed(name, head, kind, text)
    return parsed


def _typed(name: str, key: str, kind: Any, text: str) -> Any:
    if kind is bool:
        lowered = text.strip().lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(f"{name} builder: {key} must be true or false, got {text!r}")
        return lowered in ("true", "1", "yes")
    if kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            raise ValueError(f"{name} builder: {key} must be {kind.__name__}, got {text!r}") from None
    return text


def _scalar(text: str) -> Any:
    """A mapping value from the command line: an int, a float, true/false, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def bind(name: str, seed: int, args: dict[str, Any] | None = None) -> Callable[..., Iterator[Conversation]]:
    """``conversations, on_drop=None -> conversations``: the builder with its seed and arguments applied.

    The builder is looked up and its arguments checked now (``make_args``), so an unknown name or argument
    fails before any data is read.
    """
    build = get_builder(name)
    arguments = dict(args or {})
    make_args(name, arguments)

    def transform(conversations: Iterable[Conversation], on_drop: OnDrop | None = None) -> Iterator[Conversation]:
        return build(conversations, seed=seed, on_drop=on_drop, **arguments)

    return transform


__all__ = ["BUILDERS", "Builder", "BuilderSpec", "bind", "get_builder", "make_args", "parse_args", "version"]
