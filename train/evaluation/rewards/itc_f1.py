"""ITC's per-item F1 as a reward: invocation F1 (``itc_invocation_f1``) and tool F1 (``itc_tool_f1``), in [0, 1].

Both are one item of the ITC scorer (``train.evaluation.itc``), nothing recomputed: the completion becomes the row
``ItcTask(answer="tool_calls")`` writes (the calls the chat format parsed; a completion whose content is ITC's
``{"Thought", "Action"}`` answer is read as that answer; a parse failure fails FM), ``score_item`` counts it
against the reference's gold turn, and ``itc_metrics.item_prf`` gives the per-item P/R/F1 the paper's tables
average (the macro numbers). Invocation F1 matches (tool, key, value) triples, tool F1 the multiset of call names;
``matching="seal"`` counts as Seal-Tools does. Per-item conventions (``itc_metrics``): nothing predicted and
nothing gold scores 1 (for invocation only when the calls are right too), an answer with no readable call where
calls are gold scores 0, calls where the gold has none score 0. Language match (LM) plays no part: langid is not
run.
"""

from __future__ import annotations

from typing import Any

from train.evaluation.itc import ItcTask, reference_parts, score_item
from train.evaluation.rewards import RewardSpec
from train.evaluation.rewards.base import as_conversation
from train.evaluation.task_base import EvalItem
from train.schema import Conversation

_NO_LANGUAGE = "und"  # LM is not part of the F1s: a constant stands in for langid


def itc_item(completion: Any, reference: Conversation | dict[str, Any], matching: str = "multiset") -> dict:
    """The ITC scorer's item for the completion (``tools``, ``params``, ``prf``, ``errors``, ...)."""
    conv = as_conversation(reference)
    task = ItcTask(answer="tool_calls", matching=matching)
    prediction = task.prediction(EvalItem(conv.id, conv, len(conv.messages)), completion)
    return score_item(reference_parts(conv.to_dict()), prediction, lambda text: _NO_LANGUAGE, matching)


def invocation_f1(completion: Any, reference: Conversation | dict[str, Any], *, matching: str = "multiset") -> float:
    """ITC's per-item invocation F1: (tool, key, value) triples of the completion's calls against the gold turn's."""
    return float(itc_item(completion, reference, matching)["prf"]["ti_f1"])


def tool_f1(completion: Any, reference: Conversation | dict[str, Any], *, matching: str = "multiset") -> float:
    """ITC's per-item tool F1: the completion's call names against the gold turn's, as multisets."""
    return float(itc_item(completion, reference, matching)["prf"]["tool_f1"])


SPEC = RewardSpec(
    fn=invocation_f1,
    low=0.0,
    high=1.0,
    credits="ITC's per-item invocation F1: (tool, key, value) triples against the gold calls",
)
TOOL_SPEC = RewardSpec(
    fn=tool_f1, low=0.0, high=1.0, credits="ITC's per-item tool F1: called tool names against the gold calls"
)

__all__ = ["SPEC", "TOOL_SPEC", "invocation_f1", "itc_item", "tool_f1"]
