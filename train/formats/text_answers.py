"""Text answers: the assistant writes its calls as text, ``<thinking>…</thinking>`` then ``[func(a=1, b="x")]``.

The ``answer_style`` option of the chat formats (every family, through ``ChatFormat``) picks it: ``native`` (the
default) is the family's own tool-call syntax; ``toolgt_text`` (``TEXT_STYLE``; the value keeps the name of the
recipe that brought it, configs spell it so) is this layout:

* Prompt. The functions are written into the system prompt as text, in the wording of BFCL's prompting handler
  (``SYSTEM_PROMPT``), never in the family's own tools block. A conversation whose system message already is that
  prompt (a builder may write it so) is rendered as given; one with tools and no such prompt gets it composed
  from its tools, put before its own system text as BFCL's prompting handler does (``prompt + "\\n\\n" +
  system``), or as the whole system message when it has none.
* Answer. An assistant turn is plain text, trained as a whole like any text turn (the loss mask of every
  format). A turn that carries ``tool_calls`` (a converted dataset, a benchmark's gold turn) is written as its
  text, a newline, then the calls as a Python-style list, so the model learns the same text either way.
* Tool results have no place in this single-turn layout: a ``tool`` message is a ``ValueError``.

``parse_text_answer`` reads an answer back (never evaluating it): the ``<thinking>`` block is removed (a missing
``</thinking>`` ends the reasoning at the first call list, ``[`` at a line start, or else at the end of the
text), an optional ``<function>…</function>`` wrapping (a two-stage answer's) is removed, and what is left
must be one list of calls, read with ``train.base.pysyntax`` (lenient: ToolACE names such as
``Market Trends API(...)``). Every argument must be named (BFCL's answers are keyword-only; a positional value
cannot be matched to a parameter by name). ``[]`` is a well-formed answer with no call.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from train.base.pysyntax import PySyntaxError, parse_call_list
from train.schema import Conversation, Message, Tool, ToolCall

NATIVE, TEXT_STYLE = "native", "toolgt_text"
ANSWER_STYLES = (NATIVE, TEXT_STYLE)

# BFCL's prompting-handler system prompt (as ToolACE-style training data writes it), the functions as one JSON list.
PROMPT_OPENING = "You are an expert in composing functions."
SYSTEM_PROMPT = (  # the prompt of training and of evaluation alike
    PROMPT_OPENING + " You are given a question and a set of possible functions. Based on the question, you "
    "will need to make one or more function/tool calls to achieve the purpose. If none of the function can be used, "
    "point it out. If the given question lacks the parameters required by the function, also point it out. You "
    "should only return the function call in tools call sections.\n"
    "Here is a list of functions in JSON format that you can invoke\n{functions}\n"
    "Should you decide to return the function call(s). Put it in the format of [func1(params_name=params_value, "
    "params_name2=params_value2), func2(params)]\n"
    "NO other text MUST be included."
)
THINK_OPEN, THINK_CLOSE = "<thinking>", "</thinking>"
FUNCTION_OPEN, FUNCTION_CLOSE = "<function>", "</function>"
_LIST_AT_LINE_START = re.compile(r"(?m)^[ \t]*\[")


def check_answer_style(value: Any) -> str | None:
    """Why ``value`` is not an answer style, or None."""
    if value in ANSWER_STYLES:
        return None
    return f"answer_style must be one of {', '.join(ANSWER_STYLES)}, got {value!r}"


# ---------------------------------------------------------------- the prompt and the answer as text


def text_system_prompt(tools: list[Tool]) -> str:
    """The text-answer system prompt listing ``tools`` (name, description, parameters) as JSON."""
    functions = [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools]
    return SYSTEM_PROMPT.format(functions=json.dumps(functions, ensure_ascii=False))


def python_value(value: Any) -> str:
    """A JSON value as a Python literal (strings in double quotes, True/False/None)."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a Python string literal
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"non-finite number {value!r} has no literal")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(python_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(f"{json.dumps(str(k), ensure_ascii=False)}: {python_value(v)}" for k, v in value.items())
            + "}"
        )
    raise ValueError(f"{type(value).__name__} value has no literal")


def _argument_name(name: str) -> str:
    return name if name.isidentifier() else json.dumps(name)  # pysyntax's lenient reading unquotes it


def call_list_text(calls: list[ToolCall]) -> str:
    """``[func(a=1, b="x"), g()]``: the calls as the Python-style list a text answer writes (one line)."""
    written = []
    for call in calls:
        arguments = ", ".join(f"{_argument_name(name)}={python_value(value)}" for name, value in call.arguments.items())
        written.append(f"{call.name}({arguments})")
    return "[" + ", ".join(written) + "]"


def text_answer_view(conv: Conversation) -> tuple[Conversation, int]:
    """(the conversation as text answers render it: tools in the system prompt, calls as answer text; how many
    messages were put in front of the conversation's own, 1 when the prompt became a new system message)."""
    messages = list(conv.messages)
    if conv.tools:
        has_system = bool(messages) and messages[0].role == "system"
        own = (messages[0].content or "") if has_system else ""
        if not own.startswith(PROMPT_OPENING):
            prompt = text_system_prompt(conv.tools) + ("\n\n" + own if own else "")
            system = Message(role="system", content=prompt)
            messages = [system, *messages[1:]] if has_system else [system, *messages]
    shifted = len(messages) - len(conv.messages)  # 1 when a system message was added in front
    out = []
    for position, message in enumerate(messages):
        if message.role == "tool":
            raise ValueError(
                f"messages[{position - shifted}]: answer_style=toolgt_text has no tool-result turns (single-turn "
                "text answers); use answer_style=native"
            )
        if message.role == "assistant" and message.tool_calls:
            text = (message.content + "\n" if message.content else "") + call_list_text(message.tool_calls)
            message = Message(role="assistant", content=text, reasoning_content=message.reasoning_content)
        out.append(message)
    return Conversation(conv.id, out, tools=[], meta=conv.meta), shifted


# ---------------------------------------------------------------- reading an answer back


@dataclass
class TextAnswer:
    reasoning: str | None  # the text of the <thinking> block (or before the call list), None when there is none
    calls: list[ToolCall] = field(default_factory=list)
    error: str | None = None  # why the answer is not a call list; None when it is well-formed

    @property
    def well_formed(self) -> bool:
        return self.error is None


def split_reasoning(text: str) -> tuple[str | None, str]:
    """(reasoning, the rest) of an answer: the ``<thinking>`` block is the reasoning; without its close tag, the
    reasoning runs to the first line that starts a list, else to the end."""
    body = text.strip()
    if not body.startswith(THINK_OPEN):
        return None, body
    inner = body[len(THINK_OPEN) :]
    reasoning, close, rest = inner.partition(THINK_CLOSE)
    if not close:
        start = _LIST_AT_LINE_START.search(inner)
        reasoning, rest = (inner[: start.start()], inner[start.start() :]) if start else (inner, "")
    return reasoning.strip() or None, rest.strip()


def parse_text_answer(text: str) -> TextAnswer:
    """Read a text answer into calls; an answer that is not a call list gets its reason in ``error``."""
    reasoning, rest = split_reasoning(text)
    if rest.startswith(FUNCTION_OPEN):
        inner, close, after = rest[len(FUNCTION_OPEN) :].partition(FUNCTION_CLOSE)
        if close and after.strip():
            return TextAnswer(reasoning, error=f"text after </function>: {after.strip()[:60]!r}")
        rest = inner.strip()
    if not rest:
        return TextAnswer(reasoning, error="no call list after the reasoning")
    if not rest.startswith("["):
        return TextAnswer(reasoning, error=f"the answer is not a call list: {rest[:60]!r}")
    try:
        parsed = parse_call_list(rest, lenient=True)
    except PySyntaxError as err:
        return TextAnswer(reasoning, error=f"malformed call list: {err}")
    calls = []
    for call in parsed:
        if call.args:
            return TextAnswer(
                reasoning,
                error=f"{call.name}: {len(call.args)} positional argument(s); every argument of a text answer is named",
            )
        calls.append(ToolCall(name=call.name, arguments=dict(call.kwargs)))
    return TextAnswer(reasoning, calls)


def parse_as_format(text: str, end_tokens: tuple[str, ...]) -> tuple[str | None, list[ToolCall]]:
    """``ChatFormat.parse`` for text answers: (reasoning, calls), or ``ValueError`` with the reason."""
    body = text.rstrip()
    for end in end_tokens:
        body = body.removesuffix(end)
    answer = parse_text_answer(body)
    if answer.error:
        raise ValueError(f"text answer: {answer.error}")
    return answer.reasoning, answer.calls


__all__ = [
    "ANSWER_STYLES",
    "NATIVE",
    "SYSTEM_PROMPT",
    "TEXT_STYLE",
    "TextAnswer",
    "call_list_text",
    "check_answer_style",
    "parse_as_format",
    "parse_text_answer",
    "python_value",
    "split_reasoning",
    "text_answer_view",
    "text_system_prompt",
]
