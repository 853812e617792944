"""ITC, ToolBench and Nexus as generation tasks (registered with their scorers in ``train.evaluation.SCORERS``).

=========== ============================================ ==================================================
task        turn written                                 prediction row (the scorer's layout)
=========== ============================================ ==================================================
itc         the ITC scorer's gold turn: ``meta.turn``,   ``{"id", "content": the text the model wrote}``
            else the last {Thought, Action} answer       (``answer=text``, the default: FM is that text
                                                         parsing as ITC's answer); with ``answer=tool_calls``
                                                         ``{"id", "content", "tool_calls"}``, or ``{"id",
                                                         "content"}`` for a generation without parsed calls
                                                         whose content is ITC's answer
toolbench   a new turn after the user's request (the     ``{"id", "program": content, "tool": name}``:
            golds are programs in ``meta``, not a        the program or curl line is the text the model
            message); the last assistant turn when the   wrote; ``tool`` is its first parsed call's name
            reference ends with one                      (left out when it made no call)
nexus       the last assistant turn (its tool calls are  ``{"id", "tool_calls", "well_formed"}``; a generation
            the gold)                                    without parsed calls: ``{"id", "call": content,
                                                         "well_formed"}`` (the Python call text NexusRaven
                                                         models write)
=========== ============================================ ==================================================

A failed generation (a prompt the format cannot render, an output it cannot parse) is wrong for every
task: itc and nexus get a ``tool_calls`` that is not a list (FM fails / the call cannot be read);
toolbench gets the error text as its program, which no program runner or request parser accepts.

nexus and bfcl (``train.evaluation.tasks``) also report ``well_formed_rate``: the share of answers the chat format
read back without error. With ``answer_style=toolgt_text`` (``train.formats.text_answers``) the format strips the
``<thinking>`` block and decodes the call list, so the rate is the share of well-formed text answers; an answer
that is not a call list is a parse error, scored as BFCL scores a decode failure (wrong, or "no call" for
irrelevance) and wrong for Nexus.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from train.evaluation.task_base import EvalItem, Task, TaskError, failed_calls, last_assistant, new_turn_target
from train.schema import Conversation


def _calls(generation: Any) -> list[dict[str, Any]]:
    return [call.to_dict() for call in generation.tool_calls]


class ItcTask(Task):
    """International Tool Calling. Options: ``answer`` = ``text`` (default: the scorer reads the model's text as
    ITC's ``{"Thought", "Action"}`` answer; FM is that text parsing to the schema) or ``tool_calls`` (the calls
    the chat format parsed, for models that answer in their native call syntax); ``matching`` = ``multiset``
    (default) or ``seal`` (``train.evaluation.itc_metrics``); ``languages``: restrict langid to these
    comma-separated codes, or ``itc`` for the paper's 29."""

    name = "itc"
    native_source = "itc"
    OPTIONS: ClassVar[dict[str, type]] = {"answer": str, "matching": str, "languages": str}
    ANSWERS = ("text", "tool_calls")

    def __init__(self, answer: str = "text", matching: str = "multiset", languages: str | None = None):
        from train.evaluation.itc import ITC_LANGUAGES, langid_classifier

        problems = self.value_problems({"answer": answer, "matching": matching})
        if problems:
            raise TaskError("; ".join(problems))
        self.answer, self.matching, self.languages = answer, matching, None
        if languages:
            codes = ITC_LANGUAGES if languages == "itc" else tuple(c.strip() for c in languages.split(",") if c.strip())
            try:  # now, not at the first evaluation: a code langid does not know is a config error
                langid_classifier(codes)
            except ValueError as err:
                raise TaskError(f"option 'languages': {err}") from None
            self.languages = codes

    @classmethod
    def option_problems(cls, options: dict[str, Any]) -> list[str]:
        problems = super().option_problems(options)
        return problems or cls.value_problems(options)

    @classmethod
    def value_problems(cls, options: dict[str, Any]) -> list[str]:
        from train.evaluation.itc_metrics import MATCHINGS

        allowed = {"answer": cls.ANSWERS, "matching": MATCHINGS}
        return [
            f"option {key!r} must be one of {', '.join(values)}, got {options[key]!r}"
            for key, values in allowed.items()
            if key in options and options[key] not in values
        ]

    def target(self, conv: Conversation) -> int:
        from train.evaluation.itc import gold_position

        return gold_position([m.to_dict() for m in conv.messages], conv.meta)  # SchemaError is a ValueError

    def prediction(self, item: EvalItem, generation: Any) -> dict[str, Any]:
        if self.answer == "text":
            if generation.text is None:  # nothing was generated: the prompt could not be rendered
                return {"id": item.id, "content": None, "error": generation.error}
            return {"id": item.id, "content": written_answer(generation)}
        if generation.error:
            return {"id": item.id, "content": generation.content, "tool_calls": failed_calls(generation.error)}
        if not generation.tool_calls and is_itc_answer(generation.content):
            return {"id": item.id, "content": generation.content}
        return {"id": item.id, "content": generation.content, "tool_calls": _calls(generation)}

    def score(self, items: Sequence[EvalItem], predictions: list[dict[str, Any]]) -> dict[str, Any]:
        from train.evaluation import get_scorer

        references = [item.conversation.to_dict() for item in items]
        return get_scorer(self.name)(predictions, references, matching=self.matching, languages=self.languages)


def written_answer(generation: Any) -> str:
    """The assistant text the model wrote, as ITC scores it: the format's content when that is the answer,
    else the whole output (a format that read something else out of it, e.g. native call tags, or failed to
    parse it, leaves the answer, if any, only in the text)."""
    content = generation.content if isinstance(generation.content, str) else ""
    if generation.error is None and not generation.tool_calls:
        return content
    return generation.text if is_itc_answer(generation.text) or not content else content


def is_itc_answer(text: Any) -> bool:
    """Whether ``text`` is an ITC ``{"Thought", "Action"}`` answer (the ITC reader's envelope parser)."""
    from train.sources.itc import parse_answer

    if not isinstance(text, str):
        return False
    try:
        return parse_answer(text, "answer") is not None
    except (ValueError, RecursionError):
        return False


class ToolBenchTask(Task):
    """SambaNova ToolBench (Weather, Cat, Home, Booking): the model's text is its program or curl line."""

    name = "toolbench"
    native_source = "toolbench"

    def target(self, conv: Conversation) -> int:
        return new_turn_target(conv)

    def prediction(self, item: EvalItem, generation: Any) -> dict[str, Any]:
        if generation.error:
            return {"id": item.id, "program": failed_calls(generation.error)}
        row: dict[str, Any] = {"id": item.id, "program": generation.content or ""}
        if generation.tool_calls:
            row["tool"] = generation.tool_calls[0].name
        return row


class NexusTask(Task):
    """NexusRaven queries: parsed calls, or the Python call text the model wrote."""

    name = "nexus"
    native_source = "nexus"

    def target(self, conv: Conversation) -> int:
        return last_assistant(conv)  # its tool calls are the gold; meta.turn plays no part

    def prediction(self, item: EvalItem, generation: Any) -> dict[str, Any]:
        read = {"well_formed": well_formed(generation)}
        if generation.error:
            return {"id": item.id, "tool_calls": failed_calls(generation.error), **read}
        if generation.tool_calls:
            return {"id": item.id, "tool_calls": _calls(generation), **read}
        return {"id": item.id, "call": generation.content or "", **read}

    def score(self, items: Sequence[EvalItem], predictions: list[dict[str, Any]]) -> dict[str, Any]:
        return {**super().score(items, predictions), "well_formed_rate": well_formed_rate(predictions)}


def well_formed(generation: Any) -> bool:
    """Whether the chat format read the model's answer back without error (with ``answer_style=toolgt_text``: the
    answer was a call list after its reasoning). A prompt the format could not render is not well-formed."""
    return generation.text is not None and generation.error is None


def well_formed_rate(rows: Sequence[dict[str, Any]]) -> float | None:
    """The share of prediction rows marked ``well_formed``; None when no row says (rows written before the mark)."""
    marked = [row["well_formed"] for row in rows if isinstance(row, dict) and isinstance(row.get("well_formed"), bool)]
    return sum(marked) / len(marked) if marked else None


__all__ = ["ItcTask", "NexusTask", "ToolBenchTask", "is_itc_answer", "written_answer"]
