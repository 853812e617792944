"""Benchmarks: each one's scorer, generation task and row layouts, registered once in ``SCORERS``.

A scorer is a pure function of prediction rows and reference rows (``docs/evaluation.md``); its task
(``train.evaluation.tasks``) turns reference conversations into prompts and generations into its rows, for
``eval run`` and the eval callback; its layout text is ``tooltrain eval score --help``. ``eval score``, ``eval run``,
the ``eval`` config group and the README read the names from here. Wherever a benchmark is named,
``module:attr`` naming a ``ScorerSpec`` of your own works too (``docs/extending.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from train.registry import Registry, load


@dataclass(frozen=True)
class ScorerSpec:
    """One benchmark: ``score(predictions, references, ...) -> metrics`` (or its ``module:attr``), the
    ``eval score --help`` text on its row layouts, and its generation task (a ``Task`` subclass or its
    ``module:attr``; None: scored from rows only, no ``eval run``)."""

    score: Callable[..., dict] | str
    layout: str
    task: Any = None


SCORERS: Registry[ScorerSpec] = Registry("scorer", "scorers", lambda obj: isinstance(obj, ScorerSpec))

SCORERS.register("heldout", ScorerSpec(
    score="train.evaluation.heldout:score_heldout",
    task="train.evaluation.tasks:HeldOutTask",
    layout="""\
references: any canonical conversations (gold = messages[meta.turn], else the last assistant turn
with tool calls, else the last assistant turn).
predictions: {"id", "content", "tool_calls": [{"name", "arguments"}], "error"}; a set "error" is wrong.
metrics: exact match of the calls (names + normalised arguments) and name accuracy, by call/no-call turn.""",
))  # fmt: skip
SCORERS.register("metabench", ScorerSpec(
    score="train.papers.metatool.metabench:score_metabench",
    task="train.evaluation.tasks:MetaBenchTask",
    layout="""\
references: one row per turn: a canonical conversation (gold turn = messages[meta.turn], else the
last assistant message) or {"id", "tool_calls": [{"name", "arguments"}], "meta"}; meta.category is
chat|function_missing|function_existing|single_call|multi_call, plus meta.difficulty, meta.world and,
for meta_tool turns, meta.gold_tools (else read from the meta_tool results after the turn).
predictions: {"id", "content", "tool_calls": [{"name", "arguments"}], "retrieved": [names]}.
metrics: T-Acc, P-Acc, IRR, FMD, HR@1/3/5 overall, by category and by difficulty/world/category.""",
))  # fmt: skip
SCORERS.register("toolselect", ScorerSpec(
    score="train.evaluation.toolselect:score_toolselect",
    task="train.evaluation.tasks:ToolSelectTask",
    layout="""\
references: {"id", "gold_tool"}, meta.gold_tool, one gold_tools name, or a conversation whose last
assistant turn calls the tool. predictions: {"id", "content": "...Act: CALLTOOL[\\"Name\\"]"} or
{"id", "tool_calls": [{"name"}]}. metric: accuracy.""",
))  # fmt: skip
SCORERS.register("bfcl", ScorerSpec(
    score="train.evaluation.bfcl:score_bfcl",
    task="train.evaluation.tasks:BfclTask",
    layout="""\
--references QUESTIONS.json [--references POSSIBLE_ANSWER.json] --category NAME (default: read from
the questions file name). predictions: {"id", "result": [{"func_name": {"arg": value}}]}.
Every category and the leaderboard summaries: --predictions RESULT_DIR --references BFCL_DATA_DIR
(files [BFCL_vN_]CATEGORY[_result].json[l]; possible_answer/ inside the data folder)
[--category NAME ...] [--summary v4|v2]: accuracy per category, weighted/unweighted summaries.""",
))  # fmt: skip
SCORERS.register("itc", ScorerSpec(
    score="train.evaluation.itc:score_itc",
    task="train.evaluation.paper_tasks:ItcTask",
    layout="""\
references: canonical conversations from `tooltrain data convert itc` (gold = messages[meta.turn],
else the last {Thought, Action} answer).
predictions: {"id", "content": "<raw answer: {\\"Thought\\", \\"Action\\": \\"[api(p='v')]\\"}>"}
or {"id", "content": thought, "tool_calls": [...]}. metrics: LM, FM, tool P/R/F1, invocation
P/R/F1 on (tool, key, value) triples, Table 4 error shares. --languages restricts langid.
P/R/F1 as micro (Appendix B's sums) and macro (per sample: the paper's tables); --matching seal;
--summary itc. A reference's gold: its tool_calls, else its text answer's Action.""",
))  # fmt: skip
SCORERS.register("toolbench", ScorerSpec(
    score="train.evaluation.toolbench:score_toolbench",
    task="train.evaluation.paper_tasks:ToolBenchTask",
    layout="""\
references: canonical conversations from `tooltrain data convert toolbench` (meta.task, meta.completion).
predictions: {"id", "program": "<program or curl line>", "tool": "<selected tool>"}.
metrics: success rate and tool-selection accuracy per task and pooled.""",
))  # fmt: skip
SCORERS.register("nexus", ScorerSpec(
    score="train.evaluation.nexus:score_nexus",
    task="train.evaluation.paper_tasks:NexusTask",
    layout="""\
references: canonical conversations from `tooltrain data convert nexus` (meta.dataset = task, gold =
the last assistant turn's tool_calls). predictions: {"id", "call": "<python call string>"} or
{"id", "tool_calls": [...]}. metrics: accuracy per task, weighted and unweighted averages.""",
))  # fmt: skip
SCORERS.register("tracc", ScorerSpec(
    score="train.papers.ptr.scorer:score_tracc",
    layout="""\
references: {"id", "tools": [gold names]} or ToolQuery rows ({"id", "query", "gold_tools"}).
predictions: {"id", "tools": [names, best first]}. metrics: TRACC, Recall@K, NDCG@K (K = |gold|).""",
))  # fmt: skip


def get_scorer(name: str) -> Callable[..., dict]:
    """The scoring function of benchmark ``name`` (registered, or ``module:attr`` naming a ScorerSpec)."""
    score = SCORERS.get(name).score
    return load(score, "scorer") if isinstance(score, str) else score


__all__ = ["SCORERS", "ScorerSpec", "get_scorer"]
