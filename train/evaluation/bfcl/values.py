"""One argument of one call against BFCL's possible answers: type check, then value match.

``check_argument`` returns ``None`` when the value is accepted, else an ``CheckError`` carrying BFCL's
error type. The rules restate bfcl-eval 2026.3.23's ``ast_checker.py``; see ``train/evaluation/bfcl/scorer.py``
for the full list, including the quirks kept on purpose so that scores match the leaderboard.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from train.evaluation.bfcl.literals import JAVA_TYPES, JS_TYPES, UnsupportedType, java_value, js_value

PYTHON_TYPES: dict[str, type] = {
    "string": str, "any": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list, "tuple": list,
    "dict": dict,
}  # fmt: skip
# Declared types whose element type (``items.type``) is also checked, one level deep, per language.
TYPES_WITH_ITEMS = {"python": {"array", "tuple"}, "java": {"Array", "ArrayList"}, "javascript": {"array"}}
LANGUAGE_TYPES = {"python": PYTHON_TYPES, "java": JAVA_TYPES, "javascript": JS_TYPES}

# Characters BFCL deletes before comparing strings: space , . / - _ * ^ (only the ASCII space).
_IGNORED_IN_STRINGS = re.compile(r"[ ,./\-_*^]")


@dataclass(frozen=True)
class CheckError:
    error_type: str
    message: str


def normalize_string(text: str) -> str:
    """BFCL's string comparison key: drop ' ,./-_*^', lowercase, single quotes -> double quotes.

    So "April 1, 2024" == "april 1 2024" == "APRIL-1-2024", but tabs, newlines, "!" or ":" still count.
    """
    return _IGNORED_IN_STRINGS.sub("", text).lower().replace("'", '"')


def _normalized(value: Any) -> Any:
    return normalize_string(value) if type(value) is str else value


def allows_omission(accepted: Any) -> bool:
    """``""`` among the possible answers marks the argument optional.

    A bare string in place of the list (a malformed reference) always allows it: BFCL tests ``"" in value``,
    and the empty string is inside every string.
    """
    if isinstance(accepted, str):
        return True
    return isinstance(accepted, (list, tuple, dict)) and "" in accepted


def _as_sequence(accepted: Any) -> list | None:
    """How BFCL indexes a possible answer that should be a list: by position, so a string gives its
    characters and an empty dict gives []. None for what BFCL cannot index (it raises there)."""
    if isinstance(accepted, (str, list, tuple)):
        return list(accepted)
    if isinstance(accepted, dict) and not accepted:
        return []
    return None


def check_argument(param: str, value: Any, accepted: list, param_doc: dict, language: str) -> CheckError | None:
    if type(accepted) is not list:
        return CheckError("possible_answer:malformed", f"Possible answers for {param!r} are not a list: {accepted!r}.")
    types = _declared_types(param, param_doc, language)
    if isinstance(types, CheckError):
        return types
    declared, target, item_declared, item_target = types

    if language in ("java", "javascript"):
        if type(value) is not str:
            # Java and JavaScript arguments are source literals, always passed as strings.
            kind = "java" if language == "java" else "js"
            return CheckError(
                f"type_error:{kind}", f"Parameter {param!r} must be a {language} literal in a string, got {value!r}."
            )
        try:
            convert = java_value if language == "java" else js_value
            value = convert(value, declared, item_declared)
        except UnsupportedType as error:
            return CheckError("type_error:unsupported", f"Parameter {param!r}: {error}.")
    elif declared == "tuple" and type(value) is tuple:
        value = list(value)  # references come from JSON, where tuples are lists
    elif declared == "float" and type(value) is int:
        try:
            value = float(value)  # Python promotes int to float; BFCL accepts 3 for 3.0
        except OverflowError:
            return CheckError("type_error:simple", f"Parameter {param!r}: {value} does not fit a float.")

    is_variable, error = _check_type(param, value, accepted, target, item_target)
    if error:
        return error
    if not is_variable:
        if target is dict:
            return match_dict(param, value, accepted)
        if target is list and item_target is dict:
            return match_dict_list(param, value, accepted)
        if target is str:
            return match_string(param, value, accepted)
        if target is list:
            return match_list(param, value, accepted)
    if value not in accepted:  # Python equality: 1 == 1.0 == True, as in BFCL
        return CheckError("value_error:others", f"Invalid value for {param!r}: {value!r}. Expected one of {accepted}.")
    return None


def _declared_types(param: str, param_doc: Any, language: str) -> tuple | CheckError:
    """(declared type, its Python type, element type, its Python type) of a parameter, or why BFCL cannot check it."""
    types = LANGUAGE_TYPES[language]
    declared = param_doc.get("type") if isinstance(param_doc, dict) else None
    target = types.get(declared) if isinstance(declared, str) else None
    if target is None:
        return CheckError("type_error:unsupported", f"Parameter {param!r} has a type BFCL cannot check: {declared!r}.")
    if declared not in TYPES_WITH_ITEMS[language]:
        return declared, target, None, None
    items = param_doc.get("items")
    item_declared = items.get("type") if isinstance(items, dict) else None
    item_target = types.get(item_declared) if isinstance(item_declared, str) else None
    if item_target is None:
        return CheckError(
            "type_error:unsupported", f"Parameter {param!r} has an element type BFCL cannot check: {item_declared!r}."
        )
    return declared, target, item_declared, item_target


def _answer_type(accepted: Any) -> type | None:
    """The type of the first real possible answer ("" marks omission); None when there is none."""
    for answer in accepted:
        if answer != "":
            return type(answer)
    return None


def _check_type(param: str, value: Any, accepted: list, target: type, item_target: type | None):
    """Returns (is_variable, error).

    "Variable" is BFCL's word for a possible answer whose type differs from the declared one (a variable
    name like "data['sales']" for an array, null for a string): such a value is then compared exactly,
    without string normalisation or list/dict matching.
    """
    answer_type = _answer_type(accepted)
    is_variable = answer_type is not None and answer_type is not target
    if type(value) is target:
        if item_target is None or any(_elements_fit(value, answer, item_target) for answer in accepted):
            return is_variable, None
        error_type = "type_error:nested" if type(value) is answer_type else "type_error:simple"
        return False, CheckError(error_type, f"Elements of {param!r} have the wrong type: {value!r}.")
    if answer_type is not None and type(value) is answer_type:
        return True, None
    return False, CheckError(
        "type_error:simple", f"Incorrect type for {param!r}: got {type(value).__name__}, value {value!r}."
    )


def _elements_fit(value: list, answer: Any, item_target: type) -> bool:
    # Only a list-shaped possible answer constrains the elements; "" or a variable name lets anything pass.
    if type(answer) is not list:
        return True
    element_answer_type = _answer_type(answer)
    return all(type(item) is item_target or type(item) is element_answer_type for item in value)


def match_string(param: str, value: str, accepted: list) -> CheckError | None:
    candidates = {normalize_string(answer) for answer in accepted if type(answer) is str}
    if normalize_string(value) in candidates:
        return None
    return CheckError("value_error:string", f"Invalid value for {param!r}: {value!r}. Expected one of {accepted}.")


def match_list(param: str, value: list, accepted: list) -> CheckError | None:
    # Strings directly inside the list are normalised; nested lists and dicts compare exactly.
    normalized = [_normalized(item) for item in value]
    for answer in accepted:
        items = _as_sequence(answer)  # "" reads as [] so an optional list also accepts []
        if items is not None and normalized == [_normalized(item) for item in items]:
            return None
    return CheckError("value_error:list/tuple", f"Invalid value for {param!r}: {value!r}. Expected one of {accepted}.")


def match_dict(param: str, value: Any, accepted: list) -> CheckError | None:
    """A dict argument: each key must be expected and its value one of that key's possible answers;
    expected keys may be missing only when "" is among their answers. Any one possible dict suffices."""
    failure = CheckError("dict_checker:unclear", f"No possible answer to compare {param!r} with.")
    for answer in accepted:
        if answer == "":
            continue
        if type(value) is not dict:
            # Only reachable inside a list of dicts; BFCL raises here (.items() on the element).
            return CheckError("value_error:dict_value", f"Element {value!r} of {param!r} is not a dict.")
        if type(answer) is not dict:
            failure = CheckError("dict_checker:unclear", f"Possible answer {answer!r} for {param!r} is not a dict.")
            continue
        failure = _dict_failure(value, answer)
        if failure is None:
            return None
    return failure


def _dict_failure(value: dict, answer: dict) -> CheckError | None:
    failure = None
    for key, item in value.items():
        if key not in answer:
            failure = CheckError("value_error:dict_key", f"Unexpected dict key {key!r}.")
            break
        candidates = _as_sequence(answer[key])
        if candidates is None or _normalized(item) not in [_normalized(candidate) for candidate in candidates]:
            failure = CheckError(
                "value_error:dict_value",
                f"Invalid value for dict key {key!r}: {item!r}. Expected one of {answer[key]}.",
            )
            break
    # BFCL checks for missing keys even after a bad key, and the later error type wins.
    for key, answers in answer.items():
        if key not in value and not allows_omission(answers):
            return CheckError("value_error:dict_key", f"Missing dict key {key!r}.")
    return failure


def match_dict_list(param: str, value: list, accepted: list) -> CheckError | None:
    """A list of dicts: same length as one possible list, element i matching its dict i (order matters)."""
    failure = CheckError("list_dict_checker:unclear", f"No possible answer to compare {param!r} with.")
    for answer in accepted:
        expected_dicts = _as_sequence(answer)
        if expected_dicts is None or len(expected_dicts) != len(value):
            failure = CheckError("value_error:list_dict_count", f"Wrong number of dicts in {param!r}.")
            continue
        failure = None
        for item, expected in zip(value, expected_dicts):
            failure = match_dict(param, item, [expected])
            if failure:
                break
        if failure is None:
            return None
    return failure
