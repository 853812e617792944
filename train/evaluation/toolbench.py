"""SambaNova ToolBench (Weather, Cat, Home, Booking) scored as ToolVerifier reports it: success rate and
tool-selection accuracy, per task and over all 420 cases. A pure function of prediction and reference rows.

Rows
----
* references: the canonical conversations ``train.sources.toolbench`` writes, one per test case, id
  ``"<task>/test-<row>"``; the scorer reads only ``meta``: ``task`` (booking, cat, home, weather),
  ``completion`` (the gold program(s), any of which may be matched), ``compare_string_only`` (absent =
  false), ``gold_tool`` (the API name, ``forecast_weather_city``) and ``gold_tool_label`` (``test.csv``'s
  ``Name``, "Weather Forecast City").
* predictions: ``{"id", "program": str, "tool": str?}`` — ``program`` is the model's answer (a setter
  program, a ``curl`` line, or text containing one), ``tool`` its selected tool.

Success, as SambaNova's evaluators define it (``evaluator/*_evaluator.py`` in sambanova/toolbench)
------------------------------------------------------------------------------------------------
Each answer is turned into a dict of fields; precision = matching fields / predicted fields, recall =
matching fields / gold fields, F1 their harmonic mean (0 when the prediction has no field); the gold
with the highest F1 is kept (the first on ties) and the case succeeds when that F1 is exactly 1.
An answer that cannot be turned into fields scores 0 with its reason in ``error``. A reference whose gold
cannot be read is not scored but listed in ``reference_errors`` (SambaNova asserts that every gold runs).

* Home and Booking: the fields SambaNova's mock API holds after the program runs
  (``train.evaluation.pyprogram.run_program``: an ``ast`` walk, never ``exec``; its docstring lists the
  rules: setter -> field names, defaults added by ``search()``, order and value checks, ``'None'``).
* Weather and Cat: SambaNova ran the ``curl`` line against the live API and compared the JSON responses.
  Offline we compare the *request* instead, as fields: ``method``; ``url`` (scheme and host lowercased,
  path percent-decoded, trailing "/" dropped); ``query.<name>`` per query parameter (``urllib.parse``:
  "+" and "%20" both read as a space, as SambaNova turned "%20" into "+"; a repeated name keeps all its
  values in order; ``?&a=1`` has no empty parameter); ``body.<key>`` per key of a JSON object body (``-d``,
  ``--data``, ``--data-raw``), or ``body`` for any other body. Headers are ignored (the evaluator added
  its own key and content type). The prediction's first line starting with ``curl`` is used, as
  SambaNova did; an answer that is only a URL becomes ``GET`` (``DELETE`` when the predicted tool is
  "Delete image from favorites"), as ToolVerifier's ``parse_output.py`` wrapped bare URLs.
  Where the live API answers two spellings identically the request is normalised so they match:
  OpenWeatherMap's default ``lang=en``, ``units=standard``, ``mode=json`` are added when absent, except
  for air pollution and geocoding (``/direct``) — SambaNova appended exactly these before calling;
  its city query ``q`` is compared case-insensitively and ``lat``/``lon`` as numbers (``67.0`` = ``67``);
  TheCatAPI's comma lists ``mime_types`` and ``breeds``/``breed_ids`` are compared as sets.
  ``appid`` stays an ordinary parameter (the golds write ``{API_KEY}``). A request that only differs in
  another way (``zip=02134`` vs ``2134``, an extra parameter) is a failure, even where the live API might
  have returned the same response: this is stricter than the original, never more lenient.
* ``compare_string_only`` cases (Cat's 8 deletions): SambaNova's string check — runs of spaces/tabs
  become one space, repeated newlines one newline, then an exact comparison; precision = recall = F1 =
  success.

Tool-selection accuracy: ``tool`` (whitespace-trimmed) equals the gold API name or the gold ``Name``
label. A case whose prediction has no ``tool`` counts wrong; when no prediction carries one at all the
accuracy is ``None`` (not measured). Success does not depend on the tool: the program alone decides.

Aggregates: per task the success rate, tool accuracy and mean P/R/F1; overall the rates pooled over all
cases — ToolVerifier's "Average" column is this pooled (task-size weighted) rate, e.g. 90, 84.17, 88, 97
-> 89.52 — and, beside it, the unweighted mean of the task rates.

Task (``ToolBenchTask``): the model writes a new turn after the user's request (the golds are programs in
``meta``, not a message), or the last assistant turn when the reference ends with one. Its row is ``{"id",
"program": content, "tool": name}``: the program or curl line is the text the model wrote; ``tool`` is its
first parsed call's name (left out when it made no call). A failed generation gets the error text as its
program, which no program runner or request parser accepts.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from train.evaluation import ScorerSpec
from train.evaluation.calls import join_by_id, ratio, score_joined
from train.evaluation.pyprogram import ProgramError, run_program
from train.evaluation.task_base import EvalItem, Task, failed_calls, new_turn_target
from train.schema import Conversation

PROGRAM_TASKS = ("home", "booking")
REQUEST_TASKS = ("weather", "cat")
TASKS = (*PROGRAM_TASKS, *REQUEST_TASKS)
DELETE_TOOLS = ("Delete image from favorites", "delete_image_from_favorites")

_WEATHER_HOST = "api.openweathermap.org"
_WEATHER_DEFAULTS = {"lang": "en", "units": "standard", "mode": "json"}
# How the live API reads a parameter, where two spellings get the same response.
_VALUE_RULES = {
    _WEATHER_HOST: {"q": "casefold", "lat": "number", "lon": "number"},
    "api.thecatapi.com": {"mime_types": "set", "breeds": "set", "breed_ids": "set"},
}
_DATA_OPTIONS = ("-d", "--data", "--data-raw", "--data-binary", "--data-ascii")
_HEADER_OPTIONS = ("-H", "--header")
_FLAG_OPTIONS = (
    "-s", "--silent", "-S", "--show-error", "-L", "--location", "-i", "--include", "-v", "--verbose",
    "-k", "--insecure", "--compressed", "-g", "--globoff",
)  # fmt: skip


# ---------------------------------------------------------------- answers -> fields


def request_fields(program: Any, tool: Any = None) -> dict[str, Any]:
    """The normalised request of a curl answer, as fields; ``ProgramError`` when there is none."""
    method, url, body = _parse_curl(_curl_line(program, tool))
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        raise ProgramError(f"{url[:80]!r} is not an absolute URL")
    host = parts.netloc.lower()
    path = unquote(parts.path).rstrip("/")
    fields: dict[str, Any] = {"method": method, "url": f"{parts.scheme.lower()}://{host}{path}"}
    query: dict[str, list[str]] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        query.setdefault(name, []).append(value)
    if host == _WEATHER_HOST and "air_pollution" not in path and not path.endswith("/direct"):
        for name, value in _WEATHER_DEFAULTS.items():
            query.setdefault(name, [value])
    rules = _VALUE_RULES.get(host, {})
    for name in sorted(query):
        values = tuple(_normalise_value(value, rules.get(name)) for value in query[name])
        fields[f"query.{name}"] = values[0] if len(values) == 1 else values
    if body is not None:
        fields.update(_body_fields(body))
    return fields


def _curl_line(program: Any, tool: Any) -> str:
    if not isinstance(program, str):
        raise ProgramError(f"expected the answer as text, got {type(program).__name__}")
    lines = [line.strip() for line in program.split("\n")]
    for line in lines:
        if line.startswith("curl"):
            return line
    answer = program.strip()
    if re.fullmatch(r"https?://\S+", answer):  # a bare URL, as ToolVerifier's parse_output.py wrapped it
        method = "DELETE" if isinstance(tool, str) and tool.strip() in DELETE_TOOLS else "GET"
        return f"curl -X {method} {shlex.quote(answer)}"
    raise ProgramError("no line starts with 'curl'")


def _parse_curl(line: str) -> tuple[str, str, str | None]:
    try:
        tokens = shlex.split(line)
    except ValueError as err:
        raise ProgramError(f"curl command does not split into words: {err}") from None
    method, urls, data = None, [], []
    index = 1
    while index < len(tokens):
        token = tokens[index]
        takes_value = token in ("-X", "--request", "--url", *_DATA_OPTIONS, *_HEADER_OPTIONS)
        if takes_value and index + 1 >= len(tokens):
            raise ProgramError(f"curl option {token} has no value")
        value = tokens[index + 1] if takes_value else None
        if token in ("-X", "--request"):
            method = value.upper()
        elif token.startswith("-X") and len(token) > 2:
            method = token[2:].upper()
        elif token == "--url":
            urls.append(value)
        elif token in _DATA_OPTIONS:
            data.append(value)
        elif token in _HEADER_OPTIONS or token in _FLAG_OPTIONS:
            pass
        elif token.startswith("-"):
            raise ProgramError(f"unsupported curl option {token[:40]!r}")
        else:
            urls.append(token)
        index += 2 if takes_value else 1
    if len(urls) != 1:
        raise ProgramError(f"expected one URL in the curl command, got {len(urls)}")
    body = "&".join(data) if data else None  # curl joins repeated -d values with "&"
    return method or ("POST" if data else "GET"), urls[0], body


def _normalise_value(value: str, rule: str | None) -> Any:
    if rule == "casefold":
        return value.casefold()
    if rule == "set":
        return tuple(sorted(item.strip() for item in value.split(",")))
    if rule == "number":
        try:
            number = Decimal(value)
            return number.normalize() if number.is_finite() else value
        except ArithmeticError:  # not a number, or one past Decimal's exponent range
            return value
    return value


def _body_fields(body: str) -> dict[str, Any]:
    try:
        decoded = json.loads(body, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return {"body": body.strip()}
    if isinstance(decoded, dict):
        return {f"body.{key}": value for key, value in decoded.items()}
    return {"body": decoded}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def normalise_string(text: str) -> str:
    """SambaNova's ``check_string``: collapse runs of spaces/tabs and of newlines, trim."""
    text = re.sub(r"[ \t]+", " ", text).strip()
    return re.sub(r"\n+", "\n", text).strip(" \n")


def answer_fields(program: Any, task: str, tool: Any = None) -> dict[str, Any]:
    """The fields an answer of ``task`` stands for; ``ProgramError`` (with the reason) when it has none."""
    if task in PROGRAM_TASKS:
        return run_program(program, task)
    return request_fields(program, tool)


# ---------------------------------------------------------------- comparing


def precision_recall_f1(predicted: dict[str, Any], gold: dict[str, Any]) -> tuple[float, float, float]:
    """SambaNova's ``compute_f1_between_dicts``: a field matches when its key is in gold with an equal value."""
    if not predicted or not gold:
        return 0.0, 0.0, 0.0
    overlap = sum(1 for key, value in predicted.items() if key in gold and gold[key] == value)
    precision, recall = overlap / len(predicted), overlap / len(gold)
    if precision + recall == 0:
        return 0.0, 0.0, 0.0
    return precision, recall, 2 * precision * recall / (precision + recall)


def gold_fields(meta: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The fields of every gold program (None for string-only cases); ``ValueError`` if one cannot be read —
    SambaNova's evaluator asserts that every label runs, so such a case cannot be scored."""
    if meta.get("compare_string_only"):
        return None
    fields = []
    for index, gold in enumerate(meta["completion"]):
        try:
            fields.append(answer_fields(gold, meta["task"]))
        except ProgramError as err:
            raise ValueError(f"gold {index}: {err}") from None
    return fields


def score_case(program: Any, tool: Any, meta: dict[str, Any]) -> dict[str, Any]:
    """One test case: ``{"success", "precision", "recall", "f1", "closest_gold", "error"}``.
    ``ValueError`` when a gold program cannot be read (see ``gold_fields``)."""
    golds = gold_fields(meta)
    if golds is None:
        if not isinstance(program, str):
            return _failed(f"expected the answer as text, got {type(program).__name__}")
        try:
            answer = _curl_line(program, tool)
        except ProgramError:
            answer = program
        answer = normalise_string(answer)
        for index, gold in enumerate(meta["completion"]):
            if answer == normalise_string(gold):
                return _verdict(True, 1.0, 1.0, 1.0, index)
        return _failed("string comparison between the answer and the gold failed")
    try:
        predicted = answer_fields(program, meta["task"], tool)
    except ProgramError as err:
        return _failed(str(err))
    best = None
    for index, fields in enumerate(golds):
        precision, recall, f1 = precision_recall_f1(predicted, fields)
        if best is None or f1 > best["f1"]:
            best = _verdict(f1 == 1, precision, recall, f1, index)
    return best


def _failed(reason: str) -> dict[str, Any]:
    return {**_verdict(False, 0.0, 0.0, 0.0, None), "error": reason}


def _verdict(success: bool, precision: float, recall: float, f1: float, closest_gold: int | None) -> dict[str, Any]:
    return {
        "success": success, "precision": precision, "recall": recall, "f1": f1,
        "closest_gold": closest_gold, "error": None,
    }  # fmt: skip


def tool_correct(tool: Any, meta: dict[str, Any]) -> bool:
    if not isinstance(tool, str):
        return False
    return tool.strip() in {meta.get("gold_tool"), meta.get("gold_tool_label")}


def reference_meta(row: dict[str, Any]) -> dict[str, Any]:
    """The scoring facts of a reference row; ``ValueError`` naming what is missing, malformed or unreadable."""
    meta = row.get("meta")
    if not isinstance(meta, dict):
        raise ValueError("reference has no meta object")  # noqa: TRY004 - a bad row, which scorers count as ValueError
    if meta.get("task") not in TASKS:
        raise ValueError(f"meta.task {meta.get('task')!r} is not one of {', '.join(TASKS)}")
    completion = meta.get("completion")
    if not isinstance(completion, list) or not completion or not all(isinstance(g, str) for g in completion):
        raise ValueError("meta.completion is not a non-empty list of gold programs")
    if not isinstance(meta.get("compare_string_only", False), bool):
        raise ValueError("meta.compare_string_only is not a boolean")  # noqa: TRY004 - as above
    gold_fields(meta)
    return meta


# ---------------------------------------------------------------- the benchmark


def score_toolbench(predictions: Iterable[Any], references: Iterable[Any]) -> dict[str, Any]:
    """Score every reference case; a case without a prediction fails (``error`` "no prediction").

    Returns ``{"tasks": {task: aggregates}, "overall": aggregates, "per_item": [...], "reference_errors":
    [{"id", "reason"}], ...id issues}``: per item ``{"id", "task", "success", "precision", "recall", "f1",
    "closest_gold", "tool_correct", "error"}``; ``reference_errors`` lists the references that cannot be
    scored (no task, no gold, or a gold program that cannot be read), which are left out of the counts.
    """
    joined = join_by_id(predictions, references)
    tools_given = any(prediction is not None and "tool" in prediction for _, prediction in joined.pairs)

    def score(meta: dict[str, Any], prediction: dict[str, Any] | None) -> dict[str, Any]:
        if prediction is None:
            verdict = _failed("no prediction")
        else:
            verdict = score_case(prediction.get("program"), prediction.get("tool"), meta)
        tool = None if not tools_given else prediction is not None and tool_correct(prediction.get("tool"), meta)
        return {"task": meta["task"], **verdict, "tool_correct": tool}

    scored = score_joined(joined, reference_meta, score, ValueError)
    per_item = scored.per_item
    tasks = {}
    for task in dict.fromkeys(item["task"] for item in per_item):
        tasks[task] = _aggregate([item for item in per_item if item["task"] == task])
    overall = _aggregate(per_item)
    overall["unweighted_success_rate"] = _mean([t["success_rate"] for t in tasks.values()])
    overall["unweighted_tool_accuracy"] = _mean([t["tool_accuracy"] for t in tasks.values()])
    return scored.result(tasks=tasks, overall=overall)


def _aggregate(items: list[dict[str, Any]]) -> dict[str, Any]:
    total = len(items)
    success = sum(item["success"] for item in items)
    judged = [item["tool_correct"] for item in items if item["tool_correct"] is not None]
    return {
        "total": total,
        "success": success,
        "success_rate": ratio(success, total),
        "tool_correct": sum(judged) if judged else None,
        "tool_accuracy": ratio(sum(judged), len(judged)) if judged else None,
        "precision": ratio(sum(item["precision"] for item in items), total),
        "recall": ratio(sum(item["recall"] for item in items), total),
        "f1": ratio(sum(item["f1"] for item in items), total),
    }


def _mean(values: list[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return sum(known) / len(known) if known and len(known) == len(values) else None


# ---------------------------------------------------------------- the generation task and the spec


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


SPEC = ScorerSpec(
    score=score_toolbench,
    task=ToolBenchTask,
    layout="""\
references: canonical conversations from `tooltrain data convert toolbench` (meta.task, meta.completion).
predictions: {"id", "program": "<program or curl line>", "tool": "<selected tool>"}.
metrics: success rate and tool-selection accuracy per task and pooled.""",
)
