"""Java and JavaScript argument literals -> Python values, read the way BFCL's AST checker reads them.

In BFCL's Java and JavaScript categories a model passes every argument as a *string* holding a source
literal (``"true"``, ``"5L"``, ``"new int[]{1, 2}"``, ``"[1, 2]"``, ``"{a: 1}"``); the checker turns that
string into a Python value before comparing it with the possible answers. The rules below are BFCL's
(bfcl-eval 2026.3.23, ``type_convertor/java_type_converter.py`` and ``js_type_converter.py``), restated:

* A literal that does not parse is returned unchanged, as the string it was: the checker then treats it as
  a plain string (which only matches a possible answer that is itself that string, e.g. a variable name).
* Numbers are recognised by anchored regular expressions. Python's ``$`` also matches before one final
  ``"\\n"``, so ``"12\\n"`` reads as 12 exactly as it does in BFCL; ``\\d`` accepts any Unicode digit, as
  ``int()`` does.
* Collections are found with ``re.search`` / ``re.match`` and split on commas (no quote awareness), so a
  comma inside a quoted element splits it; nested braces end an object at the first ``}``. These are
  BFCL's behaviours and are kept on purpose: the scorer must agree with the leaderboard.

Types BFCL declares but never implemented (Java ``Set``, ``Hashtable``, ``Queue``, ``Stack``) raise
``UnsupportedType``; BFCL raises ``NotImplementedError`` there (no question in v2 or v4 uses them).
"""

from __future__ import annotations

import re
from typing import Any


class UnsupportedType(ValueError):
    """A declared parameter type BFCL cannot convert (its checker would raise)."""


# Python types the checker compares converted values against.
JAVA_TYPES: dict[str, type] = {
    "byte": int, "short": int, "integer": int, "long": int,
    "float": float, "double": float,
    "boolean": bool,
    "char": str, "String": str, "any": str,
    "Array": list, "ArrayList": list, "Queue": list, "Stack": list,
    "Set": set,
    "HashMap": dict, "Hashtable": dict,
}  # fmt: skip
JS_TYPES: dict[str, type] = {
    "String": str, "any": str,
    "integer": int, "Bigint": int,
    "float": float,
    "Boolean": bool,
    "dict": dict,
    "array": list,
}  # fmt: skip

# ---- Java ---------------------------------------------------------------------------------------------

_JAVA_INTEGER = re.compile(r"^-?\d+$")
_JAVA_FLOAT_F = re.compile(r"^(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)[fF]$")  # 1.5f, 3e3F
_JAVA_DOUBLE = re.compile(r"^-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?$")
_JAVA_LONG_L = re.compile(r"^(-?\d+)[lL]$")  # 5L
_JAVA_ARRAY = re.compile(r"new\s+\w+\[\]\s*\{(.*?)\}")  # new int[]{1, 2}
_JAVA_ARRAYLIST_ASLIST = re.compile(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)")
_JAVA_ARRAYLIST_ADDS = re.compile(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", re.DOTALL)
_JAVA_ADD_CALL = re.compile(r"add\((.+?)\)")
_JAVA_ARRAYLIST_EMPTY = re.compile(r"new\s+ArrayList<\w*>\(\)")
_JAVA_HASHMAP_PUTS = re.compile(r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}", re.DOTALL)
_JAVA_PUT_CALL = re.compile(r"put\(\"(.*?)\",\s*(.*?)\)")
_JAVA_HASHMAP_EMPTY = re.compile(r"new\s+HashMap<.*?>\s*\(\)")


def java_value(text: str, java_type: str, item_type: str | None = None) -> Any:
    """Read a Java literal of the declared type; ``text`` itself when it is not one."""
    if java_type not in JAVA_TYPES:
        raise UnsupportedType(f"unknown Java type {java_type!r}")
    if java_type in ("byte", "short", "integer"):
        return int(text) if _JAVA_INTEGER.match(text) else text
    if java_type == "float":  # Java float literals need their f suffix
        match = _JAVA_FLOAT_F.match(text)
        return float(match.group(1)) if match else text
    if java_type == "double":
        return float(text) if _JAVA_DOUBLE.match(text) else text
    if java_type == "long":  # and longs their L suffix
        match = _JAVA_LONG_L.match(text)
        return int(match.group(1)) if match else text
    if java_type == "boolean":
        return text == "true" if text in ("true", "false") else text
    if java_type in ("char", "String", "any"):
        # BFCL's char pattern can never match, so a char stays as written, quotes included.
        return text
    if java_type == "Array":
        return _java_array(text, item_type)
    if java_type == "ArrayList":
        return _java_arraylist(text, item_type)
    if java_type == "HashMap":
        return _java_hashmap(text)
    raise UnsupportedType(f"BFCL does not convert Java {java_type} values")


def _java_array(text: str, item_type: str | None) -> Any:
    match = _JAVA_ARRAY.search(text)
    if not match:
        return text
    parts = [part.strip() for part in match.group(1).split(",") if part.strip()]
    return [java_value(part, item_type) if item_type else _java_untyped(part) for part in parts]


def _java_arraylist(text: str, item_type: str | None) -> Any:
    match = _JAVA_ARRAYLIST_ASLIST.search(text)
    if match:
        parts = [part.strip() for part in match.group(1).split(",")]
    else:
        match = _JAVA_ARRAYLIST_ADDS.search(text)
        if match:
            parts = [part.strip() for part in _JAVA_ADD_CALL.findall(match.group(1))]
        elif _JAVA_ARRAYLIST_EMPTY.search(text):
            return []
        else:
            return text
    return [_java_arraylist_element(part, item_type) for part in parts]


def _java_arraylist_element(part: str, item_type: str | None) -> Any:
    if item_type in ("char", "String"):
        return part[1:-1]  # drop the quotes without looking at them
    return java_value(part, item_type) if item_type else _java_untyped(part)


def _java_hashmap(text: str) -> Any:
    match = _JAVA_HASHMAP_PUTS.search(text)
    if match:
        body = match.group(1)
        if not body.strip():
            return {}
        return {key: _java_untyped(raw.strip()) for key, raw in _JAVA_PUT_CALL.findall(body)}
    return {} if _JAVA_HASHMAP_EMPTY.search(text) else text


def _java_untyped(text: str) -> Any:
    """An element whose Java type is not declared: guess from its spelling."""
    if text in ("true", "false"):
        return text == "true"
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    long_match = _JAVA_LONG_L.match(text)
    if long_match:
        return int(long_match.group(1))
    float_match = _JAVA_FLOAT_F.match(text)
    if float_match:
        return float(float_match.group(1))
    return _python_number_or_text(text)


def _python_number_or_text(text: str) -> Any:
    # BFCL falls back on Python's own int() then float(), with all their leniency ("1_0", " 1", "nan").
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


# ---- JavaScript ---------------------------------------------------------------------------------------

_JS_INTEGER = re.compile(r"^-?\d+$")
_JS_FLOAT = re.compile(r"^-?\d+(?:\.\d+)?$")
_JS_BIGINT = re.compile(r"^(-?\d+)n$")
_JS_ARRAY_2D = re.compile(r"\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\)")
_JS_ARRAY = re.compile(r"\[(.*?)\]|\bnew\s+Array\((.*?)\)")
_JS_BRACKETED = re.compile(r"\[(.*?)\]")
_JS_OBJECT = re.compile(r"\{(.*?)\}")
_JS_OBJECT_PAIR = re.compile(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)")


def js_value(text: str, js_type: str, item_type: str | None = None) -> Any:
    """Read a JavaScript literal of the declared type; ``text`` itself when it is not one."""
    if js_type not in JS_TYPES:
        raise UnsupportedType(f"unknown JavaScript type {js_type!r}")
    if js_type == "String":
        return text[1:-1] if _is_quoted(text) else text
    if js_type == "integer":
        return int(text) if _JS_INTEGER.match(text) else text
    if js_type == "float":
        return float(text) if _JS_FLOAT.match(text) else text
    if js_type == "Bigint":
        match = _JS_BIGINT.match(text)
        return int(match.group(1)) if match else text
    if js_type == "Boolean":
        return text == "true" if text in ("true", "false") else text
    if js_type == "dict":
        return _js_object(text)
    if js_type == "array":
        return _js_array(text, item_type)
    return text  # any


def _is_quoted(text: str) -> bool:
    return (text.startswith('"') and text.endswith('"')) or (text.startswith("'") and text.endswith("'"))


def _js_array(text: str, item_type: str | None) -> Any:
    code = text.strip()
    try:
        nested = _JS_ARRAY_2D.match(code)
        if nested:
            return [_js_row(index, row) for index, row in enumerate(_JS_BRACKETED.findall(nested.group(0)))]
        flat = _JS_ARRAY.match(code)
        if not flat:
            return code  # note: the stripped text, as BFCL returns it
        body = flat.group(1) if flat.group(1) is not None else (flat.group(2) or "")
        parts = body.strip().split(",") if body.strip() else []
        if not item_type:
            return [_js_untyped(part) for part in parts]
        # BFCL passes "String" as the element's own item type when it is quoted (matters for arrays of arrays).
        return [js_value(part.strip(), item_type, "String" if _starts_quoted(part) else None) for part in parts]
    except UnsupportedType:
        return code


def _starts_quoted(part: str) -> bool:
    return part.strip().startswith(("'", '"'))


def _js_row(index: int, row: str) -> list:
    # The first inner match of "[[1, 2], [3]]" still carries the outer "[".
    row = row.strip()
    if index == 0 and row.startswith("["):
        row = row[1:]
    return [_js_untyped(part) for part in row.split(",")]


def _js_object(text: str) -> Any:
    code = text.strip()
    if code == "{}":
        return {}
    match = _JS_OBJECT.match(code)
    if not match:
        return code
    result: dict[str, Any] = {}
    for raw_key, raw_value in _JS_OBJECT_PAIR.findall(match.group(1)):
        key = raw_key.strip().strip("'\"")
        value = raw_value.strip()
        if value.startswith("[") and value.endswith("]"):
            result[key] = _js_array(value, None)
        elif value.startswith("{") and value.endswith("}"):
            result[key] = _js_object(value)
        else:
            result[key] = _js_untyped(value.strip("'\""))
    return result


def _js_untyped(text: str) -> Any:
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if _is_quoted(text):
        return text[1:-1]
    return _python_number_or_text(text)
