"""BFCL's Java and JavaScript categories: the function docs as BFCL prompts them, and gold values as the strings
a model must write.

In BFCL's Java and JavaScript categories every argument is passed as a string holding a source literal
(``"true"``, ``"5L"``, ``"new int[]{1, 2}"``, ``"[1, 2]"``); the checker reads it back by the declared type
(``train.evaluation.bfcl.literals``). So BFCL shows the model every parameter as a string:

* ``prompt_functions`` is bfcl-eval 2026.3.23's ``_func_doc_language_specific_pre_processing``
  (``bfcl_eval/utils.py``): the description gains " Note that the provided function is in Java 8 SDK syntax." (or
  JavaScript syntax), each parameter " This is Java boolean type parameter in string representation." (or "This
  parameter can be of any type of Java object in string representation." for ``any``), arrays name their element
  type and lose ``items``, JavaScript dicts spell out their schema and lose ``properties``, and every parameter's
  type becomes ``string``. The reader builds the tools from these docs, so text answers and native tool calls
  see what BFCL's prompting and function-calling handlers show. ``meta["bfcl_functions"]`` keeps the original
  docs: the checker needs the declared types.
* ``string_value`` writes a possible answer's value as the string BFCL's checker reads back to that value: a
  Java ``long`` 5 is ``"5L"``, a ``float`` ``"1.5f"``, an ``Array`` of ints ``"new int[]{1, 2}"``, an
  ``ArrayList`` of Strings ``new ArrayList<String>(Arrays.asList("a", "b"))``, a ``HashMap``
  ``new HashMap<String, Object>() {{ put("k", 1); }}``; a JavaScript array ``["a", 1]``, a dict ``{k: "v"}``, a
  Bigint ``"5n"``. A string answer for a non-string type (BFCL's "variable", e.g. ``mapArea``) is written as it
  is. These are the gold arguments of the reader's assistant turn (a native tool call holds them as they are).

Some possible answers cannot be reached from any string (a Java ``any`` parameter whose answer is the number
20.5, an ``ArrayList`` of ``any`` holding numbers): BFCL's checker reads every ``any`` as a string. The value is
still written (``"20.5"``); such an item scores wrong in BFCL as here.
"""

from __future__ import annotations

import copy
import json
from typing import Any

JAVA, JAVASCRIPT, PYTHON = "java", "javascript", "python"
# Element type -> the Java name an array of it is declared with (``new int[]{...}``) and its boxed name.
_JAVA_ARRAY_NAMES = {"integer": "int", "any": "Object"}
_JAVA_BOXED = {"integer": "Integer", "long": "Long", "boolean": "Boolean", "float": "Float", "double": "Double",
               "char": "Character", "byte": "Byte", "short": "Short", "any": "Object"}  # fmt: skip


def category_language(category: str) -> str:
    """BFCL's ``is_java`` / ``is_js`` on a category name (``java``, ``simple_javascript``, ...)."""
    if "javascript" in category:
        return JAVASCRIPT
    return JAVA if "java" in category else PYTHON


def _hint(language: str) -> str:
    syntax = "Java 8 SDK" if language == JAVA else "JavaScript"
    return f" Note that the provided function is in {syntax} syntax."


def prompt_functions(functions: list[Any], language: str) -> list[Any]:
    """The function docs as BFCL's prompts show them for ``language`` (a deep copy; Python docs unchanged)."""
    if language == PYTHON:
        return functions
    docs = copy.deepcopy(functions)
    name = "Java" if language == JAVA else "JavaScript"
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        doc["description"] = str(doc.get("description", "")) + _hint(language)
        parameters = doc.get("parameters") if isinstance(doc.get("parameters"), dict) else {}
        properties = parameters.get("properties") if isinstance(parameters.get("properties"), dict) else {}
        for param in properties.values():
            if isinstance(param, dict):
                _rewrite_parameter(param, name, language)
    return docs


def _rewrite_parameter(param: dict[str, Any], name: str, language: str) -> None:
    kind = param.get("type")
    description = str(param.get("description", ""))
    if kind == "any":
        description += f" This parameter can be of any type of {name} object in string representation."
    else:
        description += f" This is {name} {kind} type parameter in string representation."
    if kind in (("ArrayList", "Array") if language == JAVA else ("array",)):
        items = param.pop("items", None)
        item_type = items.get("type") if isinstance(items, dict) else None
        description += f" The list elements are of type {item_type}; they are not in string representation."
    if language == JAVASCRIPT and kind == "dict" and "properties" in param:
        schema = json.dumps(param.pop("properties"))
        description += (
            f" The dictionary entries have the following schema; they are not in string representation. {schema}"
        )
    param["description"] = description
    param["type"] = "string"


# ---------------------------------------------------------------- gold values as strings


def string_value(value: Any, param: Any, language: str) -> Any:
    """``value`` (a possible answer) as the string a model passes for a parameter declared as ``param``."""
    if language == PYTHON:
        return value
    kind = param.get("type") if isinstance(param, dict) else None
    items = param.get("items") if isinstance(param, dict) else None
    item_type = items.get("type") if isinstance(items, dict) else None
    if isinstance(value, str):
        return value  # a String, or a variable name standing for a value of the declared type
    if language == JAVA:
        return _java(value, kind, item_type)
    return _js(value, kind, item_type)


def _java(value: Any, kind: Any, item_type: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        if kind == "long":
            return f"{int(value)}L"
        if kind == "float":
            return f"{float(value)!r}f"
        if kind == "double":
            return repr(float(value))
        return repr(value)
    if isinstance(value, list):
        if kind == "ArrayList":
            if not value:
                return "new ArrayList<>()"
            box = "String" if item_type in ("String", "char", None) else _JAVA_BOXED.get(item_type, item_type)
            elements = ", ".join(_java_element(item, item_type, in_arraylist=True) for item in value)
            return f"new ArrayList<{box}>(Arrays.asList({elements}))"
        array_name = _JAVA_ARRAY_NAMES.get(item_type, item_type or "Object")
        elements = ", ".join(_java_element(item, item_type, in_arraylist=False) for item in value)
        return f"new {array_name}[]{{{elements}}}"
    if isinstance(value, dict):
        puts = " ".join(
            f'put("{key}", {_java_element(item, None, in_arraylist=False)});' for key, item in value.items()
        )
        return f"new HashMap<String, Object>() {{{{ {puts} }}}}" if puts else "new HashMap<String, Object>()"
    return str(value)


def _java_element(value: Any, item_type: Any, in_arraylist: bool) -> str:
    # BFCL reads typed elements by their type as written (a String or any element keeps its quotes), except an
    # ArrayList's String and char elements, whose first and last characters it drops; untyped elements (a
    # HashMap's values) by their spelling, a quoted one as a string.
    if isinstance(value, str):
        quoted = item_type is None or (in_arraylist and item_type in ("String", "char"))
        return f'"{value}"' if quoted else value
    return _java(value, item_type, None)


def _js(value: Any, kind: Any, item_type: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        if kind == "Bigint":
            return f"{int(value)}n"
        return repr(float(value)) if kind == "float" else repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_js_element(item, item_type) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_js_key(key)}: {_js_element(item, None)}" for key, item in value.items()) + "}"
    return str(value)


def _js_element(value: Any, item_type: Any) -> str:
    # BFCL unquotes String and untyped elements (a dict's values); an "any" element is kept as written.
    if isinstance(value, str):
        return value if item_type == "any" else f'"{value}"'
    return _js(value, item_type, None)


def _js_key(key: Any) -> str:
    text = str(key)
    return text if text.isidentifier() else f'"{text}"'


__all__ = ["JAVA", "JAVASCRIPT", "PYTHON", "category_language", "prompt_functions", "string_value"]
