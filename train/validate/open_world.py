"""The open-world rule: where a tool is defined. A tool is defined when ``tools`` lists it, or when the result of a
retrieval call returned it (an open-world dialogue does not list the tools it invokes: they are *defined by
retrieval*, the retrieval call's result carrying their JSON). ``data validate`` and the training build apply this one
rule, through ``train.validate.check_conversation``; ``with_retrieved_tools`` is the same rule as a conversation
whose ``tools`` list the retrieved ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from train.schema import Conversation, SchemaError, Tool
from train.validate.findings import json_path

# The retrieval call whose results define tools (a paper's wing defines the tool under this name; a test checks it).
RETRIEVAL_TOOL_NAME = "meta_tool"  # registration: the Meta-Tool paper's retrieval call


@dataclass(frozen=True)
class Definition:
    """Where a tool is defined: listed at ``tools[index]``, or (``message`` set) returned by the result of a
    retrieval call (``RETRIEVAL_TOOL_NAME``) at ``messages[message]``."""

    tool: Tool
    index: int
    message: int | None = None

    def where(self, segments: Iterable[str | int] = ()) -> str:
        if self.message is not None:  # the schema is JSON text inside the message: no path into it
            return f"messages[{self.message}].content"
        return json_path(f"tools[{self.index}].function.parameters", segments)

    @property
    def label(self) -> str:
        if self.message is None:
            return repr(self.tool.name)
        return f"{self.tool.name!r} (returned by the {RETRIEVAL_TOOL_NAME} result at messages[{self.message}])"


def retrieved_tools(conv: Conversation) -> list[tuple[int, Tool]]:
    """``(message index, tool)`` for each tool a retrieval call's result returned that the conversation does not
    already define (first one per name). In an open-world dialogue the invoked tools are not listed: they
    are *defined by retrieval*, by the retrieval call's result returning their JSON. Results are read in the
    layouts that occur: a tool JSON, a list of them, or the executor's ``{"results": ...}`` entries."""
    retrieval_ids = {c.id for m in conv.messages for c in m.tool_calls if c.name == RETRIEVAL_TOOL_NAME and c.id}
    if not retrieval_ids:
        return []
    known = {t.name for t in conv.tools}
    found: list[tuple[int, Tool]] = []
    for m, message in enumerate(conv.messages):
        if message.role != "tool" or message.tool_call_id not in retrieval_ids:
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
    """The conversation with the tools its retrieval calls' results returned appended to ``tools``.
    ``check_conversation`` already counts them: checking this view finds the same problems."""
    found = retrieved_tools(conv)
    if not found:
        return conv
    return Conversation(id=conv.id, messages=conv.messages, tools=[*conv.tools, *(t for _, t in found)], meta=conv.meta)


def definitions(conv: Conversation) -> list[Definition]:
    """Listed tools, then retrieved ones (numbered on after the listed, as ``with_retrieved_tools`` lists them)."""
    listed = [Definition(tool, i) for i, tool in enumerate(conv.tools)]
    return listed + [Definition(tool, len(listed) + n, m) for n, (m, tool) in enumerate(retrieved_tools(conv))]
