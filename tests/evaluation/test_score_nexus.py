"""Nexus scorer: calls read with ast and bound to their definitions, truthy-argument records, averages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from train.base.records import Rejected
from train.evaluation.nexus import (
    CallError,
    RawCall,
    Signature,
    parse_call_text,
    recorded,
    same_records,
    score_nexus,
)
from train.sources.nexus import read

FILES = ("cve_cpe", "emailrep", "virustotal", "toolalpaca", "toolllm")
SIGNATURE = {"f": Signature(("a", "b", "c"), {"c": 3}, frozenset({"a"}))}


def load_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def references(shared_data) -> list[dict]:
    folder = shared_data / "nexusraven_v1_eval"
    items = list(
        read([*(folder / f"{name}_queries.json" for name in FILES), folder / "_derived_function_definitions.json"])
    )
    assert not [item for item in items if isinstance(item, Rejected)]
    return [item.to_dict() for item in items]


def reference_text(row: dict) -> str:
    """The gold as the source file writes it (toolalpaca: its call strings, one per line)."""
    meta = row["meta"]
    if "reference" in meta:
        return meta["reference"]
    if "golden_answer" in meta:
        return "\n".join(json.loads(meta["golden_answer"]))
    return meta["output"]


# ---------------------------------------------------------------- real data


def test_every_reference_string_scores_itself_perfectly(references):
    report = score_nexus([{"id": r["id"], "call": reference_text(r)} for r in references], references)
    assert {task: (agg["total"], agg["correct"]) for task, agg in report["tasks"].items()} == {
        "cve_cpe": (78, 78), "emailrep": (38, 38), "virustotal": (151, 151),
        "toolalpaca": (85, 85), "toolllm": (21, 21),
    }  # fmt: skip
    assert (report["weighted_average"], report["unweighted_average"]) == (1.0, 1.0)
    assert report["reference_errors"] == []


def test_every_reference_as_canonical_tool_calls_scores_itself_perfectly(references):
    predictions = [{"id": r["id"], "tool_calls": r["messages"][-1]["tool_calls"]} for r in references]
    assert score_nexus(predictions, references)["weighted_average"] == 1.0


def test_toolllm_original_outputs_match_except_the_renamed_json_argument(references):
    rows = [r for r in references if r["meta"]["dataset"] == "toolllm"]
    # Output_Original writes quoted names and JSON literals ("raw" = false); one names "json" where the stub says
    # json_arg.
    report = score_nexus([{"id": r["id"], "call": r["meta"]["output_original"][0]} for r in rows], rows)
    assert report["tasks"]["toolllm"]["correct"] == 20
    assert [(i["id"], i["error"]) for i in report["per_item"] if not i["correct"]] == [
        ("toolllm_queries-17", "fetch_events() got an unexpected keyword argument 'json'")
    ]


def test_neighbouring_references_never_match(references):
    predictions = []
    for task in FILES:
        rows = [r for r in references if r["meta"]["dataset"] == task]
        predictions += [
            {"id": row["id"], "call": reference_text(rows[(i + 1) % len(rows)])} for i, row in enumerate(rows)
        ]
    report = score_nexus(predictions, references)
    assert {task: agg["correct"] for task, agg in report["tasks"].items()} == dict.fromkeys(FILES, 0)


# ---------------------------------------------------------------- reading and binding calls


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        ("r = nvdlib.searchCVE(keywordSearch='x')", [RawCall("searchCVE", (), {"keywordSearch": "x"})]),
        ("f(1, b=[2])\ng(c={'k': None})", [RawCall("f", (1,), {"b": [2]}), RawCall("g", (), {"c": {"k": None}})]),
        ("f(a=1); f(a=2)", [RawCall("f", (), {"a": 1}), RawCall("f", (), {"a": 2})]),
        ("[f(a=1), g()]", [RawCall("f", (), {"a": 1}), RawCall("g")]),
        # a nested call runs first and stands for the None its stub returns (NexusRaven-V2's nested tasks)
        ("f(a=g(1))", [RawCall("g", (1,)), RawCall("f", (), {"a": None})]),
        ('convertCurrency(from="EUR", amount=5)', [RawCall("convertCurrency", (), {"from": "EUR", "amount": 5})]),
        (
            'f(from="A")\nf(from="B", x=true)',
            [RawCall("f", (), {"from": "A"}), RawCall("f", (), {"from": "B", "x": True})],
        ),
        ("   ", []),
    ],
)
def test_call_text_is_read_without_running_it(text, calls):
    assert parse_call_text(text) == calls
    assert [c.kwargs for c in parse_call_text(text)] == [c.kwargs for c in calls]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("f(a=", "not valid Python: '(' was never closed at line 1 column 2"),
        ("f(a=x)", "line 1: f: argument 'a': a variable x is not a literal"),
        ("import os", "line 1: expected a call, got 'import os'"),
        ("x = 1", "line 1: expected a call, got 'x = 1'"),
        ("print('hi') if True else None", "line 1: expected a call, got \"print('hi') if True else None\""),
        ("f(a=1)\ng(from=)", "not valid Python: invalid syntax at line 2 column 3"),
        ('f(from="A")\nf(from=x)', "not valid Python: invalid syntax at line 1 column 3"),
        ("__import__('os').system('ls')", "line 1: called object __import__('os') is not a name"),
        (["f()"], "expected the call as text, got list"),
    ],
)
def test_malformed_call_text_raises_a_reason(text, reason):
    with pytest.raises(CallError) as caught:
        parse_call_text(text)
    assert str(caught.value) == reason


def test_binding_follows_python_and_the_stub_records_truthy_values():
    assert recorded(RawCall("f", (1, 0)), SIGNATURE) == {"name": "f", "arguments": {"a": 1, "c": 3}}
    assert recorded(RawCall("f", (), {"a": "x", "b": [], "c": 0}), SIGNATURE) == {"name": "f", "arguments": {"a": "x"}}
    assert recorded(RawCall("g", (), {"z": False, "y": "0"}), {}) == {"name": "g", "arguments": {"y": "0"}}


@pytest.mark.parametrize(
    ("call", "reason"),
    [
        (RawCall("f", (1, 2, 3, 4)), "f() takes 3 positional argument(s) but 4 were given"),
        (RawCall("f", (1,), {"a": 2}), "f() got multiple values for argument 'a'"),
        (RawCall("f", (), {"a": 1, "d": 2}), "f() got an unexpected keyword argument 'd'"),
        (RawCall("f", (), {"b": 1}), "f() missing required argument(s): 'a'"),
        (RawCall("h", (), {}), "function 'h' is not defined for this query"),
    ],
)
def test_binding_errors_are_what_the_stub_call_would_raise(call, reason):
    with pytest.raises(CallError) as caught:
        recorded(call, SIGNATURE)
    assert str(caught.value) == reason


def test_positional_arguments_need_a_definition():
    with pytest.raises(CallError, match=r"^g: positional arguments cannot be named without the function's definition$"):
        recorded(RawCall("g", (1,)), {})


def test_records_compare_as_multisets_with_python_equality():
    a, b = {"name": "f", "arguments": {"x": 1}}, {"name": "f", "arguments": {"x": 2}}
    assert same_records([b, a], [a, b])
    assert same_records([{"name": "f", "arguments": {"x": 1.0}}], [a])
    assert not same_records([a, a], [a, b])
    assert not same_records([a], [a, a])


# ---------------------------------------------------------------- rows and averages


def test_fixture_mix_hand_computed(fixtures):
    folder = fixtures / "evaluation" / "nexus"
    report = score_nexus(load_jsonl(folder / "predictions.jsonl"), load_jsonl(folder / "references.jsonl"))
    verdicts = {item["id"]: (item["correct"], item["error"]) for item in report["per_item"]}
    assert verdicts == {
        "cve_cpe_queries-0": (True, None),  # None dropped, limit 2.0 == 2, "r = nvdlib." stripped
        "emailrep_queries-0": (False, "no prediction"),
        "virustotal_queries-0": (True, None),  # positional, bound to (domain, x_apikey)
        "toolalpaca_queries-13-turns_2": (True, None),  # two calls in the other order, JSON-string arguments
        "toolllm_queries-0": (True, None),  # z=3, x=4, y=2 are the stub's defaults: recorded all the same
        "toolllm_queries-1": (False, "calls differ from the reference"),  # raw=True recorded, raw=False not
    }
    item = next(i for i in report["per_item"] if i["id"] == "toolllm_queries-1")
    assert item["predicted"] == [{"name": "hashtag", "arguments": {"hashtag": "football", "raw": True}}]
    assert item["expected"] == [{"name": "hashtag", "arguments": {"hashtag": "football"}}]
    assert {task: (agg["total"], agg["correct"]) for task, agg in report["tasks"].items()} == {
        "cve_cpe": (1, 1), "emailrep": (1, 0), "virustotal": (1, 1), "toolalpaca": (1, 1), "toolllm": (2, 1),
    }  # fmt: skip
    assert report["weighted_average"] == 4 / 6
    assert report["unweighted_average"] == pytest.approx((1 + 0 + 1 + 1 + 0.5) / 5)
    assert report["unknown_prediction_ids"] == ["emailrep_queries-99"] and report["missing_prediction_ids"] == [
        "emailrep_queries-0"
    ]


def test_averages_follow_toolgt_table_7():
    # LLaMA-3.1-8B No Thought, U = 30.06: the mean of the eight task accuracies.
    accuracies = {"a": (30, 78), "b": (104, 151), "c": (8, 48), "d": (0, 10)}
    references, predictions = [], []
    for task, (right, total) in accuracies.items():
        for index in range(total):
            references.append(
                {
                    "id": f"{task}-{index}",
                    "meta": {"dataset": task},
                    "messages": [{"role": "assistant", "tool_calls": [{"name": "f", "arguments": {"x": 1}}]}],
                }
            )
            predictions.append({"id": f"{task}-{index}", "call": "f(x=1)" if index < right else "f(x=2)"})
    report = score_nexus(predictions, references)
    assert report["weighted_average"] == 142 / 287
    assert report["unweighted_average"] == pytest.approx((30 / 78 + 104 / 151 + 8 / 48 + 0) / 4)


def test_bad_rows_are_listed_not_raised():
    good = {
        "id": "t-0",
        "meta": {"dataset": "t"},
        "messages": [{"role": "assistant", "tool_calls": [{"name": "f", "arguments": {}}]}],
    }
    references = [
        good,
        {"id": "t-1", "meta": {}, "messages": []},
        {"id": "t-2", "meta": {"dataset": "t"}, "messages": [{"role": "user", "content": "hi"}]},
        {"id": "t-3", "meta": {"dataset": "t"}, "messages": [{"role": "assistant", "tool_calls": "f()"}]},
        {
            **good,
            "id": "t-4",
            "tools": [{"type": "function", "function": {"name": "g", "parameters": {"properties": {}}}}],
        },
    ]
    predictions = [
        {"id": "t-0", "call": "f()"},
        {"id": "t-2", "call": "f()"},
        {"id": "t-3", "tool_calls": [{"name": "f", "arguments": "{bad"}]},
        {"id": "t-0", "call": "g()"},
        {"call": "f()"},
    ]
    report = score_nexus(predictions, references)
    assert [(i["id"], i["correct"], i["error"]) for i in report["per_item"]] == [("t-0", True, None)]
    assert report["reference_errors"] == [
        {"id": "t-1", "reason": "reference has no meta.dataset (its task)"},
        {"id": "t-2", "reason": "reference has no assistant message"},
        {"id": "t-3", "reason": "tool_calls: expected a list, got str"},
        {"id": "t-4", "reason": "function 'f' is not defined for this query"},
    ]
    assert report["duplicate_prediction_ids"] == ["t-0"] and len(report["rows_without_id"]) == 1


@pytest.mark.parametrize(
    ("prediction", "error"),
    [
        ({"id": "t-0", "call": ""}, "no call"),
        ({"id": "t-0"}, "prediction has neither 'call' nor 'tool_calls'"),
        (
            {"id": "t-0", "tool_calls": [{"name": "f", "arguments": "{bad"}]},
            "tool_calls[0]: arguments of 'f' are not valid JSON",
        ),
        ({"id": "t-0", "call": "f(x=1)\nf(x=1)"}, "calls differ from the reference"),
        # read, never run: eval is one more (undefined) call whose value is None
        (
            {"id": "t-0", "call": "f(x=eval('1'))"},
            "eval: positional arguments cannot be named without the function's definition",
        ),
    ],
)
def test_unreadable_predictions_are_wrong_with_a_reason(prediction, error):
    reference = {
        "id": "t-0",
        "meta": {"dataset": "t"},
        "messages": [{"role": "assistant", "tool_calls": [{"name": "f", "arguments": {"x": 1}}]}],
    }
    item = score_nexus([prediction], [reference])["per_item"][0]
    assert (item["correct"], item["error"]) == (False, error)


def test_whole_empty_predictions_score_zero_with_their_reasons(fixtures):
    references = load_jsonl(fixtures / "evaluation" / "nexus" / "references.jsonl")
    ids = [row["id"] for row in references]
    tasks = {"cve_cpe": 1, "emailrep": 1, "virustotal": 1, "toolalpaca": 1, "toolllm": 2}
    nothing = score_nexus([], references)  # an empty prediction file
    assert [(i["id"], i["correct"], i["error"], i["predicted"]) for i in nothing["per_item"]] == [
        (i, False, "no prediction", None) for i in ids
    ]
    assert nothing["tasks"] == {task: {"total": n, "correct": 0, "accuracy": 0.0} for task, n in tasks.items()}
    assert (nothing["weighted_average"], nothing["unweighted_average"]) == (0.0, 0.0)
    assert nothing["missing_prediction_ids"] == ids
    for empty in ({"call": ""}, {"call": "   \n"}, {"tool_calls": []}):  # rows present, no call in any
        report = score_nexus([{"id": i, **empty} for i in ids], references)
        assert [(i["correct"], i["error"], i["predicted"]) for i in report["per_item"]] == [(False, "no call", [])] * 6
        assert (report["weighted_average"], report["unweighted_average"], report["missing_prediction_ids"]) == (
            0.0,
            0.0,
            [],
        )
    none = score_nexus([], [])
    assert (none["tasks"], none["weighted_average"], none["unweighted_average"]) == ({}, None, None)
