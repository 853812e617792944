"""Shared scorer helpers: JSON normalisation of arguments, call multisets, joining rows by id."""

from __future__ import annotations

import pytest

from train.evaluation.calls import (
    Call,
    CallFormatError,
    canonical,
    join_by_id,
    overlap,
    read_call,
    read_calls,
    same_calls,
    same_names,
    triple_multiset,
)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (1, 1.0),
        (-0.0, 0),
        ({"a": 1, "b": [1, 2]}, {"b": [1.0, 2], "a": 1.0}),
        ({"x": {"k": 2, "j": None}}, {"x": {"j": None, "k": 2.0}}),
        ("é", "é"),
    ],
)
def test_equal_after_normalisation(a, b):
    assert canonical(a) == canonical(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (True, 1),
        (False, 0),
        ("1", 1),
        ([1, 2], [2, 1]),
        (1.5, 1),
        (None, "null"),
        ({"a": 1}, {"a": 1, "b": None}),
    ],
)
def test_different_after_normalisation(a, b):
    assert canonical(a) != canonical(b)


def test_read_call_layouts():
    assert read_call({"name": "f", "arguments": {"a": 1}}) == Call("f", {"a": 1})
    assert read_call({"id": "c0", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}) == Call(
        "f", {"a": 1}
    )
    assert read_call({"name": "f"}) == Call("f", {})
    assert read_call({"name": "f", "arguments": None}) == Call("f", {})
    assert read_calls(None) == []


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("f(x=1)", "tool_calls: expected a list, got str"),
        ([{"arguments": {}}], "tool_calls[0]: expected a non-empty string 'name'"),
        ([{"name": "f", "arguments": "{bad"}], "tool_calls[0]: arguments of 'f' are not valid JSON"),
        ([{"name": "f", "arguments": [1]}], "tool_calls[0]: arguments of 'f' must be an object, got list"),
        ([{"name": "f"}, 3], "tool_calls[1]: expected an object, got int"),
    ],
)
def test_malformed_calls(value, message):
    with pytest.raises(CallFormatError) as err:
        read_calls(value)
    assert str(err.value) == message


def test_call_multisets_pair_repeated_tools_by_arguments():
    f1, f2 = Call("f", {"x": 1}), Call("f", {"x": 2})
    assert same_calls([f1, f2], [Call("f", {"x": 2.0}), Call("f", {"x": 1})])
    assert not same_calls([f1, f1], [f1, f2])  # same names, but one expected call is never made
    assert same_names([f1, f1], [f1, f2])
    assert not same_names([f1], [f1, f1])  # a call made once where two are expected
    assert not same_calls([f1, f2, f2], [f1, f2])


def test_triples_and_overlap():
    predicted = triple_multiset([Call("f", {"a": 1, "b": "x"}), Call("g", {"a": 1})])
    gold = triple_multiset([Call("f", {"b": "x", "a": 1.0}), Call("f", {"a": 1})])
    assert overlap(predicted, gold) == 2  # f.a=1 and f.b="x"; g.a is another tool's key
    assert sum(predicted.values()) == 3 and sum(gold.values()) == 3


def test_join_by_id_lists_everything_not_paired():
    predictions = [{"id": "a", "n": 1}, {"id": "a", "n": 2}, {"id": "z"}, {"no": "id"}, "text", {"id": True}]
    references = [{"id": "a"}, {"id": "b"}, {"id": "b"}, [1]]
    joined = join_by_id(predictions, references)
    assert joined.pairs == [({"id": "a"}, {"id": "a", "n": 1}), ({"id": "b"}, None)]
    assert joined.issues() == {
        "missing_prediction_ids": ["b"],
        "unknown_prediction_ids": ["z"],
        "duplicate_prediction_ids": ["a"],
        "duplicate_reference_ids": ["b"],
        "rows_without_id": [
            {"file": "predictions", "index": 3, "reason": "not an object with a string 'id'"},
            {"file": "predictions", "index": 4, "reason": "not an object with a string 'id'"},
            {"file": "predictions", "index": 5, "reason": "not an object with a string 'id'"},
            {"file": "references", "index": 3, "reason": "not an object with a string 'id'"},
        ],
    }
