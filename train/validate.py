"""Tool-aware validation of canonical records: does a conversation make sense for its tools?

``train.schema`` guarantees *structure*; this module checks *meaning*. Each rule is a small
function yielding ``(code, where, reason)`` findings with a stable code; ``check_conversation``
runs them and gives each finding its severity (defaults in ``DEFAULT_SEVERITIES``, overridable
per code, ``"ignore"`` drops a code). ``where`` is a path inside the record, e.g.
``messages[3].tool_calls[0].function.arguments.city``.

Decisions about what real datasets do legitimately:

* A conversation may end with a user turn (eval prompts such as BFCL questions have no answer),
  with a tool result (a prompt waiting for the model's reply) or with an assistant call turn
  whose calls are unanswered (that is what an SFT target looks like). None of these is flagged.
* A call is *unanswered* (warning) when a user turn arrives before its result, or when the
  conversation goes on past the call turn and ends without a result for it.
* Tool results link to calls by ``tool_call_id``. A result without an id (sources with no ids)
  answers the earliest unanswered earlier call to the same tool name (any call when it has no
  name), but only when that call has no id either: once calls carry ids, results must too.
* Two consecutive user turns are a warning (some corpora split one question in two); a system
  message anywhere but first, a tool result not directly after an assistant call turn (or
  another result) and a conversation with no user turn at all are ``role-order`` errors.
  Two assistant turns in a row are not flagged ("let me check" then a call is common). A
  conversation that opens (after system messages) with an assistant turn is a warning
  (``assistant-first``): Qwen2.5's and ChatML's templates render it, mistral-common puts an empty
  user turn before it, but Llama 3.1's template would relabel it as the user message that carries
  the tools, so ``llama3_1`` refuses it there (docs/formats.md).
* A tool's ``parameters`` must be a valid JSON Schema (Draft 2020-12) whose top-level type is
  ``"object"``; arguments of calls to a tool with a broken schema are not checked against it.
  ``$ref`` resolves only inside the schema (and to the JSON Schema meta-schemas): nothing is ever
  fetched, and a reference outside it makes the schema invalid. Pattern matching is bounded: all
  ``pattern``/``patternProperties`` work of one record shares ``REGEX_BUDGET_S`` seconds, and a
  call whose check runs out of it is a ``pattern-timeout`` error (one record must not stall a build).
* Open world (the Meta-Tool paper): a tool a ``meta_tool`` result returned is *defined by
  retrieval*, so it counts as defined although ``tools`` does not list it (``retrieved_tools``).
  ``data validate`` and the training build apply this one rule here, in ``check_conversation``.
* Lone surrogates and NUL characters are errors (they cannot be written as UTF-8 or break
  tokenizers); U+FFFD is a warning of its own (``replacement-char``): text decoded lossily upstream.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import jsonschema
import referencing.exceptions

from train.base.call_markers import markup_findings
from train.base.json_schema import (
    LOCAL_ONLY,
    REGEX_BUDGET_S,
    BoundedValidator,
    PatternFault,
    reference_fault,
    regex_budget,
)
from train.schema import Conversation, Message, SchemaError, Tool, ToolCall, ToolLibrary, ToolQuery

Severity = Literal["error", "warning"]
Setting = Literal["error", "warning", "ignore"]
SETTINGS: tuple[str, ...] = ("error", "warning", "ignore")

DEFAULT_SEVERITIES: dict[str, Severity] = {
    # conversations
    "undefined-tool": "error",
    "arguments-schema": "error",
    "pattern-timeout": "error",
    "invalid-tool-schema": "error",
    "duplicate-tool": "error",
    "orphan-tool-result": "error",
    "unanswered-call": "warning",
    "result-name-mismatch": "warning",
    "role-order": "error",
    "assistant-first": "warning",
    "consecutive-user": "warning",
    "empty-assistant": "error",
    "duplicate-call-id": "error",
    "text-encoding": "error",
    "replacement-char": "warning",
    "call-markup-in-text": "warning",  # tool-call markup kept as text (train.base.call_markers)
    # across records of one file (``data validate``): the eval split and held-out set go by id
    "duplicate-id": "error",
    # tool queries (retrieval datasets); MetaTool's "no tool needed" queries have empty gold sets
    "empty-query": "error",
    "empty-gold": "warning",
    "duplicate-gold-tool": "warning",
    "unknown-gold-tool": "error",
}

MAX_REASON = 200  # a reason quotes values; a 5 MB argument must not become a 5 MB report line

Finding = tuple[str, str, str]  # (code, where, reason)


@dataclass(frozen=True)
class Problem:
    severity: Severity
    code: str  # stable rule name, e.g. "undefined-tool"
    where: str  # path inside the record, e.g. "messages[3].tool_calls[0]"
    message: str

    def __str__(self) -> str:
        return f"{self.code} at {self.where}: {self.message}"


def resolve_severities(overrides: Mapping[str, str] | None = None, strict: bool = False) -> dict[str, Setting]:
    """Defaults, then every warning raised to an error when ``strict``, then explicit overrides
    (an explicit ``CODE=warning`` wins over ``strict``). Unknown codes and levels raise ValueError."""
    settings: dict[str, Setting] = dict(DEFAULT_SEVERITIES)
    if strict:
        settings = {code: "error" if level == "warning" else level for code, level in settings.items()}
    for code, level in (overrides or {}).items():
        if code not in DEFAULT_SEVERITIES:
            raise ValueError(f"unknown check {code!r}; valid checks: {', '.join(DEFAULT_SEVERITIES)}")
        if level not in SETTINGS:
            raise ValueError(f"unknown severity {level!r} for {code}; valid: {', '.join(SETTINGS)}")
        settings[code] = level  # type: ignore[assignment]
    return settings


def _apply(findings: Iterable[Finding], severities: Mapping[str, str] | None) -> list[Problem]:
    settings = resolve_severities(severities)
    problems = []
    for code, where, reason in findings:
        level = settings[code]
        if level != "ignore":
            problems.append(Problem(level, code, where, _clip(reason)))  # type: ignore[arg-type]
    return problems


def _clip(text: str, limit: int = MAX_REASON) -> str:
    if len(text) <= limit:
        return text
    suffix = f"... ({len(text)} chars)"
    return text[: limit - len(suffix)] + suffix


def json_path(base: str, segments: Iterable[str | int]) -> str:
    """``base`` extended by keys (``.city`` or ``["two words"]``) and indexes (``[0]``)."""
    out = base
    for seg in segments:
        if isinstance(seg, int):
            out += f"[{seg}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", seg):
            out += f".{seg}" if out else seg
        else:
            out += "[" + json.dumps(seg, ensure_ascii=False) + "]"
    return out


# ---------------------------------------------------------------- text


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_TEXT_FAULTS = (
    ("text-encoding", _LONE_SURROGATE, "lone surrogate {code_point}"),
    ("text-encoding", re.compile("\x00"), "NUL character"),
    ("replacement-char", re.compile("\ufffd"), "replacement character U+FFFD (text decoded lossily upstream)"),
)


def iter_strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string in a JSON value, keys included, with its path. Iterative: arguments can be
    nested as deeply as the JSON parser allows, deeper than a recursive walk may go."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            yield where, item
        elif isinstance(item, dict):
            for key, sub in reversed(list(item.items())):
                sub_path = json_path(where, [key])
                yield sub_path, key
                stack.append((sub, sub_path))
        elif isinstance(item, list):
            stack.extend((sub, f"{where}[{i}]") for i, sub in reversed(list(enumerate(item))))


def _may_have_faults(record: dict[str, Any]) -> bool:
    """A cheap C-speed test over the serialized record (where NUL appears escaped) that lets
    clean records, nearly all of them, skip the walk building a path for every string."""
    try:
        text = json.dumps(record, ensure_ascii=False)
        text.encode("utf-8")  # fails on a lone surrogate
    except (RecursionError, ValueError):  # UnicodeEncodeError is a ValueError
        return True
    return "\ufffd" in text or "\\u0000" in text


def check_text(record: dict[str, Any]) -> Iterator[Finding]:
    """text-encoding / replacement-char: characters no UTF-8 file or tokenizer should carry."""
    if not _may_have_faults(record):
        return
    for where, text in iter_strings(record, ""):
        for code, pattern, what in _TEXT_FAULTS:
            found = pattern.search(text)
            if found:
                what = what.format(code_point=f"U+{ord(found.group()):04X}")
                yield code, where or "record", f"{what} at character {found.start()}"


# ---------------------------------------------------------------- tools


@lru_cache(maxsize=4096)
def _schema_fault(canonical_schema: str) -> tuple[list[str | int], str] | None:
    """Why a parameters schema (given as canonical JSON, so it can be cached) is unusable."""
    schema = json.loads(canonical_schema)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
        outside = reference_fault(schema) if isinstance(schema, dict) else None
    except jsonschema.SchemaError as err:
        return list(err.absolute_path), f"not a valid JSON Schema: {err.message}"
    except RecursionError:
        return [], "schema nested too deeply to check"
    if outside:
        return [], outside
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind != "object":
        got = "no top-level type" if kind is None else f"top-level type {kind!r}"
        return (["type"] if kind is not None else []), f"{got}, expected 'object'"
    return None


@lru_cache(maxsize=4096)
def _validator(canonical_schema: str) -> jsonschema.Draft202012Validator:
    return BoundedValidator(json.loads(canonical_schema), registry=LOCAL_ONLY)


def _canonical(schema: dict[str, Any]) -> str | None:
    try:
        return json.dumps(schema, sort_keys=True, ensure_ascii=False)
    except (RecursionError, ValueError):
        return None


def schema_fault(parameters: dict[str, Any]) -> tuple[list[str | int], str] | None:
    key = _canonical(parameters)
    return ([], "schema nested too deeply to check") if key is None else _schema_fault(key)


META_TOOL_NAME = "meta_tool"  # the Meta-Tool paper's retrieval call; train.papers.metatool.special defines the tool


@dataclass(frozen=True)
class Definition:
    """Where a tool is defined: listed at ``tools[index]``, or (``message`` set) returned by the meta_tool
    result at ``messages[message]``."""

    tool: Tool
    index: int
    message: int | None = None

    def where(self, segments: Iterable[str | int] = ()) -> str:
        if self.message is not None:  # the schema is JSON text inside the message: no path into it
            return f"messages[{self.message}].content"
        return json_path(f"tools[{self.index}].function.parameters", segments)

    @property
    def label(self) -> str:
        tail = "" if self.message is None else f" (returned by the meta_tool result at messages[{self.message}])"
        return f"{self.tool.name!r}{tail}"


def retrieved_tools(conv: Conversation) -> list[tuple[int, Tool]]:
    """``(message index, tool)`` for each tool a meta_tool result returned that the conversation does not
    already define (first one per name). In an open-world dialogue the invoked tools are not listed: they
    are *defined by retrieval*, by the meta_tool result returning their JSON. Results are read in the
    layouts that occur: a tool JSON, a list of them, or the executor's ``{"results": ...}`` entries."""
    meta_ids = {c.id for m in conv.messages for c in m.tool_calls if c.name == META_TOOL_NAME and c.id}
    if not meta_ids:
        return []
    known = {t.name for t in conv.tools}
    found: list[tuple[int, Tool]] = []
    for m, message in enumerate(conv.messages):
        if message.role != "tool" or message.tool_call_id not in meta_ids:
            continue
        try:
            value = json.loads(message.content or "")
        except (ValueError, RecursionError):
            continue
        for tool in _tool_jsons(value):
            if tool.name not in known:
                known.add(tool.name)
                found.append((m, tool))
    return found


def _tool_jsons(value: Any) -> Iterator[Tool]:
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, dict) and "results" in item:
            yield from _tool_jsons(item["results"])
        elif isinstance(item, dict) and isinstance(item.get("name"), str):
            function = {k: item[k] for k in ("name", "description", "parameters") if k in item}
            try:
                yield Tool.from_dict({"type": "function", "function": function})
            except SchemaError:
                continue


def with_retrieved_tools(conv: Conversation) -> Conversation:
    """The conversation with the tools its meta_tool results returned appended to ``tools``.
    ``check_conversation`` already counts them: checking this view finds the same problems."""
    found = retrieved_tools(conv)
    if not found:
        return conv
    return Conversation(id=conv.id, messages=conv.messages, tools=[*conv.tools, *(t for _, t in found)], meta=conv.meta)


def definitions(conv: Conversation) -> list[Definition]:
    """Listed tools, then retrieved ones (numbered on after the listed, as ``with_retrieved_tools`` lists them)."""
    listed = [Definition(tool, i) for i, tool in enumerate(conv.tools)]
    return listed + [Definition(tool, len(listed) + n, m) for n, (m, tool) in enumerate(retrieved_tools(conv))]


def check_duplicate_tools(tools: list[Tool]) -> Iterator[Finding]:
    """duplicate-tool: two definitions under one name (which one would a call mean?)."""
    first: dict[str, int] = {}
    for i, tool in enumerate(tools):
        if tool.name in first:
            yield (
                "duplicate-tool",
                f"tools[{i}].function.name",
                f"{tool.name!r} is already defined at tools[{first[tool.name]}]",
            )
        else:
            first[tool.name] = i


def check_tool_schemas(tools: list[Tool] | list[Definition]) -> Iterator[Finding]:
    """invalid-tool-schema: parameters that are not a JSON Schema for an object."""
    for i, item in enumerate(tools):
        found = item if isinstance(item, Definition) else Definition(item, i)
        fault = schema_fault(found.tool.parameters)
        if fault:
            segments, reason = fault
            yield "invalid-tool-schema", found.where(segments), f"{found.label}: {reason}"


# ---------------------------------------------------------------- calls


@dataclass(frozen=True)
class CallRef:
    message: int
    index: int
    call: ToolCall

    @property
    def where(self) -> str:
        return f"messages[{self.message}].tool_calls[{self.index}]"


def iter_calls(messages: list[Message]) -> Iterator[CallRef]:
    for m, msg in enumerate(messages):
        for c, call in enumerate(msg.tool_calls):
            yield CallRef(m, c, call)


def _first_tools(defined: list[Definition]) -> dict[str, Definition]:
    out: dict[str, Definition] = {}
    for found in defined:
        out.setdefault(found.tool.name, found)
    return out


def check_undefined_tools(conv: Conversation, defined: list[Definition] | None = None) -> Iterator[Finding]:
    """undefined-tool: a call to a tool the conversation neither lists nor got from a meta_tool result."""
    first = _first_tools(definitions(conv) if defined is None else defined)
    for ref in iter_calls(conv.messages):
        if ref.call.name not in first:
            known = ", ".join(list(first)[:10]) + (", ..." if len(first) > 10 else "")
            tail = f"defined: {known}" if first else "the conversation defines no tools"
            yield "undefined-tool", f"{ref.where}.function.name", f"{ref.call.name!r} is not a defined tool ({tail})"


def check_arguments(conv: Conversation, defined: list[Definition] | None = None) -> Iterator[Finding]:
    """arguments-schema: each JSON Schema violation of a call's arguments, at its JSON path.
    A schema that only fails when applied (unresolvable $ref) is reported as invalid-tool-schema; a
    pattern that runs out of the record's regex budget is a pattern-timeout (the call is not checked)."""
    first = _first_tools(definitions(conv) if defined is None else defined)
    broken: set[int] = set()
    deadline = time.monotonic() + REGEX_BUDGET_S  # one budget for the whole record
    for ref in iter_calls(conv.messages):
        found = first.get(ref.call.name)
        if found is None:
            continue
        key = _canonical(found.tool.parameters)
        if key is None or found.index in broken or _schema_fault(key):
            continue
        base = f"{ref.where}.function.arguments"
        try:
            with regex_budget(deadline):
                errors = sorted(_validator(key).iter_errors(ref.call.arguments), key=_error_order)
        except referencing.exceptions.Unresolvable as err:
            broken.add(found.index)
            yield "invalid-tool-schema", found.where(), f"{found.label}: unresolvable $ref ({err})"
            continue
        except PatternFault as fault:
            if not fault.timeout:
                broken.add(found.index)
                yield "invalid-tool-schema", found.where(), f"{found.label}: {fault.detail}"
                continue
            where = json_path(base, path_to(ref.call.arguments, fault.subject) or [])
            parameter = where.removeprefix(base).lstrip(".") or "the arguments"
            yield (
                "pattern-timeout",
                where,
                (
                    f"{found.label}: checking {parameter} against pattern {fault.pattern!r} ran out of the "
                    f"{REGEX_BUDGET_S:g} s regex budget of a record (catastrophic backtracking?); not checked"
                ),
            )
            continue
        except RecursionError:
            yield "arguments-schema", base, "arguments nested too deeply to check"
            continue
        for error in errors:
            yield "arguments-schema", json_path(base, error.absolute_path), error.message


def path_to(value: Any, target: Any) -> list[str | int] | None:
    """The path of the first string (a value or a key) that *is* ``target`` inside ``value``; for a key,
    the path of the object holding it. Iterative, like ``iter_strings``."""
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        item, path = stack.pop()
        if item is target:
            return path
        if isinstance(item, dict):
            if any(key is target for key in item):
                return path
            stack.extend((sub, [*path, key]) for key, sub in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((sub, [*path, i]) for i, sub in reversed(list(enumerate(item))))
    return None


def _error_order(error: jsonschema.ValidationError) -> tuple:
    # By location (indexes numerically), then message: stable whatever the schema's key order.
    where = tuple((0, seg, "") if isinstance(seg, int) else (1, 0, seg) for seg in error.absolute_path)
    return where, error.message


def check_duplicate_call_ids(messages: list[Message]) -> Iterator[Finding]:
    """duplicate-call-id: two calls sharing an id, so a result cannot say which one it answers."""
    seen: dict[str, str] = {}
    for ref in iter_calls(messages):
        call_id = ref.call.id
        if call_id is None:
            continue
        if call_id in seen:
            yield "duplicate-call-id", f"{ref.where}.id", f"id {call_id!r} is already used by {seen[call_id]}"
        else:
            seen[call_id] = ref.where


@dataclass
class Linking:
    """How tool results pair with calls: the pairs, results answering nothing, calls left open."""

    answered: list[tuple[int, CallRef]]  # (tool message index, the call it answers)
    orphans: list[tuple[int, str]]  # (tool message index, why it answers nothing)
    unanswered: list[tuple[CallRef, str]]  # (call, what came instead of its result)


def link_results(messages: list[Message]) -> Linking:
    """Pair tool results with calls (rules in the module docstring); pure, one pass."""
    linking = Linking([], [], [])
    pending: list[CallRef] = []
    fate: dict[str, str] = {}  # call id -> what happened to that call, for a clear orphan reason
    for m, msg in enumerate(messages):
        if msg.role == "assistant":
            pending.extend(CallRef(m, c, call) for c, call in enumerate(msg.tool_calls))
        elif msg.role == "user":
            for ref in pending:
                linking.unanswered.append((ref, f"the user turn at messages[{m}] came first"))
                if ref.call.id is not None:
                    fate.setdefault(ref.call.id, f"was left unanswered before the user turn at messages[{m}]")
            pending.clear()
        elif msg.role == "tool":
            ref, why = _match(msg, pending, fate)
            if ref is None:
                linking.orphans.append((m, why))
            else:
                pending.remove(ref)
                linking.answered.append((m, ref))
                if ref.call.id is not None:
                    fate.setdefault(ref.call.id, f"was already answered at messages[{m}]")
    last = len(messages) - 1
    for ref in pending:
        if ref.message != last:  # calls of the final turn are an SFT target, not a loose end
            linking.unanswered.append((ref, "the conversation ends without its result"))
    return linking


def _match(result: Message, pending: list[CallRef], fate: dict[str, str]) -> tuple[CallRef | None, str]:
    if result.tool_call_id is not None:
        for ref in pending:
            if ref.call.id == result.tool_call_id:
                return ref, ""
        if result.tool_call_id in fate:
            return None, f"tool_call_id {result.tool_call_id!r}: that call {fate[result.tool_call_id]}"
        return None, f"tool_call_id {result.tool_call_id!r} matches no earlier call"
    candidates = [ref for ref in pending if result.name is None or ref.call.name == result.name]
    if not candidates:
        target = f" to {result.name!r}" if result.name is not None else ""
        return None, f"no unanswered earlier call{target}"
    if candidates[0].call.id is not None:
        return (
            None,
            f"no tool_call_id, but the call it would answer ({candidates[0].where}) has id {candidates[0].call.id!r}",
        )
    return candidates[0], ""


def check_tool_results(messages: list[Message]) -> Iterator[Finding]:
    """orphan-tool-result, result-name-mismatch and unanswered-call, from one linking pass."""
    linking = link_results(messages)
    for m, why in linking.orphans:
        yield "orphan-tool-result", f"messages[{m}]", why
    for m, ref in linking.answered:
        name = messages[m].name
        if name is not None and name != ref.call.name:
            yield (
                "result-name-mismatch",
                f"messages[{m}].name",
                f"result names {name!r} but answers {ref.where}, a call to {ref.call.name!r}",
            )
    for ref, why in sorted(linking.unanswered, key=lambda item: (item[0].message, item[0].index)):
        yield "unanswered-call", ref.where, f"call to {ref.call.name!r} has no result: {why}"


# ---------------------------------------------------------------- turns


def check_role_order(messages: list[Message]) -> Iterator[Finding]:
    """role-order, assistant-first and consecutive-user (see the module docstring for what is allowed)."""
    if not messages:
        yield "role-order", "messages", "the conversation has no messages"
        return
    if not any(msg.role == "user" for msg in messages):
        yield "role-order", "messages", "the conversation has no user message"
    else:
        opening = next((m for m, msg in enumerate(messages) if msg.role != "system"), None)
        if opening is not None and messages[opening].role == "assistant":
            yield (
                "assistant-first",
                f"messages[{opening}]",
                (
                    "the conversation opens with an assistant turn, before any user message "
                    "(llama3_1 refuses it when the tools go in the first user message)"
                ),
            )
    for m, msg in enumerate(messages):
        previous = messages[m - 1] if m else None
        if msg.role == "system" and m > 0:
            yield "role-order", f"messages[{m}]", "a system message must come first"
        elif msg.role == "tool" and not (previous and (previous.role == "tool" or previous.tool_calls)):
            after = (
                f"{'an' if previous.role == 'assistant' else 'a'} {previous.role} message" if previous else "nothing"
            )
            what = " without tool calls" if previous and previous.role == "assistant" else ""
            yield "role-order", f"messages[{m}]", f"a tool result must follow an assistant call turn, not {after}{what}"
        elif msg.role == "user" and previous and previous.role == "user":
            yield (
                "consecutive-user",
                f"messages[{m}]",
                f"two user messages in a row (messages[{m - 1}] and messages[{m}])",
            )


def check_empty_assistant(messages: list[Message]) -> Iterator[Finding]:
    """empty-assistant: an assistant turn that says nothing and calls nothing (nothing to train)."""
    for m, msg in enumerate(messages):
        if msg.role == "assistant" and not msg.tool_calls and not (msg.content or "").strip():
            yield "empty-assistant", f"messages[{m}]", "assistant message has neither content nor tool calls"


# ---------------------------------------------------------------- entry points


def conversation_findings(conv: Conversation) -> Iterator[Finding]:
    defined = definitions(conv)  # listed tools and those meta_tool results returned (the open-world rule)
    yield from check_text(conv.to_dict())
    yield from check_duplicate_tools(conv.tools)
    yield from check_tool_schemas(defined)
    yield from check_role_order(conv.messages)
    yield from check_empty_assistant(conv.messages)
    yield from check_undefined_tools(conv, defined)
    yield from check_arguments(conv, defined)
    yield from check_duplicate_call_ids(conv.messages)
    yield from check_tool_results(conv.messages)
    yield from markup_findings(conv)


def check_conversation(conv: Conversation, severities: Mapping[str, Setting] | None = None) -> list[Problem]:
    """Every problem of one conversation, with severities from the defaults overridden by
    ``severities`` (code -> "error" | "warning" | "ignore"); ignored codes are left out. Tools a
    meta_tool result returned count as defined (``retrieved_tools``), for ``data validate`` and the
    training build alike; ``check_conversation(with_retrieved_tools(conv))`` finds the same problems."""
    return _apply(conversation_findings(conv), severities)


def query_findings(query: ToolQuery, library: set[str] | None = None) -> Iterator[Finding]:
    yield from check_text(query.to_dict())
    if not query.query.strip():
        yield "empty-query", "query", "the query is empty"
    if not query.gold_tools:
        yield "empty-gold", "gold_tools", "no gold tool (fine for 'no tool needed' queries)"
    seen: set[str] = set()
    for i, name in enumerate(query.gold_tools):
        if name in seen:
            yield "duplicate-gold-tool", f"gold_tools[{i}]", f"{name!r} is listed twice"
        seen.add(name)
        if library is not None and name not in library:
            yield "unknown-gold-tool", f"gold_tools[{i}]", f"{name!r} is not in the tool library"


def check_query(
    query: ToolQuery, severities: Mapping[str, Setting] | None = None, library: set[str] | None = None
) -> list[Problem]:
    """A retrieval query: non-empty text, a gold set without repeats, gold names known to ``library``."""
    return _apply(query_findings(query, library), severities)


def check_library(library: ToolLibrary, severities: Mapping[str, Setting] | None = None) -> list[Problem]:
    """A tool library: unique names, usable schemas, clean text."""
    findings = [
        *check_text(library.to_dict()),
        *check_duplicate_tools(library.tools),
        *check_tool_schemas(library.tools),
    ]
    return _apply(findings, severities)
