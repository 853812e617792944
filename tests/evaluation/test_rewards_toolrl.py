"""ToolRL's decomposed reward (train/evaluation/rewards/toolrl.py) on hand-computed cases.

The paper gives the formulas but no worked numbers, so each case is computed by hand from them, the arithmetic in
a comment; every value of ``correctness`` below is also what the authors' released
``verl/utils/reward_score/rlla.py`` (``compute_tool_call_reward(gt, pd, 3, -3)``, default variant) returns for
the same calls, and the ``toolrl`` totals what its ``compute_score`` returns for the same answers in its tags
(run once against a checkout of github.com/qiancheng0/ToolRL; restated here, not copied).
"""

from __future__ import annotations

import pytest

from train.evaluation.rewards import REWARDS, get_reward
from train.evaluation.rewards.base import completion_of
from train.evaluation.rewards.toolrl import (
    correctness,
    correctness_reward,
    format_reward,
    match_score,
    max_score,
    toolrl_reward,
)
from train.schema import Conversation, Message, ToolCall


def call(name: str, **arguments) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


def reference(gold_calls=(), gold_text=None) -> Conversation:
    gold = Message(role="assistant", content=gold_text, tool_calls=list(gold_calls))
    return Conversation(id="r", messages=[Message(role="user", content="Weather in Paris?"), gold])


WEATHER = [call("get_weather", city="Paris", unit="C")]  # S_max = 1 + (1 + 2) = 4


def test_match_score_is_the_multiset_jaccard_with_its_edges():
    assert match_score(["a", "b"], ["b", "a"]) == 1.0  # |{a,b}| / (2 + 2 - 2)
    assert match_score(["a"], ["a", "a"]) == 0.5  # 1 / (1 + 2 - 1)
    assert match_score(["a", "b"], ["a", "c"]) == pytest.approx(1 / 3)  # 1 / (2 + 2 - 1)
    assert match_score([], []) == 1.0 and match_score([], ["a"]) == 0.0  # equal lists first, then an empty one


@pytest.mark.parametrize(
    ("predicted", "expected"),
    [
        (WEATHER, 3.0),  # exact match
        ([call("get_weather", city="Paris", unit="F")], 1.5),  # names 1 + keys 1 + values 1 = 3; 6*3/4 - 3
        ([call("get_weather", city="Paris")], 0.75),  # names 1 + keys 1/2 + values 1 = 2.5; 6*2.5/4 - 3
        ([call("get_time", city="Paris")], -3.0),  # names 0/(1+1-0) = 0, no partner of that name: 6*0/4 - 3
        ([], -3.0),  # no call: names 0, nothing to pair
        (WEATHER * 2, 2.25),  # extra call: names 1/(1+2-1) = 0.5, first call pairs for 3; 6*3.5/4 - 3
    ],
    ids=["exact", "wrong_value", "missing_param", "wrong_name", "no_call", "extra_call"],
)
def test_correctness_on_single_call_perturbations(predicted, expected):
    assert max_score(WEATHER) == 4.0
    assert correctness(WEATHER, predicted) == pytest.approx(expected)


def test_parallel_calls_in_another_order():
    gold = [call("f", a=1), call("g", b=2, c=3)]  # S_max = 1 + (1 + 1) + (1 + 2) = 6
    # names [f, g] vs [g, f]: 2 / (2 + 2 - 2) = 1; f pairs for 1 + 1; g for keys 1 + values 1 (c differs): 5
    assert correctness(gold, [call("g", b=2, c=4), call("f", a=1)]) == pytest.approx(6 * 5 / 6 - 3)  # 2.0


def test_pairing_is_the_released_codes_greedy_one_not_the_best():
    gold = [call("f", a=1, b=2), call("f", a=1, b=9)]  # S_max = 1 + 3 + 3 = 7
    predicted = [call("f", a=1, b=9), call("f", a=5, b=2)]
    # gold 1 meets both at 1 + 1 and takes the first on the tie (f(a=1, b=9)); gold 2 is left f(a=5, b=2) at
    # 1 + 0: score 1 + 2 + 1 = 4, 6*4/7 - 3 = 3/7 (the best pairing would give 1 + 2 + 3 = 6, i.e. 15/7)
    assert correctness(gold, predicted) == pytest.approx(3 / 7)
    # a candidate scoring 0 is not taken, so it stays free for a later gold call: names [f, f] vs [f] = 1/2;
    # f(a=1) meets f(b=2) at 0 + 0 (not taken), f(b=2) then takes it at 1 + 1: 2.5, S_max 5: 6*2.5/5 - 3 = 0
    assert correctness([call("f", a=1), call("f", b=2)], [call("f", b=2)]) == pytest.approx(0.0)


def test_values_compare_by_python_equality_as_the_code_does():
    gold = [call("f", n=1)]  # S_max = 3
    assert correctness(gold, [call("f", n=1.0)]) == 3.0
    assert correctness(gold, [call("f", n=True)]) == 3.0  # the code's == : True == 1
    assert correctness(gold, [call("f", n="1")]) == pytest.approx(1.0)  # names 1 + keys 1 + values 0: 6*2/3 - 3
    assert correctness([call("f")], [call("f", x=1)]) == 0.0  # names 1, keys [] vs [x] = 0, no partner: 6*1/2 - 3


def test_format_asks_for_the_gold_turns_parts():
    calls_gold, text_gold = reference(WEATHER), reference(gold_text="No tool fits.")
    both_gold = reference(WEATHER, gold_text="Let me look.")
    assert format_reward(completion_of(calls=WEATHER), calls_gold) == 1.0
    assert format_reward(completion_of(content="Sunny.", calls=WEATHER), calls_gold) == 0.0  # text the gold lacks
    assert format_reward(completion_of(content="Sunny."), calls_gold) == 0.0
    assert format_reward(completion_of(content="Sorry."), text_gold) == 1.0
    assert format_reward(completion_of(calls=WEATHER), text_gold) == 0.0
    assert format_reward(completion_of(content="One moment.", calls=WEATHER), both_gold) == 1.0
    assert format_reward(completion_of(error="parse: unclosed <tool_call>"), calls_gold) == 0.0


def test_totals_match_the_released_compute_score():
    gold = reference([call("f", n=1)])
    # rlla.compute_score on "<think>..</think>\n<tool_call>{f(n=2)}</tool_call>": (2.0, format 1.0, correct 1.0)
    assert toolrl_reward(completion_of(calls=[call("f", n=2)]), gold) == pytest.approx(2.0)
    # a <response> where a call is gold: (-3.0, 0.0, -3.0)
    assert toolrl_reward(completion_of(content="I cannot."), gold) == -3.0
    text_gold = reference(gold_text="No tool fits.")
    # the gold is a <response>: correctness is 0 whatever comes; a response scores (1.0, 1.0, 0.0), a call (0, 0, 0)
    assert toolrl_reward(completion_of(content="Sorry."), text_gold) == 1.0
    assert toolrl_reward(completion_of(calls=[call("f", n=2)]), text_gold) == 0.0
    assert toolrl_reward(completion_of(calls=[call("f", n=1)]), gold) == 4.0  # the top of [-3, 4]


def test_an_unparsed_answer_scores_the_bottom_where_calls_are_gold():
    unparsed = completion_of(error="parse: bad JSON in <tool_call>")
    assert correctness_reward(unparsed, reference(WEATHER)) == -3.0
    assert toolrl_reward(unparsed, reference(WEATHER)) == -3.0
    assert correctness_reward(unparsed, reference(gold_text="No.")) == 0.0


def test_registered_with_the_papers_ranges():
    assert get_reward("toolrl") is toolrl_reward
    ranges = {name: (REWARDS.get(name).low, REWARDS.get(name).high) for name in REWARDS if name.startswith("toolrl")}
    assert ranges == {"toolrl": (-3.0, 4.0), "toolrl_format": (0.0, 1.0), "toolrl_correctness": (-3.0, 3.0)}
    assert toolrl_reward(completion_of(calls=WEATHER), reference(WEATHER).to_dict()) == 4.0
