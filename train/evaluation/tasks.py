"""Benchmarks as generation tasks: finding a benchmark's task by name, reading its references, scoring its rows.

A task (``task_base.Task``; each benchmark's own subclass lives in its module, beside its scorer and its
``ScorerSpec``) knows three things about its benchmark: which assistant turn of a reference conversation the model
must write (its prompt is everything before it, rendered by the chat format), how a parsed generation becomes the
scorer's prediction row, and how to call the scorer. The scorers are the pure functions of ``docs/evaluation.md``;
a task never changes a verdict. Each benchmark module's docstring says which turn its task writes and which row.

A failed generation (a prompt the format cannot render, an output it cannot parse) is scored wrong by every task.

References come from canonical JSON Lines, or from a benchmark's own files through its reader
(``read_references``: BFCL question + possible-answer files, ToolSelect's ``train.csv``, the ITC
samples (+ API) files, NexusRaven query files, the SambaNova ToolBench folder).
``prepare`` is also told which files the references came from (``sources``): a task may need a file
beside them (Meta-Bench's tool library). A task takes options (``eval.benchmarks.N.options``,
``tooltrain eval run --option``); ``OPTIONS`` lists each task's names and types.
Tasks are found through ``train.evaluation.SCORERS`` (``task_class``), so only the benchmark asked for is imported.
This module imports nothing heavy: ``train.engine.config`` reads the tasks when it checks a config.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from train.evaluation.task_base import EvalItem, Outcome, Prepared, Task, TaskError, failed_calls
from train.schema import Conversation


def task_names() -> list[str]:
    """The benchmarks ``eval run`` and the eval callback can generate for (registered with a task)."""
    from train.evaluation import SCORERS

    return [name for name in SCORERS.names() if SCORERS.get(name).task is not None]


def task_class(name: str) -> type[Task]:
    """The task of benchmark ``name`` (registered, or ``module:attr`` naming a ScorerSpec); TaskError when
    there is none, listing the benchmarks that have one."""
    from train.evaluation import SCORERS
    from train.registry import load

    if not SCORERS.known(name):
        raise TaskError(f"unknown benchmark {name!r}; valid: {', '.join(task_names())} (or module:attr for your own)")
    try:
        task = SCORERS.get(name).task
        cls = load(task, "task", TaskError) if isinstance(task, str) else task
    except ValueError as err:
        raise TaskError(str(err)) from None
    if task is None:
        raise TaskError(
            f"{name} is scored from rows only (tooltrain eval score {name}); "
            f"benchmarks with a generation task: {', '.join(task_names())}"
        )
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise TaskError(f"{name}: its task {cls!r} is not a train.evaluation.task_base.Task subclass")
    return cls


def get_task(name: str, options: dict[str, Any] | None = None) -> Task:
    cls = task_class(name)
    problems = cls.option_problems(dict(options or {}))
    if problems:
        raise TaskError(f"{name}: {'; '.join(problems)}")
    task = cls(**dict(options or {}))
    task.name = name  # the name it was asked by (a module:attr too): Task.score finds its scorer by it
    return task


# ---------------------------------------------------------------- references


def read_references(
    paths: Sequence[Path], source: str | None, task: Task
) -> tuple[list[Conversation], list[dict[str, str]]]:
    """(conversations, rejected as {"location", "reason"}) from canonical files or the bench's own files.

    ``source`` names a reader (``train.sources``); without it, canonical JSON Lines are read as such
    and anything else through the task's native reader.
    """
    from train.sources import Rejected, SourceError, get_reader
    from train.sources.canonical import looks_canonical

    paths = [Path(p) for p in paths]
    for path in paths:
        if not path.exists():
            raise TaskError(f"{path}: no such file")
    if source is None:
        canonical = all(looks_canonical(path) for path in paths)
        source = "canonical" if canonical else task.native_source
        if source is None:
            raise TaskError(
                f"{', '.join(map(str, paths))}: not canonical conversations, and {task.name} has no reader of its own; "
                "convert with `tooltrain data convert` or pass --source"
            )
    folders = [path for path in paths if not path.is_file()]
    if source == "canonical" and folders:
        raise TaskError(f"{folders[0]}: not a file (canonical references are JSON Lines files)")
    conversations: list[Conversation] = []
    rejected: list[dict[str, str]] = []
    try:
        for item in get_reader(source)(paths):
            if isinstance(item, Rejected):
                rejected.append({"location": item.location, "reason": item.reason})
            elif isinstance(item, Conversation):
                conversations.append(item)
    except SourceError as err:
        raise TaskError(str(err)) from None
    return conversations, rejected


# ---------------------------------------------------------------- scoring


def metrics_of(result: dict[str, Any]) -> dict[str, Any]:
    """The scorer's numbers without its per-item rows and issue lists."""
    return {key: value for key, value in result.items() if key != "per_item" and not isinstance(value, list)}


def evaluate_generations(task: Task, items: Sequence[EvalItem], generations: Sequence[Any]) -> Outcome:
    predictions = task.predictions(items, generations)
    result = task.score(items, predictions)
    return Outcome(metrics=metrics_of(result), result=result, predictions=predictions)


def prediction_records(outcome: Outcome, generations: Sequence[Any]) -> list[dict[str, Any]]:
    """Each scorer row with its generation beside it (``tooltrain eval score`` reads the rows as they are)."""
    return [{**row, "generation": generation.to_dict()} for row, generation in zip(outcome.predictions, generations)]


def flat_metrics(metrics: dict[str, Any], prefix: str) -> dict[str, float]:
    """Numeric leaves as ``prefix + path`` (``overall`` folded away): what trackers and metrics.jsonl take."""
    flat: dict[str, float] = {}
    for key, value in metrics.items():
        name = prefix if key == "overall" else f"{prefix}{key}/"
        if isinstance(value, dict):
            flat.update(flat_metrics(value, name))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            flat[f"{prefix}{key}"] = value
    return flat


__all__ = [
    "EvalItem",
    "Outcome",
    "Prepared",
    "Task",
    "TaskError",
    "evaluate_generations",
    "failed_calls",
    "flat_metrics",
    "get_task",
    "metrics_of",
    "prediction_records",
    "read_references",
    "task_class",
    "task_names",
]
