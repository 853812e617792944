"""Abstention: credit for calling nothing where no call is expected (When2Call's framing: Ross et al. 2025,
"When2Call: When (not) to Call Tools", NAACL 2025).

When2Call sorts the right behaviour into four kinds: call a tool; answer directly; say that no offered tool can
serve the request; ask for a required parameter the user did not give. Its finding is that SFT teaches models to
call anyway (a *hallucinated* call). This reward covers the three kinds that call nothing:

* the reference's gold turn holds no call (a text answer: a refusal, a question back to the user, a direct
  answer), or the reference is a BFCL irrelevance question (no gold turn; ``meta.category``);
* then the reward is 1.0 when the chat format parsed the completion, it holds no call and it has text, and 0.0
  otherwise (a call, whatever it is, is the hallucinated call; a completion that did not parse or wrote nothing
  has abstained from nothing).

How "asks for the missing parameter" is recognised: minimally, as a text answer without a call. The reward does
not read the text (no question-mark or keyword test: When2Call itself judges the kind of answer with log-prob
multiple choice or an LLM judge), so asking, refusing and answering directly are credited alike; a reward that
tells them apart needs a judge and a label of the expected kind.

Where a call is expected (the gold turn holds calls, or a BFCL relevance question) the reward does not apply: it
returns ``call_expected`` (default 0.0, neutral when summed with a correctness reward), the caller's choice.
"""

from __future__ import annotations

from typing import Any

from train.evaluation.bfcl.scorer import CATEGORIES, canonical_category
from train.evaluation.rewards import RewardSpec
from train.evaluation.rewards.base import as_conversation, gold_turn, has_text, is_parsed
from train.schema import Conversation


def expects_call(conv: Conversation) -> bool:
    """Whether the reference expects a call: its gold turn holds one; without a gold turn, a BFCL relevance
    question does and an irrelevance question does not; ValueError for any other reference without a gold turn."""
    turn = gold_turn(conv)
    if turn is not None:
        return bool(turn.tool_calls)
    try:
        check = CATEGORIES[canonical_category(str(conv.meta.get("category")))].check
    except ValueError:
        check = None
    if check in ("irrelevance", "relevance"):
        return check == "relevance"
    raise ValueError(f"reference {conv.id!r} has no gold assistant turn to say whether a call is expected")


def abstention_reward(completion: Any, reference: Conversation | dict[str, Any], *, call_expected: float = 0.0):
    """1.0 for a parsed text answer without calls where no call is expected, 0.0 for a call (or no answer) there;
    ``call_expected`` where a call is expected (the reward does not apply)."""
    if expects_call(as_conversation(reference)):
        return float(call_expected)
    abstained = is_parsed(completion) and not completion.tool_calls and has_text(completion)
    return 1.0 if abstained else 0.0


SPEC = RewardSpec(
    fn=abstention_reward,
    low=0.0,
    high=1.0,
    credits="calling nothing (a text answer) where no call is expected; 0 for a hallucinated call",
)

__all__ = ["SPEC", "abstention_reward", "expects_call"]
