"""Helpers the Meta-Bench, ITC, TRACC and ToolSelect scorers share: argument normalisation, call
multisets, and joining prediction rows to reference rows by id.

Argument equality
-----------------
Two argument values are equal when they are the same JSON value after normalisation:

* object key order is ignored (``{"a": 1, "b": 2} == {"b": 2, "a": 1}``);
* numbers compare by value, so ``1 == 1.0`` (and ``-0.0 == 0``), but a boolean is never a number
  (``True != 1``) and a string is never a number (``"1" != 1``);
* lists keep their order (a list is a sequence, not a set).

``canonical`` turns a JSON value into a hashable key with exactly that equality, so calls and
(tool, key, value) triples can go into ``collections.Counter`` multisets.

Call multisets
--------------
A turn's calls are compared as multisets: order is ignored, repetition is not. When the same tool is
called twice, the calls pair up by their normalised arguments: ``[f(x=1), f(x=2)]`` equals
``[f(x=2), f(x=1)]`` but not ``[f(x=1), f(x=1)]``. Multiset equality of ``(name, canonical
arguments)`` is exactly "there is a one-to-one pairing of predicted and expected calls in which every
pair has the same name and equal arguments", with no greedy-order effects.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any


class CallFormatError(ValueError):
    """A ``tool_calls`` field that is not a list of ``{"name", "arguments"}`` calls."""


def canonical(value: Any) -> Hashable:
    """A hashable key equal for JSON values that are equal up to key order and int/float spelling."""
    if value is None:
        return ("null",)
    if isinstance(value, bool):  # before numbers: bool is an int subclass
        return ("bool", value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, (list, tuple)):
        return ("array", tuple(canonical(item) for item in value))
    if isinstance(value, dict):
        return ("object", tuple(sorted((str(key), canonical(item)) for key, item in value.items())))
    return ("other", repr(value))


@dataclass
class Call:
    """One tool call with its arguments; ``key`` is what multiset comparison uses."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, Hashable]:
        return (self.name, canonical(self.arguments))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments}


def read_call(obj: Any, where: str = "tool_call") -> Call:
    """``{"name", "arguments"}`` or the canonical ``{"type", "function": {"name", "arguments"}}``.

    ``arguments`` may be an object, a JSON string holding an object (OpenAI's wire form), or absent
    (no arguments). Anything else is a ``CallFormatError`` naming ``where``.
    """
    if not isinstance(obj, dict):
        raise CallFormatError(f"{where}: expected an object, got {type(obj).__name__}")
    body = obj["function"] if isinstance(obj.get("function"), dict) else obj
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise CallFormatError(f"{where}: expected a non-empty string 'name'")
    arguments = body.get("arguments", {})
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):  # JSONDecodeError, or an integer past the digit limit
            raise CallFormatError(f"{where}: arguments of {name!r} are not valid JSON") from None
    if not isinstance(arguments, dict):
        raise CallFormatError(f"{where}: arguments of {name!r} must be an object, got {type(arguments).__name__}")
    return Call(name=name, arguments=arguments)


def read_calls(value: Any, where: str = "tool_calls") -> list[Call]:
    """A ``tool_calls`` field; absent or null means no call."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise CallFormatError(f"{where}: expected a list, got {type(value).__name__}")
    return [read_call(item, f"{where}[{index}]") for index, item in enumerate(value)]


def name_multiset(calls: Iterable[Call]) -> Counter[str]:
    return Counter(call.name for call in calls)


def call_multiset(calls: Iterable[Call]) -> Counter[tuple[str, Hashable]]:
    return Counter(call.key for call in calls)


def triple_multiset(calls: Iterable[Call]) -> Counter[tuple[str, str, Hashable]]:
    """(tool name, argument key, canonical value) for every argument of every call."""
    return Counter((call.name, key, canonical(value)) for call in calls for key, value in call.arguments.items())


def same_names(predicted: Iterable[Call], expected: Iterable[Call]) -> bool:
    return name_multiset(predicted) == name_multiset(expected)


def same_calls(predicted: Iterable[Call], expected: Iterable[Call]) -> bool:
    return call_multiset(predicted) == call_multiset(expected)


def overlap(a: Counter, b: Counter) -> int:
    """Size of the multiset intersection."""
    return sum((a & b).values())


# ---------------------------------------------------------------- joining rows by id


@dataclass
class Joined:
    """References paired with their predictions; nothing is dropped without being listed.

    ``pairs`` holds one ``(reference, prediction or None)`` per usable reference, in reference order.
    """

    pairs: list[tuple[dict[str, Any], dict[str, Any] | None]]
    missing_prediction_ids: list[Any]
    unknown_prediction_ids: list[Any]
    duplicate_prediction_ids: list[Any]
    duplicate_reference_ids: list[Any]
    rows_without_id: list[dict[str, Any]]  # {"file": "predictions"|"references", "index", "reason"}

    def issues(self) -> dict[str, Any]:
        return {
            "missing_prediction_ids": self.missing_prediction_ids,
            "unknown_prediction_ids": self.unknown_prediction_ids,
            "duplicate_prediction_ids": self.duplicate_prediction_ids,
            "duplicate_reference_ids": self.duplicate_reference_ids,
            "rows_without_id": self.rows_without_id,
        }


def _has_id(row: Any) -> bool:
    return isinstance(row, dict) and isinstance(row.get("id"), (str, int)) and not isinstance(row.get("id"), bool)


def join_by_id(predictions: Iterable[Any], references: Iterable[Any]) -> Joined:
    """Pair each reference with the prediction of the same id (the first one when an id repeats).

    A reference without a prediction is paired with None (the scorers count it wrong); a prediction
    whose id no reference has is listed in ``unknown_prediction_ids``; a second reference with an id
    already seen is listed and not scored twice; a row that is not an object with a string or integer
    ``id`` is listed with its 0-based index.
    """
    without_id: list[dict[str, Any]] = []
    by_id: dict[Any, dict[str, Any]] = {}
    duplicate_predictions: list[Any] = []
    for index, row in enumerate(predictions):
        if not _has_id(row):
            without_id.append({"file": "predictions", "index": index, "reason": "not an object with a string 'id'"})
        elif row["id"] in by_id:
            duplicate_predictions.append(row["id"])
        else:
            by_id[row["id"]] = row
    pairs: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    seen: set[Any] = set()
    duplicate_references: list[Any] = []
    missing: list[Any] = []
    for index, row in enumerate(references):
        if not _has_id(row):
            without_id.append({"file": "references", "index": index, "reason": "not an object with a string 'id'"})
            continue
        if row["id"] in seen:
            duplicate_references.append(row["id"])
            continue
        seen.add(row["id"])
        prediction = by_id.get(row["id"])
        if prediction is None:
            missing.append(row["id"])
        pairs.append((row, prediction))
    unknown = [item_id for item_id in by_id if item_id not in seen]
    return Joined(pairs, missing, unknown, duplicate_predictions, duplicate_references, without_id)


@dataclass
class Scored:
    """Every reference either scored (``per_item``, in reference order) or listed as unscorable."""

    per_item: list[dict[str, Any]]
    reference_errors: list[dict[str, Any]]  # {"id", "reason"}: references left out of the counts
    joined: Joined

    def result(self, **metrics: Any) -> dict[str, Any]:
        """A scorer's result: its metrics, then the items, the unscorable references and the id issues."""
        return {**metrics, "per_item": self.per_item, "reference_errors": self.reference_errors, **self.joined.issues()}


def score_joined(
    joined: Joined,
    read_reference: Callable[[dict[str, Any]], Any],
    score: Callable[[Any, dict[str, Any] | None], dict[str, Any]],
    bad_reference: type[Exception] | tuple[type[Exception], ...],
) -> Scored:
    """The scorers' loop: for each reference (with its prediction or None), ``read_reference`` reads
    what it expects, raising ``bad_reference`` when it cannot (the reference is listed with the
    reason and left out of the counts); ``score(expected, prediction)`` gives the item's fields, to
    which its ``id`` is put first. A prediction-side problem is the item's to report, never raised."""
    per_item: list[dict[str, Any]] = []
    reference_errors: list[dict[str, Any]] = []
    for reference, prediction in joined.pairs:
        try:
            expected = read_reference(reference)
        except bad_reference as err:
            reference_errors.append({"id": reference["id"], "reason": str(err)})
            continue
        per_item.append({"id": reference["id"], **score(expected, prediction)})
    return Scored(per_item, reference_errors, joined)


def ratio(numerator: float, denominator: float) -> float | None:
    """A rate, or None when nothing was counted (a metric over zero items is undefined, not 0)."""
    return numerator / denominator if denominator else None
