"""Tool-aware validation of canonical records: does a conversation make sense for its tools?

``train.schema`` guarantees *structure*; this package checks *meaning*. Each rule is a small
function yielding ``(code, where, reason)`` findings with a stable code, in the module of its family
(``text``, ``tools``, ``open_world``, ``calls``, ``results``, ``turns``); ``check_conversation`` here
runs them and gives each finding its severity (``findings``: defaults in ``DEFAULT_SEVERITIES``,
overridable per code, ``"ignore"`` drops a code). ``where`` is a path inside the record, e.g.
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
* Open world: a tool the result of a retrieval call returned is *defined by retrieval*, so it counts
  as defined although ``tools`` does not list it (``train.validate.open_world``). ``data validate`` and
  the training build apply this one rule, in ``check_conversation``, and refuse a conversation for the
  same problem (``refusal``).
* Lone surrogates and NUL characters are errors (they cannot be written as UTF-8 or break
  tokenizers); U+FFFD is a warning of its own (``replacement-char``): text decoded lossily upstream.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from train.base.call_markers import markup_findings
from train.schema import Conversation, ToolLibrary, ToolQuery
from train.validate.calls import CallRef, check_arguments, check_duplicate_call_ids, check_undefined_tools, iter_calls
from train.validate.findings import (
    DEFAULT_SEVERITIES,
    MAX_REASON,
    SETTINGS,
    Finding,
    Problem,
    Setting,
    Severity,
    apply_severities,
    json_path,
    resolve_severities,
)
from train.validate.open_world import (
    RETRIEVAL_TOOL_NAME,
    Definition,
    definitions,
    retrieved_tools,
    with_retrieved_tools,
)
from train.validate.results import Linking, check_tool_results, link_results
from train.validate.text import check_text, iter_strings
from train.validate.tools import check_duplicate_tools, check_tool_schemas, schema_fault
from train.validate.turns import check_empty_assistant, check_role_order


def conversation_findings(conv: Conversation) -> Iterator[Finding]:
    defined = definitions(conv)  # listed tools and retrieved ones (the open-world rule)
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
    retrieval call's result returned count as defined (``retrieved_tools``), for ``data validate`` and the
    training build alike; ``check_conversation(with_retrieved_tools(conv))`` finds the same problems."""
    return apply_severities(conversation_findings(conv), severities)


def refusal(conv: Conversation) -> Problem | None:
    """The problem a training build refuses ``conv`` for: its first error at the default severities, the first error
    ``data validate`` reports for it; None when it may be trained."""
    return next((p for p in check_conversation(conv) if p.severity == "error"), None)


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
    return apply_severities(query_findings(query, library), severities)


def check_library(library: ToolLibrary, severities: Mapping[str, Setting] | None = None) -> list[Problem]:
    """A tool library: unique names, usable schemas, clean text."""
    findings = [
        *check_text(library.to_dict()),
        *check_duplicate_tools(library.tools),
        *check_tool_schemas(library.tools),
    ]
    return apply_severities(findings, severities)


__all__ = [
    "DEFAULT_SEVERITIES",
    "MAX_REASON",
    "RETRIEVAL_TOOL_NAME",
    "SETTINGS",
    "CallRef",
    "Definition",
    "Finding",
    "Linking",
    "Problem",
    "Setting",
    "Severity",
    "check_arguments",
    "check_conversation",
    "check_duplicate_call_ids",
    "check_duplicate_tools",
    "check_empty_assistant",
    "check_library",
    "check_query",
    "check_role_order",
    "check_text",
    "check_tool_results",
    "check_tool_schemas",
    "check_undefined_tools",
    "conversation_findings",
    "definitions",
    "iter_calls",
    "iter_strings",
    "json_path",
    "link_results",
    "query_findings",
    "refusal",
    "resolve_severities",
    "retrieved_tools",
    "schema_fault",
    "with_retrieved_tools",
]
