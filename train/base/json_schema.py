"""JSON Schema checking that cannot hang or reach the network: tool schemas come from datasets.

* ``pattern``, ``patternProperties`` and ``additionalProperties`` match with ``regex`` under a time
  budget shared by one record (``REGEX_BUDGET_S``; ``PatternFault`` when it runs out), through
  ``BoundedValidator``.
* References resolve inside the schema only (``LOCAL_ONLY``; ``reference_fault`` names one that
  points outside it): jsonschema would otherwise fetch any http(s) ``$ref``, with no timeout.

``train.validate`` turns these faults into findings; this module knows nothing of conversations.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

import jsonschema
import referencing
import referencing.exceptions
import regex
from jsonschema_specifications import REGISTRY as META_SCHEMAS
from referencing.jsonschema import DRAFT202012

# jsonschema matches ``pattern`` and ``patternProperties`` with Python's ``re``, a backtracking engine
# with no time limit: ``^(a|a)*$`` against 40 a's and a b never ends. The keywords below match with
# ``regex`` instead, which takes a ``timeout``. Why ``regex`` and not RE2 (no backtracking at all): the
# patterns are ECMA-262 but have always been run as Python patterns here, and ``regex`` (version 0 mode)
# is ``re``-compatible, so every schema keeps its meaning; RE2 refuses lookarounds and backreferences,
# which ECMA-262 has and real schemas use, so those tools would stop being checkable. ``regex`` is
# well kept (the engine tiktoken and transformers already depend on).
REGEX_BUDGET_S = 1.0  # all pattern matching of one record; real patterns take microseconds


class PatternFault(Exception):
    """A pattern that could not be matched in the record's budget (``timeout``) or compiled by ``regex``."""

    def __init__(self, pattern: str, subject: str, timeout: bool, detail: str = ""):
        self.pattern, self.subject, self.timeout, self.detail = pattern, subject, timeout, detail
        super().__init__(detail or f"pattern {pattern!r} timed out")


class ExternalReference(Exception):
    """Raised for every URI a schema's ``$ref`` would fetch: references resolve inside the schema only."""


def _refuse_retrieval(uri: str) -> referencing.Resource:
    raise ExternalReference(uri)


# jsonschema adds the meta-schemas to this registry; without one it would fetch any http(s) $ref, no timeout
LOCAL_ONLY: referencing.Registry = referencing.Registry(retrieve=_refuse_retrieval)
_regex_deadline: ContextVar[float | None] = ContextVar("regex_deadline", default=None)


@contextmanager
def regex_budget(deadline: float) -> Iterator[None]:
    token = _regex_deadline.set(deadline)
    try:
        yield
    finally:
        _regex_deadline.reset(token)


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> regex.Pattern:
    return regex.compile(pattern, regex.VERSION0)


def bounded_search(pattern: str, subject: str) -> bool:
    """``re.search(pattern, subject)`` within what is left of the record's budget; PatternFault otherwise."""
    deadline = _regex_deadline.get()
    left = REGEX_BUDGET_S if deadline is None else deadline - time.monotonic()
    if left <= 0:
        raise PatternFault(pattern, subject, timeout=True)
    try:
        return _compiled(pattern).search(subject, timeout=left) is not None
    except TimeoutError:
        raise PatternFault(pattern, subject, timeout=True) from None
    except regex.error as err:
        raise PatternFault(pattern, subject, timeout=False, detail=f"pattern {pattern!r}: {err}") from None


# The three keywords of Draft 2020-12 that call re.search, as jsonschema writes them, with bounded_search.
def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not bounded_search(pattern, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator, patterns, instance, schema):
    if validator.is_type(instance, "object"):
        for pattern, subschema in patterns.items():
            for key, value in instance.items():
                if bounded_search(pattern, key):
                    yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator, additional, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    named, patterns = schema.get("properties", {}), list(schema.get("patternProperties", {}))
    extras = [k for k in instance if k not in named and not any(bounded_search(p, k) for p in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        listed = ", ".join(repr(k) for k in sorted(extras))
        if patterns:
            shown = ", ".join(repr(p) for p in sorted(patterns))
            yield jsonschema.ValidationError(
                f"{listed} {'does' if len(extras) == 1 else 'do'} not match any of the regexes: {shown}"
            )
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield jsonschema.ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")


BoundedValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    {"pattern": _pattern, "patternProperties": _pattern_properties, "additionalProperties": _additional_properties},
)
# Data, not subschemas: a {"$ref": ...} inside a default or an enum is a value, never resolved.
_DATA_KEYWORDS = {"const", "enum", "default", "examples"}
_NAMED_SUBSCHEMAS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}


def subschemas(schema: Any) -> Iterator[dict[str, Any]]:
    """Every schema object inside a schema (itself included), iteratively; the names under ``properties``
    and the like are names, not keywords, and values of ``const``/``enum``/``default`` are data."""
    stack = [schema]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            yield item
            for key, value in item.items():
                if key in _NAMED_SUBSCHEMAS and isinstance(value, dict):
                    stack.extend(value.values())
                elif key not in _DATA_KEYWORDS:
                    stack.append(value)


def _cause(err: BaseException | None, kind: type[BaseException]) -> BaseException | None:
    while err is not None and not isinstance(err, kind):
        err = err.__cause__ or err.__context__
    return err


def reference_fault(schema: dict[str, Any]) -> str | None:
    """Why a schema cannot be used as it is without fetching anything: a ``$ref`` leading outside it, or
    ``unevaluatedProperties`` beside ``patternProperties`` (jsonschema matches those with ``re``, unbounded)."""
    parts = list(subschemas(schema))
    if any("unevaluatedProperties" in s for s in parts) and any("patternProperties" in s for s in parts):
        return "unevaluatedProperties with patternProperties is not supported (its matching cannot be time-bounded)"
    resource = DRAFT202012.create_resource(schema)
    base = resource.id() or ""
    resolver = META_SCHEMAS.combine(LOCAL_ONLY).with_resource(base, resource).resolver(base)
    for part in parts:
        for keyword in ("$ref", "$dynamicRef"):
            ref = part.get(keyword)
            if not isinstance(ref, str):
                continue
            try:
                resolver.lookup(ref)
            except referencing.exceptions.Unresolvable as err:
                if _cause(err, ExternalReference) is not None:
                    return f"{keyword} {ref!r} points outside the schema; only references inside it are resolved"
    return None
