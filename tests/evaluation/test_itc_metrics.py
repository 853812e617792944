"""ITC per-sample (macro) metrics, the Seal-Tools matching mode, text answers and both reference shapes, with
hand-computed values (``train/evaluation/itc_metrics.py``, ``train/evaluation/itc.py``)."""

from __future__ import annotations

import json

import pytest

from train.evaluation.calls import Call
from train.evaluation.itc import read_prediction, reference_parts, score_itc, seal_correct
from train.evaluation.itc_metrics import PRF_KEYS

SYSTEM = "You are an advanced AI assistant with expertise in: 1. Intelligent tool and API selection ..."


def english(text: str) -> str:
    return "zh" if any("\u4e00" <= char <= "\u9fff" for char in text) else "en"


def answer(action: str, thought: str = "I will call the API.", prefix: str = "") -> str:
    return prefix + json.dumps({"Thought": thought, "Action": action}, ensure_ascii=False)


def native(item_id: str, calls: list[tuple[str, dict]], **meta) -> dict:
    """A reference as the ITC reader writes it: the Thought as content, the Action as tool_calls."""
    tool_calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}
        for i, (name, args) in enumerate(calls)
    ]
    return {
        "id": item_id,
        "tools": [],
        "messages": [
            {"role": "user", "content": "Please help."},
            {"role": "assistant", "content": "thought", "tool_calls": tool_calls},
        ],
        "meta": {"language": "en", **meta},
    }


def text(item_id: str, *turns: dict, **meta) -> dict:
    """A reference as the ITC builder writes it: system prompt, the answer as the assistant's TEXT."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Please help."}, *turns]
    return {"id": item_id, "tools": [], "messages": messages, "meta": {"language": "en", **meta}}


def said(content: str) -> dict:
    return {"role": "assistant", "content": content}


def score(predictions: list[tuple[str, str]], references: list[dict], **options) -> dict:
    rows = [{"id": item_id, "content": content} for item_id, content in predictions]
    return score_itc(rows, references, language_of=english, **options)


# ---------------------------------------------------------------- macro vs micro


def test_macro_and_micro_on_two_items():
    """a: gold f(a=1, b=2), predicted f(a=1): triples P 1, R 1/2, F1 2/3. b: gold f(a=1), predicted f(a=1, b=2):
    P 1/2, R 1, F1 2/3. Macro: P = R = 3/4, F1 = 2/3, below both (Table 3's Qwen2.5-7B: 42.76 / 43.37 / 42.71).
    Micro: 2 correct of 3 predicted and 3 gold: P = R = F1 = 2/3 (a harmonic mean lies between P and R)."""
    references = [native("a", [("f", {"a": 1, "b": 2})]), native("b", [("f", {"a": 1})])]
    result = score([("a", answer("[f(a=1)]")), ("b", answer("[f(a=1, b=2)]"))], references)
    assert result["macro"] == {"tool_p": 1.0, "tool_r": 1.0, "tool_f1": 1.0, "ti_p": 0.75, "ti_r": 0.75, "ti_f1": 2 / 3}
    assert result["macro"]["ti_f1"] < min(result["macro"]["ti_p"], result["macro"]["ti_r"])
    assert result["micro"] == {
        "tool_p": 1.0,
        "tool_r": 1.0,
        "tool_f1": 1.0,
        "ti_p": 2 / 3,
        "ti_r": 2 / 3,
        "ti_f1": 2 / 3,
    }


def test_macro_conventions_for_empty_items_and_format_failures():
    """c: [] where [] is right: 1 everywhere. d: a call without parameters, right: tools 1, invocation 1 (no
    triple either side). e: no call where g() is gold: 0, invocation too (no triple either side, but the calls
    are wrong: not a vacuous 1). f: fails FM where [] is gold: 0 (not an answer)."""
    references = [native("c", []), native("d", [("g", {})]), native("e", [("g", {})]), native("f", [])]
    result = score([("c", answer("[]")), ("d", answer("[g()]")), ("e", answer("[]")), ("f", "no JSON")], references)
    rows = {item["id"]: item["prf"] for item in result["per_item"]}
    assert rows == {
        "c": dict.fromkeys(rows["c"], 1.0),
        "d": dict.fromkeys(rows["d"], 1.0),
        "e": dict.fromkeys(rows["e"], 0.0),
        "f": dict.fromkeys(rows["f"], 0.0),
    }
    assert result["macro"] == dict.fromkeys(PRF_KEYS, 0.5)
    # micro: 1 correct of 1 predicted and 2 gold tools; no triple anywhere: null
    assert result["micro"] == {
        "tool_p": 1.0,
        "tool_r": 0.5,
        "tool_f1": 2 / 3,
        "ti_p": None,
        "ti_r": None,
        "ti_f1": None,
    }


# ---------------------------------------------------------------- Seal-Tools matching


def test_seal_matching_does_not_consume_gold_calls():
    gold = [Call("f", {"a": 1}), Call("f", {"a": 2})]
    assert seal_correct([Call("f", {"a": 1}), Call("f", {"a": 2})], gold) == (2, 1)  # both meet f(a=1)
    assert seal_correct([Call("f", {"a": 1})] * 3, gold) == (3, 3)
    references = [native("r", [("f", {"a": 1}), ("f", {"a": 2})])]
    prediction = [("r", answer("[f(a=1), f(a=1), f(a=1)]"))]
    multiset, seal = score(prediction, references), score(prediction, references, matching="seal")
    assert (multiset["counts"]["tools"], multiset["counts"]["params"]) == (
        {"predicted": 3, "gold": 2, "correct": 2},
        {"predicted": 3, "gold": 2, "correct": 1},
    )
    assert (seal["counts"]["tools"], seal["counts"]["params"]) == (
        {"predicted": 3, "gold": 2, "correct": 3},
        {"predicted": 3, "gold": 2, "correct": 3},
    )
    assert seal["micro"]["tool_r"] == seal["micro"]["ti_r"] == 1.5  # recall above 1, as Seal-Tools counts
    assert multiset["micro"]["tool_r"] == 1.0 and seal["overall"]["matching"] == "seal"


def test_seal_matching_compares_values_as_strings():
    references = [native("r", [("f", {"a": 1}), ("g", {"b": 2})])]
    prediction = [("r", answer("[f(a='1'), g(b=2.0)]"))]
    multiset, seal = score(prediction, references), score(prediction, references, matching="seal")
    assert multiset["counts"]["params"]["correct"] == 1  # 2.0 == 2 after JSON normalisation; "1" != 1
    assert seal["counts"]["params"]["correct"] == 1  # str("1") == str(1); "2.0" != "2"
    assert seal_correct([Call("f", {"a": "1"})], [Call("f", {"a": 1})]) == (1, 1)
    assert seal_correct([Call("f", {"a": 2.0})], [Call("f", {"a": 2})]) == (1, 0)
    with pytest.raises(ValueError, match="matching must be one of multiset, seal, got 'exact'"):
        score(prediction, references, matching="exact")


# ---------------------------------------------------------------- text answers


def test_text_answer_format_matching():
    valid = read_prediction({"content": answer("[weather(city='Paris')]", prefix="json")})
    assert (valid["format_ok"], valid["calls"], valid["thought"]) == (
        True,
        [Call("weather", {"city": "Paris"})],
        "I will call the API.",
    )
    broken = read_prediction({"content": '{"Thought": "I will call the API.", "Action": "[weather(city=1)]"'})
    # fails FM, its Action's call still read (credited as the paper's tables credit them, #27 item 8)
    assert (broken["format_ok"], broken["calls"], broken["thought"]) == (
        False,
        [Call("weather", {"city": 1})],
        "I will call the API.",
    )
    assert broken["error"].startswith("answer: answer is not a json{Thought, Action} object")
    prose = read_prediction({"content": answer("I would call the weather API for Paris")})
    assert (prose["format_ok"], prose["calls"]) == (False, [])
    assert prose["error"].startswith("answer.Action: ")
    not_calls = read_prediction({"content": answer("[1, 2]")})
    assert not_calls["format_ok"] is False and not_calls["error"].startswith("answer.Action: ")
    listed = read_prediction({"content": json.dumps({"Thought": "t", "Action": ["weather(city='Paris')"]})})
    assert listed["error"] == "answer.Action: expected a string, got list"


# ---------------------------------------------------------------- references in both shapes


def test_references_in_both_shapes_give_the_same_gold():
    calls = [("latest", {"from": "EUR", "to": "USD"}), ("currencies", {})]
    from_tool_calls = reference_parts(native("n", calls))
    written = text("t", said(answer("[latest(from='EUR', to='USD'), currencies()]", prefix="json")))
    from_text = reference_parts(written)
    assert from_text["gold"] == from_tool_calls["gold"] == [Call(name, args) for name, args in calls]
    renamed = text("r", said(answer("[Google Translate(text='x')]")), renamed_calls={"Google Translate": "tr1"})
    assert reference_parts(renamed)["gold"] == [Call("tr1", {"text": "x"})]
    assert reference_parts(text("e", said(answer("[]"))))["gold"] == []


def test_nested_text_reference_scores_its_last_answer_not_the_final_reply():
    nested = text(
        "nested",
        said(answer("[find_city(name='Lyon')]")),
        {"role": "tool", "content": '{"id": 7}'},
        said(answer("[weather(city_id=7)]")),
        {"role": "tool", "content": '{"temp": 21}'},
        said("It is 21 degrees in Lyon."),
        task_type="nested",
    )
    assert reference_parts(nested)["gold"] == [Call("weather", {"city_id": 7})]
    result = score([("nested", answer("[weather(city_id=7)]"))], [nested])
    assert result["per_item"][0]["correct"] is True and result["by_task_type"]["nested"]["macro"]["ti_f1"] == 1.0


def test_broken_gold_text_is_a_reference_error():
    result = score([("b", answer("[]"))], [text("b", said('{"Thought": "t", "Action": "[f(x=]"}'))])
    assert [error["id"] for error in result["reference_errors"]] == ["b"]
    assert result["reference_errors"][0]["reason"].startswith("messages[2].content: answer.Action: ")


def test_task_type_breakdown():
    references = [
        text("s", said(answer("[f(a=1)]")), task_type="single"),
        text("p", said(answer("[f(a=1), g(b=2)]")), task_type="parallel"),
        text("u", said(answer("[f(a=1)]"))),
    ]
    result = score([("s", answer("[f(a=1)]")), ("p", answer("[f(a=1)]")), ("u", "nothing")], references)
    assert sorted(result["by_task_type"]) == ["parallel", "single", "unlabelled"]
    assert result["by_task_type"]["parallel"]["macro"]["tool_r"] == 0.5
    assert result["by_task_type"]["single"]["macro"]["tool_f1"] == 1.0
    assert result["by_task_type"]["unlabelled"]["fm"] == 0.0


def test_a_builder_row_offers_its_meta_apis_and_its_query_is_the_first_user_turn():
    """The ITC builder's rows have no ``tools`` (the APIs are in the system prompt) and a nested task's later user
    turns carry tool results: an offered API called once too often is *extra*, not *hallucinated*, and the query
    is the first user turn."""
    row = text(
        "n",
        said(answer("[find_city(name='Lyon')]")),
        {"role": "user", "content": 'Tool results: {"id": 7}'},
        said(answer("[weather(city_id=7)]")),
        task_type="nested",
        apis=["find_city", "weather"],
    )
    parts = reference_parts(row)
    assert parts["offered"] == {"find_city", "weather"} and parts["query"] == "Please help."
    result = score([("n", answer("[weather(city_id=7), find_city(name='Paris'), stock(s='X')]"))], [row])
    counts = result["per_item"][0]["errors"]
    assert counts["extra_tools"] == 1 and counts["hallucinated_tools"] == 1
