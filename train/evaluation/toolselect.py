"""ToolSelect scorer (ToolVerifier, seed 003, §2.1 and §3.1): tool-selection accuracy.

The paper reports "accuracy in percentage" of the selected tool (Tables 2 and 4); a sample's output is
a reasoning note and ``Act: CALLTOOL["<tool name>"]`` (Figure 2, ``train.csv``)::

    accuracy = #{samples whose chosen tool name equals the gold tool name} / #samples

Rows
----
* predictions: ``{"id", "content": "<model text>"}``, the choice read from the text; or
  ``{"id", "tool_calls": [{"name", "arguments"}]}`` (a chat format's parsed call), the choice being
  the one call's name. When ``tool_calls`` holds a call it wins over the text.
* references: ``{"id", "gold_tool": name}``; or any row whose ``meta["gold_tool"]`` names it; or a
  canonical ``ToolQuery`` with exactly one ``gold_tools`` name; or a canonical conversation whose last
  assistant message calls one tool or says ``Act: CALLTOOL[...]`` in its content.

Reading the choice from text
----------------------------
The first line that holds ``Act:`` followed by ``CALLTOOL[...]`` decides (ToolVerifier's model stops
after its first Act). Inside the brackets: a double- or single-quoted name (``CALLTOOL["Book
Review"]``, the dataset's form) or a bare name with optional ``()`` (``CALLTOOL[CarFinder()]``, the
paper's Figure 2). Names compare exactly after trimming surrounding spaces. Text with no such line,
empty brackets, an unclosed quote, or more than one tool call is wrong, with the reason in ``error``;
it never raises.

Task (``ToolSelectTask``): the model writes the last assistant turn; its row is ``{"id", "content",
"tool_calls"}`` (a failed generation gets a ``tool_calls`` that is not a list: a malformed prediction, wrong).
"""

from __future__ import annotations

import re
from typing import Any

from train.evaluation import ScorerSpec
from train.evaluation.calls import CallFormatError, join_by_id, ratio, read_calls, score_joined
from train.evaluation.task_base import Task, last_assistant
from train.schema import Conversation

_ACT = re.compile(r"Act:\s*CALLTOOL\[(?P<body>[^\n\]]*)\]")
_QUOTED = re.compile(r"""\s*(?P<q>["'])(?P<name>(?:(?!(?P=q)).)*)(?P=q)\s*""")
_BARE = re.compile(r"\s*(?P<name>[^\"'()\[\]]+?)\s*(?:\(\s*\))?\s*")


class ChoiceError(ValueError):
    pass


def chosen_tool_in_text(text: Any) -> str:
    """The tool named by the first ``Act: CALLTOOL[...]`` line; ChoiceError saying why there is none."""
    if not isinstance(text, str):
        raise ChoiceError(f"content is {type(text).__name__}, not text")
    for line in text.splitlines():
        found = _ACT.search(line)
        if found is None:
            continue
        body = found.group("body")
        match = _QUOTED.fullmatch(body) or _BARE.fullmatch(body)
        name = match.group("name").strip() if match else ""
        if not name:
            raise ChoiceError(f"cannot read a tool name in {found.group(0)!r}")
        return name
    raise ChoiceError("no 'Act: CALLTOOL[...]' in the text")


def chosen_tool(row: dict[str, Any]) -> str:
    """A prediction's choice: its one tool call, else the Act line of its content."""
    try:
        calls = read_calls(row.get("tool_calls"))
    except CallFormatError as err:
        raise ChoiceError(str(err)) from None
    if len(calls) > 1:
        raise ChoiceError(f"expected one tool choice, got {len(calls)} calls")
    if calls:
        return calls[0].name.strip()
    return chosen_tool_in_text(row.get("content"))


def gold_tool(row: dict[str, Any]) -> str:
    """The reference's gold tool name (layouts in the module docstring)."""
    meta = row.get("meta") if isinstance(row.get("meta"), dict) else {}
    for value in (row.get("gold_tool"), meta.get("gold_tool")):
        if isinstance(value, str) and value.strip():
            return value.strip()
    gold_tools = row.get("gold_tools")
    if isinstance(gold_tools, list):
        if len(gold_tools) == 1 and isinstance(gold_tools[0], str):
            return gold_tools[0].strip()
        raise ChoiceError(f"expected exactly one gold tool, got {len(gold_tools)}")
    messages = row.get("messages")
    if isinstance(messages, list):
        answers = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
        if answers:
            return chosen_tool(answers[-1])
    raise ChoiceError(
        "no gold tool: expected 'gold_tool', meta.gold_tool, one 'gold_tools' name or an assistant answer"
    )


def score_toolselect(predictions: list[dict[str, Any]], references: list[dict[str, Any]]) -> dict[str, Any]:
    """Tool-selection accuracy over the references; a missing or unreadable prediction is wrong."""
    scored = score_joined(join_by_id(predictions, references), gold_tool, score_choice, ChoiceError)
    per_item = scored.per_item
    correct = sum(item["correct"] for item in per_item)
    return scored.result(
        overall={"accuracy": ratio(correct, len(per_item)), "correct": correct, "total": len(per_item)}
    )


def score_choice(gold: str, prediction: dict[str, Any] | None) -> dict[str, Any]:
    item = {"gold": gold, "predicted": None, "correct": False, "error": None}
    if prediction is None:
        item["error"] = "missing prediction"
    else:
        try:
            item["predicted"] = chosen_tool(prediction)
            item["correct"] = item["predicted"] == gold
        except ChoiceError as err:
            item["error"] = str(err)
    return item


# ---------------------------------------------------------------- the generation task and the spec


class ToolSelectTask(Task):
    name = "toolselect"
    native_source = "toolselect"

    def target(self, conv: Conversation) -> int:
        return last_assistant(conv)


SPEC = ScorerSpec(
    score=score_toolselect,
    task=ToolSelectTask,
    layout="""\
references: {"id", "gold_tool"}, meta.gold_tool, one gold_tools name, or a conversation whose last
assistant turn calls the tool. predictions: {"id", "content": "...Act: CALLTOOL[\\"Name\\"]"} or
{"id", "tool_calls": [{"name"}]}. metric: accuracy.""",
)
