"""What every generation task is: items to write, the task interface, its errors, and the row pieces tasks share.

Each benchmark's ``Task`` subclass lives in its benchmark's module, beside its scorer (``heldout``, ``bfcl.task``,
...); this base is what they all import, so no benchmark module imports another. Finding a task by name and
running it is ``train.evaluation.tasks``. Imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from train.schema import Conversation


@dataclass
class EvalItem:
    id: str
    conversation: Conversation
    target: int  # the assistant message the model writes; len(messages) for a turn after the last message


@dataclass
class Prepared:
    items: list[EvalItem]
    skipped: list[dict[str, Any]] = field(default_factory=list)  # {"id", "reason"}: references the task cannot use
    # lines for the console (a limit that cut the bench): prepare has no rank, so the caller that knows it prints
    # them, once (the eval callback on the main rank, ``eval run``)
    notes: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    metrics: dict[str, Any]  # the scorer's metrics (per-item rows and issue lists removed)
    result: dict[str, Any]  # everything the scorer returned
    predictions: list[dict[str, Any]]  # the scorer rows, in item order


def _fits(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return kind is bool
    return isinstance(value, (int, float)) if kind is float else isinstance(value, kind)


class TaskError(ValueError):
    """References that cannot be read at all (missing file, not conversations, no reader for them)."""


def failed_calls(error: str) -> str:
    """A ``tool_calls`` value call-reading scorers reject as malformed: a failed generation is wrong."""
    return f"unparseable output ({error})"


class Episode(Protocol):
    """An item the model answers several times, the task answering in between (tool results, the next user turn):
    ``prompt()`` is the next ``(conversation, index of the assistant message to write)``, None once the episode is
    over; ``take(generation)`` hands it the model's answer to that prompt; ``record()`` is what ``prediction``
    reads in place of a generation (it has ``to_dict()``, for the prediction records, and its class a
    ``summarize(records)`` classmethod, for the generation counts, as ``generate.Generation`` has)."""

    def prompt(self) -> tuple[Conversation, int] | None: ...

    def take(self, generation: Any) -> None: ...

    def record(self) -> Any: ...


class Task:
    name: ClassVar[str]
    native_source: ClassVar[str | None] = None  # the reader of the benchmark's own files
    OPTIONS: ClassVar[dict[str, type]] = {}  # option name -> type, passed to __init__
    # True: each item is an ``Episode`` (``episode``), driven by ``generate.generate_for_task``
    episodic: ClassVar[bool] = False
    max_prompt_tokens: int | None = None  # an episode's prompt longer than this is not generated: a failed generation

    @classmethod
    def option_problems(cls, options: dict[str, Any]) -> list[str]:
        """What is wrong with ``options`` for this task (unknown names, wrong types); [] when fine."""
        problems = []
        for key, value in options.items():
            kind = cls.OPTIONS.get(key)
            if kind is None:
                valid = ", ".join(cls.OPTIONS) or "none"
                problems.append(f"unknown option {key!r} (valid: {valid})")
            elif not _fits(value, kind):
                problems.append(f"option {key!r} must be {kind.__name__}, got {value!r}")
        return problems

    def target(self, conv: Conversation) -> int:
        """The index of the assistant message to write (``meta.turn``, else the last assistant
        message, as the Meta-Bench scorer reads its gold); ValueError when there is none."""
        position = conv.meta.get("turn")
        if position is None:
            return last_assistant(conv)
        if not isinstance(position, int) or isinstance(position, bool) or not 0 <= position < len(conv.messages):
            raise ValueError(f"meta.turn {position!r} is not a message index")
        if conv.messages[position].role != "assistant":
            raise ValueError(f"meta.turn {position}: messages[{position}] is not an assistant message")
        return position

    def prepare(
        self, conversations: Sequence[Conversation], limit: int | None = None, sources: Sequence[Path] = ()
    ) -> Prepared:
        """The first ``limit`` usable references as items; the others are listed with their reason.
        ``sources``: the files the references were read from."""
        prepared = Prepared(items=[])
        for conv in conversations:
            if limit is not None and len(prepared.items) >= limit:
                break
            try:
                prepared.items.append(EvalItem(conv.id, conv, self.target(conv)))
            except ValueError as err:
                prepared.skipped.append({"id": conv.id, "reason": str(err)})
        return prepared

    def episode(self, item: EvalItem) -> Episode:
        """The interaction for ``item`` (episodic tasks only)."""
        raise NotImplementedError(f"{self.name} is not episodic")

    def prediction(self, item: EvalItem, generation: Any) -> dict[str, Any]:
        calls: Any = [call.to_dict() for call in generation.tool_calls]
        if generation.error:
            calls = failed_calls(generation.error)
        return {"id": item.id, "content": generation.content, "tool_calls": calls}

    def predictions(self, items: Sequence[EvalItem], generations: Sequence[Any]) -> list[dict[str, Any]]:
        """The scorer's rows for all items (a task that works on the whole batch overrides this)."""
        return [self.prediction(item, generation) for item, generation in zip(items, generations)]

    def score(self, items: Sequence[EvalItem], predictions: list[dict[str, Any]]) -> dict[str, Any]:
        from train.evaluation import get_scorer

        return get_scorer(self.name)(predictions, [item.conversation.to_dict() for item in items])


def well_formed(generation: Any) -> bool:
    """Whether the chat format read the model's answer back without error (with ``answer_style=toolgt_text``: the
    answer was a call list after its reasoning). A prompt the format could not render is not well-formed."""
    return generation.text is not None and generation.error is None


def well_formed_rate(rows: Sequence[dict[str, Any]]) -> float | None:
    """The share of prediction rows marked ``well_formed``; None when no row says (rows written before the mark)."""
    marked = [row["well_formed"] for row in rows if isinstance(row, dict) and isinstance(row.get("well_formed"), bool)]
    return sum(marked) / len(marked) if marked else None


def last_assistant(conv: Conversation) -> int:
    """The index of the conversation's last assistant message; ValueError when it has none."""
    assistant = [i for i, m in enumerate(conv.messages) if m.role == "assistant"]
    if not assistant:
        raise ValueError("no assistant message to score")
    return assistant[-1]


def new_turn_target(conv: Conversation) -> int:
    """The last assistant message when the conversation ends with one (a reference with its gold turn),
    else a new turn after the last message (a benchmark whose gold is not a message)."""
    if not conv.messages:
        raise ValueError("no message to answer")
    last = len(conv.messages) - 1
    return last if conv.messages[last].role == "assistant" else len(conv.messages)


__all__ = [
    "Episode",
    "EvalItem",
    "Outcome",
    "Prepared",
    "Task",
    "TaskError",
    "failed_calls",
    "last_assistant",
    "new_turn_target",
    "well_formed",
    "well_formed_rate",
]
