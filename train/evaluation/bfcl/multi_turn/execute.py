"""BFCL's multi-turn environments, and one call run against them by name, never by ``eval``.

bfcl-eval 2026.3.23 (``eval_checker/multi_turn_eval/multi_turn_utils.py``, ``execute_multi_turn_func_call``) makes
one instance of each involved class (``GorillaFileSystem``, ``MathAPI``, ``MessageAPI``, ``TwitterAPI``,
``TicketAPI``, ``TradingBot``, ``TravelAPI``, ``VehicleControlAPI``), loads every stateful one with
``_load_scenario(deepcopy(initial_config[class]), long_context=...)``, maps each public method name to its instance
(a later class wins a shared name; none is shared in 2026.3.23), then turns each call into a Python string and
``eval``s it. Here the method is looked up by name among the permitted ones (public methods of the involved classes
that their function docs list) and called with the call's own values: a model's JSON arguments as keywords, a gold
call's literals (read by ``train.base.pysyntax``, never executed) as written. What BFCL's ``eval`` gives back is
reproduced: a refused name (its list: kill, exit, ...) -> ``Function call NAME is not allowed.``, an unknown name ->
``name 'NAME' is not defined`` (BFCL's NameError; a Python builtin of that name is never run here), any exception ->
``Error during execution: <message>``; a result that is a ``str`` stays, a ``dict`` becomes ``json.dumps`` (else
``str``), anything else ``str``. Known difference: BFCL rewrites ``name(`` inside string arguments too (its regex
prefixes method names before ``eval``), which changes such strings; here they arrive as written.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from train.base.pysyntax import parse_call

REFUSED = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")  # BFCL's list, checked before eval
ERROR = "Error during execution: "
INSTALL = "pip install --no-deps bfcl-eval==2026.3.23"


class PackageMissing(ValueError):
    """bfcl-eval is not installed: its environment classes are what the episodes run against."""


@dataclass
class Call:
    name: str
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)


def backend_config() -> tuple[dict[str, str], list[str]]:
    """(class name -> module, the stateless classes): bfcl-eval's own table."""
    try:
        from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES
    except ImportError:
        raise PackageMissing(f"BFCL multi-turn runs bfcl-eval's environments: {INSTALL}") from None
    return CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES


def gold_call(text: str) -> Call:
    """A gold call string (``sort('final_report.pdf')``) as a call; its literals read with ``ast``."""
    parsed = parse_call(text, fold_arithmetic=True)
    return Call(parsed.name, list(parsed.args), dict(parsed.kwargs))


def stringify(result: Any) -> str:
    """An execution result as BFCL writes it into the tool message and compares it."""
    if type(result) is str:  # BFCL tests the exact type: a str subclass goes through str()
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except (TypeError, ValueError):  # an object inside (BFCL: "some function returns an object instance")
            return str(result)
    return str(result)


class Environments:
    """One entry's instances of its involved classes, and the methods a call may reach."""

    def __init__(self, classes: Iterable[str], initial_config: dict[str, Any], long_context: bool, permitted: set[str]):
        modules, stateless = backend_config()
        self.instances: dict[str, Any] = {}
        self.methods: dict[str, Any] = {}
        for name in classes:
            if name not in modules:
                raise ValueError(f"unknown BFCL class {name!r}; known: {', '.join(modules)}")
            instance = getattr(importlib.import_module(modules[name]), name)()
            if name not in stateless:
                instance._load_scenario(copy.deepcopy(initial_config.get(name, {})), long_context=long_context)
            self.instances[name] = instance
            for method_name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not method_name.startswith("_") and method_name in permitted:
                    self.methods[method_name] = method

    def execute(self, call: Call) -> str:
        """The call's result as BFCL's executor reports it (never raises for what the call does)."""
        if call.name in REFUSED:
            return f"{ERROR}Function call {call.name} is not allowed."
        method = self.methods.get(call.name)
        if method is None:
            return f"{ERROR}name '{call.name}' is not defined"
        try:
            result = method(*call.args, **call.kwargs)
        except Exception as err:  # noqa: BLE001 -- BFCL reports every exception of a call as its result
            return f"{ERROR}{err}"
        return stringify(result)


def state_differences(model: Environments, gold: Environments) -> dict[str, list[str]]:
    """Per class, the public attributes of the gold instance whose value the model's instance does not have
    (BFCL's ``state_checker`` / ``_compare_instances``: ``vars`` of the gold instance, ``!=``); {} when equal."""
    differences: dict[str, list[str]] = {}
    for class_name, gold_instance in gold.instances.items():
        model_instance = model.instances[class_name]
        missing = object()
        changed = [
            attr
            for attr in vars(gold_instance)
            if not attr.startswith("_") and getattr(model_instance, attr, missing) != getattr(gold_instance, attr)
        ]
        if changed:
            differences[class_name] = changed
    return differences


def missing_results(gold: list[str], model: list[str]) -> list[str]:
    """The gold results that the model's results lack, each counted as often as it occurs (BFCL's
    ``_is_subsequence_unordered``: order free, duplicates matched once each)."""
    pool = list(model)
    missing = []
    for item in gold:
        if item in pool:
            pool.remove(item)
        else:
            missing.append(item)
    return missing


__all__ = [
    "ERROR",
    "INSTALL",
    "REFUSED",
    "Call",
    "Environments",
    "PackageMissing",
    "backend_config",
    "gold_call",
    "missing_results",
    "state_differences",
    "stringify",
]
