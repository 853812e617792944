"""#27 item 8 (a, b, d): the ITC recipes score with Seal-Tools' matching and evaluate the base model at start; calls
in an answer that fails FM are credited as the paper's tables credit watt-tool's (FM 5.53, tool F1 88.30)."""

from __future__ import annotations

from pathlib import Path

import yaml

from train.evaluation.itc import loose_calls, score_itc

CONF = Path(__file__).resolve().parents[2] / "conf" / "eval"


def test_itc_eval_configs_default_to_seal_and_evaluate_at_start():
    for name in ("itc.yaml", "itc_tiny.yaml"):
        config = yaml.safe_load((CONF / name).read_text())
        assert config["benchmarks"][0]["options"]["matching"] == "seal", name
        assert config["at_start"] is True, name


def test_loose_calls_read_a_bare_call_list_without_evaluating_it():
    text = "Sure! Here you go: [get_weather(city='Paris', unit=\"c\"), news(q='x [1]')] hope it helps"
    assert [(c.name, c.arguments) for c in loose_calls(text)] == [
        ("get_weather", {"city": "Paris", "unit": "c"}),
        ("news", {"q": "x [1]"}),
    ]
    assert loose_calls("[__import__('os').system('echo hi')]") == []  # not a name(...) call: nothing is run
    assert loose_calls("no list [1, 2] and [f('positional')]") == []
    assert [c.name for c in loose_calls('{"Thought": "x", "Action": "[f(a=1)]" trailing')] == ["f"]


def test_an_answer_failing_fm_is_scored_on_its_calls():
    reference = {
        "id": "r",
        "tools": [],
        "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": "t", "tool_calls": [{"function": {"name": "w", "arguments": {"c": "P"}}}]},
        ],
        "meta": {"language": "en"},
    }
    result = score_itc([{"id": "r", "content": "[w(c='P')]"}], [reference], language_of=lambda text: "en")
    assert result["overall"]["fm"] == 0.0
    assert result["macro"]["tool_f1"] == 1.0 and result["micro"]["ti_f1"] == 1.0
