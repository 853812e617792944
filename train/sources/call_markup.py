"""Tool-call markup written inside message text, found and parsed (or refused) in one place.

Many chat exports keep the calls as the model wrote them instead of in structured fields: Hermes and
Qwen ``<tool_call>{"name", "arguments"}</tool_call>`` blocks in the assistant text, the tools as JSON
inside ``<tools>…</tools>`` in the system prompt, results as ``<tool_response>…</tool_response>`` in
tool turns (NousResearch hermes-function-calling-v1 and the ShareGPT sets derived from it). Read as
plain text they train a model on its own markup with no tools listed and no call checked. The readers
(``sharegpt``, ``openai``), ``data convert`` and ``data validate`` use this module so that such markup
either becomes canonical ``tool_calls``/``tools``/tool messages or is refused with the markup named.

Layouts parsed:

* Hermes/Qwen: ``<tool_call>`` blocks whose body is a JSON object ``{"name", "arguments"}`` (Hermes v1
  writes Python literals, ``{'arguments': {...}, 'name': 'f'}``: read with ``ast``, never evaluated);
  ``<tools>`` holding a JSON list, one JSON definition per line (Qwen's template), or a Python list;
  ``<tool_response>`` blocks (``{"name", "content"}`` bodies give the result's tool name).
* Llama 3.1: ``<|python_tag|>`` then JSON ``{"name", "parameters"}`` (or ``"arguments"``), ``;``-separated.
* Mistral: ``[TOOL_CALLS]`` then a JSON list of ``{"name", "arguments"}`` (v3) or ``name[ARGS]{...}`` (v11).

Markers of other layouts (``<functioncall>``, DeepSeek's, Kimi's, InternLM's, ...) are recognised but
not parsed: a reader rejects the record naming the marker. Only assistant, tool and system turns are
looked at: markup in user text is what the user typed, and stays text (as control tokens do). The markers
themselves, and the ``data validate`` check, are in ``train.base.call_markers``: it needs only the
schema, so ``train.validate`` (a layer below the readers) can use it.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from typing import Any

from train.base.call_markers import (
    CODE,
    OTHER_MARKERS,
    PYTHON_TAG,
    TOOL_CALLS,
    assistant_marker,
    blocks,
    markup_findings,
    tool_blocks,
    without,
)
from train.base.pysyntax import MAX_SOURCE_CHARS, PySyntaxError, literal
from train.base.records import STRICT_JSON, parse_json_string
from train.schema import Conversation, SchemaError

Call = tuple[str, dict[str, Any]]  # (name, arguments object)
_MISTRAL_V11 = re.compile(r"\s*([A-Za-z0-9_.\-]+)\[ARGS\]")
KNOWN = "<tool_call> JSON (Hermes/Qwen), <|python_tag|> JSON (Llama 3.1), [TOOL_CALLS] (Mistral)"
# A whole Hermes/Qwen tool section of a system prompt: its intro, the <tools> block and the answer-format example.
# Removed with the tools, or the format would render the tool instructions twice. Found with str.find, not one
# regex: a backtracking pattern over a long prompt is the kind of stall data must never cause.
_SECTION_STARTS = ("# Tools\n\n", "You are a function calling AI model.")


# --- reading values written in markup --------------------------------------------------------


def _value(text: str, what: str, path: str) -> Any:
    """A JSON value, or a Python literal (Hermes v1's ``{'name': ...}``); SchemaError naming ``what``."""
    body = text.strip()
    try:
        value = STRICT_JSON.decode(body)
    except (ValueError, RecursionError):
        pass
    else:
        return _encodable(value, what, path)
    if len(body) > MAX_SOURCE_CHARS:
        raise SchemaError(path, f"{what} of {len(body)} characters is too large to read")
    try:
        with warnings.catch_warnings():  # "C:\\dir" keeps its backslash, as Python reads it
            warnings.simplefilter("ignore", (SyntaxWarning, DeprecationWarning))
            tree = ast.parse(body, mode="eval")  # parsed, never evaluated: only literals become values
        value = literal(tree.body)
    except (SyntaxError, PySyntaxError, RecursionError, MemoryError, ValueError):
        raise SchemaError(path, f"{what} is neither JSON nor a Python literal: {_quote(body)}") from None
    return _encodable(value, what, path)


def _encodable(value: Any, what: str, path: str) -> Any:
    """``value``, unless an escape in the markup made a lone surrogate: not text (the record-level check
    cannot see it, it was still an escape there), it could not be written as UTF-8."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise SchemaError(path, f"text-encoding: {what} holds a lone surrogate") from None
    return value


def _quote(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _call(item: Any, markup: str, path: str, keys: tuple[str, ...] = ("arguments", "parameters")) -> Call:
    """``{"name", "arguments"}`` (or ``parameters``) -> (name, arguments object)."""
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
        raise SchemaError(path, f"{markup} call is not an object with a string 'name': {_quote(json.dumps(item))}")
    given = [key for key in keys if key in item]
    unknown = sorted(set(item) - {"name", *keys})
    if unknown or len(given) > 1:
        raise SchemaError(path, f"{markup} call {item['name']!r} has unexpected key(s) {unknown or given}")
    arguments = item.get(given[0], {}) if given else {}
    if isinstance(arguments, str):  # some exports double-encode the arguments
        arguments = parse_json_string(arguments, f"{path} ({markup} {item['name']!r} arguments)")
    if not isinstance(arguments, dict):
        raise SchemaError(
            path, f"{markup} call {item['name']!r}: arguments are {type(arguments).__name__}, not an object"
        )
    return item["name"], arguments


def _content(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# --- finding markup ------------------------------------------------------------------------------


def assistant_calls(text: str, path: str) -> tuple[str | None, list[Call]] | None:
    """(text left, calls) from assistant text with call markup; None when it has none.

    SchemaError names the markup when it is recognised but cannot be read (bad JSON, an unclosed
    block, a layout not parsed here): such text must not be kept as if it were prose.
    """
    marker = assistant_marker(text)
    if marker is None:
        return None
    if marker in ("<tool_call>", "</tool_call>"):
        return _hermes_calls(text, path)
    if marker == PYTHON_TAG:
        return _tagged_calls(text, path, PYTHON_TAG, _llama_calls)
    if marker == TOOL_CALLS:
        return _tagged_calls(text, path, TOOL_CALLS, _mistral_calls)
    raise SchemaError(path, f"call markup {marker!r} in assistant text, a layout not parsed here (known: {KNOWN})")


def _hermes_calls(text: str, path: str) -> tuple[str | None, list[Call]]:
    found = blocks(text, "tool_call")
    calls = [_call(_value(block.body, "<tool_call> body", path), "<tool_call>", path) for block in found]
    rest = without(text, found)
    for stray in ("<tool_call>", "</tool_call>"):
        if stray in rest:
            raise SchemaError(path, f"unclosed or unopened {stray} markup in assistant text")
    if other := assistant_marker(rest):
        raise SchemaError(path, f"call markup {other!r} beside <tool_call> blocks in assistant text")
    return rest.strip() or None, calls


def _tagged_calls(text: str, path: str, tag: str, parse: Any) -> tuple[str | None, list[Call]]:
    """Text before the first ``tag`` is content; everything after it must be calls."""
    head, _, tail = text.partition(tag)
    calls = parse(tail.replace(tag, " "), path)
    if not calls:
        raise SchemaError(path, f"{tag} in assistant text with no call after it")
    return head.strip() or None, calls


def _json_sequence(text: str, path: str, markup: str, separators: str = "; \t\r\n,") -> list[Any]:
    """JSON values one after another (separated by ``separators``); SchemaError at the first non-JSON."""
    values, position = [], 0
    while True:
        while position < len(text) and text[position] in separators:
            position += 1
        if position >= len(text):
            return values
        try:
            value, position = STRICT_JSON.raw_decode(text, position)
        except (ValueError, RecursionError):
            raise SchemaError(path, f"{markup} is not followed by JSON calls: {_quote(text[position:])}") from None
        values.append(_encodable(value, f"{markup} call", path))


def _llama_calls(tail: str, path: str) -> list[Call]:
    return [_call(item, PYTHON_TAG, path) for item in _json_sequence(tail, path, PYTHON_TAG)]


def _mistral_calls(tail: str, path: str) -> list[Call]:
    if tail.lstrip().startswith("["):  # v3: [TOOL_CALLS] [{"name", "arguments"}, ...]
        items = [
            i
            for value in _json_sequence(tail, path, TOOL_CALLS)
            for i in (value if isinstance(value, list) else [value])
        ]
        return [_call(item, TOOL_CALLS, path, ("arguments",)) for item in items]
    calls, position = [], 0  # v11+: [TOOL_CALLS]name[ARGS]{...}[TOOL_CALLS]name2[ARGS]{...}
    while tail[position:].strip():
        match = _MISTRAL_V11.match(tail, position)
        if match is None:
            raise SchemaError(
                path, f"{TOOL_CALLS} is not followed by JSON calls or name[ARGS]{{...}}: {_quote(tail[position:])}"
            )
        try:
            arguments, position = STRICT_JSON.raw_decode(tail, match.end())
        except (ValueError, RecursionError):
            raise SchemaError(path, f"{TOOL_CALLS} {match.group(1)!r}: [ARGS] are not JSON") from None
        arguments = _encodable(arguments, f"{TOOL_CALLS} call", path)
        calls.append(_call({"name": match.group(1), "arguments": arguments}, TOOL_CALLS, path))
    return calls


def tool_results(text: str, path: str) -> list[tuple[str | None, str]] | None:
    """[(tool name or None, content)] from a tool turn of ``<tool_response>`` blocks; None when it has none.

    A ``{"name", "content"}`` body (Hermes) gives the name and the content (JSON text unless a string);
    any other body is the content as written.
    """
    if "<tool_response>" not in text and "</tool_response>" not in text:
        return None
    results: list[tuple[str | None, str]] = []
    found = blocks(text, "tool_response")
    for block in found:
        body = block.body.strip()
        try:
            value = _value(body, "<tool_response> body", path)
        except SchemaError:
            value = None  # a result is any text
        if isinstance(value, dict) and set(value) == {"name", "content"} and isinstance(value["name"], str):
            results.append((value["name"], _content(value["content"])))
        else:
            results.append((None, body))
    rest = without(text, found)
    if "<tool_response>" in rest or "</tool_response>" in rest:
        raise SchemaError(path, "unclosed or unopened <tool_response> markup in tool text")
    if rest.strip():
        raise SchemaError(path, f"text outside the <tool_response> blocks of a tool turn: {_quote(rest.strip())}")
    return results


def system_tools(text: str, path: str) -> tuple[str | None, list[dict[str, Any]]] | None:
    """(system text without its tool section, function definitions) from ``<tools>`` blocks; None when none.

    A ``<tools> </tools>`` with nothing inside is prose naming the tag ("signatures within <tools> </tools>
    XML tags"), not a block. The known Hermes/Qwen tool section (intro, block, answer format) goes whole.
    """
    found = tool_blocks(text)
    if not found:
        return None
    specs: list[dict[str, Any]] = []
    for block in found:
        specs += _definitions(block.body, path)
    section = _tool_section(text, found[0].start, found[0].end)
    rest = text if section is None else text[: section[0]] + "\n\n" + text[section[1] :]
    return without(rest, tool_blocks(rest)).strip() or None, specs


def _tool_section(text: str, start: int, end: int) -> tuple[int, int] | None:
    """(start, end) of the known tool section around the ``<tools>`` block at ``text[start:end]``: from the
    intro before it to the end of the ``<tool_call>{… <function-name> …}</tool_call>`` example after it (the
    first non-empty one: "within <tool_call></tool_call> XML tags" is prose naming the tag)."""
    intro = max(text.rfind(opening, 0, start) for opening in _SECTION_STARTS)
    example = next((b for b in blocks(text[end:], "tool_call") if b.body.strip()), None)
    if intro < 0 or example is None:
        return None
    body = example.body.strip()  # {"name": <function-name>, "arguments": <args-json-object>}
    if (body[:1], body[-1:], body.count("{"), body.count("}")) != ("{", "}", 1, 1) or "<function-name>" not in body:
        return None
    return intro, end + example.end


def _definitions(body: str, path: str) -> list[dict[str, Any]]:
    """A JSON (or Python) list or object, else one JSON object per line (Qwen's template)."""
    try:
        value = _value(body, "<tools> block", path)
    except SchemaError:
        lines = [line for line in body.splitlines() if line.strip()]
        try:
            value = [STRICT_JSON.decode(line.strip()) for line in lines]
        except (ValueError, RecursionError):
            raise SchemaError(
                path, f"the <tools> block of the system prompt is not JSON function definitions: {_quote(body.strip())}"
            ) from None
    items = _encodable(value if isinstance(value, list) else [value], "<tools> block", path)
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise SchemaError(
                f"{path}.<tools>[{index}]", f"expected a function definition object, got {type(item).__name__}"
            )
    return items


# --- one record's markup, for a reader --------------------------------------------------------


class RecordMarkup:
    """What a reader found in one record's text: the system prompt's tools, the markups it parsed and the
    system text as the source wrote it (``meta["call_markup"]``: the conversion stays lossless)."""

    def __init__(self) -> None:
        self.specs: list[dict[str, Any]] = []  # function definitions, in the order written
        self.parsed: set[str] = set()
        self.systems: list[str] = []

    def system(self, text: str, path: str) -> str | None:
        """The system text to keep (None: nothing left), its ``<tools>`` taken out."""
        found = system_tools(text, path)
        if found is None:
            return text
        rest, specs = found
        self.specs += specs
        self.parsed.add("<tools>")
        self.systems.append(text)
        return rest

    def assistant(self, text: str, path: str) -> tuple[str | None, list[Call]] | None:
        found = assistant_calls(text, path)
        if found is not None:
            self.parsed.add(assistant_marker(text) or "")
        return found

    def results(self, text: str, path: str) -> list[tuple[str | None, str]] | None:
        found = tool_results(text, path)
        if found is not None:
            self.parsed.add("<tool_response>")
        return found

    def new_specs(self, listed: list[str]) -> list[dict[str, Any]]:
        """The system prompt's definitions of tools the record does not list already (by name)."""
        seen = set(listed)
        out = []
        for spec in self.specs:
            function = spec.get("function") if isinstance(spec.get("function"), dict) else spec
            name = function.get("name")
            if not isinstance(name, str):  # not a definition: the reader's tool check says why
                out.append(spec)
            elif name not in seen:
                seen.add(name)
                out.append(spec)
        return out

    def meta(self) -> dict[str, Any]:
        """``{"call_markup": {"parsed": [...], "system": [original texts]}}``, or {} when none was found."""
        if not self.parsed:
            return {}
        found: dict[str, Any] = {"parsed": sorted(self.parsed)}
        if self.systems:
            found["system"] = self.systems
        return {"call_markup": found}


# --- canonical records: markup left in text (``data convert`` and ``data validate``) ------------


def markup_reject(conv: Conversation) -> str | None:
    """The reason to reject a converted record whose text still carries call markup, or None."""
    findings = list(markup_findings(conv))
    return "; ".join(f"{code} at {where}: {reason}" for code, where, reason in findings) or None


__all__ = [
    "CODE",
    "KNOWN",
    "OTHER_MARKERS",
    "RecordMarkup",
    "assistant_calls",
    "assistant_marker",
    "markup_findings",
    "markup_reject",
    "system_tools",
    "tool_results",
]
