"""ITC scorer (International Tool Calling, seed 002, §5.2, Appendix B and Table 4).

Appendix B's formulas, quoted (amounts summed over the whole test set: micro-averages; the paper's
tables, though, average per sample: ``train.evaluation.itc_metrics`` computes both, as ``micro`` and
``macro``, and says why the tables are macro)::

    LM = amount_correct language / amount_all                         (1)
    FM = amount_correct format / amount_all                           (2)
    Tool P = amount_correct tools / amount_predict tools              (3)
    Tool R = amount_correct tools / amount_gold tools                 (4)
    Tool F1 = 2 · Tool P · Tool R / (Tool P + Tool R)                 (5)
    TI P = amount_correct parameters / amount_predict parameters      (6)
    TI R = amount_correct parameters / amount_gold parameters         (7)
    TI F1 = 2 · TI P · TI R / (TI P + TI R)                           (8)

§5.2: tool invocation is "triple-level matching of the tool name, parameter key, and parameter
value"; LM asks whether "the thought field is expressed in the same language as the user's input
query" using ``langid``; FM whether "the model's output conforms to the expected JSON schema".

What is counted, precisely
--------------------------
* tools: the multiset of call names. correct tools = |pred ∩ gold| as multisets, so a tool called
  twice where the gold calls it once is one correct and one extra (recall cannot pass 1).
  ``matching="seal"`` counts as Seal-Tools does instead (each predicted call meets the first gold
  call of its name, not consumed; values compared as ``str``): ``itc_metrics`` has a worked example.
* parameters: the multiset of (tool name, key, value) triples over all calls, values compared after
  JSON normalisation (``calls.canonical``: key order ignored, 1 == 1.0, "1" != 1).
* FM: the output is the ITC answer ``{"Thought": str, "Action": "[api(p='v'), ...]"}``, read by the
  ITC reader's ``parse_answer`` (bare, ```` ```json ```` fenced, ``json{...}`` or ``json({...})``, as
  the dataset writes it), and every Action item is a call with keyword arguments only (the Action
  list is parsed with ``ast`` by ``train.base.pysyntax``, lenient: call names with spaces and
  quoted keys as in the paper's examples). An output that fails FM is still searched for calls, as the paper's
  tables credit them (watt-tool-8B: FM 5.53, tool F1 88.30): ``loose_calls`` takes the broken answer's Action,
  else the first bracketed call list in the text (Seal-Tools' extraction takes the first call list it finds);
  those calls are scored, and an output with none contributes no predicted tools or parameters.
* LM: ``langid`` of the Thought equals the query's language. The Thought is the parsed one, else a
  ``"Thought": "..."`` string found in broken JSON, else the whole output: LM does not require FM
  (the paper's Table 3 has models with LM above FM). The query's language is ``meta["language"]``
  when the reference carries it (the dataset's label), else ``langid`` of the query. langid runs
  over all its 97 languages by default: the paper names no restriction. ``languages=`` restricts it
  (``ITC_LANGUAGES`` is the 29 of the paper's Table 10).
* Zero denominators and per-item conventions: ``train.evaluation.itc_metrics``.

Table 4 error analysis (each type as a share of its group's errors, so a row sums to 1)
------------------------------------------------------------------------------------
Selection, from the name multisets of one item: a predicted call left after matching is
*hallucinated* when its name is not a tool the reference offers (nor a gold name), else *extra*; a
gold call left is *missing*. Invocation, over the calls whose tool was selected: each gold call, in
order, is paired with the unpaired predicted call of the same tool that shares the most (key,
value) pairs with it (the first on ties); in a pair, a gold key with another value is an
*incorrect* parameter, a gold key absent is a *missing* one, a predicted key the gold lacks an
*extra* one. Calls left unpaired are selection errors only, so no error is counted twice.

Rows
----
* references: canonical conversations, in either shape. The ITC reader's (``tooltrain data convert
  itc``): the gold turn's content is the Thought and its ``tool_calls`` the Action. The ITC builder's
  (text answers): the gold turn's content is the whole answer text, ``json{"Thought", "Action"}``,
  with no ``tool_calls``; its Action gives the gold calls (a gold text that does not parse is a
  reference error). The gold turn is ``messages[meta["turn"]]``, else the last assistant message
  that is a {Thought, Action} answer (``meta["raw_answers"]`` tells a plain final reply apart; without
  it, the content does when some assistant turn is a text answer; else the last assistant message).
  The query is the last user message before it, the offered tools are ``tools`` by name,
  ``meta["language"]`` and ``meta["task_type"]`` (single / repeated / parallel / nested) are optional
  labels for the breakdowns, and ``meta["renamed_calls"]`` (the reader's map from an Action's tool
  name to its API name) is applied to predicted names and to a text gold's names.
* predictions: ``{"id", "content": "<the model's whole answer>"}``, scored as above (the ``itc``
  task writes this by default: FM is the model's text parsing to the schema); or, for a model
  whose chat format already parsed the calls (the task's ``answer=tool_calls``), ``{"id", "content":
  Thought, "tool_calls": [{"name", "arguments"}]}``, where FM is "``tool_calls`` is a well-formed
  list" (the format's parser checked the syntax) and the Thought is ``content``.

Task (``ItcTask``, for ``eval run`` and the eval callback): the model writes the gold turn above. Its row is
``{"id", "content": the text the model wrote}`` (``answer=text``, the default: FM is that text parsing as ITC's
answer); with ``answer=tool_calls``, ``{"id", "content", "tool_calls"}``, or ``{"id", "content"}`` for a
generation without parsed calls whose content is ITC's answer. A failed generation gets a ``tool_calls`` that is
not a list, so FM fails.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from train.base.languages import language_classifier
from train.base.pysyntax import PySyntaxError, parse_call_list
from train.evaluation import ScoreOptions, ScorerSpec, get_scorer
from train.evaluation.calls import (
    Call,
    CallFormatError,
    canonical,
    join_by_id,
    name_multiset,
    overlap,
    read_calls,
    score_joined,
    triple_multiset,
)
from train.evaluation.itc_metrics import (
    INVOCATION_ERRORS,
    MATCHINGS,
    SELECTION_ERRORS,
    aggregate,
    item_prf,
    precision_recall_f1,
)
from train.evaluation.task_base import EvalItem, Task, TaskError, failed_calls
from train.schema import Conversation, SchemaError

# Table 10 of the paper: the 29 languages of the ITC data (ISO 639-1, as langid names them).
ITC_LANGUAGES = (
    "en", "zh", "hi", "fr", "vi", "pt", "de", "ja", "es", "ar", "id", "th", "ko", "nl", "sw",
    "sl", "xh", "ur", "cs", "la", "tl", "ms", "it", "rw", "fi", "hr", "gl", "kn", "zu",
)  # fmt: skip
_THOUGHT = re.compile(r'"Thought"\s*:\s*("(?:[^"\\]|\\.)*")', re.DOTALL)
_ACTION = re.compile(r'"Action"\s*:\s*("(?:[^"\\]|\\.)*")', re.DOTALL)
LOOSE_SCAN_CHARACTERS = 1_000_000  # bracketed's whole budget: ~0.3 s of Python on the slowest output
LOOSE_CANDIDATES = 20  # bracketed lists tried in an output that fails FM: bounded work per item

LanguageOf = Callable[[str], str]


def langid_classifier(languages: tuple[str, ...] | None = None) -> LanguageOf:
    """langid's language of a text, among ``languages`` (train.base.languages: one decoded model per process)."""
    return language_classifier(languages)


# ---------------------------------------------------------------- reading rows


def reference_parts(reference: dict[str, Any]) -> dict[str, Any]:
    """Gold calls, query, offered tool names, language and task-type labels and renames of a conversation.

    The gold calls are the gold turn's ``tool_calls`` when it has some (the ITC reader's rows), else the
    Action of its content when that is an ITC answer (text answers, the ITC builder's rows), else none.
    """
    messages = reference.get("messages")
    if not isinstance(messages, list):
        raise SchemaError("messages", "expected the list of a canonical conversation")
    meta = reference.get("meta") if isinstance(reference.get("meta"), dict) else {}
    position = gold_position(messages, meta)
    users = [m for m in messages[:position] if isinstance(m, dict) and m.get("role") == "user"]
    if not users or not isinstance(users[0].get("content"), str):
        raise SchemaError("messages", "no user query before the gold answer")
    renames = meta.get("renamed_calls") if isinstance(meta.get("renamed_calls"), dict) else {}
    renamed = {k: v for k, v in renames.items() if isinstance(v, str) and v}
    gold = gold_calls(messages[position], f"messages[{position}]", renamed)
    tools = reference.get("tools") if isinstance(reference.get("tools"), list) else []
    offered = {
        t["function"]["name"]
        for t in tools
        if isinstance(t, dict) and isinstance(t.get("function"), dict) and isinstance(t["function"].get("name"), str)
    }
    # text-answer rows (the ITC builder's) list their APIs in the system prompt, and their names in meta.apis
    apis = meta.get("apis") if isinstance(meta.get("apis"), list) else []
    offered |= {name for name in apis if isinstance(name, str)}
    return {
        "gold": gold,
        # the task's query is its first user turn: later user turns of a nested task carry tool results
        "query": users[0]["content"],
        "offered": offered,
        "renamed": renamed,
        "language": _label(meta, "language"),
        "task_type": _label(meta, "task_type"),
    }


def _label(meta: dict[str, Any], key: str) -> str | None:
    return meta[key] if isinstance(meta.get(key), str) and meta[key] else None


def gold_calls(message: Any, where: str, renamed: dict[str, str]) -> list[Call]:
    """The gold turn's calls: its ``tool_calls`` when it has some, else its text answer's Action."""
    if not isinstance(message, dict):
        raise SchemaError(where, f"expected a message object, got {type(message).__name__}")
    calls = message.get("tool_calls")
    if not calls:
        text = message.get("content")
        read = read_prediction({"content": text}) if text_answer(text) else None
        if read is not None:
            if not read["format_ok"]:
                raise SchemaError(f"{where}.content", read["error"])
            return [Call(renamed.get(c.name, c.name), c.arguments) for c in read["calls"]]
    try:
        return read_calls(calls or [], f"{where}.tool_calls")
    except CallFormatError as err:
        raise SchemaError("messages", str(err)) from None


def text_answer(text: Any) -> bool:
    """Whether ``text`` is written as an ITC answer (a JSON object, bare, fenced or json-prefixed), valid or not."""
    if not isinstance(text, str):
        return False
    try:
        from train.sources.itc import parse_answer

        return parse_answer(text, "answer") is not None
    except (ValueError, RecursionError):  # it has the answer's envelope but breaks inside: still an answer
        return True


def gold_position(messages: list[Any], meta: dict[str, Any]) -> int:
    """``meta["turn"]``, else the last assistant message that is an ITC answer (not a plain reply).

    The ITC reader keeps each assistant value in ``meta["raw_answers"]``; a final natural-language
    reply after tool results is not a {Thought, Action} answer, so it is not the scored turn. Rows
    without it whose assistant turns are text answers (the ITC builder's) are told apart the same way,
    by their content; other rows score their last assistant message.
    """
    answers = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"]
    if "turn" in meta:
        if meta["turn"] not in answers or isinstance(meta["turn"], bool):
            raise SchemaError("meta.turn", f"{meta['turn']!r} is not the index of an assistant message")
        return meta["turn"]
    raw = meta.get("raw_answers")
    if isinstance(raw, list) and len(raw) == len(answers):
        answers = [position for position, text in zip(answers, raw) if _parses(text)]
    else:
        written = [position for position in answers if _parses(messages[position].get("content"))]
        answers = written or answers
    if not answers:
        raise SchemaError("messages", "no assistant answer holds the gold Thought/Action")
    return answers[-1]


def _parses(text: Any) -> bool:
    from train.sources.itc import parse_answer

    try:
        return isinstance(text, str) and parse_answer(text, "raw") is not None
    except (ValueError, RecursionError):  # SchemaError, or JSON past the digit/nesting limits
        return False


def read_prediction(prediction: dict[str, Any]) -> dict[str, Any]:
    """``{"format_ok", "calls", "thought", "error"}`` for one prediction row."""
    content = prediction.get("content")
    if "tool_calls" in prediction and prediction["tool_calls"] is not None:
        thought = content if isinstance(content, str) else ""
        try:
            return {"format_ok": True, "calls": read_calls(prediction["tool_calls"]), "thought": thought, "error": None}
        except CallFormatError as err:
            return {"format_ok": False, "calls": [], "thought": thought, "error": str(err)}
    if not isinstance(content, str):
        reason = prediction.get("error") if isinstance(prediction.get("error"), str) else "no 'content' text"
        return {"format_ok": False, "calls": [], "thought": "", "error": reason}
    from train.sources.itc import parse_answer  # the reader's own envelope parser: one definition of the format

    try:
        answer = parse_answer(content, "answer")
        if answer is None:
            raise SchemaError("answer", 'not a {"Thought", "Action"} JSON answer')
        thought, py_calls = answer
        positional = [call.name for call in py_calls if call.args]
        if positional:
            raise SchemaError("answer.Action", f"{positional[0]}: positional arguments have no parameter names")
    except (ValueError, RecursionError) as err:  # SchemaError, or JSON past the digit/nesting limits
        reason = str(err) if isinstance(err, SchemaError) else f"answer: invalid JSON: {err}"
        return {"format_ok": False, "calls": loose_calls(content), "thought": _loose_thought(content), "error": reason}
    calls = [Call(name=call.name, arguments=call.kwargs) for call in py_calls]
    return {"format_ok": True, "calls": calls, "thought": thought, "error": None}


def loose_calls(text: str) -> list[Call]:
    """The calls of an output that fails FM, as the paper's tables credit them (watt-tool-8B: FM 5.53, tool F1
    88.30): the broken answer's ``"Action": "..."`` string when it holds a call list, else the first bracketed
    call list anywhere in the text (``[f(a=1), g(b='x')]``, the bare list watt-tool and ToolACE write), as
    Seal-Tools' ``transform_output_format`` takes the first call list it finds in an output. Read with ``ast``
    (``train.base.pysyntax``, lenient as the Action is), never evaluated; a list with a positional argument is
    passed over (its parameters have no names). [] when none is found: the output is then scored as no answer."""
    candidates = []
    action = _ACTION.search(text)
    if action:
        try:
            candidates.append(json.loads(action.group(1)))
        except (ValueError, RecursionError):
            pass
    candidates += bracketed(text)
    for candidate in candidates:
        try:
            calls = parse_call_list(candidate, lenient=True)
        except PySyntaxError:
            continue
        if calls and not any(call.args for call in calls):
            return [Call(name=call.name, arguments=call.kwargs) for call in calls]
    return []


def bracketed(text: str, limit: int = LOOSE_CANDIDATES, budget: int = LOOSE_SCAN_CHARACTERS) -> list[str]:
    """The first ``limit`` substrings ``[...]`` of ``text`` whose brackets balance outside quoted strings, each
    from an opening bracket that no earlier candidate contains (the outermost lists, in order).

    Each opening bracket is scanned from afresh (a quote before it, "It's [f(a=1)]", must not hide it), so an
    output of many unclosed brackets would cost quadratic time: at most ``budget`` characters are examined in all,
    and the candidates found by then are the answer (a real answer is found within its first pass)."""
    found: list[str] = []
    start = text.find("[")
    while start != -1 and len(found) < limit and budget > 0:
        end, budget = _closing(text, start, budget)
        if end is None:
            start = text.find("[", start + 1)
            continue
        found.append(text[start : end + 1])
        start = text.find("[", end + 1)
    return found


def _closing(text: str, start: int, budget: int) -> tuple[int | None, int]:
    """The index of the ``]`` closing the ``[`` at ``start`` (quotes ' and " skipped, backslash escapes kept),
    or None when it is never closed within ``budget`` characters; and the budget left."""
    depth, quote, index = 0, None, start
    stop = min(len(text), start + budget)
    while index < stop:
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return index, budget - (index + 1 - start)
        index += 1
    return None, budget - (stop - start)


def _loose_thought(text: str) -> str:
    """The Thought string of an answer whose JSON is broken, else the whole text (for LM only)."""
    found = _THOUGHT.search(text)
    if found:
        try:
            return json.loads(found.group(1))
        except (ValueError, RecursionError):
            pass
    return text


# ---------------------------------------------------------------- one item


def error_breakdown(predicted: list[Call], gold: list[Call], offered: set[str]) -> dict[str, int]:
    """Table 4's six error counts for one item (definitions in the module docstring)."""
    pred_names, gold_names = name_multiset(predicted), name_multiset(gold)
    left_pred, left_gold = pred_names - gold_names, gold_names - pred_names
    known = offered | set(gold_names)
    errors = {
        "hallucinated_tools": sum(n for name, n in left_pred.items() if name not in known),
        "extra_tools": sum(n for name, n in left_pred.items() if name in known),
        "missing_tools": sum(left_gold.values()),
        "incorrect_params": 0,
        "missing_params": 0,
        "extra_params": 0,
    }
    for gold_call, pred_call in paired_calls(predicted, gold):
        for key, value in gold_call.arguments.items():
            if key not in pred_call.arguments:
                errors["missing_params"] += 1
            elif canonical(pred_call.arguments[key]) != canonical(value):
                errors["incorrect_params"] += 1
        errors["extra_params"] += sum(key not in gold_call.arguments for key in pred_call.arguments)
    return errors


def paired_calls(predicted: list[Call], gold: list[Call]) -> list[tuple[Call, Call]]:
    """Gold calls paired with predicted calls of the same tool: each gold call, in order, takes the
    unpaired predicted call sharing the most (key, value) pairs with it (the first on ties)."""
    pairs: list[tuple[Call, Call]] = []
    free = list(predicted)
    for gold_call in gold:
        candidates = [c for c in free if c.name == gold_call.name]
        if not candidates:
            continue
        best = max(candidates, key=lambda c: overlap(triple_multiset([c]), triple_multiset([gold_call])))
        free.remove(best)
        pairs.append((gold_call, best))
    return pairs


def seal_correct(predicted: list[Call], gold: list[Call]) -> tuple[int, int]:
    """(correct tools, correct parameters) as Seal-Tools counts them: each predicted call meets the first gold
    call of its name, never consumed; a parameter is correct when that call has the key and the values print
    alike (``str(a) == str(b)``)."""
    tools = params = 0
    for call in predicted:
        match = next((g for g in gold if g.name == call.name), None)
        if match is None:
            continue
        tools += 1
        params += sum(
            key in match.arguments and str(value) == str(match.arguments[key]) for key, value in call.arguments.items()
        )
    return tools, params


def score_item(
    parts: dict[str, Any],
    prediction: dict[str, Any] | None,
    language_of: LanguageOf,
    matching: str = "multiset",
) -> dict[str, Any]:
    gold: list[Call] = parts["gold"]
    if prediction is None:
        read = {"format_ok": False, "calls": [], "thought": "", "error": "missing prediction"}
    else:
        read = read_prediction(prediction)
    predicted = [Call(parts["renamed"].get(c.name, c.name), c.arguments) for c in read["calls"]]
    query_language = parts["language"] or language_of(parts["query"])
    thought = read["thought"]
    thought_language = language_of(thought) if thought.strip() else None
    pred_names, gold_names = name_multiset(predicted), name_multiset(gold)
    pred_triples, gold_triples = triple_multiset(predicted), triple_multiset(gold)
    if matching == "seal":
        correct_tools, correct_params = seal_correct(predicted, gold)
    else:
        correct_tools, correct_params = overlap(pred_names, gold_names), overlap(pred_triples, gold_triples)
    item = {
        "format_ok": read["format_ok"],
        "language_ok": thought_language == query_language,
        "query_language": query_language,
        "thought_language": thought_language,
        "task_type": parts["task_type"],
        "tools": {"predicted": sum(pred_names.values()), "gold": sum(gold_names.values()), "correct": correct_tools},
        "params": {
            "predicted": sum(pred_triples.values()),
            "gold": sum(gold_triples.values()),
            "correct": correct_params,
        },
        "errors": error_breakdown(predicted, gold, parts["offered"]),
        "correct": read["format_ok"] and pred_triples == gold_triples and pred_names == gold_names,
        "error": read["error"],
    }
    return {**item, "prf": item_prf(item)}


def score_itc(
    predictions: list[dict[str, Any]],
    references: list[dict[str, Any]],
    *,
    languages: tuple[str, ...] | None = None,
    language_of: LanguageOf | None = None,
    matching: str = "multiset",
) -> dict[str, Any]:
    """ITC metrics; ``language_of`` replaces langid (tests), ``languages`` restricts it, ``matching`` is
    ``multiset`` (default) or ``seal`` (``train.evaluation.itc_metrics``)."""
    if matching not in MATCHINGS:
        raise ValueError(f"matching must be one of {', '.join(MATCHINGS)}, got {matching!r}")
    joined = join_by_id(predictions, references)
    identify = language_of or langid_classifier(tuple(languages) if languages else None)
    scored = score_joined(
        joined,
        reference_parts,
        lambda parts, prediction: score_item(parts, prediction, identify, matching),
        SchemaError,
    )
    return scored.result(**aggregate(scored.per_item, matching))


# ---------------------------------------------------------------- the generation task and the spec


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
        problems = self.value_problems({"answer": answer, "matching": matching})
        if problems:
            raise TaskError("; ".join(problems))
        self.answer, self.matching, self.languages = answer, matching, None
        if languages:
            codes = language_codes(languages)
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
        allowed = {"answer": cls.ANSWERS, "matching": MATCHINGS}
        return [
            f"option {key!r} must be one of {', '.join(values)}, got {options[key]!r}"
            for key, values in allowed.items()
            if key in options and options[key] not in values
        ]

    def target(self, conv: Conversation) -> int:
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
        calls = [call.to_dict() for call in generation.tool_calls]
        return {"id": item.id, "content": generation.content, "tool_calls": calls}

    def score(self, items: Sequence[EvalItem], predictions: list[dict[str, Any]]) -> dict[str, Any]:
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


# ---------------------------------------------------------------- eval score's options for ITC


def language_codes(text: str) -> tuple[str, ...]:
    """``--languages`` / the task option ``languages``: comma-separated codes, or ``itc`` for the paper's 29."""
    return ITC_LANGUAGES if text == "itc" else tuple(c.strip() for c in text.split(",") if c.strip())


def add_score_arguments(parser: Any) -> None:
    parser.add_argument(
        "--matching",
        choices=MATCHINGS,
        default="multiset",
        help="itc only: multiset (default: each gold call and triple matched once) or seal (Seal-Tools' counting: "
        "first gold call of the name, not consumed, values compared as str)",
    )
    parser.add_argument(
        "--languages",
        metavar="CODES",
        help="itc only: restrict langid to these comma-separated codes, or 'itc' for the paper's 29",
    )


def score_options_problem(args: Any) -> str | None:
    """``--matching`` is refused for another bench (``--languages`` is not read there)."""
    return f"--matching is for itc, not {args.bench}" if args.matching != "multiset" and args.bench != "itc" else None


def score_with_options(scorer: Callable[..., dict], args: Any, predictions: list, references: list) -> dict:
    codes = language_codes(args.languages) if args.languages else None
    try:
        return scorer(predictions, references, languages=codes, matching=args.matching)
    except ValueError as err:  # a code langid does not know
        raise ValueError(f"--languages: {err}") from None


SPEC = ScorerSpec(
    score=score_itc,
    task=ItcTask,
    layout="""\
references: canonical conversations from `tooltrain data convert itc` (gold = messages[meta.turn],
else the last {Thought, Action} answer).
predictions: {"id", "content": "<raw answer: {\\"Thought\\", \\"Action\\": \\"[api(p='v')]\\"}>"}
or {"id", "content": thought, "tool_calls": [...]}. metrics: LM, FM, tool P/R/F1, invocation
P/R/F1 on (tool, key, value) triples, Table 4 error shares. --languages restricts langid.
P/R/F1 as micro (Appendix B's sums) and macro (per sample: the paper's tables); --matching seal;
--summary itc. A reference's gold: its tool_calls, else its text answer's Action.""",
    options=ScoreOptions(add_score_arguments, score_options_problem, score_with_options),
)

__all__ = [
    "INVOCATION_ERRORS",
    "ITC_LANGUAGES",
    "SELECTION_ERRORS",
    "SPEC",
    "ItcTask",
    "error_breakdown",
    "gold_calls",
    "gold_position",
    "is_itc_answer",
    "langid_classifier",
    "language_codes",
    "loose_calls",
    "paired_calls",
    "precision_recall_f1",
    "read_prediction",
    "reference_parts",
    "score_itc",
    "score_item",
    "seal_correct",
    "text_answer",
    "written_answer",
]
