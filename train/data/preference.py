"""Preference pairs on tool calls: each gold assistant turn against a wrong turn built from it (issue #30 item 3).

A pair is the conversation up to an assistant turn (the prompt, with the tools offered), that turn as written
(chosen) and a turn that gets the call wrong (rejected), one of:

================= ====================================================== =========================================
kind              rejected turn                                          built when
================= ====================================================== =========================================
wrong_tool        the first call names another offered tool, keeping the the turn calls and another tool is offered
                  arguments that tool declares
wrong_argument    one argument of the first call that has one takes a    an argument can be changed so (below)
                  wrong value: another enum member, a number + 1, the
                  other boolean, or another string argument's value
missing_argument  the first call that has a required argument loses one  a call has a required argument
spurious_call     a call (no arguments) where the gold turn answers in   the turn calls nothing and a tool is
                  text: When2Call's finding that SFT teaches models to   offered
                  call when no tool fits
================= ====================================================== =========================================

Which call, argument or tool is chosen is seeded by the pair's id (``<conversation id>/t<message index>/<kind>``),
so a rebuild is identical and does not depend on what else the corpus holds. Only what changes is changed: the
rejected turn keeps the chosen turn's text and its other calls, so the pair differs where the mistake is. A turn
that no kind applies to yields no pair; ``pairs`` counts what it skipped and why (read = paired + skipped).
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from train.schema import Conversation, Message, Tool, ToolCall

KINDS = ("wrong_tool", "wrong_argument", "missing_argument", "spurious_call")


@dataclass(frozen=True)
class PreferencePair:
    id: str  # <conversation id>/t<index of the chosen message>/<kind>
    prompt: Conversation  # the messages before the turn, with the conversation's tools and meta
    chosen: Message
    rejected: Message
    kind: str


def _rng(pair_id: str, seed: int) -> random.Random:
    return random.Random(f"{seed}/{pair_id}")  # str seeds hash with sha512: the same draw on every machine


def _schema(tools: Sequence[Tool], name: str) -> dict[str, Any]:
    for tool in tools:
        if tool.name == name:
            return tool.parameters if isinstance(tool.parameters, dict) else {}
    return {}


def _replace_call(message: Message, index: int, call: ToolCall) -> Message:
    calls = list(message.tool_calls)
    calls[index] = call
    return dataclasses.replace(message, tool_calls=calls)


def wrong_tool(message: Message, tools: Sequence[Tool], rng: random.Random) -> Message | None:
    if not message.tool_calls:
        return None
    first = message.tool_calls[0]
    others = [tool for tool in tools if tool.name != first.name]
    if not others:
        return None
    other = rng.choice(others)
    declared = (other.parameters or {}).get("properties") or {}
    arguments = {key: value for key, value in first.arguments.items() if key in declared}
    return _replace_call(message, 0, ToolCall(name=other.name, arguments=arguments, id=first.id))


def changed_value(value: Any, spec: dict[str, Any], strings: Sequence[str], rng: random.Random) -> tuple[bool, Any]:
    """A wrong value for an argument whose right value is ``value``: (False, None) when none can be made."""
    enum = [member for member in spec.get("enum") or [] if member != value]
    if enum:
        return True, rng.choice(enum)
    if isinstance(value, bool):
        return True, not value
    if isinstance(value, int | float):
        return True, value + 1
    if isinstance(value, str):
        others = sorted({text for text in strings if text != value})
        if others:
            return True, rng.choice(others)
    return False, None


def wrong_argument(message: Message, tools: Sequence[Tool], rng: random.Random) -> Message | None:
    for index, call in enumerate(message.tool_calls):
        properties = _schema(tools, call.name).get("properties") or {}
        strings = [value for value in call.arguments.values() if isinstance(value, str)]
        options = []
        for key in sorted(call.arguments):
            made, value = changed_value(call.arguments[key], properties.get(key) or {}, strings, rng)
            if made:
                options.append((key, value))
        if options:
            key, value = rng.choice(options)
            return _replace_call(message, index, dataclasses.replace(call, arguments={**call.arguments, key: value}))
    return None


def missing_argument(message: Message, tools: Sequence[Tool], rng: random.Random) -> Message | None:
    for index, call in enumerate(message.tool_calls):
        required = [key for key in _schema(tools, call.name).get("required") or [] if key in call.arguments]
        if required:
            dropped = rng.choice(sorted(required))
            arguments = {key: value for key, value in call.arguments.items() if key != dropped}
            return _replace_call(message, index, dataclasses.replace(call, arguments=arguments))
    return None


def spurious_call(message: Message, tools: Sequence[Tool], rng: random.Random) -> Message | None:
    if message.tool_calls or not tools:
        return None
    return dataclasses.replace(message, tool_calls=[ToolCall(name=rng.choice(list(tools)).name)])


REJECTED = {
    "wrong_tool": wrong_tool,
    "wrong_argument": wrong_argument,
    "missing_argument": missing_argument,
    "spurious_call": spurious_call,
}


def conversation_pairs(conv: Conversation, kinds: Sequence[str] = KINDS, seed: int = 0) -> Iterator[PreferencePair]:
    """Every pair ``conv`` gives: for each assistant turn, one per kind that applies to it."""
    for position, message in enumerate(conv.messages):
        if message.role != "assistant":
            continue
        prompt = dataclasses.replace(conv, messages=list(conv.messages[:position]))
        for kind in kinds:
            pair_id = f"{conv.id}/t{position}/{kind}"
            rejected = REJECTED[kind](message, conv.tools, _rng(pair_id, seed))
            if rejected is not None and rejected != message:
                yield PreferencePair(id=pair_id, prompt=prompt, chosen=message, rejected=rejected, kind=kind)


def pairs(
    conversations: Iterable[Conversation], kinds: Sequence[str] = KINDS, seed: int = 0, counts: Counter | None = None
) -> Iterator[PreferencePair]:
    """The pairs of every conversation; ``counts`` (when given) gets ``read``, ``paired`` (conversations that gave
    at least one pair), ``skipped: no assistant turn a kind applies to`` and the pairs per kind."""
    unknown = [kind for kind in kinds if kind not in REJECTED]
    if unknown:
        raise ValueError(f"unknown preference pair kind(s) {', '.join(unknown)}; valid: {', '.join(KINDS)}")
    counts = Counter() if counts is None else counts
    for conv in conversations:
        counts["read"] += 1
        made = list(conversation_pairs(conv, kinds, seed))
        counts["paired" if made else "skipped: no assistant turn a kind applies to"] += 1
        for pair in made:
            counts[pair.kind] += 1
            yield pair


__all__ = ["KINDS", "PreferencePair", "conversation_pairs", "pairs"]
