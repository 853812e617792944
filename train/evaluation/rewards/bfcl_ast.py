"""BFCL AST correctness as a reward: 1.0 exactly when BFCL's checker (``train.evaluation.bfcl.scorer``) scores the
completion right, else 0.0.

Nothing is re-implemented: the completion becomes BFCL's prediction row as ``eval run`` writes it
(``BfclTask.prediction``: native calls keep their JSON values, a Java/JavaScript text answer is decoded as BFCL
decodes a prompting model's answer, a parse failure is BFCL's decode-failure string) and that row is scored by
``score_bfcl`` for the reference's category, so the reward is the checker's verdict item for item: per category
(simple, multiple, parallel, parallel_multiple, live_*), irrelevance (right when no call came out), relevance
(right when one did), Java and JavaScript. The reference is a conversation read by the BFCL reader
(``meta.category``, ``meta.bfcl_functions``, ``meta.ground_truth``: ``tooltrain data convert bfcl``).
"""

from __future__ import annotations

from typing import Any

from train.evaluation.bfcl.scorer import CATEGORIES, canonical_category, score_bfcl
from train.evaluation.bfcl.task import BfclTask
from train.evaluation.rewards import RewardSpec
from train.evaluation.rewards.base import as_conversation
from train.evaluation.task_base import EvalItem
from train.schema import Conversation


def bfcl_verdict(completion: Any, reference: Conversation | dict[str, Any], *, underscore_to_dot: bool = False) -> dict:
    """BFCL's per-item verdict ``{"id", "valid", "error", "error_type"}`` on the completion."""
    conv = as_conversation(reference)
    meta = conv.meta
    spec = CATEGORIES[canonical_category(str(meta.get("category")))]  # ValueError: not a scorable category
    if "bfcl_functions" not in meta:
        raise ValueError(f"reference {conv.id!r}: not a BFCL question (no meta.bfcl_functions)")
    needs_answer = spec.check not in ("irrelevance", "relevance")
    if needs_answer and "ground_truth" not in meta:
        raise ValueError(f"reference {conv.id!r}: category {spec.name} needs meta.ground_truth")
    # the target only matters to tasks that read the gold turn; BFCL's prediction reads the category alone
    prediction = BfclTask().prediction(EvalItem(conv.id, conv, len(conv.messages)), completion)
    question = {"id": conv.id, "function": meta["bfcl_functions"]}
    answers = [{"id": conv.id, "ground_truth": meta["ground_truth"]}] if needs_answer else None
    scored = score_bfcl([prediction], [question], answers, spec.name, underscore_to_dot=underscore_to_dot)
    return scored["per_item"][0]


def bfcl_ast_reward(completion: Any, reference: Conversation | dict[str, Any], *, underscore_to_dot: bool = False):
    """1.0 when BFCL's checker scores the completion right for the reference's category, else 0.0."""
    return 1.0 if bfcl_verdict(completion, reference, underscore_to_dot=underscore_to_dot)["valid"] else 0.0


SPEC = RewardSpec(
    fn=bfcl_ast_reward,
    low=0.0,
    high=1.0,
    credits="BFCL's AST checker's verdict on the completion, per category (irrelevance: no call is right)",
)

__all__ = ["SPEC", "bfcl_ast_reward", "bfcl_verdict"]
