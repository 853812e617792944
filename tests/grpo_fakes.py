"""A reward for tests of the GRPO loop on the random tiny model, whose rollouts the real rewards score alike (ToolRL
gives every garbage answer to a text turn the same 1.0): the share of the answer's characters that are digits, which
random token soup varies, so groups have a spread, advantages are non-zero, and steps have gradients."""

from __future__ import annotations

from train.evaluation.rewards import RewardSpec


def digit_share(completion, reference) -> float:
    text = completion.text or ""
    return sum(ch.isdigit() for ch in text) / len(text) if text else 0.0


DIGITS = RewardSpec(fn=digit_share, low=0.0, high=1.0, credits="digits in the answer (a test signal, not a task)")
