"""Helpers the tests share (on pytest's pythonpath: ``from helpers import ...``)."""

from __future__ import annotations

from train.schema import Conversation, ToolLibrary, ToolQuery
from train.sources import Rejected


def split(items):
    """A dialogue reader's output -> (conversations, rejects); nothing else may appear."""
    items = list(items)
    accepted = [i for i in items if isinstance(i, Conversation)]
    rejected = [i for i in items if isinstance(i, Rejected)]
    assert len(accepted) + len(rejected) == len(items)
    return accepted, rejected


def split_queries(items):
    """A query reader's output -> (queries, rejects, libraries); nothing else may appear."""
    items = list(items)
    queries = [i for i in items if isinstance(i, ToolQuery)]
    rejects = [i for i in items if isinstance(i, Rejected)]
    libraries = [i for i in items if isinstance(i, ToolLibrary)]
    assert len(queries) + len(rejects) + len(libraries) == len(items)
    return queries, rejects, libraries


def call(call_id, name, arguments):
    """A canonical tool call as a dict."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool(name, description, parameters):
    """A canonical tool definition as a dict."""
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


# The recipes that run on a CPU as shipped (the others are GPU recipes with a default strategy and GPU count, which
# tests/engine/test_memory_plan.py and test_fast_defaults.py list with them)
CPU_RECIPES = frozenset(
    {"demo", "tiny", "dpo_tiny", "grpo_tiny", "grpo_smollm2", "itc_tiny", "mt_llama_tiny", "toolgt_tiny"}
    | {"toolverifier_tiny", "ptr", "ptr_tiny"}
)
