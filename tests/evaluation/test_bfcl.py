"""Hand-computed behaviour of the BFCL scorer (train/evaluation/bfcl/scorer.py); parity lives in test_bfcl_parity.py."""

from __future__ import annotations

import importlib.util
import json
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from train.evaluation import SCORERS, get_scorer
from train.evaluation.bfcl.literals import UnsupportedType, java_value, js_value
from train.evaluation.bfcl.scorer import canonical_category, score_bfcl
from train.evaluation.bfcl.summary import summarize_bfcl
from train.evaluation.bfcl.values import normalize_string


def _read(path: Path) -> list:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _fn(name: str, properties: dict, required: list | None = None) -> dict:
    return {"name": name, "parameters": {"type": "dict", "properties": properties, "required": required or []}}


def _one(category: str, functions: list, ground_truth: list | None, result, **options) -> dict:
    answers = None if ground_truth is None else [{"id": "q", "ground_truth": ground_truth}]
    scored = score_bfcl(
        [{"id": "q", "result": result}], [{"id": "q", "function": functions}], answers, category, **options
    )
    return scored["per_item"][0]


STR = {"type": "string"}
INT = {"type": "integer"}
FLOAT = {"type": "float"}
F = [_fn("f", {"a": STR, "b": INT}, ["a"])]
GT = [{"f": {"a": ["x"], "b": [1, ""]}}]


# ---- registry and names ----------------------------------------------------------------------------------


def test_registry_imports_the_bfcl_scorer_lazily():
    assert "bfcl" in SCORERS and get_scorer("bfcl") is score_bfcl
    with pytest.raises(
        ValueError, match=r"unknown scorer 'bfcl2'; valid scorers: heldout, metabench, toolselect, bfcl,"
    ):
        get_scorer("bfcl2")


@pytest.mark.parametrize(
    "name, canonical",
    [
        ("simple", "simple_python"), ("simple_python", "simple_python"), ("BFCL_v2_simple", "simple_python"),
        ("java", "simple_java"), ("BFCL_v4_simple_java", "simple_java"), ("javascript", "simple_javascript"),
        ("parallel_multiple", "parallel_multiple"), ("BFCL_v2_live_relevance", "live_relevance"),
    ],
)  # fmt: skip
def test_both_category_naming_schemes(name, canonical):
    assert canonical_category(name) == canonical


def test_categories_needing_execution_are_refused_by_name():
    with pytest.raises(
        ValueError,
        match=r"unknown or unsupported BFCL category 'exec_simple'; scorable categories: "
        r"simple_python, simple_java, .*, live_relevance, simple, java, javascript",
    ):
        canonical_category("exec_simple")


def test_ast_category_without_answers_is_refused():
    with pytest.raises(ValueError, match="BFCL category multiple needs its possible-answer rows"):
        score_bfcl([], [], None, "multiple")


# ---- whole categories --------------------------------------------------------------------------------------


def test_fixture_category_scores_exactly(fixtures):
    folder = fixtures / "evaluation" / "bfcl"
    scored = score_bfcl(
        _read(folder / "mini_simple_predictions.jsonl"),
        _read(folder / "mini_simple_questions.jsonl"),
        _read(folder / "mini_simple_answers.jsonl"),
        "simple",
    )
    assert (scored["category"], scored["correct"], scored["total"], scored["accuracy"]) == ("simple_python", 2, 5, 0.4)
    assert [(item["id"], item["valid"], item["error_type"]) for item in scored["per_item"]] == [
        ("mini_0", True, ""),  # "san-francisco" == "San Francisco"; the optional unit left out
        ("mini_1", True, ""),  # radius 2 promoted to 2.0
        ("mini_2", False, "type_error:simple"),  # "false" is not a boolean
        ("mini_3", False, "value_error:dict_value"),  # seats 3 where 2 is expected
        ("mini_4", False, "missing_prediction"),
    ]
    assert scored["per_item"][4]["error"] == ["No prediction for 'mini_4'."]
    assert scored["duplicate_prediction_ids"] == ["mini_0"]
    assert scored["unknown_prediction_ids"] == ["not_a_question"]
    assert scored["unreadable_predictions"] == [
        {"index": 6, "reason": "prediction is not an object with an 'id'"},
        {"index": 7, "reason": "prediction is not an object with an 'id'"},
    ]


def test_empty_predictions_score_every_question_wrong():
    questions = [{"id": "a", "function": F}, {"id": "b", "function": F}]
    answers = [{"id": "a", "ground_truth": GT}, {"id": "b", "ground_truth": GT}]
    scored = score_bfcl([], questions, answers, "simple_python")
    assert (scored["correct"], scored["total"], scored["accuracy"]) == (0, 2, 0.0)
    assert {item["error_type"] for item in scored["per_item"]} == {"missing_prediction"}


def test_no_questions_is_an_empty_score():
    scored = score_bfcl([{"id": "x", "result": []}], [], [], "parallel")
    assert (scored["correct"], scored["total"], scored["accuracy"], scored["per_item"]) == (0, 0, 0.0, [])
    assert scored["unknown_prediction_ids"] == ["x"]


def test_answers_are_matched_by_id_then_by_position():
    questions = [{"id": "a", "function": F}, {"id": "b", "function": F}]
    by_id = [{"id": "b", "ground_truth": [{"f": {"a": ["y"]}}]}, {"id": "a", "ground_truth": GT}]
    predictions = [{"id": "a", "result": [{"f": {"a": "x"}}]}, {"id": "b", "result": [{"f": {"a": "y"}}]}]
    assert score_bfcl(predictions, questions, by_id, "simple")["correct"] == 2
    other_ids = [{"id": "0", "ground_truth": GT}, {"id": "1", "ground_truth": [{"f": {"a": ["y"]}}]}]
    assert score_bfcl(predictions, questions, other_ids, "simple")["correct"] == 2
    missing = score_bfcl(predictions, questions, other_ids[:1], "simple")["per_item"]
    assert [item["error_type"] for item in missing] == ["reference_error:missing_answer"] * 2


# ---- malformed model output: scored wrong, never a crash ---------------------------------------------------


@pytest.mark.parametrize(
    "result, error_type",
    [
        ("f(a='x')", "ast_decoder:decoder_failed"),
        (None, "ast_decoder:decoder_wrong_output_format"),
        ({"f": {"a": "x"}}, "ast_decoder:decoder_wrong_output_format"),
        ([{}], "ast_decoder:decoder_wrong_output_format"),
        ([{"f": "a='x'"}], "ast_decoder:decoder_wrong_output_format"),
        ([{"f": {"a": "x"}, "g": {}}], "ast_decoder:decoder_wrong_output_format"),
        ([["f", {"a": "x"}]], "ast_decoder:decoder_wrong_output_format"),
        ([], "simple_function_checker:wrong_count"),
    ],
)
def test_malformed_output_is_wrong(result, error_type):
    assert _one("simple", F, GT, result)["error_type"] == error_type


def test_prediction_ids_must_be_strings_or_integers():
    rows = [{"id": ["q"], "result": []}, {"id": None, "result": []}, {"id": 7, "result": []}]
    scored = score_bfcl(rows, [{"id": 7, "function": F}], [{"id": 7, "ground_truth": GT}], "simple")
    assert scored["unreadable_predictions"] == [
        {"index": 0, "reason": "prediction id ['q'] is not a string or an integer"},
        {"index": 1, "reason": "prediction id None is not a string or an integer"},
    ]
    assert scored["per_item"] == [
        {
            "id": 7,
            "valid": False,
            "error": ["Wrong number of functions."],
            "error_type": "simple_function_checker:wrong_count",
        }
    ]


def test_prediction_without_result_is_a_wrong_format():
    scored = score_bfcl([{"id": "q"}], [{"id": "q", "function": F}], [{"id": "q", "ground_truth": GT}], "simple")
    assert scored["per_item"][0]["error_type"] == "ast_decoder:decoder_wrong_output_format"


@pytest.mark.parametrize("value", [None, [1, [2]], {"x": {"y": None}}, float("nan"), 10**400, True, "", "\u00e9"])
def test_any_json_value_in_any_parameter_is_scored(value):
    functions = [_fn("f", {"s": STR, "i": INT, "x": FLOAT, "l": {"type": "array", "items": {"type": "dict"}},
                           "d": {"type": "dict"}, "t": {"type": "tuple", "items": FLOAT}})]  # fmt: skip
    ground_truth = [{"f": {"s": ["a", ""], "i": [1, ""], "x": [1.0, ""], "l": [[{"k": ["v"]}], ""],
                           "d": [{"k": ["v"]}, ""], "t": [[1.0], ""]}}]  # fmt: skip
    for param in ("s", "i", "x", "l", "d", "t"):
        assert _one("simple", functions, ground_truth, [{"f": {param: value}}])["valid"] in (True, False)


# ---- each error type -------------------------------------------------------------------------------------

LIST_OF_DICTS = [_fn("f", {"a": {"type": "array", "items": {"type": "dict"}}})]
DICT = [_fn("f", {"a": {"type": "dict"}})]
JAVA_INT = [_fn("f", {"a": {"type": "integer"}})]

ERROR_TYPES = [
    ("simple", F, GT, [{"f": {"a": "x"}}, {"f": {"a": "x"}}], "simple_function_checker:wrong_count"),
    ("simple", F, GT, [{"g": {"a": "x"}}], "simple_function_checker:wrong_func_name"),
    ("simple", F, GT, [{"f": {"b": 1}}], "simple_function_checker:missing_required"),
    ("simple", F, GT, [{"f": {"a": "x", "c": 1}}], "simple_function_checker:unexpected_param"),
    ("simple", F, [{"f": {"a": ["x"], "b": [1]}}], [{"f": {"a": "x"}}], "simple_function_checker:missing_optional"),
    ("simple", F, GT, [{"f": {"a": "x", "b": 1.0}}], "type_error:simple"),
    ("simple", F, GT, [{"f": {"a": "x", "b": True}}], "type_error:simple"),
    ("simple", [_fn("f", {"a": {"type": "array", "items": FLOAT}})], [{"f": {"a": [[1.5, 2.0]]}}],
     [{"f": {"a": [1.5, 2]}}], "type_error:nested"),
    ("java", JAVA_INT, [{"f": {"a": [5]}}], [{"f": {"a": 5}}], "type_error:java"),
    ("javascript", JAVA_INT, [{"f": {"a": [5]}}], [{"f": {"a": 5}}], "type_error:js"),
    ("simple", F, GT, [{"f": {"a": "x!"}}], "value_error:string"),
    ("simple", [_fn("f", {"a": {"type": "array", "items": STR}})], [{"f": {"a": [["x", "y"]]}}],
     [{"f": {"a": ["y", "x"]}}], "value_error:list/tuple"),
    ("simple", DICT, [{"f": {"a": [{"k": ["v"]}]}}], [{"f": {"a": {"k": "v", "z": 1}}}], "value_error:dict_key"),
    ("simple", DICT, [{"f": {"a": [{"k": ["v"]}]}}], [{"f": {"a": {}}}], "value_error:dict_key"),
    ("simple", DICT, [{"f": {"a": [{"k": ["v"]}]}}], [{"f": {"a": {"k": "w"}}}], "value_error:dict_value"),
    ("simple", DICT, [{"f": {"a": [""]}}], [{"f": {"a": {}}}], "dict_checker:unclear"),
    ("simple", LIST_OF_DICTS, [{"f": {"a": [[{"k": ["v"]}]]}}], [{"f": {"a": []}}], "value_error:list_dict_count"),
    ("simple", F, GT, [{"f": {"a": "x", "b": 2}}], "value_error:others"),
    ("multiple", F, GT, [{"f": {"a": "x"}}, {"f": {"a": "x"}}], "multiple_function_checker:wrong_count"),
    ("parallel", F, GT * 2, [{"f": {"a": "x"}}], "parallel_function_checker_no_order:wrong_count"),
    ("parallel", F, GT * 2, [{"f": {"a": "x"}}, {"f": {"a": "y"}}],
     "parallel_function_checker_no_order:cannot_find_match"),
    ("parallel", F, [{"g": {"a": ["x"]}}], [{"g": {"a": "x"}}], "reference_error:function_not_offered"),
    ("irrelevance", F, None, [{"f": {}}], "irrelevance_error:decoder_success"),
    ("live_relevance", F, None, [], "relevance_error:decoder_failed"),
    ("live_relevance", F, None, "no call", "relevance_error:decoder_failed"),
]  # fmt: skip


@pytest.mark.parametrize("category, functions, ground_truth, result, error_type", ERROR_TYPES)
def test_each_error_type(category, functions, ground_truth, result, error_type):
    item = _one(category, functions, ground_truth, result)
    assert (item["valid"], item["error_type"]) == (False, error_type)
    assert item["error"] and all(isinstance(message, str) for message in item["error"])


@pytest.mark.parametrize(
    "category, result",
    [("irrelevance", []), ("irrelevance", "I cannot help"), ("live_irrelevance", [{"f": "x"}]),
     ("live_irrelevance", [{}]), ("live_relevance", [{"anything": {}}]), ("live_relevance", [{"f": {"a": 1}}])],
)  # fmt: skip
def test_relevance_right_answers(category, result):
    assert _one(category, F, None, result) == {"id": "q", "valid": True, "error": [], "error_type": ""}


# ---- matching rules ----------------------------------------------------------------------------------------


def test_duplicated_calls():
    assert _one("simple", F, GT, [{"f": {"a": "x"}}] * 2)["error_type"] == "simple_function_checker:wrong_count"
    assert _one("parallel", F, GT * 2, [{"f": {"a": "x"}}] * 2)["valid"]  # each copy matches its own ground truth
    other = [{"f": {"a": ["x"]}}, {"f": {"a": ["y"]}}]
    assert _one("parallel", F, other, [{"f": {"a": "x"}}] * 2)["error_type"].endswith("cannot_find_match")


def test_parallel_matching_is_greedy_in_ground_truth_order():
    ground_truth = [{"f": {"a": ["x", "y"]}}, {"f": {"a": ["x"]}}]
    # The first ground-truth call takes "x", leaving "y" for one that only accepts "x": BFCL says wrong.
    assert not _one("parallel", F, ground_truth, [{"f": {"a": "x"}}, {"f": {"a": "y"}}])["valid"]
    assert _one("parallel", F, ground_truth, [{"f": {"a": "y"}}, {"f": {"a": "x"}}])["valid"]


def test_multiple_checks_only_the_first_call_against_the_named_function():
    functions = [_fn("g", {"a": STR}), *F]
    assert _one("multiple", functions, GT, [{"f": {"a": "X"}}])["valid"]
    assert (
        _one("multiple", functions, GT, [{"g": {"a": "x"}}])["error_type"] == "simple_function_checker:wrong_func_name"
    )


def test_simple_checks_the_first_function_whatever_the_ground_truth_names():
    assert _one("simple", F, [{"other": {"a": ["x"]}}], [{"f": {"a": "x"}}])["valid"]


@pytest.mark.parametrize(
    "text, key",
    [("April 1, 2024", "april12024"), ("a/b-c_d*e^f.g", "abcdefg"), ("It's", 'it"s'), ("tab\there", "tab\there"),
     ("Ünïcode", "ünïcode"), ("x!:", "x!:")],
)  # fmt: skip
def test_string_normalisation(text, key):
    assert normalize_string(text) == key


def test_numbers_follow_bfcl_types():
    float_param = [_fn("f", {"x": FLOAT})]
    assert _one("simple", float_param, [{"f": {"x": [3.0]}}], [{"f": {"x": 3}}])["valid"]  # int -> float
    assert not _one("simple", F, [{"f": {"a": ["x"], "b": [3]}}], [{"f": {"a": "x", "b": 3.0}}])["valid"]
    floats = [_fn("f", {"x": {"type": "array", "items": FLOAT}})]
    assert not _one("simple", floats, [{"f": {"x": [[1.0, 2.0]]}}], [{"f": {"x": [1, 2.0]}}])["valid"]  # not in lists
    assert _one("simple", floats, [{"f": {"x": [[1, 2.0]]}}], [{"f": {"x": [1, 2.0]}}])["valid"]


def test_optional_arguments_and_empty_values():
    assert _one("simple", F, GT, [{"f": {"a": "x"}}])["valid"]
    assert _one("simple", [_fn("f", {"a": STR})], [{"f": {"a": ["x", ""]}}], [{"f": {"a": ""}}])["valid"]
    lists = [_fn("f", {"a": {"type": "array", "items": STR}})]
    assert _one("simple", lists, [{"f": {"a": [["x"], ""]}}], [{"f": {"a": []}}])["valid"]  # "" also accepts []


def test_a_variable_answer_is_compared_exactly():
    arrays = [_fn("f", {"a": {"type": "array", "items": INT}})]
    ground_truth = [{"f": {"a": ["data['sales']"]}}]
    assert _one("simple", arrays, ground_truth, [{"f": {"a": "data['sales']"}}])["valid"]
    assert not _one("simple", arrays, ground_truth, [{"f": {"a": "DATA['sales']"}}])["valid"]


def test_dotted_names_under_the_underscore_option():
    functions = [_fn("math.add", {"a": INT}, ["a"])]
    ground_truth = [{"math.add": {"a": [1]}}]
    assert _one("simple", functions, ground_truth, [{"math.add": {"a": 1}}])["valid"]
    assert not _one("simple", functions, ground_truth, [{"math_add": {"a": 1}}])["valid"]
    assert _one("simple", functions, ground_truth, [{"math_add": {"a": 1}}], underscore_to_dot=True)["valid"]
    assert not _one("simple", functions, ground_truth, [{"math.add": {"a": 1}}], underscore_to_dot=True)["valid"]


# ---- Java and JavaScript literals --------------------------------------------------------------------------

JAVA = [
    ("123", "integer", None, 123), ("-5", "short", None, -5), ("12\n", "integer", None, 12),
    ("1.5", "integer", None, "1.5"),
    ("3.14f", "float", None, 3.14), ("3.14", "float", None, "3.14"), ("3e3F", "float", None, 3000.0),
    ("2.5", "double", None, 2.5), ("5L", "long", None, 5), ("5", "long", None, "5"), ("true", "boolean", None, True),
    ("True", "boolean", None, "True"), ("'a'", "char", None, "'a'"), ('"x"', "String", None, '"x"'),
    ("new int[]{1, 2, 3}", "Array", "integer", [1, 2, 3]),
    ('new String[]{"a", "b"}', "Array", "String", ['"a"', '"b"']),
    ("new String[]{a, b}", "Array", "String", ["a", "b"]), ("myList", "Array", "integer", "myList"),
    ('new ArrayList<>(Arrays.asList("a", "b"))', "ArrayList", "String", ["a", "b"]),
    ("new ArrayList<Long>() {{ add(1L); add(2L); }}", "ArrayList", "long", [1, 2]),
    ("new ArrayList<>()", "ArrayList", "integer", []),
    ('new HashMap<String, Object>() {{ put("k", 1); put("s", "v"); }}', "HashMap", None, {"k": 1, "s": "v"}),
    ("new HashMap<>()", "HashMap", None, {}),
]  # fmt: skip


@pytest.mark.parametrize("text, java_type, item_type, value", JAVA)
def test_java_literals(text, java_type, item_type, value):
    assert java_value(text, java_type, item_type) == value


def test_unimplemented_java_types_are_refused():
    with pytest.raises(UnsupportedType, match="BFCL does not convert Java Queue values"):
        java_value("new LinkedList<>()", "Queue")


JS = [
    ("'abc'", "String", None, "abc"), ("abc", "String", None, "abc"), ('"', "String", None, ""),
    ("42", "integer", None, 42), ("4.5", "float", None, 4.5), ("5", "float", None, 5.0), ("1e3", "float", None, "1e3"),
    ("10n", "Bigint", None, 10), ("true", "Boolean", None, True), ("[1, 2, 3]", "array", "integer", [1, 2, 3]),
    ("['a', 'b']", "array", "String", ["a", "b"]), ("[1, 'two', true]", "array", None, [1, "two", True]),
    ("new Array(1, 2)", "array", "integer", [1, 2]), ("[[1, 2], [3]]", "array", "integer", [[1, 2], [3]]),
    ("[1, , 2]", "array", "integer", [1, "", 2]), ("a, b", "array", "String", "a, b"),
    ("{a: 1, b: 'x'}", "dict", None, {"a": 1, "b": "x"}), ("{}", "dict", None, {}),
    ("{x: [1, 2], y: 3}", "dict", None, {"x": [1, 2], "y": 3}), ("{a: {b: 1}}", "dict", None, {"a": "{b: 1"}),
    ("{'k': \"123\"}", "dict", None, {"k": 123}),
]  # fmt: skip


@pytest.mark.parametrize("text, js_type, item_type, value", JS)
def test_javascript_literals(text, js_type, item_type, value):
    assert js_value(text, js_type, item_type) == value


# ---- leaderboard summaries on a tiny hand-built set ------------------------------------------------------

TINY = {
    "simple_python": (0.8, 10), "simple_java": (0.5, 4), "simple_javascript": (1.0, 2), "multiple": (0.6, 5),
    "parallel": (0.4, 5), "parallel_multiple": (0.2, 5), "irrelevance": (0.9, 10), "live_simple": (0.5, 4),
    "live_multiple": (0.25, 8), "live_parallel": (1.0, 2), "live_parallel_multiple": (0.0, 2),
    "live_irrelevance": (0.7, 10), "live_relevance": (1.0, 2),
}  # fmt: skip
TINY_SCORES = {name: {"accuracy": accuracy, "total": total} for name, (accuracy, total) in TINY.items()}


def _approx(fraction: Fraction):
    return pytest.approx(float(fraction), abs=1e-12)


def test_v4_summary_by_hand():
    summary = summarize_bfcl(TINY_SCORES, version="v4")
    assert summary["non_live_simple_ast"] == _approx(Fraction(23, 30))  # (0.8 + 0.5 + 1.0) / 3
    assert summary["non_live_ast_summary"] == summary["non_live_overall"] == _approx(Fraction(59, 120))
    assert summary["live_ast_summary"] == summary["live_overall"] == _approx(Fraction(6, 16))  # (2 + 2 + 2 + 0) / 16
    assert summary["irrelevance"] == _approx(Fraction(4, 5))  # (0.9 + 0.7) / 2
    assert summary["relevance"] == 1.0
    assert summary["multi_turn_overall"] == summary["agentic_overall"] == 0.0
    assert summary["overall"] == _approx(Fraction(1, 6))  # 10% each of 59/120, 3/8, 4/5; multi-turn, agentic 0
    assert summary["missing"] == [
        "multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context",
        "web_search_base", "web_search_no_snippet", "memory_kv", "memory_vector", "memory_rec_sum",
    ]  # fmt: skip


def test_v4_missing_live_category_counts_zero_over_its_dataset_size():
    scores = {name: score for name, score in TINY_SCORES.items() if name != "live_multiple"}
    summary = summarize_bfcl(scores, version="v4")
    assert summary["live_ast_summary"] == _approx(Fraction(2 + 2, 4 + 1053 + 2 + 2))
    assert summary["categories"]["live_multiple"] == 0.0
    assert "live_multiple" in summary["missing"]


def test_v2_summary_by_hand_with_v2_names():
    renamed = {"simple": "simple_python", "java": "simple_java", "javascript": "simple_javascript"}
    scores = {next((old for old, new in renamed.items() if new == name), name): s for name, s in TINY_SCORES.items()}
    assert "simple" in scores and "simple_python" not in scores
    summary = summarize_bfcl(scores, version="v2")
    assert summary["non_live_ast_summary"] == _approx(Fraction(59, 120))
    assert summary["non_live_exec_summary"] == summary["exec_summary"] == 0.0
    assert summary["non_live_overall"] == _approx(Fraction(43, 135))  # 4 AST groups + 4 exec (0) + irrelevance, / 9
    assert summary["live_ast_summary"] == _approx(Fraction(6, 16))
    assert summary["live_overall"] == _approx(Fraction(15, 28))  # (6 + 7 + 2) / (16 + 10 + 2)
    assert summary["simple_ast"] == _approx(Fraction(19, 30))  # (23/30 + 0.5) / 2
    assert summary["ast_summary"] == _approx(Fraction(223, 480))
    assert summary["overall"] == _approx(Fraction(439, 1200))  # 4 AST totals + 4 exec (0) + 0.8 + 1.0, / 10
    assert summary["missing"] == ["exec_simple", "exec_multiple", "exec_parallel", "exec_parallel_multiple", "rest"]


def test_summary_accepts_score_bfcl_results_and_refuses_unknown_versions():
    scored = score_bfcl([{"id": "q", "result": []}], [{"id": "q", "function": F}], None, "live_relevance")
    assert summarize_bfcl({"live_relevance": scored})["relevance"] == 0.0
    with pytest.raises(ValueError, match="unknown BFCL version 'v5'; valid versions: v2, v3, v4"):
        summarize_bfcl({}, version="v5")


# ---- the real data: gold predictions score the references' own ceiling --------------------------------------

GOLD_V4 = {
    "simple_python": (400, 400, []), "simple_java": (97, 100, ["simple_java_36", "simple_java_64", "simple_java_65"]),
    "simple_javascript": (50, 50, []), "multiple": (200, 200, []), "parallel": (200, 200, []),
    "parallel_multiple": (198, 200, ["parallel_multiple_12", "parallel_multiple_26"]), "irrelevance": (240, 240, []),
    "live_simple": (256, 258, ["live_simple_106-63-0", "live_simple_112-68-0"]),
    "live_multiple": (1050, 1053, ["live_multiple_507-149-4", "live_multiple_862-181-3", "live_multiple_964-207-0"]),
    "live_parallel": (16, 16, []), "live_parallel_multiple": (24, 24, []), "live_irrelevance": (884, 884, []),
    "live_relevance": (0, 16, None),
}  # fmt: skip
GOLD_V2 = {
    "simple_python": (399, 400, ["simple_363"]),
    "simple_java": (94, 100, ["java_36", "java_64", "java_65", "java_67", "java_68", "java_94"]),
    "simple_javascript": (48, 50, ["javascript_5", "javascript_41"]), "multiple": (200, 200, []),
    "parallel": (200, 200, []),
    "parallel_multiple": (197, 200, ["parallel_multiple_12", "parallel_multiple_26", "parallel_multiple_179"]),
    "irrelevance": (240, 240, []), "live_simple": (256, 258, ["live_simple_106-63-0", "live_simple_112-68-0"]),
    "live_multiple": (1033, 1037, ["live_multiple_1-0-1", "live_multiple_189-83-0", "live_multiple_862-181-3",
                                   "live_multiple_964-207-0"]),
    "live_parallel": (15, 16, ["live_parallel_9-5-0"]), "live_parallel_multiple": (24, 24, []),
    "live_irrelevance": (875, 875, []), "live_relevance": (0, 41, None),
}  # fmt: skip


def _score_gold(data_dir: Path, version: str) -> dict:
    """Each question answered with its first possible answers ([] for the relevance categories)."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:  # pytest imports tests in importlib mode: put the corpus helpers beside this file in reach
        sys.path.insert(0, here)
    from bfcl_corpus import perturb_ast_item
    from bfcl_reference import load_category

    from train.evaluation.bfcl.scorer import CATEGORIES

    results = {}
    for category, spec in CATEGORIES.items():
        questions, answers = load_category(data_dir, version, category)
        if answers is None:
            predictions = [{"id": question["id"], "result": []} for question in questions]
        else:
            predictions = [
                {"id": q["id"], "result": next(perturb_ast_item(q["function"], a["ground_truth"], spec.language))[1]}
                for q, a in zip(questions, answers)
            ]
        results[category] = score_bfcl(predictions, questions, answers, category)
    return results


def _assert_gold(results: dict, expected: dict):
    for category, (correct, total, wrong_ids) in expected.items():
        scored = results[category]
        assert (scored["correct"], scored["total"]) == (correct, total), category
        if wrong_ids is not None:
            assert [item["id"] for item in scored["per_item"] if not item["valid"]] == wrong_ids, category


def test_gold_predictions_on_v4_data():
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None:
        pytest.skip("bfcl-eval (tests/requirements-reference.txt) is not installed")
    results = _score_gold(Path(spec.origin).parent / "data", "v4")
    _assert_gold(results, GOLD_V4)
    summary = summarize_bfcl(results, version="v4")
    assert summary["non_live_ast_summary"] == _approx(Fraction(398, 400))  # (0.99 + 1 + 1 + 0.99) / 4
    assert summary["live_ast_summary"] == _approx(Fraction(1346, 1351))


def test_gold_predictions_on_v2_data(shared_data):
    results = _score_gold(shared_data / "bfcl_v2", "v2")
    _assert_gold(results, GOLD_V2)
    assert summarize_bfcl(results, version="v2")["live_ast_summary"] == _approx(Fraction(1328, 1335))
