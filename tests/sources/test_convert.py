"""``train.sources.convert``: what ``data convert`` keeps of each item a reader yields (the verb's counts and files
are tested in tests/sources/test_*.py and tests/test_output_*.py)."""

from __future__ import annotations

import json

from train.schema import Conversation, ToolQuery
from train.sources import Rejected
from train.sources.convert import canonical_line, source_inputs, trains_nothing


def conversation(*messages: dict, tools: list | None = None) -> Conversation:
    return Conversation.from_dict({"id": "c", "tools": tools or [], "messages": list(messages)})


USER = {"role": "user", "content": "hi"}
UNDEFINED_CALL = {
    "role": "assistant",
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "x", "arguments": {}}}],
}


def test_a_record_becomes_its_canonical_line():
    conv = conversation(USER, {"role": "assistant", "content": "ok"})
    assert json.loads(canonical_line(conv)) == conv.to_dict()
    query = ToolQuery("q", "find a tool", ["t"])
    assert json.loads(canonical_line(query)) == query.to_dict()


def test_a_reject_passes_through_and_markup_is_rejected():
    rejected = Rejected("f:1", "why")
    assert canonical_line(rejected) is rejected
    marked = conversation(
        USER, {"role": "assistant", "content": '<tool_call>{"name": "x", "arguments": {}}</tool_call>'}
    )
    line = canonical_line(marked)
    assert isinstance(line, Rejected) and "tool_call" in line.reason and line.raw == marked.to_dict()


def test_validation_errors_reject_only_when_asked():
    conv = conversation(USER, UNDEFINED_CALL)
    assert isinstance(canonical_line(conv), bytes)
    line = canonical_line(conv, validate=True)
    assert isinstance(line, Rejected) and "undefined-tool" in line.reason


def test_text_that_is_not_unicode_is_rejected():
    line = canonical_line(conversation({"role": "user", "content": "bad \udc80"}))
    assert isinstance(line, Rejected) and line.reason.startswith("text-encoding: not encodable as UTF-8")


def test_trains_nothing():
    assert trains_nothing(conversation(USER))
    assert not trains_nothing(conversation(USER, UNDEFINED_CALL))
    assert not trains_nothing(ToolQuery("q", "find", ["t"]))


def test_source_inputs_is_the_readers_inputs_sentence():
    assert source_inputs("glaive").startswith("one or more JSON array or JSON Lines files, read in order")
    assert "\n" not in source_inputs("glaive")
    assert source_inputs("train.schema:dumps") == "see the convert table in the README"
