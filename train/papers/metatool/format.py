"""The chat format of Meta-Tool's MT-LLaMA, ``llama3_1_metatool``: Llama 3.1 with reasoning and parallel calls.

The seed paper (Figures 13-16, A.1) keeps the Llama 3.1 prelude ("We adopt the function calling instruction
format used in LLaMA"; ``train.formats.llama3.Llama31Family``), but an assistant turn with calls is its reasoning
text, then ``<|python_tag|>``, then a JSON list of ``{"name": ..., "parameters": ...}`` objects (``", "``-separated,
non-ASCII kept), with no separator around the tag (Figures 16, 18). Such a turn ends with ``<|eom_id|>``: in Llama
3.1, ``<|eom_id|>`` ends a message after which the executor runs the calls and the model goes on, ``<|eot_id|>``
ends the model's turn; so a turn with calls ends in ``<|eom_id|>`` (even when it is the last message) and a turn
without calls in ``<|eot_id|>``. A run of consecutive tool results is one ``ipython`` turn holding the paper's
result list (Figures 12, 15): ``[{"name": ..., "function_id": <index of the answered call in its turn>,
"results": ...}]``, where ``results`` is the tool's output parsed as JSON when it is a JSON object or array, and
the output string otherwise.

``parse`` reads text without ``<|python_tag|>`` as content; after the tag, the calls must be a well-formed
non-empty JSON list, or ``parse`` raises ``ValueError`` saying what is wrong.

Registered as ``llama3_1_metatool`` (``train.formats.FORMATS``); its chat template is ``llama3_1_metatool.jinja``
beside this module, after the family's shared ``llama3_prelude.jinja``.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from train.formats.base import Segment, to_json
from train.formats.llama3 import (
    EOM,
    EOT,
    PYTHON_TAG,
    Llama31Family,
    call_from_json,
    call_object,
    header,
    load_json,
    message_text,
)
from train.formats.serving import Serving
from train.schema import Conversation, Message, ToolCall


class Llama31MetaToolFormat(Llama31Family):
    """Meta-Tool's MT-LLaMA format: reasoning text, ``<|python_tag|>``, a JSON list of calls, ``<|eom_id|>``."""

    name: ClassVar[str] = "llama3_1_metatool"
    variant_of: ClassVar[str] = "llama3_1"  # the paper's layout of Llama 3.1: a Llama 3.1 model folder keeps it
    serving: ClassVar[Serving] = Serving(
        templates=("common.jinja", "llama3_prelude.jinja", "train.papers.metatool:llama3_1_metatool.jinja"),
        variables=("tools_in_user_message", "date_string"),
        vllm_parser="llama3_json",
        sglang_parser="llama3",
        exact=False,
        notes=(
            "No parser reads this format exactly: a call turn is reasoning text, <|python_tag|>, then a JSON list "
            "of calls. vLLM's llama3_json (special tokens skipped, so the tag is gone) finds every call object but "
            "drops the reasoning text (content is null), fails the whole turn when the reasoning holds a '{' that "
            "is not a call, and when streaming finds calls only in a completion that starts with <|python_tag|> "
            "or '{'. SGLang's llama3 reads the list only "
            "when the turn has no reasoning text (or when special tokens are kept). Exact: tooltrain's own parse "
            "(train.formats.get_format('llama3_1_metatool').parse) on the raw completion."
        ),
    )

    def _call_turn(self, index: int, message: Message) -> list[Segment]:
        calls: list[Segment] = [Segment("[", "call_syntax", index)]
        for position, call in enumerate(message.tool_calls):
            if position:
                calls.append(Segment(", ", "call_syntax", index))
            calls += call_object(call, index)
        calls.append(Segment("]", "call_syntax", index))
        return [
            *header("assistant"),
            Segment(message_text(message), "text", index),
            Segment(PYTHON_TAG, "call_syntax", index, special=True),
            *calls,
            Segment(EOM, "end", index, special=True),
        ]

    def _tool_results(self, conv: Conversation, run: list[tuple[int, Message]]) -> list[Segment]:
        answered = _calls_answered(conv, run[0][0])
        results = []
        for position, (_, message) in enumerate(run):
            # Linked by id when the result names its call; otherwise results answer calls in order.
            function_id, call_name = answered.get(message.tool_call_id or "", (position, None))
            name = message.name if message.name is not None else call_name
            results.append({"name": name, "function_id": function_id, "results": _result_value(message.content)})
        first, last = run[0][0], run[-1][0]
        result_list = Segment(to_json(results), "tool_result", first)
        return [*header("ipython"), result_list, Segment(EOT, "header", last, special=True)]

    def parse(self, text: str) -> tuple[str | None, list[ToolCall]]:
        body = self._strip_end(text)
        reasoning, tag, calls_text = body.partition(PYTHON_TAG)
        content = reasoning.strip() or None
        if not tag:
            return content, []
        where = "llama3_1_metatool calls after <|python_tag|>"
        calls = load_json(calls_text, where)
        if not isinstance(calls, list) or not calls:
            raise ValueError(f"{where}: expected a non-empty JSON list of calls, got {calls!r}")
        return content, [call_from_json(call, f"{where}, item {i}") for i, call in enumerate(calls)]


def _calls_answered(conv: Conversation, first_result: int) -> dict[str, tuple[int, str]]:
    """call id -> (its position, its name) in the assistant turn right before a run of tool results."""
    previous = conv.messages[first_result - 1] if first_result > 0 else None
    if previous is None or previous.role != "assistant":
        return {}
    return {call.id: (i, call.name) for i, call in enumerate(previous.tool_calls) if call.id is not None}


def _result_value(content: str | None) -> Any:
    """A tool's output as the result list holds it: parsed when it is a JSON object or array."""
    text = content or ""
    if text.strip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass
    return text


__all__ = ["Llama31MetaToolFormat"]
