"""Result rules: how tool results pair with calls (``link_results``: by ``tool_call_id``, or, for sources with no
ids, the earliest unanswered earlier call to the same name), results answering nothing (``orphan-tool-result``),
results naming another tool than their call (``result-name-mismatch``) and calls left open (``unanswered-call``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from train.schema import Message
from train.validate.calls import CallRef
from train.validate.findings import Finding


@dataclass
class Linking:
    """How tool results pair with calls: the pairs, results answering nothing, calls left open."""

    answered: list[tuple[int, CallRef]]  # (tool message index, the call it answers)
    orphans: list[tuple[int, str]]  # (tool message index, why it answers nothing)
    unanswered: list[tuple[CallRef, str]]  # (call, what came instead of its result)


def link_results(messages: list[Message]) -> Linking:
    """Pair tool results with calls (rules in the module docstring); pure, one pass."""
    linking = Linking([], [], [])
    pending: list[CallRef] = []
    fate: dict[str, str] = {}  # call id -> what happened to that call, for a clear orphan reason
    for m, msg in enumerate(messages):
        if msg.role == "assistant":
            pending.extend(CallRef(m, c, call) for c, call in enumerate(msg.tool_calls))
        elif msg.role == "user":
            for ref in pending:
                linking.unanswered.append((ref, f"the user turn at messages[{m}] came first"))
                if ref.call.id is not None:
                    fate.setdefault(ref.call.id, f"was left unanswered before the user turn at messages[{m}]")
            pending.clear()
        elif msg.role == "tool":
            ref, why = _match(msg, pending, fate)
            if ref is None:
                linking.orphans.append((m, why))
            else:
                pending.remove(ref)
                linking.answered.append((m, ref))
                if ref.call.id is not None:
                    fate.setdefault(ref.call.id, f"was already answered at messages[{m}]")
    last = len(messages) - 1
    for ref in pending:
        if ref.message != last:  # calls of the final turn are an SFT target, not a loose end
            linking.unanswered.append((ref, "the conversation ends without its result"))
    return linking


def _match(result: Message, pending: list[CallRef], fate: dict[str, str]) -> tuple[CallRef | None, str]:
    if result.tool_call_id is not None:
        for ref in pending:
            if ref.call.id == result.tool_call_id:
                return ref, ""
        if result.tool_call_id in fate:
            return None, f"tool_call_id {result.tool_call_id!r}: that call {fate[result.tool_call_id]}"
        return None, f"tool_call_id {result.tool_call_id!r} matches no earlier call"
    candidates = [ref for ref in pending if result.name is None or ref.call.name == result.name]
    if not candidates:
        target = f" to {result.name!r}" if result.name is not None else ""
        return None, f"no unanswered earlier call{target}"
    if candidates[0].call.id is not None:
        return (
            None,
            f"no tool_call_id, but the call it would answer ({candidates[0].where}) has id {candidates[0].call.id!r}",
        )
    return candidates[0], ""


def check_tool_results(messages: list[Message]) -> Iterator[Finding]:
    """orphan-tool-result, result-name-mismatch and unanswered-call, from one linking pass."""
    linking = link_results(messages)
    for m, why in linking.orphans:
        yield "orphan-tool-result", f"messages[{m}]", why
    for m, ref in linking.answered:
        name = messages[m].name
        if name is not None and name != ref.call.name:
            yield (
                "result-name-mismatch",
                f"messages[{m}].name",
                f"result names {name!r} but answers {ref.where}, a call to {ref.call.name!r}",
            )
    for ref, why in sorted(linking.unanswered, key=lambda item: (item[0].message, item[0].index)):
        yield "unanswered-call", ref.where, f"call to {ref.call.name!r} has no result: {why}"
