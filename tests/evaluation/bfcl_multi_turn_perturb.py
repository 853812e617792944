"""Perturbed multi-turn answers built from BFCL's gold, and the official checker's verdict on them.

``perturbations(entry, gold, functions, seed)`` gives named model results (per turn, per step,
``[{name: {arg: value}}]``, the row layout of ``bfcl_multi_turn``): the gold itself, the gold one call per step, a
wrong argument, two calls of a turn swapped, a call left out, a call made twice, a clarification (a text answer)
in place of a turn's calls, and (where a turn's gold is empty: miss_func / miss_param) the next turn's calls made
early. ``official_verdict`` decodes a result as BFCL decodes a function-calling model's answer
(``convert_to_function_call``: ``name(k=repr(v), ...)``, empty steps dropped) and runs bfcl-eval's own
``multi_turn_checker`` on it, as ``eval_runner._evaluate_single_multi_turn_entry`` does (a non-list result is an
inference error, a turn count that differs a forced termination). The reference ``eval``s call strings: it is the
official code, used here only as the reference.
"""

from __future__ import annotations

import copy
import itertools
import json
import random
from pathlib import Path
from typing import Any

from train.sources.bfcl import calls_from_python

_RUNS = itertools.count()


def data_dir() -> Path:
    import bfcl_eval

    return Path(bfcl_eval.__file__).parent / "data"


def load_category(category: str) -> list[tuple[dict, list[list[str]], list[dict]]]:
    """(question entry, gold turns, function docs of its classes) per entry of ``multi_turn_<category>``."""
    from train.sources.bfcl import FUNC_DOC_FILES

    folder = data_dir()
    name = f"BFCL_v4_multi_turn_{category}.json"
    entries = [json.loads(line) for line in (folder / name).read_text(encoding="utf-8").splitlines() if line]
    answers = [json.loads(line) for line in (folder / "possible_answer" / name).read_text().splitlines() if line]
    docs: dict[str, list[dict]] = {}
    out = []
    for entry, answer in zip(entries, answers):
        assert entry["id"] == answer["id"]
        functions = []
        for cls in entry["involved_classes"]:
            if cls not in docs:
                path = folder / "multi_turn_func_doc" / FUNC_DOC_FILES[cls]
                docs[cls] = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
            functions += docs[cls]
        out.append((entry, answer["ground_truth"], functions))
    return out


def gold_result(gold: list[list[str]], functions: list[dict]) -> list[list[list[dict]]]:
    """The gold as a model result: per turn one step with all its calls (none for an empty turn)."""
    by_name = {f["name"]: f for f in functions}
    return [[[{c.name: c.arguments} for c in calls_from_python(turn, by_name)]] if turn else [] for turn in gold]


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "_x"
    if isinstance(value, list):
        return value[:-1] if value else ["x"]
    if isinstance(value, dict):
        return {**value, "x": 1}
    return "x"


def perturbations(gold: list[list[str]], functions: list[dict], seed: int) -> dict[str, list]:
    rng = random.Random(seed)
    base = gold_result(gold, functions)
    out: dict[str, list] = {"gold": base}
    out["one_call_per_step"] = [[[call] for call in turn[0]] if turn else [] for turn in base]
    called = [t for t, turn in enumerate(base) if turn]
    with_args = [(t, i) for t in called for i, call in enumerate(base[t][0]) if next(iter(call.values()))]
    if with_args:
        t, i = rng.choice(with_args)
        result = copy.deepcopy(base)
        args = next(iter(result[t][0][i].values()))
        key = rng.choice(sorted(args))
        args[key] = _changed(args[key])
        out["wrong_argument"] = result
    pairs = [(t, i) for t in called for i in range(len(base[t][0]) - 1) if base[t][0][i] != base[t][0][i + 1]]
    if pairs:
        t, i = rng.choice(pairs)
        result = copy.deepcopy(base)
        step = result[t][0]
        step[i], step[i + 1] = step[i + 1], step[i]
        out["swapped_order"] = result
    if called:
        t = rng.choice(called)
        result = copy.deepcopy(base)
        del result[t][0][rng.randrange(len(result[t][0]))]
        out["missing_call"] = result
        t = rng.choice(called)
        result = copy.deepcopy(base)
        result[t][0].append(copy.deepcopy(rng.choice(result[t][0])))
        out["extra_call"] = result
        t = rng.choice(called)
        result = copy.deepcopy(base)
        result[t] = []  # a text answer (a clarification) in place of the calls
        out["clarification"] = result
    early = [t for t, turn in enumerate(base[:-1]) if not turn and base[t + 1]]
    if early:
        t = rng.choice(early)
        result = copy.deepcopy(base)
        result[t], result[t + 1] = result[t + 1], []
        out["calls_before_asked"] = result
    return out


def decode(result: list) -> list[list[list[str]]]:
    """BFCL's decoding of a function-calling result file's turns (``convert_to_function_call``), empty steps dropped."""
    decoded = []
    for turn in result:
        steps = []
        for step in turn:
            strings = [
                f"{name}({','.join(f'{k}={v!r}' for k, v in args.items())})" for c in step for name, args in c.items()
            ]
            if strings:
                steps.append(strings)
        decoded.append(steps)
    return decoded


def official_verdict(result: Any, gold: list[list[str]], entry: dict) -> dict:
    """bfcl-eval's verdict on one result, as its eval runner reaches it."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    if not isinstance(result, list):
        return {"valid": False, "error_type": "multi_turn:inference_error"}
    if len(result) != len(gold):
        return {"valid": False, "error_type": "multi_turn:force_terminated"}
    model = f"tooltrain_ref_{next(_RUNS)}"  # the checker keeps instances in its module's globals, by model name
    category = entry["id"].rsplit("_", 1)[0]
    try:
        verdict = multi_turn_checker(decode(result), gold, copy.deepcopy(entry), category, model)
    finally:
        for key in [k for k in vars(multi_turn_utils) if k.startswith(model)]:
            delattr(multi_turn_utils, key)
    return {"valid": verdict["valid"], "error_type": verdict.get("error_type")}


__all__ = ["decode", "gold_result", "load_category", "official_verdict", "perturbations"]
