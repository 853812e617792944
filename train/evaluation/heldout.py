"""Held-out scorer (``heldout``): did the model write the reference assistant turn's tool calls?

Works on any canonical conversations, so a run can score generation on its own eval split
(``data.eval_fraction``) while it trains. The unit is one assistant turn (``gold_turn_index``):
``messages[meta.turn]`` when ``meta.turn`` is given, else the last assistant message that calls a
tool (what a tool-use model is trained for), else the last assistant message.

* **exact_match**: the predicted calls equal the gold calls as a multiset of (name, normalised
  arguments) (``calls.same_calls``: key order ignored, ``1 == 1.0``, ``true != 1``). A gold turn
  without calls is matched by a prediction without calls, whatever its text.
* **name_accuracy**: the multiset of called names equals the gold one (arguments ignored).
* **valid_call_rate**: of the turns whose gold calls a tool, the share where the model wrote calls a tool
  runtime would accept: the output parsed, it holds at least one call, and every call names a tool the
  conversation defines with arguments valid against that tool's JSON Schema (``train.validate``'s
  undefined-tool and arguments-schema checks). A reference that defines no tools has names and
  arguments left unchecked. It says whether the model writes usable calls at all, right or wrong.

All are reported ``overall`` and ``by_kind``: ``call`` (the gold turn calls tools) and ``no_call``
(it answers in text). A rate with nothing to count is ``null``.

Rows
----
* references: canonical conversations ``{"id", "tools", "messages", "meta"}``.
* predictions: ``{"id", "content", "tool_calls": [{"name", "arguments"}], "error"}``. A prediction
  whose ``error`` is set (the output could not be parsed, the prompt could not be rendered) or whose
  ``tool_calls`` is not a list of calls is wrong on every metric, never a crash; ``parse_errors``
  counts the former.

Per item: ``{"id", "kind", "exact", "names", "valid_call", "gold_names", "predicted_names", "error"}``;
``valid_call`` is None for a ``no_call`` turn.

Task (``HeldOutTask``, for ``eval run`` and the eval callback): the model writes the gold turn above; its row is
``{"id", "content", "tool_calls", "error"}``, and a failed generation (a prompt the format cannot render, an
output it cannot parse) sets ``error``, so it is wrong.
"""

from __future__ import annotations

from typing import Any

from train.evaluation import ScorerSpec
from train.evaluation.calls import (
    Call,
    CallFormatError,
    join_by_id,
    ratio,
    read_calls,
    same_calls,
    same_names,
    score_joined,
)
from train.evaluation.task_base import EvalItem, Task
from train.schema import Conversation


class BadReference(ValueError):
    """A reference the scorer cannot use (reported, not counted against the model)."""


def gold_turn_index(messages: Any, meta: Any) -> int:
    """The assistant message a prediction answers: ``meta.turn``, else the last assistant message
    with tool calls, else the last assistant message."""
    if not isinstance(messages, list):
        raise BadReference("messages must be a list")
    position = meta.get("turn") if isinstance(meta, dict) else None
    if position is None:
        assistant = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"]
        if not assistant:
            raise BadReference("no assistant message to score")
        calling = [i for i in assistant if messages[i].get("tool_calls")]
        return (calling or assistant)[-1]
    if not isinstance(position, int) or isinstance(position, bool) or not 0 <= position < len(messages):
        raise BadReference(f"meta.turn {position!r} is not a message index")
    if not isinstance(messages[position], dict) or messages[position].get("role") != "assistant":
        raise BadReference(f"meta.turn {position}: messages[{position}] is not an assistant message")
    return position


def gold_calls(reference: dict[str, Any]) -> list[Call]:
    index = gold_turn_index(reference.get("messages"), reference.get("meta"))
    try:
        return read_calls(reference["messages"][index].get("tool_calls"), f"messages[{index}].tool_calls")
    except CallFormatError as err:
        raise BadReference(str(err)) from None


def invalid_call_reason(calls: list[Call], tools: Any) -> str | None:
    """Why these calls would fail at the tool boundary (no call, an undefined tool, arguments outside the
    tool's JSON Schema); None when every call is valid. ``tools``: the reference's tool definitions."""
    if not calls:
        return "no call written"
    if not tools:
        return None  # nothing to check names and arguments against
    from train.schema import Conversation, Message, SchemaError, Tool, ToolCall
    from train.validate import check_arguments, check_undefined_tools

    try:
        defined = [Tool.from_dict(tool, f"tools[{i}]") for i, tool in enumerate(tools)]
    except SchemaError:
        return None  # a reference problem, not the model's: left unchecked
    written = [ToolCall(name=call.name, arguments=call.arguments) for call in calls]
    conversation = Conversation(id="", tools=defined, messages=[Message(role="assistant", tool_calls=written)])
    for _, where, reason in (*check_undefined_tools(conversation), *check_arguments(conversation)):
        return f"{where.removeprefix('messages[0].')}: {reason}"
    return None


def score_item(gold: list[Call], prediction: dict[str, Any] | None, tools: Any = None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "kind": "call" if gold else "no_call",
        "exact": False,
        "names": False,
        "valid_call": False if gold else None,
        "gold_names": [call.name for call in gold],
        "predicted_names": None,
        "error": None,
    }
    if prediction is None:
        item["error"] = "missing prediction"
        return item
    if prediction.get("error"):
        item["error"] = str(prediction["error"])
        return item
    try:
        predicted = read_calls(prediction.get("tool_calls"))
    except CallFormatError as err:
        item["error"] = f"malformed prediction: {err}"
        return item
    item["predicted_names"] = [call.name for call in predicted]
    item["names"] = same_names(predicted, gold)
    item["exact"] = item["names"] and same_calls(predicted, gold)
    if gold:
        item["valid_call"] = invalid_call_reason(predicted, tools) is None
    return item


def _rates(items: list[dict[str, Any]]) -> dict[str, Any]:
    exact = sum(item["exact"] for item in items)
    calling = [item for item in items if item["kind"] == "call"]
    return {
        "exact_match": ratio(exact, len(items)),
        "name_accuracy": ratio(sum(item["names"] for item in items), len(items)),
        "valid_call_rate": ratio(sum(bool(item["valid_call"]) for item in calling), len(calling)),
        "correct": exact,
        "total": len(items),
    }


def score_heldout(predictions: list[dict[str, Any]], references: list[dict[str, Any]]) -> dict[str, Any]:
    """Exact match, name accuracy and valid-call rate of the predicted calls; a missing or failed prediction is
    wrong."""
    scored = score_joined(
        join_by_id(predictions, references),
        lambda reference: (gold_calls(reference), reference.get("tools")),
        lambda gold, prediction: score_item(gold[0], prediction, gold[1]),
        BadReference,
    )
    per_item = scored.per_item
    overall = _rates(per_item)
    overall["parse_errors"] = sum(1 for item in per_item if (item["error"] or "").startswith("parse"))
    by_kind = {kind: _rates([i for i in per_item if i["kind"] == kind]) for kind in ("call", "no_call")}
    return scored.result(overall=overall, by_kind=by_kind)


# ---------------------------------------------------------------- the generation task and the spec


class HeldOutTask(Task):
    name = "heldout"

    def target(self, conv: Conversation) -> int:
        try:
            return gold_turn_index([m.to_dict() for m in conv.messages], conv.meta)
        except BadReference as err:
            raise ValueError(str(err)) from None

    def prediction(self, item: EvalItem, generation: Any) -> dict[str, Any]:
        calls = [call.to_dict() for call in generation.tool_calls]
        return {"id": item.id, "content": generation.content, "tool_calls": calls, "error": generation.error}


SPEC = ScorerSpec(
    score=score_heldout,
    task=HeldOutTask,
    layout="""\
references: any canonical conversations (gold = messages[meta.turn], else the last assistant turn
with tool calls, else the last assistant turn).
predictions: {"id", "content", "tool_calls": [{"name", "arguments"}], "error"}; a set "error" is wrong.
metrics: exact match of the calls (names + normalised arguments) and name accuracy, by call/no-call turn.""",
)
