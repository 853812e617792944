"""BFCL (Berkeley Function Calling Leaderboard) AST scorer: a pure function of prediction and reference rows.

Restates the rules of the official checker, bfcl-eval 2026.3.23 (``eval_checker/ast_eval/ast_checker.py``,
``eval_runner.py``, ``utils.py``), which the parity test runs side by side with this one.

Inputs
------
* predictions: BFCL's *decoded* model output, ``{"id", "result": [{"func_name": {"arg": value}}, ...]}``.
  A ``result`` that is a string is a decode failure; one that is not a list of one-key dicts whose value is
  a dict is "wrong output format". Both score wrong for AST categories and as "no call" for (ir)relevance.
* questions: the category's question file rows ``{"id", "function": [{name, parameters: {properties,
  required}}]}``; answers: the possible-answer rows ``{"id", "ground_truth": [{func: {arg: [values]}}]}``,
  where ``""`` among the values means the argument may be omitted. Answers are matched to questions by
  id, falling back to position (BFCL aligns them by position).

Categories (both naming schemes)
--------------------------------
v4 ``simple_python`` / ``simple_java`` / ``simple_javascript`` are v2's ``simple`` / ``java`` /
``javascript``; ``multiple``, ``parallel``, ``parallel_multiple``, ``irrelevance`` and the ``live_*`` names
are shared. A ``BFCL_v2_`` / ``BFCL_v4_`` file prefix is accepted.

The check of one AST item, in BFCL's order
------------------------------------------
1. Category shape. simple: exactly one call, checked against the *first* function of the question (not
   looked up by name) and the first ground-truth call. multiple: as many calls as ground-truth calls, and
   only the first call is checked, against the function named by the first ground-truth call. parallel and
   parallel_multiple (live too): as many calls as ground-truth calls, matched in any order **greedily**:
   each ground-truth call, in order, takes the first still-unmatched model call that passes; there is no
   backtracking, so two calls of one function with overlapping possible values can fail in one order.
2. One call: the function name must equal the function's ``name`` (with ``underscore_to_dot=True``,
   the option BFCL turns on for OpenAI/Mistral/Google-style models, "." in the name is expected as "_");
   every ``required`` parameter must be present; every argument must be both a declared parameter and in
   the ground truth (else "unexpected"); each argument must pass step 3; finally every ground-truth
   argument left out must have ``""`` among its values.
3. One argument (``values.check_argument``). Java/JavaScript arguments must be strings holding source
   literals and are first converted (``literals``). Python ints are promoted to float for ``float``
   parameters (not inside lists). Types are exact (``True`` is not an integer). If the first real
   possible answer has another type than declared, BFCL calls it a *variable* and the value only needs
   that type and exact equality. Otherwise strings compare after normalisation (delete space , . / - _ *
   ^, lowercase, ' -> "); lists compare element-wise with top-level strings normalised; dicts key by key
   (values normalised when strings, missing keys allowed only with ``""``), lists of dicts element by
   element in order; other values by Python equality. Element types of arrays/tuples are checked one
   level deep, and a ``""`` (or any non-list) possible answer makes that element check pass.
4. irrelevance / live_irrelevance are correct when the output holds no call (decode failure, wrong
   format or ``[]``); live_relevance when it holds at least one well-formed call, whatever it is.

Quirks of the official checker kept on purpose (the leaderboard's numbers depend on them): greedy
parallel matching; ``""`` as a list's possible answer also accepts ``[]``; a possible answer given as a
bare string is read character by character where a list is expected; Java ``String``/``char`` values and
``Array`` elements keep their quotes; simple categories ignore the ground-truth function name.

Where the official checker raises instead of scoring (the parity test asserts each case it meets)
---------------------------------------------------------------------------------------------------
* A ground-truth function that the question does not offer, in multiple/parallel categories (v2
  ``parallel_multiple_179`` expects ``deck``): BFCL raises TypeError; here the item is wrong,
  ``reference_error:function_not_offered``.
* A list-of-dicts argument whose elements are not dicts, let through the element type check by a ``""``
  possible answer: BFCL raises AttributeError; here such an element matches no possible dict.
* A possible answer BFCL cannot index (a number or non-empty dict where a list or dict is expected, a
  non-list of possible answers), a parameter or element type it has no mapping for, Java
  Set/Hashtable/Queue/Stack, an int too large for a float, an empty function or ground-truth list:
  BFCL raises; here the argument or item is wrong (``possible_answer:malformed``,
  ``type_error:unsupported``, ``reference_error:malformed``, or the value simply does not match).
* A JavaScript Bigint literal followed by a newline ("5n\n"): BFCL raises ValueError; here it reads 5.
None of these occurs in the v2 or v4 data except parallel_multiple_179 (31 corpus cases reach it).

Leaderboard aggregation (``summary.summarize_bfcl``; BFCL's ``eval_runner_helper.py``)
--------------------------------------------------------------------------------------
"Unweighted" is the plain mean of the listed accuracies; "weighted" is sum(acc * count) / sum(count).
* v4 (bfcl-eval 2026.3.23, ``generate_leaderboard_csv``):
  simple AST = unweighted(simple_python, simple_java, simple_javascript);
  non-live AST summary = non-live overall = unweighted(simple AST, multiple, parallel, parallel_multiple)
  (irrelevance is *not* in it); live AST summary = live overall = weighted(live_simple, live_multiple,
  live_parallel, live_parallel_multiple); hallucination: irrelevance = unweighted(irrelevance,
  live_irrelevance), relevance = live_relevance; multi-turn = unweighted(4 multi_turn_*); agentic =
  unweighted(unweighted(web_search_base, web_search_no_snippet), unweighted(memory_kv, memory_vector,
  memory_rec_sum)); overall = 10% non-live + 10% live + 10% irrelevance + 30% multi-turn + 40% agentic.
  A category not scored counts as accuracy 0 with its full dataset size (BFCL shows "N/A" but still
  counts 0), so with only the AST categories here the overall is a lower bound; ``missing`` lists them.
* v3 (gorilla cd9429cc, 2025-08-06, the last v3 before the v4 release; its executable categories were retired in
  4ed459c0): non-live overall = unweighted(simple AST, multiple, parallel, parallel_multiple, irrelevance); live
  overall = weighted(4 live AST, live_irrelevance, live_relevance); multi-turn = unweighted(4 multi_turn_*);
  overall = unweighted(live overall, non-live overall, multi-turn). A missing category counts 0 over its full size.
* v2 (gorilla commit 3f5ace7, the data in shared/data/bfcl_v2): non-live AST summary as in v4, exec summary
  = unweighted(unweighted(exec_simple, rest), exec_multiple, exec_parallel, exec_parallel_multiple),
  non-live overall = unweighted of those 8 groups + irrelevance; live AST summary = weighted(4 live AST),
  live overall = weighted(4 live AST + live_irrelevance + live_relevance); overall = unweighted(simple,
  multiple, parallel, parallel_multiple, each = unweighted(non-live, live) [simple's non-live part is the
  simple AST mean], the 4 exec groups, unweighted(irrelevance, live_irrelevance), live_relevance).
  A missing category counts as accuracy 0 with count 0 (so it drops out of weighted means). Exec and REST
  categories need live execution: supply their accuracies from elsewhere or accept the lower bound.
* toolgt (seed 004 §3.3, ``summary.summarize_toolgt``): the 13 categories above without exec/REST/sql/chatable;
  W = accuracy over all their items (3,641), non-live / live / relevance = the same per group, BFCL = the v2
  overall without the exec groups; a category not scored drops out of every mean instead of counting 0.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from train.evaluation.bfcl.values import CheckError, allows_omission, check_argument


@dataclass(frozen=True)
class CategorySpec:
    name: str
    check: str  # "simple" | "multiple" | "parallel" | "irrelevance" | "relevance"
    language: str  # "python" | "java" | "javascript"


CATEGORIES: dict[str, CategorySpec] = {
    spec.name: spec
    for spec in (
        CategorySpec("simple_python", "simple", "python"),
        CategorySpec("simple_java", "simple", "java"),
        CategorySpec("simple_javascript", "simple", "javascript"),
        CategorySpec("multiple", "multiple", "python"),
        CategorySpec("parallel", "parallel", "python"),
        CategorySpec("parallel_multiple", "parallel", "python"),
        CategorySpec("irrelevance", "irrelevance", "python"),
        CategorySpec("live_simple", "simple", "python"),
        CategorySpec("live_multiple", "multiple", "python"),
        CategorySpec("live_parallel", "parallel", "python"),
        CategorySpec("live_parallel_multiple", "parallel", "python"),
        CategorySpec("live_irrelevance", "irrelevance", "python"),
        CategorySpec("live_relevance", "relevance", "python"),
    )
}
V2_CATEGORY_NAMES = {"simple": "simple_python", "java": "simple_java", "javascript": "simple_javascript"}


def canonical_category(name: str) -> str:
    """The v4 name of a BFCL category given in either scheme (``simple``, ``BFCL_v2_java``, ``live_simple``)."""
    bare = re.sub(r"^BFCL_v\d+_", "", name)
    bare = V2_CATEGORY_NAMES.get(bare, bare)
    if bare not in CATEGORIES:
        valid = ", ".join([*CATEGORIES, *V2_CATEGORY_NAMES])
        raise ValueError(f"unknown or unsupported BFCL category {name!r}; scorable categories: {valid}")
    return bare


def score_bfcl(
    predictions: list[dict],
    questions: list[dict],
    answers: list[dict] | None,
    category: str,
    *,
    underscore_to_dot: bool = False,
) -> dict:
    """Score one category. Every question is one item: a question without a prediction scores wrong.

    Returns ``{"category", "accuracy", "correct", "total", "per_item": [{"id", "valid", "error",
    "error_type"}], "unknown_prediction_ids", "duplicate_prediction_ids", "unreadable_predictions"}``;
    the last three list prediction rows that were not scored (nothing is dropped silently).
    """
    spec = CATEGORIES[canonical_category(category)]
    needs_answers = spec.check not in ("irrelevance", "relevance")
    if needs_answers and answers is None:
        raise ValueError(f"BFCL category {spec.name} needs its possible-answer rows")
    by_id, duplicates, unreadable = _index_predictions(predictions)
    answer_for = _answer_lookup(questions, answers) if needs_answers else None

    per_item = []
    for position, question in enumerate(questions):
        item_id = question.get("id", position)
        if item_id not in by_id:
            verdict = _wrong("missing_prediction", f"No prediction for {item_id!r}.")
        elif not needs_answers:
            verdict = check_relevance(by_id[item_id].get("result"), spec.check)
        else:
            answer = answer_for(position, item_id)
            if answer is None:
                verdict = _wrong("reference_error:missing_answer", f"No possible answer for {item_id!r}.")
            else:
                verdict = check_ast(
                    by_id[item_id].get("result"),
                    question.get("function"),
                    answer.get("ground_truth"),
                    spec,
                    underscore_to_dot=underscore_to_dot,
                )
        per_item.append({"id": item_id, **verdict})

    question_ids = {question.get("id", position) for position, question in enumerate(questions)}
    correct = sum(item["valid"] for item in per_item)
    return {
        "category": spec.name,
        "accuracy": correct / len(per_item) if per_item else 0.0,
        "correct": correct,
        "total": len(per_item),
        "per_item": per_item,
        "unknown_prediction_ids": [item_id for item_id in by_id if item_id not in question_ids],
        "duplicate_prediction_ids": duplicates,
        "unreadable_predictions": unreadable,
    }


def _index_predictions(predictions: Iterable[Any]) -> tuple[dict, list, list]:
    by_id: dict[Any, dict] = {}
    duplicates, unreadable = [], []
    for index, row in enumerate(predictions):
        if not isinstance(row, dict) or "id" not in row:
            unreadable.append({"index": index, "reason": "prediction is not an object with an 'id'"})
        elif not _is_id(row["id"]):
            unreadable.append({"index": index, "reason": f"prediction id {row['id']!r} is not a string or an integer"})
        elif row["id"] in by_id:
            duplicates.append(row["id"])  # the first row for an id is the one scored
        else:
            by_id[row["id"]] = row
    return by_id, duplicates, unreadable


def _is_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _answer_lookup(questions: list[dict], answers: list[dict]):
    by_id = {answer["id"]: answer for answer in answers if isinstance(answer, dict) and _is_id(answer.get("id"))}
    same_length = len(answers) == len(questions)

    def answer_for(position: int, item_id: Any) -> dict | None:
        if item_id in by_id:
            return by_id[item_id]
        answer = answers[position] if same_length else None
        return answer if isinstance(answer, dict) else None

    return answer_for


def _wrong(error_type: str, *errors: str) -> dict:
    return {"valid": False, "error": list(errors), "error_type": error_type}


_RIGHT = {"valid": True, "error": [], "error_type": ""}


def is_call_list(result: Any) -> bool:
    """BFCL's decoded shape: a list of one-key dicts ``{function_name: {argument: value}}`` ([] included)."""
    return type(result) is list and all(
        type(call) is dict and len(call) == 1 and type(next(iter(call.values()))) is dict for call in result
    )


def check_relevance(result: Any, check: str) -> dict:
    """irrelevance: right when no call came out; relevance: right when at least one did."""
    has_call = is_call_list(result) and len(result) > 0
    if check == "irrelevance":
        return (
            _wrong("irrelevance_error:decoder_success", "A call was made where none should be.") if has_call else _RIGHT
        )
    return _RIGHT if has_call else _wrong("relevance_error:decoder_failed", "No call was made where one should be.")


def check_ast(result: Any, functions: Any, ground_truth: Any, spec: CategorySpec, *, underscore_to_dot=False) -> dict:
    """One AST item: the model's decoded calls against the question's functions and the possible answers."""
    if isinstance(result, str):
        return _wrong("ast_decoder:decoder_failed", "The model output could not be decoded into calls.")
    if not is_call_list(result):
        return _wrong("ast_decoder:decoder_wrong_output_format", f"Not a list of calls: {result!r}.")
    if isinstance(functions, dict):
        functions = [functions]
    if not isinstance(functions, list) or not isinstance(ground_truth, list) or not ground_truth:
        return _wrong(
            "reference_error:malformed", "The question's functions or the ground truth are empty or malformed."
        )
    if spec.check == "parallel":
        return _check_parallel(result, functions, ground_truth, spec.language, underscore_to_dot)
    if spec.check == "multiple":
        if len(result) != len(ground_truth):
            return _wrong("multiple_function_checker:wrong_count", "Wrong number of functions.")
        doc = _find_function(functions, _expected_name(ground_truth[0]))
        if doc is None:
            return _not_offered(ground_truth[0])
        return _verdict(check_call(doc, result[0], ground_truth[0], spec.language, underscore_to_dot))
    if len(result) != 1:
        return _wrong("simple_function_checker:wrong_count", "Wrong number of functions.")
    if not functions:
        return _wrong("reference_error:malformed", "The question offers no function.")
    return _verdict(check_call(functions[0], result[0], ground_truth[0], spec.language, underscore_to_dot))


def _verdict(failure: CheckError | None) -> dict:
    return _RIGHT if failure is None else _wrong(failure.error_type, failure.message)


def _expected_name(expected_call: Any) -> Any:
    return next(iter(expected_call)) if isinstance(expected_call, dict) and expected_call else None


def _find_function(functions: list, name: Any) -> dict | None:
    return next((doc for doc in functions if isinstance(doc, dict) and doc.get("name") == name), None)


def _not_offered(expected_call: Any) -> dict:
    name = _expected_name(expected_call)
    return _wrong(
        "reference_error:function_not_offered", f"The ground truth calls {name!r}, which the question does not offer."
    )


def _check_parallel(calls: list, functions: list, ground_truth: list, language: str, underscore_to_dot: bool) -> dict:
    if len(calls) != len(ground_truth):
        return _wrong("parallel_function_checker_no_order:wrong_count", "Wrong number of functions.")
    unmatched = list(range(len(calls)))
    for expected_index, expected in enumerate(ground_truth):
        doc = _find_function(functions, _expected_name(expected))
        if doc is None:
            return _not_offered(expected)
        failures = []
        for call_index in unmatched:
            failure = check_call(doc, calls[call_index], expected, language, underscore_to_dot)
            if failure is None:
                unmatched.remove(call_index)  # greedy: the first passing call is taken for good
                break
            failures.append(f"call {call_index}: {failure.error_type}: {failure.message}")
        else:
            return _wrong(
                "parallel_function_checker_no_order:cannot_find_match",
                f"No unmatched call {unmatched} matches ground-truth call {expected_index}.",
                *failures,
            )
    return _RIGHT


def check_call(
    doc: dict, call: dict, expected_call: Any, language: str, underscore_to_dot: bool = False
) -> CheckError | None:
    """One decoded call ``{name: {arg: value}}`` against one function doc and one ground-truth call."""
    if (
        not isinstance(expected_call, dict)
        or len(expected_call) != 1
        or not isinstance(_only_value(expected_call), dict)
    ):
        return CheckError("reference_error:malformed", f"Malformed ground-truth call {expected_call!r}.")
    expected_args = _only_value(expected_call)
    parameters = doc.get("parameters") if isinstance(doc.get("parameters"), dict) else {}
    declared = parameters.get("properties") or {}
    name = doc.get("name")
    if underscore_to_dot and isinstance(name, str):
        name = name.replace(".", "_")  # such models cannot emit "." in a function name
    if name not in call:
        return CheckError("simple_function_checker:wrong_func_name", f"Function {name!r} not found in the call.")
    arguments = call[name]
    for param in parameters.get("required") or []:
        if param not in arguments:
            return CheckError("simple_function_checker:missing_required", f"Missing required parameter {param!r}.")
    for param, value in arguments.items():
        if param not in declared or param not in expected_args:
            return CheckError("simple_function_checker:unexpected_param", f"Unexpected parameter {param!r}.")
        failure = check_argument(param, value, expected_args[param], declared[param], language)
        if failure:
            return failure
    for param, accepted in expected_args.items():
        if param not in arguments and not allows_omission(accepted):
            return CheckError(
                "simple_function_checker:missing_optional", f"Parameter {param!r} is missing and not optional."
            )
    return None


def _only_value(mapping: dict) -> Any:
    return next(iter(mapping.values()))


__all__ = [
    "CATEGORIES",
    "CategorySpec",
    "canonical_category",
    "check_ast",
    "check_call",
    "check_relevance",
    "is_call_list",
    "score_bfcl",
]
