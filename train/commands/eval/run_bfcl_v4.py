"""``tooltrain eval run bfcl_v4 MODEL [--category NAME ...] [--limit N]``: the BFCL v4 suite from the installed package.

One benchmark per category (``train.evaluation.bfcl.v4``): its files are read from the ``bfcl-eval`` wheel, its
task (looked up by name: ``bfcl`` for the single-turn categories, ``bfcl_multi_turn`` for the multi-turn ones)
prompts, generates and scores, with MODEL loaded once. ``--limit`` is per category. Skipped categories (web search,
memory, format sensitivity) and categories whose task is not registered are listed with the reason, never an error.
Prints each category's row, then the leaderboard table (``--summary bfcl_v4``'s, always printed here).

``eval run`` hands in how it opens MODEL and generates (``open_model``, ``generate_items``, ``generation_summary``),
so this module imports no verb.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from train.commands.outputs import check_outputs, write_results

NO_TASK = "multi-turn categories need the {task} task (not registered in this tooltrain)"


def plan(names: list[str] | None) -> tuple[list[Any], list[dict[str, str]]]:
    """(categories to run, categories left out with their reason). ValueError for an unknown category name."""
    from train.evaluation.bfcl import v4
    from train.evaluation.tasks import task_names

    registered = set(task_names())
    runnable, skipped = [], []
    for entry in v4.chosen(names):
        if entry.task is None:
            skipped.append({"category": entry.name, "reason": str(entry.skip)})
        elif entry.task not in registered:  # the multi-turn task lands on its own: until then, say so
            skipped.append({"category": entry.name, "reason": NO_TASK.format(task=entry.task)})
        else:
            runnable.append(entry)
    return runnable, skipped


def run_category(args: argparse.Namespace, entry: Any, model: tuple, generate_items: Callable, summary: Callable):
    """One category through its task: read, prepare (``--limit``), generate, score."""
    from train.evaluation.bfcl import v4
    from train.evaluation.tasks import TaskError, evaluate_generations, get_task, read_references

    task = get_task(entry.task)
    paths = v4.files(entry)
    conversations, rejected = read_references(paths, "bfcl", task)
    prepared = task.prepare(conversations, args.limit, paths)
    for note in prepared.notes:  # what the task says of its items (a cut), as eval run prints it
        print(note, flush=True)
    if not prepared.items:
        unusable = f"{len(prepared.skipped)} unusable, {len(rejected)} unreadable"
        raise TaskError(f"{entry.name}: no item to evaluate ({unusable})")
    loaded, _, fmt, backend = model
    generations = generate_items(task, prepared.items, fmt, loaded.tokenizer, backend, args.max_new_tokens)
    outcome = evaluate_generations(task, prepared.items, generations)
    by_category = outcome.metrics.get("by_category") or {entry.name: outcome.metrics["overall"]}
    score = by_category.get(entry.name, outcome.metrics["overall"])
    return {
        "task": entry.task,
        "score": counted_as_bfcl(score, rejected, whole=args.limit is None),
        "metrics": outcome.metrics,
        "generation": summary(generations),
        "issues": {"skipped_references": prepared.skipped, "unreadable_references": rejected},
        "records": [{**row, "category": entry.name} for row in outcome.predictions],
    }


def counted_as_bfcl(score: dict[str, Any], rejected: list[dict[str, str]], whole: bool) -> dict[str, Any]:
    """The category's score over every question of its file, as BFCL counts it: a question the reader refused (a
    possible answer no call can meet, e.g. live_simple_106-63-0's empty value list) is wrong for every model, so
    it counts as wrong here too. With ``--limit`` only the evaluated prefix counts (refused rows are listed)."""
    correct, total = score["correct"], score["total"] + (len(rejected) if whole else 0)
    return {"accuracy": correct / total if total else 0.0, "correct": correct, "total": total}


def category_lines(results: dict[str, dict[str, Any]], skipped: list[dict[str, str]]) -> list[str]:
    lines = [f"{'category':<26}{'task':<18}{'accuracy':>10}{'correct':>9}{'total':>7}"]
    for name, result in results.items():
        score = result["score"]
        lines.append(
            f"{name:<26}{result['task']:<18}{score['accuracy']:>10.4f}{score['correct']:>9}{score['total']:>7}"
        )
    lines += [f"{row['category']:<26}skipped: {row['reason']}" for row in skipped]
    return lines


def run(args: argparse.Namespace, open_model: Callable, generate_items: Callable, generation_summary: Callable) -> int:
    """The suite; ``open_model()`` -> (loaded, format name, format, backend), as ``eval run`` opens MODEL."""
    from train.evaluation.bfcl import v4
    from train.evaluation.bfcl.leaderboard import leaderboard, leaderboard_lines
    from train.evaluation.generate import GenerationError
    from train.evaluation.tasks import TaskError

    try:
        v4.data_dir()
        runnable, skipped = plan(args.category)
    except (v4.BfclNotInstalled, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not runnable:
        reasons = "; ".join(f"{row['category']}: {row['reason']}" for row in skipped)
        print(f"error: none of the chosen categories runs here ({reasons})", file=sys.stderr)
        return 2
    inputs = [Path(args.model)] if Path(args.model).is_dir() else []
    check_outputs([args.predictions, args.output], inputs)
    results: dict[str, dict[str, Any]] = {}
    try:
        model = open_model()
        loaded, format_name = model[0], model[1]
        for entry in runnable:
            results[entry.name] = run_category(args, entry, model, generate_items, generation_summary)
    except (TaskError, GenerationError, ValueError, OSError) as err:  # a ModelError is a ValueError
        print(f"error: {err}", file=sys.stderr)
        return 2
    items = sum(result["score"]["total"] for result in results.values())
    print(f"bfcl_v4: {items} items in {len(results)} categories, {loaded.description}, {format_name}, {args.backend}")
    print("\n".join(category_lines(results, skipped)))
    if args.limit is not None:  # the leaderboard's numbers are over whole categories
        print(f"--limit {args.limit}: each accuracy is over the first {args.limit} items of its category")
    board = leaderboard({name: result["score"] for name, result in results.items()})
    print("\n" + "\n".join(leaderboard_lines(board, ours=str(args.model))))
    report = {
        "bench": "bfcl_v4",
        "model": loaded.description,
        "format": format_name,
        "data": str(v4.data_dir()),
        "metrics": {"by_category": {name: result["score"] for name, result in results.items()},
                    "summary": {"v4": board["v4"], "v3": board["v3"]}},
        "categories": {name: {k: v for k, v in result.items() if k != "records"} for name, result in results.items()},
        "skipped_categories": skipped,
        "bfcl_v4_summary": board,
    }  # fmt: skip
    records = [row for result in results.values() for row in result["records"]] if args.predictions else []
    return write_results(args.predictions, records, args.output, report, inputs=inputs)
