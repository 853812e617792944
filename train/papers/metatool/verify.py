"""A.3's verification of each built Meta-Tool sample, offline: a deterministic structural check.

The paper (seed 000, A.3) verifies its augmented data twice: "automatic verification of the JSON structure"
("the invocation must be a valid JSON object. Each invocation should have the name: meta-tool, and its parameters
must include tool description and param description, with no additional parameters allowed"), then an "LLM-based
Verification" in which GPT-4o reads the reasoning for hallucinations, consistency and the multi-step pattern
(Figure 9). Here the first runs on every whole sample and the second is not run: no model judges the samples
(docs/metatool.md, departures). ``sample_problem`` is the one check:

* every call is well-formed for the tools the sample lists or retrieves: its tool is defined and its arguments
  are a JSON object that fits the tool's parameter schema (required keys, types; ``train.validate``, whose
  errors a training build would refuse the sample for anyway). A key the schema does not list passes when
  the schema allows it (JSON Schema's default), as A.3 checks the source's own calls no further ("the dataset
  our work are based on has already undergone basic verification of tool calls");
* every ``meta_tool`` call passes A.3's JSON check (``special.verify_meta_call``);
* every ``meta_tool`` result parses as the retrieved tool's JSON object, with its name.

A sample that fails is not yielded: the builder counts it under its reason in the build report.
"""

from __future__ import annotations

import json

from train.papers.metatool.special import META_TOOL_NAME, verify_meta_call
from train.schema import Conversation
from train.validate import check_conversation


def sample_problem(conv: Conversation) -> str | None:
    """Why a built sample fails A.3's structural check (one reason per kind, for counting), or None."""
    errors = [p for p in check_conversation(conv) if p.severity == "error"]
    if errors:
        return f"fails A.3's structural check ({errors[0].code})"
    for message in conv.messages:
        for call in message.tool_calls:
            if call.name == META_TOOL_NAME and verify_meta_call({"name": call.name, "parameters": call.arguments}):
                return "fails A.3's structural check (meta_tool call)"
        if message.role == "tool" and message.name == META_TOOL_NAME and not retrieved_tool(message.content):
            return "fails A.3's structural check (meta_tool result is not a tool's JSON)"
    return None


def retrieved_tool(content: str | None) -> bool:
    """Whether a meta_tool result is a tool's JSON: an object with a non-empty text ``name``."""
    try:
        value = json.loads(content or "")
    except (ValueError, RecursionError):  # JSONDecodeError, or JSON past the digit/nesting limits
        return False
    return isinstance(value, dict) and isinstance(value.get("name"), str) and bool(value["name"].strip())


__all__ = ["retrieved_tool", "sample_problem"]
