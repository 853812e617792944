"""BFCL's multi-turn verdict on one entry, and the scorer of ``bfcl_multi_turn`` (a pure function of rows).

A prediction row is ``{"id", "result": [turn, ...]}``, each turn a list of steps, each step the calls the model
made in one answer as ``[{name: {arg: value}}]`` (BFCL's result file for a function-calling model, with arguments
as objects). The verdict restates bfcl-eval 2026.3.23 (``eval_runner._evaluate_single_multi_turn_entry`` and
``multi_turn_checker.multi_turn_checker``):

* a result that is not a list is an inference error; fewer (or more) turns than the gold is a forced termination
  (the runner stopped the entry at its step budget or an unrenderable prompt): wrong;
* a step without calls, or one that does not decode, is dropped (BFCL scores calls, not chat);
* the model's calls and the gold calls run turn by turn against two fresh sets of environments (``execute``),
  each carrying its state into the next turn; a turn whose gold is empty (the model should ask, or cannot act yet)
  is not checked, but its calls still run, so they count in later turns;
* a turn with gold calls needs at least one model step, then the state of every instance equal to the gold's
  (public attributes) and every gold result found among all the model's results so far (a multiset, any order);
* an entry is correct when every checked turn passes.

Model calls are executed again here rather than taken from the episode: what is scored is what the row says,
exactly as BFCL re-executes a result file.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from train.evaluation.bfcl.multi_turn.execute import Call, Environments, gold_call, missing_results, state_differences

AGENTIC_CLASSES = (
    "GorillaFileSystem",
    "MathAPI",
    "MessageAPI",
    "TwitterAPI",
    "TicketAPI",
    "TradingBot",
    "TravelAPI",
    "VehicleControlAPI",
)  # the multi-turn categories' classes (web search and memory need backends of their own)


def entry_category(meta: dict[str, Any], entry_id: str) -> str:
    """The entry's category: the reader's (from the file name), else BFCL's (the id without its number)."""
    category = meta.get("category")
    return str(category) if category else entry_id.rsplit("_", 1)[0]


def environments(meta: dict[str, Any], entry_id: str) -> Environments:
    """Fresh instances for one entry, as BFCL makes them (``long_context`` for long-context and composite ids)."""
    category = entry_category(meta, entry_id)
    functions = meta.get("bfcl_functions") or []
    permitted = {f["name"] for f in functions if isinstance(f, dict) and isinstance(f.get("name"), str)}
    return Environments(
        meta["involved_classes"],
        meta.get("initial_config") or {},
        long_context="long_context" in category or "composite" in category,
        permitted=permitted,
    )


def step_calls(step: Any) -> list[Call]:
    """One step's calls as BFCL decodes a function-calling answer; [] for an empty or undecodable step."""
    if not isinstance(step, list):
        return []
    calls = []
    for item in step:
        if not isinstance(item, dict):
            return []
        for name, arguments in item.items():
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    return []
            if not isinstance(name, str) or not isinstance(arguments, dict):
                return []
            calls.append(Call(name, [], copy.deepcopy(arguments)))  # a call may change what it is given
    return calls


def verdict(valid: bool, error_type: str | None = None, message: str | None = None, turn: int | None = None) -> dict:
    return {"valid": valid, "error_type": error_type, "error": message, "turn": turn}


def check_entry(result: Any, ground_truth: Sequence[Sequence[str]], meta: dict[str, Any], entry_id: str) -> dict:
    """``{"valid", "error_type", "error", "turn"}``: BFCL's verdict on one entry (error types as BFCL names them)."""
    if not isinstance(result, list):
        return verdict(False, "multi_turn:inference_error", f"not a list of turns: {str(result)[:200]}")
    if len(result) != len(ground_truth):
        message = f"{len(result)} turns answered of {len(ground_truth)}"
        return verdict(False, "multi_turn:force_terminated", message)
    model, gold = environments(meta, entry_id), environments(meta, entry_id)
    model_results: list[str] = []  # every turn's, so far: a call made early still counts
    for turn, (answer, gold_turn) in enumerate(zip(result, ground_truth)):
        steps = [calls for calls in map(step_calls, answer if isinstance(answer, list) else []) if calls]
        model_results += [model.execute(call) for calls in steps for call in calls]
        gold_results = [gold.execute(gold_call(text)) for text in gold_turn]
        if not gold_turn:
            continue
        if not steps:
            return verdict(False, "multi_turn:empty_turn_model_response", f"no call in turn {turn}", turn)
        differences = state_differences(model, gold)
        if differences:
            return verdict(False, "multi_turn:instance_state_mismatch", f"state differs: {differences}", turn)
        missing = missing_results(gold_results, model_results)
        if missing:
            return verdict(False, "multi_turn:execution_response_mismatch", f"missing results: {missing}", turn)
    return verdict(True)


def _meta(reference: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(reference, dict):
        return str(reference.get("id")), reference.get("meta") or {}
    return reference.id, reference.meta


def score_bfcl_multi_turn(predictions: Sequence[dict[str, Any]], references: Sequence[Any]) -> dict[str, Any]:
    """Accuracy over entries (all, and per category); a reference without a prediction row is wrong."""
    rows = {row.get("id"): row for row in predictions if isinstance(row, dict)}
    per_item = []
    for reference in references:
        entry_id, meta = _meta(reference)
        row = rows.get(entry_id)
        result = row.get("result") if row is not None else "no prediction"
        outcome = check_entry(result, meta["ground_truth"], meta, entry_id)
        per_item.append({"id": entry_id, "category": entry_category(meta, entry_id), **outcome})
    sections: dict[str, dict[str, Any]] = {}
    for item in per_item:
        section = sections.setdefault(item["category"], {"correct": 0, "total": 0})
        section["correct"] += int(item["valid"])
        section["total"] += 1
    for section in sections.values():
        section["accuracy"] = section["correct"] / section["total"]
    correct = sum(int(item["valid"]) for item in per_item)
    overall = {"accuracy": correct / len(per_item) if per_item else None, "correct": correct, "total": len(per_item)}
    forced = sum(item["error_type"] == "multi_turn:force_terminated" for item in per_item)
    return {"overall": overall, "by_category": dict(sorted(sections.items())), "force_terminated": forced,
            "per_item": per_item}  # fmt: skip


__all__ = ["AGENTIC_CLASSES", "check_entry", "entry_category", "environments", "score_bfcl_multi_turn", "step_calls"]
