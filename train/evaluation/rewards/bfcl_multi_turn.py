"""BFCL's multi-turn state reward: 1.0 when a played episode passes BFCL's multi-turn checker, else 0.0.

The completion is the episode's record (``train.evaluation.bfcl.multi_turn.episode.EpisodeRecord``, or its
``result``: per user turn, the model's answers' calls), the reference the BFCL multi-turn conversation as its reader
writes it (``meta.ground_truth`` per turn, ``initial_config``, ``involved_classes``). The verdict is
``check.check_entry``, the ``bfcl_multi_turn`` scorer's own: after every turn, each environment's state equals the
gold calls' and the gold turn's execution results are among the model's (tests/evaluation: 100% agreement with
bfcl-eval's ``multi_turn_checker`` on the perturbation sets). An episode a step budget cut short, or one whose answer
did not parse, is 0.0, as the checker counts it.
"""

from __future__ import annotations

from typing import Any

from train.evaluation.bfcl.multi_turn.check import check_entry
from train.evaluation.rewards import RewardSpec
from train.evaluation.rewards.base import as_conversation


def bfcl_multi_turn_reward(completion: Any, reference: Any) -> float:
    """BFCL's multi-turn verdict on ``completion`` (an episode record, or its per-turn ``result``) as 1.0 / 0.0."""
    conv = as_conversation(reference)
    if "ground_truth" not in conv.meta:
        raise ValueError(f"reference {conv.id!r} has no meta.ground_truth (read the possible-answer file too)")
    result = completion.result if hasattr(completion, "result") else completion
    return 1.0 if check_entry(result, conv.meta["ground_truth"], conv.meta, conv.id)["valid"] else 0.0


SPEC = RewardSpec(
    fn=bfcl_multi_turn_reward,
    low=0.0,
    high=1.0,
    credits="a multi-turn episode whose environments end every turn in the gold state with the gold results (BFCL)",
    episode="bfcl_multi_turn",
)
