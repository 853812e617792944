"""Hidden perturbations of model outputs for BFCL v4's single-turn categories, and both sides' per-item verdicts.

The outputs a model could give on one item, built from the item's gold answer (issue #29 item 5): the gold itself,
a wrong argument value, a missing required argument, an extra call, a wrong function name, the calls in another
order (parallel categories), no call, a text answer; on the (ir)relevance items: no call, a text answer, a call,
two calls. Deterministic: the sample is drawn with a fixed seed.

Tooltrain's side goes the whole way a model output goes in ``eval run bfcl_v4``: the package's files read by the
``bfcl`` reader, the ``bfcl`` task's prompts, a ``Generation`` holding the perturbed native tool calls (or text),
``BfclTask.prediction`` and ``BfclTask.score``. The official side is bfcl-eval's checker on the package's raw rows
(``bfcl_reference.official_verdict``), given what BFCL's function-calling handlers decode from the same output: the
list of calls, or the text (a decode failure). A question the reader refuses (a possible answer no call can meet)
counts as wrong on tooltrain's side, as ``eval run bfcl_v4`` counts it.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bfcl_corpus import first_answer, materialize, render
from bfcl_reference import Case, official_verdict

from train.evaluation.bfcl import v4
from train.evaluation.bfcl.scorer import CATEGORIES
from train.evaluation.generate import Generation
from train.evaluation.tasks import get_task, read_references
from train.schema import ToolCall

SEED = 29
TEXT = "Could you tell me which account you mean?"  # a clarification instead of a call
SINGLE_TURN = tuple(entry for entry in v4.OFFLINE if not entry.multi_turn)


@dataclass
class Item:
    category: str
    id: str
    functions: list
    ground_truth: list | None  # None: an (ir)relevance item


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def package_items(entry: v4.V4Category) -> list[Item]:
    """Every question of the category, with its possible answer, as the package ships them."""
    paths = v4.files(entry)
    questions = read_rows(paths[0])
    answers = {row["id"]: row["ground_truth"] for row in read_rows(paths[1])} if len(paths) > 1 else {}
    return [Item(entry.name, row["id"], row["function"], answers.get(row["id"])) for row in questions]


def sample(items: list[Item], per_category: int | None) -> list[Item]:
    if per_category is None or len(items) <= per_category:
        return items
    return sorted(random.Random(f"{SEED}/{items[0].category}").sample(items, per_category), key=items.index)


# ---- the perturbations ---------------------------------------------------------------------------------------


def _gold_values(item: Item) -> list[tuple[str, dict]]:
    """(name, {argument: python value}) per ground-truth call: each argument's first possible answer."""
    docs = {doc["name"]: doc for doc in item.functions}
    calls = []
    for expected in item.ground_truth or []:
        ((name, accepted_args),) = expected.items()
        properties = docs.get(name, {}).get("parameters", {}).get("properties", {})
        values = {}
        for param, accepted in accepted_args.items():
            found, answer = first_answer(accepted)
            if found:
                values[param] = materialize(answer, properties.get(param, {}))
        calls.append((name, values))
    return calls


def _rendered(item: Item, calls: list[tuple[str, dict]]) -> list[dict]:
    """``[{name: {argument: value}}]`` with Java/JavaScript values as the source literals a model writes."""
    language = CATEGORIES[item.category].language
    docs = {doc["name"]: doc for doc in item.functions}
    out = []
    for name, values in calls:
        properties = docs.get(name, {}).get("parameters", {}).get("properties", {})
        out.append(
            {name: {param: render(value, properties.get(param, {}), language) for param, value in values.items()}}
        )
    return out


def wrong_value(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 7
    if isinstance(value, str):
        return value + " wrong"
    if isinstance(value, list):
        return [*value, value[0]] if value else ["wrong"]
    if isinstance(value, dict):
        return {**value, "wrong_key": 1}
    return "wrong"


def perturbations(item: Item) -> Iterator[tuple[str, Any]]:
    """(label, output): ``output`` is a list of calls or a text answer (a string)."""
    if item.ground_truth is None:
        doc = item.functions[0] if item.functions else {"name": "any_function"}  # some offer no function at all
        required = doc.get("parameters", {}).get("required") or []
        yield "no_call", []
        yield "text_answer", TEXT
        yield "call", [{doc["name"]: {param: "x" for param in required}}]
        yield "two_calls", [{doc["name"]: {}}, {doc["name"]: {"query": "y"}}]
        return
    gold = _gold_values(item)
    yield "gold", _rendered(item, gold)
    name, values = gold[0]
    if values:
        param = next(iter(values))
        yield "wrong_value", _rendered(item, [(name, {**values, param: wrong_value(values[param])}), *gold[1:]])
    docs = {doc["name"]: doc for doc in item.functions}
    required = [p for p in docs.get(name, {}).get("parameters", {}).get("required") or [] if p in values]
    if required:
        dropped = {k: v for k, v in values.items() if k != required[0]}
        yield "missing_required", _rendered(item, [(name, dropped), *gold[1:]])
    yield "extra_call", _rendered(item, [*gold, gold[0]])
    yield "wrong_name", _rendered(item, [(name + "_wrong", values), *gold[1:]])
    if len(gold) > 1:
        yield "reordered", _rendered(item, gold[::-1])
    yield "no_call", []
    yield "text_answer", TEXT


# ---- the two sides ---------------------------------------------------------------------------------------------


def official_verdicts(official: Any, items: list[Item]) -> dict[tuple[str, str], str]:
    """(item id, label) -> "valid" | "invalid" | "raises ..." from bfcl-eval's own checker."""
    verdicts = {}
    for item in items:
        for label, output in perturbations(item):
            case = Case("v4", item.category, item.id, label, copy.deepcopy(output), item.functions, item.ground_truth)
            verdicts[(item.id, label)] = official_verdict(official, case)[0]
    return verdicts


def _write_subset(entry: v4.V4Category, ids: set[str], folder: Path) -> list[Path]:
    # the reader takes the package's file names (the category comes from them): the chosen rows, same names
    paths = []
    for source in v4.files(entry):
        target = folder / source.relative_to(v4.data_dir())
        target.parent.mkdir(parents=True, exist_ok=True)
        rows = [line for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
        target.write_text("\n".join(r for r in rows if json.loads(r)["id"] in ids) + "\n", encoding="utf-8")
        paths.append(target)
    return paths


def tooltrain_verdicts(entry: v4.V4Category, items: list[Item], folder: Path | None) -> dict[tuple[str, str], str]:
    """(item id, label) -> "valid" | "invalid" through the reader, the ``bfcl`` task and its scorer. ``folder``:
    where the sampled rows are written for the reader (None: the package's whole files)."""
    task = get_task("bfcl")
    paths = v4.files(entry) if folder is None else _write_subset(entry, {item.id for item in items}, folder)
    conversations, rejected = read_references(paths, "bfcl", task)
    prepared = task.prepare(conversations, None, paths)
    by_id = {item.id: item for item in items}
    verdicts = {}
    refused = {item.id for item in items} - {evaluated.id for evaluated in prepared.items}
    assert len(refused) == len(rejected) + len(prepared.skipped), (refused, rejected, prepared.skipped)
    for item_id in refused:  # counted wrong, as eval run bfcl_v4 counts a refused question
        verdicts.update({(item_id, label): "invalid" for label, _ in perturbations(by_id[item_id])})
    labels = sorted({label for item in items for label, _ in perturbations(item)})
    for label in labels:
        chosen, generations = [], []
        for evaluated in prepared.items:
            output = dict(perturbations(by_id[evaluated.id])).get(label)
            if output is None:
                continue
            chosen.append(evaluated)
            generations.append(_generation(output))
        if not chosen:
            continue
        scored = task.score(chosen, task.predictions(chosen, generations))
        for row in scored["per_item"]:
            verdicts[(row["id"], label)] = "valid" if row["valid"] else "invalid"
    return verdicts


def _generation(output: Any) -> Generation:
    if isinstance(output, str):
        return Generation(text=output, content=output, stopped=True)
    calls = [ToolCall(name, copy.deepcopy(args)) for call in output for name, args in call.items()]
    return Generation(text="<calls>", tool_calls=calls, stopped=True)


def agreement(official: Any, per_category: int | None, folder: Path | None) -> dict[str, dict[str, Any]]:
    """Per category: cases compared, agreements, and the disagreements (item id, label, official, tooltrain)."""
    report = {}
    for entry in SINGLE_TURN:
        items = sample(package_items(entry), per_category)
        theirs = official_verdicts(official, items)
        ours = tooltrain_verdicts(entry, items, None if folder is None else folder / entry.name)
        disagreements = [(*key, theirs[key], ours.get(key)) for key in theirs if theirs[key] != ours.get(key)]
        report[entry.name] = {
            "items": len(items),
            "cases": len(theirs),
            "agree": len(theirs) - len(disagreements),
            "valid": sum(verdict == "valid" for verdict in theirs.values()),
            "disagreements": disagreements,
        }
    return report
