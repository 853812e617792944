"""Nexus function-calling benchmark (NexusRaven queries): accuracy per task, its weighted average (by task size)
and its unweighted average (mean of the task accuracies), the two averages ToolGT reports (seed 004, §3.3).
A pure function of prediction and reference rows.

Which tasks
-----------
ToolGT's Nexus is the 8 NexusRaven-V2 tasks, 692 queries (``TOOLGT_NEXUS_TASKS``: NVDLibrary 78, VirusTotal 151,
Places 48, Climate 197, OTX 92, VT-nested 49, VT-parallel 21, CVECPE 56; Table 7). A NexusRaven-V2 release folder
(``train.sources.nexus_release``) gives all eight, named so. The files shipped here are the NexusRaven **V1**
evaluation set (cve_cpe, emailrep, virustotal, toolalpaca, toolllm): only two of its tasks are ToolGT tasks,
cve_cpe = NVDLibrary (78) and virustotal = VirusTotal (151). ``score_nexus`` averages over the tasks it is given,
so over the V1 files its W / U are *not* ToolGT's; ``toolgt_nexus`` reports the ToolGT tasks that were scored, one
by one, with W / U over them, the tasks missing (ToolGT's W / U need all eight) and the sizes that are not Table 7's
(Climate: 47 rows in the NexusRaven-V2 notebooks, 197 in Table 7's arithmetic).

Rows
----
* references: the canonical conversations ``train.sources.nexus`` writes. The task is ``meta["dataset"]``
  (cve_cpe, emailrep, virustotal, toolalpaca, toolllm; a V2 release's eight); the expected calls are the
  ``tool_calls`` of the last assistant message (the reader parsed ``meta["reference"]`` / ``golden_answer`` /
  ``Output`` with ``ast`` and named positional arguments); the function definitions are the conversation's ``tools``
  (parameter order = ``properties`` order, ``default`` and ``required`` as the reader wrote them).
  Every reference given is scored: to reproduce NexusRaven's standardised toolalpaca split, pass only
  the rows with ``meta["in_standardized_eval"]``.
* predictions: ``{"id", "call": "<python call string>"}`` or ``{"id", "tool_calls": [...]}`` (canonical or
  ``{"name", "arguments"}`` calls).

When a call matches
-------------------
NexusRaven's evaluation runs the reference and the model's call against stub functions that record
``{name: {argument: value}}`` for every argument whose value is truthy (its toolllm stubs show the rule:
``args_dict = locals()`` then ``if value: return_dict[key] = value``). Nothing is run here; both sides
become the same record by reading them:

1. The call text is parsed with ``ast`` (``train.base.pysyntax``; the lenient repairs of that module
   apply to both sides, so ``convertCurrency(from="EUR")`` — a toolalpaca gold — can be matched). The text
   may hold several calls: one per statement (``f(a=1)\\ng(b=2)`` or ``f(a=1); g(b=2)``), or one list
   ``[f(a=1), g(b=2)]``; near-Python that needs the repairs is read as a whole, else one call per line.
   ``r = nvdlib.searchCVE(...)`` is ``searchCVE(...)``: an assignment target and a module prefix are
   dropped, as NexusRaven-V2's notebook strips ``r = nvdlib.``. A nested call (``f(a=g(x=1))``, the V2
   nested tasks) is a call of its own, recorded before the call it is an argument of, and its value is
   ``None`` (what the stub returns; ``train.sources.nexus_calls``); any other argument must be a literal:
   an expression makes the call unreadable (wrong). Text that is neither Python nor repairable gets
   Python's own syntax error, at its line and column.
2. Arguments are bound to the function's definition the way Python binds them: positional arguments
   take the parameters in order; an unknown keyword, a parameter given twice, too many positional
   arguments, a missing required parameter, or a function the task does not define is an error (the stub
   call would have raised). Parameters left out take their default. Without any definition (a reference
   row with no tools), keywords are taken as given and positional arguments are an error.
3. Arguments whose value is falsy in Python (None, False, 0, 0.0, "", [], {}) are dropped.

A case is correct when the predicted records equal the expected records as multisets (order free,
repetition counted; values by Python ``==``, so ``1 == 1.0``); for the V2 release's tasks (``ORDERED_TASKS``)
as lists, in order, as the V2 notebooks compare them. NexusRaven-V1's parser also truncated float keyword
values to int; that quirk is not reproduced. Nor are two of the V2 notebooks' execution effects: a call that
raises part-way (an unknown function after a good one) keeps the records made before it there and is wrong
here, and a tuple is not equal to a list there (read as lists here, they are). A prediction that cannot be read is wrong
with the reason in ``error``; a reference that cannot be read is not scored but listed in
``reference_errors``.

Task (``NexusTask``): the model writes the last assistant turn (its tool calls are the gold; ``meta.turn`` plays
no part). Its row is ``{"id", "tool_calls", "well_formed"}``; a generation without parsed calls gives ``{"id",
"call": content, "well_formed"}`` (the Python call text NexusRaven models write); a failed generation gets a
``tool_calls`` that is not a list (the call cannot be read: wrong). It also reports ``well_formed_rate``
(``task_base.well_formed``): with ``answer_style=toolgt_text`` an answer that is not a call list is wrong.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from train.base.pysyntax import MAX_SOURCE_CHARS, PySyntaxError, parse_call_list
from train.evaluation import ScorerSpec
from train.evaluation.calls import CallFormatError, join_by_id, ratio, read_calls, score_joined
from train.evaluation.task_base import EvalItem, Task, failed_calls, last_assistant, well_formed, well_formed_rate
from train.schema import Conversation
from train.sources.nexus_calls import flatten_calls


class CallError(ValueError):
    """A call that cannot be read or bound; the message says why."""


@dataclass(frozen=True)
class Signature:
    parameters: tuple[str, ...]
    defaults: dict[str, Any] = field(default_factory=dict, hash=False)
    required: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RawCall:
    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict, hash=False)


# ---------------------------------------------------------------- reading calls


def signatures(tools: Any) -> dict[str, Signature]:
    """Function name -> signature from canonical tools; malformed entries are skipped (no definition)."""
    out: dict[str, Signature] = {}
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        schema = function.get("parameters") if isinstance(function.get("parameters"), dict) else {}
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        defaults = {
            name: spec["default"] for name, spec in properties.items() if isinstance(spec, dict) and "default" in spec
        }
        required = schema.get("required") if isinstance(schema.get("required"), list) else []
        required_names = frozenset(r for r in required if isinstance(r, str))
        out[function["name"]] = Signature(tuple(properties), defaults, required_names)
    return out


def parse_call_text(text: Any) -> list[RawCall]:
    """The calls in a prediction's text (layouts in the module docstring); empty text is no call."""
    if not isinstance(text, str):
        raise CallError(f"expected the call as text, got {type(text).__name__}")
    if len(text) > MAX_SOURCE_CHARS:
        raise CallError(f"call text of {len(text)} characters exceeds {MAX_SOURCE_CHARS}")
    source = text.strip()
    if not source:
        return []
    try:
        module = ast.parse(source, mode="exec")
    except SyntaxError as err:
        try:
            return _near_python_calls(source)
        except CallError:  # neither Python nor repairable: Python's own message, in the text's positions
            raise CallError(f"not valid Python: {err.msg} at line {err.lineno} column {err.offset}") from None
    except (RecursionError, MemoryError, ValueError):
        raise CallError("not valid Python: nested too deeply or contains NUL") from None
    calls: list[RawCall] = []
    for statement in module.body:
        node = statement.value if isinstance(statement, (ast.Expr, ast.Assign)) else None
        if isinstance(statement, ast.Assign) and [type(t) for t in statement.targets] != [ast.Name]:
            node = None  # only "name = call"
        if not isinstance(node, (ast.Call, ast.List, ast.Tuple)):
            raise CallError(f"line {statement.lineno}: expected a call, got {ast.unparse(statement)[:60]!r}")
        try:
            calls += _calls_from(ast.get_source_segment(source, node) or "")
        except CallError as err:
            raise CallError(f"line {statement.lineno}: {err}") from None
    return calls


def _near_python_calls(source: str) -> list[RawCall]:
    """Text Python rejects (``from="EUR"``, ``true``): pysyntax's lenient repair, as a whole, else line by line."""
    try:
        return _calls_from(source)
    except CallError:
        lines = [line for line in source.splitlines() if line.strip()]
        if len(lines) < 2:
            raise
    return [call for line in lines for call in _calls_from(line)]


def _calls_from(source: str) -> list[RawCall]:
    """Literal calls (with pysyntax's lenient repairs), else calls that nest calls (``nexus_calls``, strict Python);
    when neither reads the text, the literal reader's reason."""
    try:
        parsed = parse_call_list(source, lenient=True)
    except PySyntaxError as err:
        try:
            parsed = flatten_calls(source)
        except PySyntaxError:
            raise CallError(str(err)) from None
    return [RawCall(call.short_name, tuple(call.args), dict(call.kwargs)) for call in parsed]


def prediction_calls(row: dict[str, Any]) -> list[RawCall]:
    """A prediction's calls: its ``tool_calls`` when present, else its ``call`` text."""
    if row.get("tool_calls") is not None:
        try:
            return [RawCall(_short(call.name), (), dict(call.arguments)) for call in read_calls(row["tool_calls"])]
        except CallFormatError as err:
            raise CallError(str(err)) from None
    if "call" not in row:
        raise CallError("prediction has neither 'call' nor 'tool_calls'")
    return parse_call_text(row["call"])


def reference_calls(row: dict[str, Any]) -> list[RawCall]:
    """The tool calls of the reference's last assistant message."""
    messages = row.get("messages")
    messages = messages if isinstance(messages, list) else []
    assistant = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
    if not assistant:
        raise CallError("reference has no assistant message")
    try:
        calls = read_calls(assistant[-1].get("tool_calls"))
    except CallFormatError as err:
        raise CallError(str(err)) from None
    if not calls:
        raise CallError("reference's assistant message has no tool call")
    return [RawCall(_short(call.name), (), dict(call.arguments)) for call in calls]


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


# ---------------------------------------------------------------- what the stub records


def recorded(call: RawCall, known: dict[str, Signature]) -> dict[str, Any]:
    """``{"name", "arguments"}`` as NexusRaven's stub records the call: bound, defaults filled, falsy dropped."""
    signature = known.get(call.name)
    if signature is None:
        if known:
            raise CallError(f"function {call.name!r} is not defined for this query")
        if call.args:
            raise CallError(f"{call.name}: positional arguments cannot be named without the function's definition")
        bound = dict(call.kwargs)
    else:
        bound = _bind(call, signature)
    return {"name": call.name, "arguments": {key: value for key, value in bound.items() if value}}


def _bind(call: RawCall, signature: Signature) -> dict[str, Any]:
    parameters = signature.parameters
    if len(call.args) > len(parameters):
        raise CallError(f"{call.name}() takes {len(parameters)} positional argument(s) but {len(call.args)} were given")
    bound = dict(zip(parameters, call.args))
    for key, value in call.kwargs.items():
        if key not in parameters:
            raise CallError(f"{call.name}() got an unexpected keyword argument {key!r}")
        if key in bound:
            raise CallError(f"{call.name}() got multiple values for argument {key!r}")
        bound[key] = value
    missing = [p for p in parameters if p in signature.required and p not in bound]
    if missing:
        raise CallError(f"{call.name}() missing required argument(s): {', '.join(map(repr, missing))}")
    return {p: bound.get(p, signature.defaults.get(p)) for p in parameters}


def same_records(predicted: list[dict[str, Any]], expected: list[dict[str, Any]], ordered: bool = False) -> bool:
    """Multiset equality under Python ``==`` (an equivalence on JSON values, so pairing greedily is exact);
    ``ordered``: list equality, the NexusRaven-V2 rule (its stubs append to one list, compared with ``==``)."""
    if ordered:
        return predicted == expected
    remaining = list(predicted)
    for record in expected:
        for index, candidate in enumerate(remaining):
            if candidate == record:
                del remaining[index]
                break
        else:
            return False
    return not remaining


# ---------------------------------------------------------------- the benchmark


def expected_records(reference: dict[str, Any]) -> list[dict[str, Any]]:
    """What the stub records for the reference's calls; ``CallError`` when they cannot be read or bound."""
    known = signatures(reference.get("tools"))
    return [recorded(call, known) for call in reference_calls(reference)]


@dataclass(frozen=True)
class Expected:
    task: str  # meta.dataset
    records: list[dict[str, Any]]  # the reference's calls, bound to their signatures
    known: dict[str, Signature]  # the signatures of the reference's tools


def read_reference(reference: dict[str, Any]) -> Expected:
    """What one query expects; ``CallError`` when the reference has no task or its calls are unreadable."""
    meta = reference.get("meta") if isinstance(reference.get("meta"), dict) else {}
    task = meta.get("dataset")
    if not isinstance(task, str) or not task:
        raise CallError("reference has no meta.dataset (its task)")
    return Expected(task, expected_records(reference), signatures(reference.get("tools")))


def judge(expected: Expected, prediction: dict[str, Any] | None) -> dict[str, Any]:
    """``{"task", "correct", "error", "predicted", "expected"}`` for one query."""
    ordered = expected.task in ORDERED_TASKS
    return {"task": expected.task, **verdict_of(prediction, expected.records, expected.known, ordered)}


def verdict_of(
    prediction: dict[str, Any] | None,
    expected: list[dict[str, Any]],
    known: dict[str, Signature],
    ordered: bool = False,
) -> dict[str, Any]:
    """``{"correct", "error", "predicted", "expected"}``: a prediction's problems are its error, never raised."""
    verdict = {"correct": False, "error": None, "predicted": None, "expected": expected}
    if prediction is None:
        return {**verdict, "error": "no prediction"}
    try:
        predicted = [recorded(call, known) for call in prediction_calls(prediction)]
    except CallError as err:
        return {**verdict, "error": str(err)}
    verdict["predicted"] = predicted
    if not predicted:
        return {**verdict, "error": "no call"}
    if same_records(predicted, expected, ordered):
        return {**verdict, "correct": True}
    return {**verdict, "error": "calls differ from the reference"}


def score_nexus(predictions: Iterable[Any], references: Iterable[Any]) -> dict[str, Any]:
    """Score every reference query; a query without a prediction is wrong ("no prediction").

    Returns ``{"tasks": {task: {"total", "correct", "accuracy"}}, "weighted_average",
    "unweighted_average", "toolgt" (``toolgt_nexus``: ToolGT's tasks among them),
    "per_item": [{"id", "task", "correct", "error", "predicted", "expected"}],
    "reference_errors": [{"id", "reason"}], ...id issues}``. A reference without ``meta.dataset`` (its task)
    or whose calls cannot be read or bound is listed in ``reference_errors`` and left out of the counts.
    """
    scored = score_joined(join_by_id(predictions, references), read_reference, judge, CallError)
    per_item = scored.per_item
    tasks = {}
    for task in dict.fromkeys(item["task"] for item in per_item):
        items = [item for item in per_item if item["task"] == task]
        correct = sum(item["correct"] for item in items)
        tasks[task] = {"total": len(items), "correct": correct, "accuracy": correct / len(items)}
    accuracies = [summary["accuracy"] for summary in tasks.values()]
    return scored.result(
        tasks=tasks,
        weighted_average=ratio(sum(item["correct"] for item in per_item), len(per_item)),
        unweighted_average=ratio(sum(accuracies), len(accuracies)),
        toolgt=toolgt_nexus(tasks),
    )


# ---------------------------------------------------------------- ToolGT's task set (seed 004, Table 7)

TOOLGT_NEXUS_TASKS = {
    "NVDLibrary": 78, "VirusTotal": 151, "Places": 48, "Climate": 197, "OTX": 92, "VT-nested": 49,
    "VT-parallel": 21, "CVECPE": 56,
}  # fmt: skip
TOOLGT_NEXUS_ITEMS = sum(TOOLGT_NEXUS_TASKS.values())  # 692
V1_TO_TOOLGT = {"cve_cpe": "NVDLibrary", "virustotal": "VirusTotal"}  # the V1 files that are ToolGT tasks
TOOLGT_NEXUS_NOTE = (
    "only NVDLibrary (cve_cpe) and VirusTotal (virustotal) of ToolGT's 8 Nexus tasks are in the NexusRaven V1 "
    "files; W / U here are over the ToolGT tasks scored, not the paper's 8"
)
# The NexusRaven-V2 release's tasks (``train.sources.nexus_release`` names them as Table 7 does): their stubs append
# to one list compared with ``==``, so the order of the calls counts there; the V1 tasks keep the multiset rule.
ORDERED_TASKS = frozenset(TOOLGT_NEXUS_TASKS)


def toolgt_nexus_averages(accuracies: dict[str, float]) -> tuple[float, float]:
    """(W, U) over ToolGT tasks: W weights each task's accuracy by its size (TOOLGT_NEXUS_TASKS), U is the
    plain mean of the task accuracies. Table 7's W / U are this over all eight tasks."""
    unknown = [task for task in accuracies if task not in TOOLGT_NEXUS_TASKS]
    if unknown or not accuracies:
        raise ValueError(f"not ToolGT Nexus tasks: {unknown}; valid: {', '.join(TOOLGT_NEXUS_TASKS)}")
    size = sum(TOOLGT_NEXUS_TASKS[task] for task in accuracies)
    weighted = sum(acc * TOOLGT_NEXUS_TASKS[task] for task, acc in accuracies.items()) / size
    return weighted, sum(accuracies.values()) / len(accuracies)


def toolgt_nexus(tasks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """ToolGT's view of ``score_nexus``'s ``tasks``: the ToolGT tasks scored, their W / U, the ToolGT tasks missing,
    the tasks whose size is not Table 7's (``size_differs``: {task: [scored, paper]}) and a note saying which W / U
    these are. A V1 file stands for its ToolGT task (``V1_TO_TOOLGT``) only when the release's own task was not
    scored; tasks not used are listed in ``not_toolgt``."""
    source = {name: name for name in tasks if name in TOOLGT_NEXUS_TASKS}  # ToolGT task -> the task scored for it
    for v1, name in V1_TO_TOOLGT.items():
        if v1 in tasks and name not in source:
            source[name] = v1
    scored = {name: tasks[source[name]] for name in TOOLGT_NEXUS_TASKS if name in source}  # Table 7's column order
    accuracies = {name: summary["accuracy"] for name, summary in scored.items()}
    weighted, unweighted = toolgt_nexus_averages(accuracies) if accuracies else (None, None)
    missing = [name for name in TOOLGT_NEXUS_TASKS if name not in scored]
    differs = {n: [s["total"], TOOLGT_NEXUS_TASKS[n]] for n, s in scored.items() if s["total"] != TOOLGT_NEXUS_TASKS[n]}
    return {
        "tasks": {name: {k: scored[name][k] for k in ("accuracy", "correct", "total")} for name in scored},
        "weighted_average": weighted,
        "unweighted_average": unweighted,
        "missing": missing,
        "size_differs": differs,
        "not_toolgt": [name for name in tasks if name not in source.values()],
        "note": toolgt_nexus_note(missing, differs),
    }


def toolgt_nexus_note(missing: list[str], differs: dict[str, list[int]]) -> str:
    """Which W / U ``toolgt_nexus`` printed: the paper's (all 8 tasks at Table 7's sizes) or what they fall short of.
    With some tasks missing, the sizes stay in ``size_differs`` (a subset's W / U is not the paper's anyway)."""
    scored = [name for name in TOOLGT_NEXUS_TASKS if name not in missing]
    if not scored:
        return "no ToolGT Nexus task scored (the NexusRaven-V2 release folder: train.sources.nexus_release)"
    if set(scored) <= set(V1_TO_TOOLGT.values()):
        return TOOLGT_NEXUS_NOTE
    if missing:
        return (
            f"{len(scored)} of ToolGT's 8 Nexus tasks scored (missing: {', '.join(missing)}); W / U here are over "
            "the ToolGT tasks scored, not the paper's 8"
        )
    if differs:
        sizes = ", ".join(f"{task} {rows} rows, Table 7 {paper}" for task, (rows, paper) in differs.items())
        return f"all 8 of ToolGT's Nexus tasks; sizes differ from Table 7 ({sizes}); W weights by Table 7's sizes"
    return "all 8 of ToolGT's Nexus tasks at Table 7's sizes: W / U as the paper computes them"


# ---------------------------------------------------------------- the generation task and the spec


def _calls(generation: Any) -> list[dict[str, Any]]:
    return [call.to_dict() for call in generation.tool_calls]


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


SPEC = ScorerSpec(
    score=score_nexus,
    task=NexusTask,
    layout="""\
references: canonical conversations from `tooltrain data convert nexus` (meta.dataset = task, gold =
the last assistant turn's tool_calls). predictions: {"id", "call": "<python call string>"} or
{"id", "tool_calls": [...]}. metrics: accuracy per task, weighted and unweighted averages.""",
)
