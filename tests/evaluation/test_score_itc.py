"""ITC metrics (seed 002 §5.2, Appendix B, Table 4) on hand-built items with hand-computed values."""

from __future__ import annotations

import json

import pytest

from train.evaluation.calls import Call
from train.evaluation.itc import error_breakdown, paired_calls, precision_recall_f1, read_prediction, score_itc


def fake_language(text: str) -> str:
    """Deterministic stand-in for langid in the arithmetic tests: "FR:" prefix, CJK, else English."""
    if text.startswith("FR:"):
        return "fr"
    if any("\u4e00" <= char <= "\u9fff" for char in text):
        return "zh"
    return "en"


def reference(
    item_id: str,
    calls: list[tuple[str, dict]],
    query: str = "Please help.",
    tools=(),
    language: str | None = "en",
    **meta,
) -> dict:
    return {
        "id": item_id,
        "tools": [
            {"type": "function", "function": {"name": name, "description": "", "parameters": {}}} for name in tools
        ],
        "messages": [
            {"role": "user", "content": query},
            {"role": "assistant", "content": "gold thought", "tool_calls": [
                {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}
                for i, (name, args) in enumerate(calls)
            ]},
        ],
        "meta": {**({"language": language} if language else {}), **meta},
    }  # fmt: skip


def answer(thought: str, action: str, wrap: str = "{}") -> str:
    body = json.dumps({"Thought": thought, "Action": action}, ensure_ascii=False)
    return wrap.replace("{}", body)


REFERENCES = [
    reference("r1", [("translate", {"text": "hi", "target": "fr"})], tools=("translate", "detect")),
    reference("r2", [("latest", {"from": "EUR", "to": "USD"}), ("currencies", {})], tools=("latest", "currencies")),
    reference("r3", [("f", {"a": 1}), ("f", {"a": 2})], tools=("f",), language="fr"),
    reference("r4", [("weather", {"city": "北京"})], tools=("weather",), language="zh"),
    reference("r5", [], query="Hello?", language=None),  # tools insufficient: the gold Action is []
    reference("r6", [("search", {"q": "x"})], tools=("search",)),
    reference("r7", [("g", {"k": True})], tools=("g",)),
    reference("r8", [("h", {"k": "v"})], tools=("h", "detect")),
    reference(
        "r9",
        [("translate1", {"text": "x", "target": "fr"})],
        tools=("translate1",),
        renamed_calls={"Google Translate": "translate1"},
    ),
]
PREDICTIONS = [
    {"id": "r1", "content": answer("I will translate.", "[translate(text='hi', target='fr')]", "json{}")},
    # fenced; hallucinated convert(), wrong 'to', extra 'amount'
    {
        "id": "r2",
        "content": answer(
            "Rates.", "[latest(from='EUR', to='AUD', amount=1), currencies(), convert(x=1)]", "```json\n{}\n```"
        ),
    },
    {"id": "r3", "content": answer("FR: je calcule", "[f(a=1.0)]", "json({})")},  # 1 == 1.0; one repeated call short
    # broken JSON: fails FM, its Action's call still credited (as the paper's tables credit watt-tool's calls)
    {"id": "r4", "content": '{"Thought": "我来查天气", "Action": "[weather(city=\'北京\')]"'},
    {"id": "r5", "content": "I cannot help with that."},  # plain text
    {"id": "r6", "content": answer("我来搜索", "[search('x')]")},  # positional argument
    # r7: no prediction
    {
        "id": "r8",
        "content": "a thought",
        "tool_calls": [{"name": "h", "arguments": {"k": "v"}}, {"name": "detect", "arguments": {}}],
    },
    {"id": "r9", "content": answer("FR: traduire", "[Google Translate(text='x')]")},  # renamed; 'target' missing
]


@pytest.fixture(scope="module")
def result() -> dict:
    return score_itc(PREDICTIONS, REFERENCES, language_of=fake_language)


def test_appendix_b_metrics(result):
    assert result["overall"] == {
        "lm": pytest.approx(6 / 9),  # r1 r2 r3 r4 r5 r8; r6 (zh thought, en query), r7 (none), r9 (fr vs en) miss
        "fm": pytest.approx(5 / 9),  # r1 r2 r3 r8 r9
        "items": 9,
        "matching": "multiset",
    }
    assert result["micro"] == {
        "tool_p": pytest.approx(7 / 9),
        "tool_r": pytest.approx(7 / 10),
        "tool_f1": pytest.approx(14 / 19),  # 2 * (7/9) * (7/10) / (133/90)
        "ti_p": pytest.approx(7 / 10),
        "ti_r": pytest.approx(7 / 12),
        "ti_f1": pytest.approx(7 / 11),  # 2 * (7/10) * (7/12) / (77/60)
    }
    assert result["counts"]["tools"] == {"predicted": 9, "gold": 10, "correct": 7}  # r4's call credited
    assert result["counts"]["params"] == {"predicted": 10, "gold": 12, "correct": 7}


def test_per_sample_macro_metrics(result):
    """Each item's (tool P, R, F1 | invocation P, R, F1), averaged over the 9 items; r5-r7 fail FM with no call
    found in them: all 0; r4 fails FM but its Action's call is credited.

    r1 and r4 (1, 1, 1 | 1, 1, 1); r2 tools 2 of 3 predicted, 2 of 2 gold (2/3, 1, 4/5), triples 1 of 4, 1 of 2
    (1/4, 1/2, 1/3); r3 (1, 1/2, 2/3 | 1, 1/2, 2/3); r8 (1/2, 1, 2/3 | 1, 1, 1); r9 (1, 1, 1 | 1, 1/2, 2/3).
    """
    assert result["macro"] == {
        "tool_p": pytest.approx((1 + 2 / 3 + 1 + 1 + 1 / 2 + 1) / 9),
        "tool_r": pytest.approx((1 + 1 + 1 / 2 + 1 + 1 + 1) / 9),
        "tool_f1": pytest.approx((1 + 4 / 5 + 2 / 3 + 1 + 2 / 3 + 1) / 9),
        "ti_p": pytest.approx((1 + 1 / 4 + 1 + 1 + 1 + 1) / 9),
        "ti_r": pytest.approx((1 + 1 / 2 + 1 / 2 + 1 + 1 + 1 / 2) / 9),
        "ti_f1": pytest.approx((1 + 1 / 3 + 2 / 3 + 1 + 1 + 2 / 3) / 9),
    }
    rows = {item["id"]: item["prf"] for item in result["per_item"]}
    assert rows["r2"] == pytest.approx(
        {"tool_p": 2 / 3, "tool_r": 1.0, "tool_f1": 0.8, "ti_p": 0.25, "ti_r": 0.5, "ti_f1": 1 / 3}
    )
    assert rows["r5"] == dict.fromkeys(rows["r5"], 0.0)  # fails FM although its gold is []: not an answer


def test_language_breakdown_and_the_non_english_block(result):
    assert {language: block["items"] for language, block in result["by_language"].items()} == {
        "en": 7, "fr": 1, "zh": 1,
    }  # fmt: skip
    assert result["by_language"]["zh"] == {
        "items": 1, "lm": 1.0, "fm": 0.0,  # r4 fails FM, its call is credited
        "micro": dict.fromkeys(("tool_p", "tool_r", "tool_f1", "ti_p", "ti_r", "ti_f1"), 1.0),
        "macro": dict.fromkeys(("tool_p", "tool_r", "tool_f1", "ti_p", "ti_r", "ti_f1"), 1.0),
    }  # fmt: skip
    non_english = result["non_english"]  # r3 (fr) and r4 (zh): Table 7's test set is the non-English queries
    assert (non_english["items"], non_english["lm"], non_english["fm"]) == (2, 1.0, 0.5)
    assert non_english["micro"]["tool_r"] == pytest.approx(2 / 3)  # 1 of r3's 2 + r4's 1 gold calls
    assert non_english["macro"]["tool_r"] == pytest.approx(3 / 4)  # (1/2 + 1) / 2
    assert "by_task_type" not in result  # no reference has meta.task_type


def test_table_4_error_shares(result):
    assert result["counts"]["errors"] == {
        "hallucinated_tools": 1,  # r2 convert
        "missing_tools": 3,  # r3 second f, r6, r7 (r4's call is credited)
        "extra_tools": 1,  # r8 detect (offered, not gold)
        "incorrect_params": 1,  # r2 latest.to
        "missing_params": 1,  # r9 target
        "extra_params": 1,  # r2 latest.amount (convert.x is a selection error, not counted again)
    }
    assert result["error_shares"] == {
        "selection": {"hallucinated_tools": 1 / 5, "missing_tools": 3 / 5, "extra_tools": 1 / 5},
        "invocation": {"incorrect_params": 1 / 3, "missing_params": 1 / 3, "extra_params": 1 / 3},
    }


def test_per_item(result):
    rows = {item["id"]: item for item in result["per_item"]}
    assert [(i, rows[i]["format_ok"], rows[i]["language_ok"], rows[i]["correct"]) for i in rows] == [
        ("r1", True, True, True),
        ("r2", True, True, False),
        ("r3", True, True, False),
        ("r4", False, True, False),
        ("r5", False, True, False),
        ("r6", False, False, False),
        ("r7", False, False, False),
        ("r8", True, True, False),
        ("r9", True, False, False),
    ]
    assert rows["r4"]["thought_language"] == "zh"  # read from the broken JSON's "Thought"
    assert rows["r5"]["error"] == 'answer: not a {"Thought", "Action"} JSON answer'
    assert rows["r6"]["error"] == "answer.Action: search: positional arguments have no parameter names"
    assert rows["r7"]["error"] == "missing prediction" and rows["r7"]["thought_language"] is None
    assert rows["r4"]["error"].startswith("answer: answer is not a json{Thought, Action} object")


def test_paired_calls_take_the_closest_call():
    gold = [Call("f", {"a": 1, "b": 2}), Call("f", {"a": 3})]
    predicted = [Call("f", {"a": 3}), Call("f", {"a": 1, "b": 9})]
    assert paired_calls(predicted, gold) == [(gold[0], predicted[1]), (gold[1], predicted[0])]
    assert error_breakdown(predicted, gold, {"f"}) == {
        "hallucinated_tools": 0, "extra_tools": 0, "missing_tools": 0,
        "incorrect_params": 1, "missing_params": 0, "extra_params": 0,
    }  # fmt: skip


def test_duplicated_calls_are_extra_tools():
    gold = [Call("f", {"a": 1})]
    predicted = [Call("f", {"a": 1}), Call("f", {"a": 1})]
    assert error_breakdown(predicted, gold, {"f"})["extra_tools"] == 1
    result = score_itc(
        [{"id": "x", "content": answer("t", "[f(a=1), f(a=1)]")}],
        [reference("x", [("f", {"a": 1})], tools=("f",))],
        language_of=fake_language,
    )
    assert result["counts"]["tools"] == {"predicted": 2, "gold": 1, "correct": 1}  # recall cannot pass 1
    assert result["counts"]["params"] == {"predicted": 2, "gold": 1, "correct": 1}


def test_without_offered_tools_every_stray_name_is_hallucinated():
    assert error_breakdown([Call("g")], [Call("f")], set()) == {
        "hallucinated_tools": 1, "extra_tools": 0, "missing_tools": 1,
        "incorrect_params": 0, "missing_params": 0, "extra_params": 0,
    }  # fmt: skip


def test_precision_recall_edges():
    assert precision_recall_f1(0, 0, 0) == {"p": None, "r": None, "f1": None}
    assert precision_recall_f1(0, 0, 4) == {"p": 0.0, "r": 0.0, "f1": 0.0}
    assert precision_recall_f1(0, 3, 0) == {"p": 0.0, "r": 0.0, "f1": 0.0}


def test_prediction_layouts():
    assert read_prediction({"content": answer("t", "")}) == {
        "format_ok": True,
        "calls": [],
        "thought": "t",
        "error": None,
    }
    assert read_prediction({"content": answer("t", "[]")})["format_ok"] is True
    assert read_prediction({"content": None}) == {
        "format_ok": False,
        "calls": [],
        "thought": "",
        "error": "no 'content' text",
    }
    broken = read_prediction({"content": "t", "tool_calls": [{"arguments": {}}]})
    assert broken == {
        "format_ok": False,
        "calls": [],
        "thought": "t",
        "error": "tool_calls[0]: expected a non-empty string 'name'",
    }
    assert (
        read_prediction({"content": '{"Thought": 3, "Action": "[]"}'})["error"]
        == "answer.Thought: expected a string, got int"
    )
    assert (
        read_prediction({"content": answer("t", "[f(x=y)]")})["error"]
        == "answer.Action: item 0: f: argument 'x': a variable y is not a literal"
    )


def test_pathological_model_text_is_wrong_not_a_crash():
    huge = read_prediction({"content": '{"Thought": "t", "Action": "[]", "n": ' + "1" * 5000 + "}"})
    assert (huge["format_ok"], huge["thought"]) == (False, "t")
    assert huge["error"].startswith(
        "answer: answer is not a json{Thought, Action} object: Exceeds the limit (4300 digits)"
    )
    deep = read_prediction({"content": '{"Thought": "t", "Action": ' + "[" * 100_000})
    assert deep["format_ok"] is False and deep["thought"] == "t"
    assert read_prediction({"content": "t", "tool_calls": [{"name": "f", "arguments": '{"a": ' + "9" * 5000 + "}"}]})[
        "error"
    ] == ("tool_calls[0]: arguments of 'f' are not valid JSON")


def test_empty_predictions():
    result = score_itc([], REFERENCES[:2], language_of=fake_language)
    assert result["overall"] == {"lm": 0.0, "fm": 0.0, "items": 2, "matching": "multiset"}
    assert result["micro"] == result["macro"] == dict.fromkeys(result["micro"], 0.0)
    empty = score_itc([], [], language_of=fake_language)
    assert empty["overall"]["fm"] is None and empty["macro"] == dict.fromkeys(empty["macro"])


def test_gold_turn_skips_a_final_plain_reply():
    conversation = reference("n", [("a", {"x": 1})], tools=("a",))
    conversation["messages"] += [
        {"role": "tool", "tool_call_id": "call_0", "name": "a", "content": "{}"},
        {"role": "assistant", "content": "All done."},
    ]
    conversation["meta"]["raw_answers"] = [answer("t", "[a(x=1)]", "json{}"), "All done."]
    result = score_itc([{"id": "n", "content": answer("t", "[a(x=1)]")}], [conversation], language_of=fake_language)
    assert result["per_item"][0]["correct"] is True
    result = score_itc([], [{**conversation, "messages": conversation["messages"][:1]}], language_of=fake_language)
    assert result["reference_errors"] == [
        {"id": "n", "reason": "messages: no assistant answer holds the gold Thought/Action"}
    ]


def test_language_matching_with_langid():
    """The real langid: English, Chinese and French thoughts against the query's language."""
    references = [
        reference("en", [], query="Could you tell me the weather forecast for London tomorrow morning?", language=None),
        reference("zh", [], query="请帮我查询明天北京的天气预报。", language=None),
        reference("fr", [], query="Pouvez-vous traduire cette phrase en anglais pour mon voyage ?", language=None),
    ]
    predictions = [
        {"id": "en", "content": answer("I will look up the weather forecast for London for tomorrow morning.", "[]")},
        {"id": "zh", "content": answer("I will look up the weather forecast for Beijing for tomorrow.", "[]")},
        {"id": "fr", "content": answer("Je vais traduire cette phrase en anglais pour votre voyage.", "[]")},
    ]
    rows = score_itc(predictions, references)["per_item"]
    assert [(r["query_language"], r["thought_language"], r["language_ok"]) for r in rows] == [
        ("en", "en", True),
        ("zh", "en", False),
        ("fr", "fr", True),
    ]


def test_bracket_search_stops_at_its_budget_and_keeps_what_it_found():
    from train.evaluation.itc import bracketed

    text = "It's [f(a=1)] then [[[ [g(b=2)]"
    assert bracketed(text) == ["[f(a=1)]", "[g(b=2)]"]  # a quote before a bracket does not hide it
    assert bracketed(text, budget=9) == ["[f(a=1)]"]  # 8 characters for the first, then the budget is spent
    assert bracketed("[" * 50 + "[g()]", budget=40) == []  # unclosed brackets eat the budget: no candidates
