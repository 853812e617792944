"""Turn-order rules: who may speak when (``role-order``, ``assistant-first``, ``consecutive-user``) and assistant
turns with nothing to train (``empty-assistant``); what is allowed is in ``train.validate``'s docstring."""

from __future__ import annotations

from collections.abc import Iterator

from train.schema import Message
from train.validate.findings import Finding


def check_role_order(messages: list[Message]) -> Iterator[Finding]:
    """role-order, assistant-first and consecutive-user (see the module docstring for what is allowed)."""
    if not messages:
        yield "role-order", "messages", "the conversation has no messages"
        return
    if not any(msg.role == "user" for msg in messages):
        yield "role-order", "messages", "the conversation has no user message"
    else:
        opening = next((m for m, msg in enumerate(messages) if msg.role != "system"), None)
        if opening is not None and messages[opening].role == "assistant":
            yield (
                "assistant-first",
                f"messages[{opening}]",
                (
                    "the conversation opens with an assistant turn, before any user message "
                    "(llama3_1 refuses it when the tools go in the first user message)"
                ),
            )
    for m, msg in enumerate(messages):
        previous = messages[m - 1] if m else None
        if msg.role == "system" and m > 0:
            yield "role-order", f"messages[{m}]", "a system message must come first"
        elif msg.role == "tool" and not (previous and (previous.role == "tool" or previous.tool_calls)):
            after = (
                f"{'an' if previous.role == 'assistant' else 'a'} {previous.role} message" if previous else "nothing"
            )
            what = " without tool calls" if previous and previous.role == "assistant" else ""
            yield "role-order", f"messages[{m}]", f"a tool result must follow an assistant call turn, not {after}{what}"
        elif msg.role == "user" and previous and previous.role == "user":
            yield (
                "consecutive-user",
                f"messages[{m}]",
                f"two user messages in a row (messages[{m - 1}] and messages[{m}])",
            )


def check_empty_assistant(messages: list[Message]) -> Iterator[Finding]:
    """empty-assistant: an assistant turn that says nothing and calls nothing (nothing to train)."""
    for m, msg in enumerate(messages):
        if msg.role == "assistant" and not msg.tool_calls and not (msg.content or "").strip():
            yield "empty-assistant", f"messages[{m}]", "assistant message has neither content nor tool calls"
