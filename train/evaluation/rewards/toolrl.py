"""ToolRL's decomposed reward (Qian et al. 2025, "ToolRL: Reward is All Tool Learning Needs", arXiv 2504.13958,
§3.3), restated from the paper and its released code (github.com/qiancheng0/ToolRL,
``verl/utils/reward_score/rlla.py``, the default reward: no variant environment variable set).

    R_final = R_format + R_correct,  R_format in {0, 1},  R_correct in [-3, 3],  so R_final in [-3, 4]

Correctness, for gold calls G and predicted calls P (each a name and its arguments):

* tool names: ``match(names(G), names(P))``, where ``match(a, b)`` is 1 when the two lists are equal, 0 when
  either is empty, else the multiset Jaccard ``|a ∩ b| / (|a| + |b| - |a ∩ b|)`` (the code's ``match_score``);
* each gold call g, in order, is paired with the unused predicted call of the same name whose
  ``match(keys(g), keys(p)) + #{k in keys(g): p[k] == g[k]}`` is highest and above 0 (the first on ties: the
  code keeps a candidate only when it beats the best so far, starting from 0); that pair adds its parameter-name
  match (in [0, 1]) and its count of equal values (in [0, |keys(g)|]) to the score. A gold call without such a
  partner adds nothing.
* ``S_max = 1 + sum over g of (1 + |keys(g)|)``, and ``R_correct = 6 * score / S_max - 3`` (the paper's rescaling
  of [0, S_max] onto [-3, 3]); an exact match of the call lists, in order, is 3 directly.
* The code's edges, kept: a gold answer without calls gives ``R_correct = 0`` whatever was predicted (only the
  format reward judges such a turn: it is 1 only for a text answer without calls); an answer the format cannot
  parse, where calls are expected, gives -3 (the code's failed ``<tool_call>`` parse). Values compare by Python
  equality of the JSON values, as the code's ``==`` does (``1 == 1.0``; also ``true == 1``).

Departures (``docs/rewards.md``):

* Format. The paper's format reward checks its own tags (``<think>``, ``<tool_call>``, ``<response>``), each
  present and in order "as specified by the ground truth". Here the chat format's parser is the check: R_format
  is 1 when the format parsed the completion without error *and* the answer has the parts the gold turn has (calls
  exactly when the gold has calls, text exactly when the gold has text), which is the code's per-gold pattern
  choice (tool call only / response only / both) with the format's own markup in place of ToolRL's tags. The
  ``<think>`` block is the format's business (Qwen3 parses it, others have none): it is not required.
* Matching. The paper describes the score over a matching of predicted to gold calls; the released code (what
  trained the paper's models) matches greedily as above, and that is what is restated.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from train.evaluation.rewards import RewardSpec
from train.evaluation.rewards.base import as_conversation, gold_calls, gold_turn, has_text, is_parsed
from train.schema import Conversation, ToolCall

CORRECT_MAX, CORRECT_MIN = 3.0, -3.0
FORMAT_MAX, FORMAT_MIN = 1.0, 0.0


def match_score(a: list[Any], b: list[Any]) -> float:
    """ToolRL's list similarity: 1 for equal lists, 0 when either is empty, else the multiset Jaccard index."""
    if a == b:
        return 1.0
    if not a or not b:
        return 0.0
    shared = sum((Counter(a) & Counter(b)).values())
    return shared / (len(a) + len(b) - shared)


def max_score(gold: list[ToolCall]) -> float:
    """S_max = 1 (tool names) + for each gold call, 1 (parameter names) + one per gold parameter (values)."""
    return 1.0 + sum(1.0 + len(call.arguments) for call in gold)


def equal_values(gold: dict[str, Any], predicted: dict[str, Any]) -> float:
    """How many gold parameters the prediction gives with an equal value (Python ``==``, as the code compares)."""
    return float(sum(key in predicted and predicted[key] == value for key, value in gold.items()))


def match_total(gold: list[ToolCall], predicted: list[ToolCall]) -> float:
    """The raw score in [0, S_max]: tool-name match, then each gold call's greedy partner's name and value matches."""
    score = match_score([c.name for c in gold], [c.name for c in predicted])
    used: set[int] = set()
    for expected in gold:
        best, best_index = 0.0, None
        for index, call in enumerate(predicted):
            if index in used or call.name != expected.name:
                continue
            names = match_score(list(expected.arguments), list(call.arguments))
            values = equal_values(expected.arguments, call.arguments)
            if names + values > best:  # strictly better: a partner must score above 0, the first wins ties
                best, best_index = names + values, index
        if best_index is not None:
            used.add(best_index)
            score += best
    return score


def correctness(gold: list[ToolCall], predicted: list[ToolCall]) -> float:
    """R_correct in [-3, 3] for parsed calls (gold non-empty)."""
    if [(c.name, c.arguments) for c in gold] == [(c.name, c.arguments) for c in predicted]:
        return CORRECT_MAX
    scale = CORRECT_MAX - CORRECT_MIN
    return scale * match_total(gold, predicted) / max_score(gold) + CORRECT_MIN


def correctness_reward(completion: Any, reference: Conversation | dict[str, Any]) -> float:
    """R_correct for a completion: 0 when the gold turn has no calls, -3 when the completion did not parse."""
    gold = gold_calls(as_conversation(reference))
    if not gold:
        return 0.0
    if not is_parsed(completion):
        return CORRECT_MIN
    return correctness(gold, list(completion.tool_calls))


def format_reward(completion: Any, reference: Conversation | dict[str, Any]) -> float:
    """R_format: 1 when the chat format parsed the completion and it has the gold turn's parts (calls exactly when
    the gold has calls, text exactly when the gold has text), else 0."""
    conv = as_conversation(reference)
    turn = gold_turn(conv)
    if turn is None:
        raise ValueError(f"reference {conv.id!r} has no gold assistant turn")
    if not is_parsed(completion):
        return FORMAT_MIN
    gold_parts = (bool(turn.tool_calls), isinstance(turn.content, str) and turn.content.strip() != "")
    parts = (bool(completion.tool_calls), has_text(completion))
    return FORMAT_MAX if parts == gold_parts else FORMAT_MIN


def toolrl_reward(completion: Any, reference: Conversation | dict[str, Any]) -> float:
    """R_final = R_format + R_correct, in [-3, 4]."""
    return format_reward(completion, reference) + correctness_reward(completion, reference)


SPEC = RewardSpec(
    fn=toolrl_reward,
    low=CORRECT_MIN + FORMAT_MIN,
    high=CORRECT_MAX + FORMAT_MAX,
    credits="ToolRL's format (0/1) + correctness ([-3, 3]: tool-name Jaccard, parameter names, parameter values)",
)
FORMAT_SPEC = RewardSpec(
    fn=format_reward,
    low=FORMAT_MIN,
    high=FORMAT_MAX,
    credits="ToolRL's format reward: the chat format parsed the answer and it has the gold turn's parts",
)
CORRECTNESS_SPEC = RewardSpec(
    fn=correctness_reward,
    low=CORRECT_MIN,
    high=CORRECT_MAX,
    credits="ToolRL's correctness reward: tool-name Jaccard, parameter-name and value matches, scaled to [-3, 3]",
)

__all__ = [
    "CORRECTNESS_SPEC",
    "FORMAT_SPEC",
    "SPEC",
    "correctness",
    "correctness_reward",
    "equal_values",
    "format_reward",
    "match_score",
    "match_total",
    "max_score",
    "toolrl_reward",
]
