"""BFCL multi-turn as an episodic generation task, and its ``ScorerSpec`` (``bfcl_multi_turn`` in
``train.evaluation.SCORERS``).

================= ============================================ =============================================
task              what the model writes                        prediction row
================= ============================================ =============================================
bfcl_multi_turn   every answer of an episode (``episode``):    ``{"id", "result": [[[{name: {arg: value}}]]],
                  turns x steps, tool results between them     "well_formed", "steps"}``
================= ============================================ =============================================

Items are the entries of ``BFCL_v4_multi_turn_{base,miss_func,miss_param,long_context}.json`` read with their
possible-answer file (``train.sources.bfcl``). Options: ``max_steps`` (answers with calls per turn before the entry
is cut, BFCL's ``MAXIMUM_STEP_LIMIT`` by default), ``max_turns`` (entries with more user turns are left out, listed
as skipped: a verdict always covers a whole entry), ``max_prompt_tokens`` (a longer prompt ends its entry as an
inference error, before it reaches the model), ``ids`` (comma-separated: only these entries, in this order). Scoring:
``check.score_bfcl_multi_turn``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from train.evaluation import ScorerSpec
from train.evaluation.bfcl.multi_turn.check import AGENTIC_CLASSES, environments, score_bfcl_multi_turn
from train.evaluation.bfcl.multi_turn.episode import EpisodeRecord, MultiTurnEpisode, user_turns
from train.evaluation.bfcl.multi_turn.execute import PackageMissing, backend_config
from train.evaluation.task_base import EvalItem, Prepared, Task, TaskError, well_formed_rate
from train.schema import Conversation


def bfcl_defaults() -> tuple[int, str]:
    """(BFCL's step limit, the user message of a turn that adds functions): the package's own constants."""
    backend_config()  # the package, or PackageMissing naming the install line
    from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC, MAXIMUM_STEP_LIMIT

    return MAXIMUM_STEP_LIMIT, DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC


class BfclMultiTurnTask(Task):
    """Episodes against bfcl-eval's environments, scored with BFCL's multi-turn checker semantics."""

    name = "bfcl_multi_turn"
    native_source = "bfcl"
    episodic = True
    OPTIONS: ClassVar[dict[str, type]] = {"max_steps": int, "max_turns": int, "max_prompt_tokens": int, "ids": str}

    def __init__(
        self,
        max_steps: int | None = None,
        max_turns: int | None = None,
        max_prompt_tokens: int | None = None,
        ids: str | None = None,
    ):
        try:
            step_limit, self.added_turn_prompt = bfcl_defaults()
        except PackageMissing as err:
            raise TaskError(str(err)) from None
        bounds = {"max_steps": max_steps, "max_turns": max_turns, "max_prompt_tokens": max_prompt_tokens}
        for option, value in bounds.items():
            if value is not None and value < 1:
                raise TaskError(f"option {option!r} must be at least 1, got {value}")
        self.max_steps = step_limit if max_steps is None else max_steps
        self.max_turns, self.max_prompt_tokens = max_turns, max_prompt_tokens
        self.ids = None if ids is None else [i.strip() for i in ids.split(",") if i.strip()]

    def target(self, conv: Conversation) -> int:
        meta = conv.meta
        classes = meta.get("involved_classes")
        if not isinstance(classes, list) or "initial_config" not in meta:
            raise ValueError("not a BFCL multi-turn entry (no involved_classes / initial_config)")
        unsupported = [c for c in classes if c not in AGENTIC_CLASSES]
        if unsupported:
            raise ValueError(f"needs {', '.join(unsupported)} (web search and memory need backends of their own)")
        gold = meta.get("ground_truth")
        if not isinstance(gold, list) or not all(isinstance(turn, list) for turn in gold):
            raise ValueError("needs meta.ground_truth, a list of turns (read the possible-answer file too)")
        turns = len(user_turns(conv))
        if turns != len(gold):
            raise ValueError(f"{turns} user turns but {len(gold)} gold turns")
        if self.max_turns is not None and turns > self.max_turns:
            raise ValueError(f"{turns} turns, over max_turns={self.max_turns}")
        return len(conv.messages)  # not a message: the episode writes every answer

    def prepare(
        self, conversations: Sequence[Conversation], limit: int | None = None, sources: Sequence[Path] = ()
    ) -> Prepared:
        if self.ids is None:
            return super().prepare(conversations, limit, sources)
        by_id = {conv.id: conv for conv in conversations}
        unknown = [i for i in self.ids if i not in by_id]
        if unknown:
            raise TaskError(f"option ids: no entry {', '.join(map(repr, unknown))} in the references")
        return super().prepare([by_id[i] for i in self.ids], limit, sources)

    def episode(self, item: EvalItem) -> MultiTurnEpisode:
        envs = environments(item.conversation.meta, item.id)
        return MultiTurnEpisode(item.conversation, envs, self.max_steps, self.added_turn_prompt)

    def prediction(self, item: EvalItem, generation: Any) -> dict[str, Any]:
        if not isinstance(generation, EpisodeRecord):  # a caller that generated once instead of playing the episode
            raise TaskError(f"{self.name} is episodic: generate with train.evaluation.generate.generate_for_task")
        return {"id": item.id, "result": generation.result, "well_formed": generation.well_formed,
                "steps": len(generation.steps)}  # fmt: skip

    def score(self, items: Sequence[EvalItem], predictions: list[dict[str, Any]]) -> dict[str, Any]:
        result = score_bfcl_multi_turn(predictions, [item.conversation for item in items])
        steps = [row["steps"] for row in predictions if isinstance(row.get("steps"), int)]
        return {**result, "well_formed_rate": well_formed_rate(predictions),
                "mean_steps": sum(steps) / len(steps) if steps else None}  # fmt: skip


SPEC = ScorerSpec(
    score=score_bfcl_multi_turn,
    task=BfclMultiTurnTask,
    layout="""\
--references BFCL_v4_multi_turn_CATEGORY.json --references possible_answer/BFCL_v4_multi_turn_CATEGORY.json
(read by the bfcl reader; needs bfcl-eval installed). predictions: {"id", "result": [turn: [step: [{"func_name":
{"arg": value}}]]]}: the calls of every answer, per user turn; a result that is not a list, or has fewer turns than
the gold, is wrong.""",
)

__all__ = ["SPEC", "BfclMultiTurnTask", "bfcl_defaults"]
