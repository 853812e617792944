"""Rewards for preference and reinforcement learning on tool use, registered once in ``REWARDS``.

A reward is a pure function ``reward(completion, reference) -> float`` (``base``: the completion is the chat
format's parse of the model's answer, the reference the canonical conversation with its gold turn). Each sits on
its benchmark's scorer, so the reward a policy is trained on and the score it is evaluated with are one function
(docs STYLE 18): ``bfcl_ast`` is the BFCL checker's verdict, ``itc_*`` the ITC scorer's per-item F1. ``toolrl``
restates ToolRL's decomposed reward, ``abstention`` credits calling nothing where no call is expected.
``docs/rewards.md`` lists each one's range, what it credits, its source and its departures.

Registered by ``module:attr`` naming a ``RewardSpec``, imported on first use; wherever a reward is named,
``module:attr`` naming a ``RewardSpec`` of your own works too.

``bfcl_multi_turn`` is BFCL's multi-turn state verdict on a played episode (the ``bfcl_multi_turn`` scorer's
``check_entry``): its completion is the episode's record, not one parse.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from train.registry import Registry, load


@dataclass(frozen=True)
class RewardSpec:
    """One reward: ``fn(completion, reference, **options) -> float`` (or its ``module:attr``), the closed range
    ``[low, high]`` its values lie in, and one line on what it credits (help texts, ``docs/rewards.md``)."""

    fn: Callable[..., float] | str
    low: float
    high: float
    credits: str
    # the episodic task whose played episode's record the reward reads (``grpo.episode``); None: one turn's parse
    episode: str | None = None


REWARDS: Registry[RewardSpec] = Registry("reward", "rewards", lambda obj: isinstance(obj, RewardSpec))

REWARDS.register("bfcl_ast", "train.evaluation.rewards.bfcl_ast:SPEC")
REWARDS.register("toolrl", "train.evaluation.rewards.toolrl:SPEC")
REWARDS.register("toolrl_format", "train.evaluation.rewards.toolrl:FORMAT_SPEC")
REWARDS.register("toolrl_correctness", "train.evaluation.rewards.toolrl:CORRECTNESS_SPEC")
REWARDS.register("itc_invocation_f1", "train.evaluation.rewards.itc_f1:SPEC")
REWARDS.register("itc_tool_f1", "train.evaluation.rewards.itc_f1:TOOL_SPEC")
REWARDS.register("abstention", "train.evaluation.rewards.abstention:SPEC")
REWARDS.register("bfcl_multi_turn", "train.evaluation.rewards.bfcl_multi_turn:SPEC")


def get_reward(name: str) -> Callable[..., float]:
    """The function of reward ``name`` (registered, or ``module:attr`` naming a RewardSpec)."""
    fn = REWARDS.get(name).fn
    return load(fn, "reward") if isinstance(fn, str) else fn


def reward_range(name: str) -> tuple[float, float]:
    spec = REWARDS.get(name)
    return spec.low, spec.high


def describe(name: str) -> dict[str, Any]:
    spec = REWARDS.get(name)
    return {"name": name, "low": spec.low, "high": spec.high, "credits": spec.credits}


__all__ = ["REWARDS", "RewardSpec", "describe", "get_reward", "reward_range"]
