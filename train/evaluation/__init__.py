"""Benchmarks, registered once in ``SCORERS``: each one's scorer, generation task and row layouts, in its own room.

One module per benchmark (a small folder for BFCL) holds its scorer (a pure function of prediction rows and
reference rows, ``docs/evaluation.md``), its generation task (reference conversations -> prompts; generations ->
its rows, for ``eval run`` and the eval callback) and its ``ScorerSpec`` (``SPEC``). The papers' own benchmarks
live in their wing (``train/papers/<paper>/``). Each is registered here by a ``module:attr`` line, imported on first
use, so asking for one benchmark never imports another. The shared rooms: ``task_base`` (the task interface),
``tasks`` (finding and running a task), ``calls`` (call reading and matching), ``generate`` (model output).
``eval score``, ``eval run``, the ``eval`` config group and the README read the names from here. Wherever a
benchmark is named, ``module:attr`` naming a ``ScorerSpec`` of your own works too (``docs/extending.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from train.registry import Registry, load


@dataclass(frozen=True)
class ScoreOptions:
    """Options a registered benchmark adds to ``eval score`` (ITC's ``--matching``, ``--languages``), kept with its
    scorer: ``add_arguments(parser)``; ``problem(args) -> str | None``: why they cannot go with ``args.bench`` (asked
    whatever the bench: an option given for another bench); ``score(scorer, args, predictions, references) ->
    metrics``: the scorer called with them, a ValueError naming the option when a value is wrong."""

    add_arguments: Callable[[Any], None]
    problem: Callable[[Any], str | None]
    score: Callable[..., dict]


@dataclass(frozen=True)
class ScorerSpec:
    """One benchmark: ``score(predictions, references, ...) -> metrics`` (or its ``module:attr``), the
    ``eval score --help`` text on its row layouts, its generation task (a ``Task`` subclass or its
    ``module:attr``; None: scored from rows only, no ``eval run``) and the ``eval score`` options of its own."""

    score: Callable[..., dict] | str
    layout: str
    task: Any = None
    options: ScoreOptions | None = None


SCORERS: Registry[ScorerSpec] = Registry("scorer", "scorers", lambda obj: isinstance(obj, ScorerSpec))

# registration order is the order of every list that names them (help texts, README, error messages)
SCORERS.register("heldout", "train.evaluation.heldout:SPEC")
SCORERS.register("metabench", "train.papers.metatool.metabench:SPEC")
SCORERS.register("toolselect", "train.evaluation.toolselect:SPEC")
SCORERS.register("bfcl", "train.evaluation.bfcl.task:SPEC")
SCORERS.register("bfcl_multi_turn", "train.evaluation.bfcl.multi_turn.task:SPEC")
SCORERS.register("itc", "train.evaluation.itc:SPEC")
SCORERS.register("toolbench", "train.evaluation.toolbench:SPEC")
SCORERS.register("nexus", "train.evaluation.nexus:SPEC")
SCORERS.register("tracc", "train.papers.ptr.scorer:SPEC")


def get_scorer(name: str) -> Callable[..., dict]:
    """The scoring function of benchmark ``name`` (registered, or ``module:attr`` naming a ScorerSpec)."""
    score = SCORERS.get(name).score
    return load(score, "scorer") if isinstance(score, str) else score


__all__ = ["SCORERS", "ScoreOptions", "ScorerSpec", "get_scorer"]
