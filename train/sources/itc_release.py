"""The ITC dataset's rows as released, passed through as text (seed 002, arXiv 2603.05515, Figs 4 and 16-20).

INPUTS: a samples file (the release's train or test file; JSON array or JSON Lines), then optionally the API file
(Fig. 4 records). Registered as ``itc_release`` (``data.sources.N.name``, ``eval.benchmarks.N.source``,
``data convert``): the ``itc`` reader turns the same rows into canonical ``tools`` / ``tool_calls`` instead.

The layout read. The release could not be fetched (the paper's only address, an anonymous.4open.science link, is
unreachable here and no copy exists offline), so this is the layout of the paper's own figures, read from them:

* sample (Figs 17-20): ``{"system": "<Fig. 17's prompt>", "conversations": [{"from": "user", "value"}, {"from":
  "assistant", "value": "json{\\"Thought\\": ..., \\"Action\\": \\"[api(p='v')]\\"}"}, {"role": "Tool", "content":
  {...}}, ...]}``; ``id``, ``language``, ``task_type``, ``split`` and any other field are optional and kept in ``meta``.
* API record (Figs 4, 16): ``{"tool_name", "tool_description", "home_url", "country", "api_list": [{"name", "url",
  "description", "method", "required_parameters", "optional_parameters", ...}]}``.

Nothing is rewritten: the system message is the sample's ``system`` text, every answer is its ``value`` text as
released (its own Thought, in its own language), no call is re-serialised. Two things are filled in, both as the
figures show them. (1) The figures print Fig. 17's prompt with a literal ``{api_list}``: when the system text still
holds it, it is replaced by the sample's own ``api_list`` field (a list of records) when it has one, else by the
records of the API file that its calls name (the whole record: sibling APIs stay as distractors, as the ``itc``
reader resolves them), as one JSON line of the records as they are (``url``, ``method``, ``home_url`` kept). A
sample whose ``{api_list}`` cannot be filled is rejected. (2) A tool result (Fig. 20's ``{"role": "Tool",
"content": {...}}``) answers a text Action, not a structured call, so it becomes a ``user`` turn holding its text
(compact JSON when it is an object), as the ``itc`` builder writes nested tasks.

``meta``: ``source: itc_release`` (what the ``itc`` builder's ``source=release`` asks for), ``turn`` (the scored
answer: the last ``json{Thought, Action}`` answer, which must parse), ``apis`` (the offered API and tool names,
read from the records in the prompt), ``task_type`` (the sample's, else from its answers: ``nested`` when several
answers carry calls, else ``none`` / ``single`` / ``repeated`` / ``parallel``), and the sample's other fields
(``language``, ``split``, ...) as they are. The conversation has no ``tools``: the APIs are in the prompt.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from train.base.records import Rejected
from train.schema import Conversation, Message, SchemaError
from train.sources.itc import ROLES, ApiIndex, parse_answer, read_samples

SOURCE = "itc_release"
PLACEHOLDER = "{api_list}"
_LIST_HEADER = "(in JSON format):"  # Fig. 17: "Below is the list of functions you can invoke (in JSON format):"


def offered_names(records: Any) -> list[str]:
    """Tool and API names of Fig. 4 records (an Action names either: ``latest``, ``Google Translate``)."""
    names: list[str] = []
    for record in records if isinstance(records, list) else [records]:
        if not isinstance(record, dict):
            continue
        if isinstance(record.get("tool_name"), str):
            names.append(record["tool_name"])
        for api in record.get("api_list") or []:
            if isinstance(api, dict) and isinstance(api.get("name"), str):
                names.append(api["name"])
    return list(dict.fromkeys(names))


def records_in_prompt(system: str) -> Any:
    """The JSON records that follow Fig. 17's "(in JSON format):" in a filled system prompt, or None."""
    start = system.find(_LIST_HEADER)
    if start == -1:
        return None
    text = system[start + len(_LIST_HEADER) :].lstrip()
    try:
        value, _ = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return None
    return value


def _answers(turns: list[tuple[str, Any]]) -> list[tuple[int, list[Any]]]:
    """(message index, parsed calls) of each assistant turn that is a ``json{Thought, Action}`` answer; the
    message index counts the system message as 0."""
    found = []
    for position, (role, value) in enumerate(turns, start=1):
        if role != "assistant" or not isinstance(value, str):
            continue
        try:
            parsed = parse_answer(value, f"conversations[{position - 1}].value")
        except SchemaError:
            continue  # an answer that does not parse is kept as text; only the scored one must parse
        if parsed is not None:
            found.append((position, parsed[1]))
    return found


def task_type(answers: list[tuple[int, list[Any]]]) -> str:
    """Figs 17-20's types from the answers' calls (the sample's own ``task_type`` wins when it has one)."""
    if sum(1 for _, calls in answers if calls) > 1:
        return "nested"
    calls = next((calls for _, calls in reversed(answers) if calls), [])
    if not calls:
        return "none"
    if len(calls) == 1:
        return "single"
    return "repeated" if len({call.name for call in calls}) == 1 else "parallel"


def _fill(system: str, sample: dict[str, Any], answers: list[tuple[int, list[Any]]], apis: ApiIndex | None) -> Any:
    """(the system text with ``{api_list}`` filled, the records now in it)."""
    if PLACEHOLDER not in system:
        return system, records_in_prompt(system)
    records = sample.get("api_list")
    if records is None and apis is not None:
        positions = [apis.resolve(call.name, "conversations.Action")[0] for _, calls in answers for call in calls]
        records = [apis.records[position][1] for position in dict.fromkeys(positions)]
    if not records:
        where = "no api_list field, no API file" if apis is None else "no call names an API of the API file"
        raise SchemaError("system", f"the prompt's {PLACEHOLDER} cannot be filled ({where})")
    return system.replace(PLACEHOLDER, json.dumps(records, ensure_ascii=False)), records


def convert(sample: Any, index: int, path: Path, apis: ApiIndex | None) -> Conversation:
    if not isinstance(sample, dict):
        raise SchemaError("sample", f"expected an object, got {type(sample).__name__}")
    system, entries = sample.get("system"), sample.get("conversations")
    if not isinstance(system, str):
        raise SchemaError("system", f"expected Fig. 17's prompt as a string, got {type(system).__name__}")
    if not isinstance(entries, list) or not entries:
        raise SchemaError("conversations", "expected a non-empty list")
    turns = []
    for position, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise SchemaError(f"conversations[{position}]", f"expected an object, got {type(entry).__name__}")
        speaker, value = entry.get("from", entry.get("role")), entry.get("value", entry.get("content"))
        role = ROLES.get(speaker.lower()) if isinstance(speaker, str) else None
        if role is None:
            raise SchemaError(f"conversations[{position}]", f"unknown speaker {speaker!r}")
        if role != "tool" and not isinstance(value, str):
            raise SchemaError(f"conversations[{position}].value", f"expected a string, got {type(value).__name__}")
        turns.append((role, value))
    answers = _answers(turns)
    if not answers:
        raise SchemaError("conversations", 'no assistant answer is a json{"Thought", "Action"} answer')
    system, records = _fill(system, sample, answers, apis)
    messages = [Message(role="system", content=system)]
    for role, value in turns:
        if role == "tool":  # a result of a text Action: no structured call to answer, so the user's turn
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            messages.append(Message(role="user", content=text))
        else:
            messages.append(Message(role=role, content=value))
    if messages[1].role != "user":
        raise SchemaError("conversations[0]", "the first turn must be the user's query")
    meta = {k: v for k, v in sample.items() if k not in ("id", "system", "conversations", "api_list")}
    names = offered_names(records) or [call.name for _, calls in answers for call in calls]
    meta.update(source=SOURCE, turn=answers[-1][0], apis=names)
    meta.setdefault("task_type", task_type(answers))
    sample_id = sample.get("id", f"{path.stem}-{index}")
    if not isinstance(sample_id, str):
        raise SchemaError("id", f"expected a string, got {type(sample_id).__name__}")
    return Conversation(id=sample_id, messages=messages, tools=[], meta=meta)


def read(inputs: list[Path]) -> Iterator[Conversation | Rejected]:
    return read_samples(inputs, convert)  # the itc reader's inputs and rejects, this module's conversion


__all__ = ["SOURCE", "convert", "offered_names", "read", "records_in_prompt", "task_type"]
