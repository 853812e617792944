"""The ToolGT builder (seed 004, §2.3, Tables 5 and 8-11): template-guided reasoning before BFCL-style calls.

Canonical conversations in (ToolACE, glaive, xLAM, ... through their readers), single-turn samples out:

1. Split: every assistant turn that calls tools is one sample: query = the user turns since the previous call turn
   (joined by a newline), tools = the conversation's tools, gold = the turn's calls. A call turn with no user turn
   of its own (it follows tool results) cannot stand alone: dropped. Every assistant turn that answers a user turn
   in text, in a conversation with tools, is a relevance sample (Table 2's relevance column; the prompts of Tables
   8 and 11: "If none of the function can be used, point it out. If the given question lacks the parameters
   required by the function, also point it out"): query = the user turns since the previous assistant turn, gold =
   no call (``[]``, the answer BFCL's irrelevance check and ``answer_style=toolgt_text`` read as no call). A text
   turn after tool results answers the results: not a sample. A conversation that gives no sample is dropped
   (``split: no tools and no call turn``: nothing to call and nothing to abstain from).
2. Decontamination (``decontaminate=bfcl:PATH,nexus:PATH``; tooltrain's own addition, not the paper's): a sample
   whose normalised query or call set matches an eval item is dropped and counted
   (``train.papers.toolgt.checks``); without the argument the report says "not checked".
3. Stage 1: the teacher writes a reasoning from (query, tools, gold) following the template, in ``<thinking>``
   tags; a reasoning that leaks the answer ("ground truth", "the answer is") is dropped.
4. Stage 2: the teacher regenerates the call from (query, tools, reasoning), without the template, in
   ``<function>`` tags; no readable call list (an empty ``<function></function>`` reads as no call), or no call
   where the gold has one: dropped.
5. Stage 3: kept when the regenerated list equals the gold's text (exact), else is AST-equivalent to it, else the
   judge (``judge=true``) answers ``CAN REPLACE GROUND TRUTH``. The sample trains on the GOLD call, never on the
   regenerated one.

The arms (``arm=none|cot|template``) and their data (``arm_data=paper|shared``). ``paper`` (the default, §3.2 and
Table 3): each arm trains on the samples whose own reasoning passed stages 1-3: ``arm=template`` on those the
template's reasoning passed, ``arm=cot`` on those the CoT reasoning passed, ``arm=none`` (No-Thought: ToolACE's
calls as they are, no reasoning) on the template's kept set, so its data varies with the template only, as Table
3's No-Thought row does. ``shared``: the three arms train on one query set per template, the samples that both the
template's reasoning AND the CoT reasoning passed (one of them when ``template=cot``), so the arms differ only in
the reasoning. ``arm=template`` trains on the template's reasoning, ``arm=cot`` on the CoT reasoning, ``arm=none``
on the call alone; ``toolgt.arm=none,cot,template`` sweeps the paper's three rows (the teacher's answers are
cached, so the builds ask once per template).

Each training sample (Table 11): system = the BFCL prompting system prompt with the functions, the user's query, and
one assistant message whose content is ``<thinking>REASONING</thinking>\\n[func(a=1)]`` (``arm=none``: the call
list alone; a relevance sample's list is ``[]``) with no ``tool_calls``; ``meta``: ``gold_calls``, ``template``,
``arm``, ``arm_data``, ``source_id``, ``turn``, ``verified`` (template -> exact | ast | judge). A chat format
renders that content as text (``answer_style``).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from train.base.pysyntax import PySyntaxError
from train.papers.toolgt import teacher as prompts
from train.papers.toolgt.checks import EvalIndex, equivalent, leaks
from train.schema import Conversation, Message, Tool, ToolCall
from train.teacher import (
    StageParams,
    Teacher,
    TeacherError,
    TeacherRequest,
    default_cache,
    make_backend,
    teacher_config_problem,
)

BUILDER_VERSION = "2"  # 2: relevance samples (no-call turns) and arm_data
ARMS = ("none", "cot", "template")
ARM_DATA = ("paper", "shared")  # each arm on its own reasoning's kept set | all arms on template AND CoT kept
NO_TOOLS = "split: no tools and no call turn"
DECONTAMINATION_ORIGIN = "tooltrain's own addition, not the paper's"
THINKING = re.compile(r"<thinking>(.*?)</thinking>", re.DOTALL)
FUNCTION = re.compile(r"<function>(.*?)</function>", re.DOTALL)


@dataclass
class ToolGTOptions:
    """``data.builder_args`` of a recipe and ``data build toolgt key=value``: one set of arguments."""

    template: str = "detail"  # detail | simple | claude | cot: the reasoning template (decides the kept set)
    arm: str = "template"  # none (No-Thought) | cot | template: what the assistant turn trains on
    arm_data: str = "paper"  # paper | shared: which kept set each arm trains on (the module docstring)
    teacher: dict[str, Any] = field(default_factory=lambda: {"kind": "offline"})  # train.teacher.make_backend
    cache_dir: str = ""  # "" = none for offline, ~/.cache/tooltrain/teacher otherwise; "none" = no cache
    judge: bool = True  # stage 3's LLM judge for calls that are neither exact nor AST-equivalent
    decontaminate: str = ""  # bfcl:PATH,nexus:PATH (files or folders); "" = not checked
    reasoning_temperature: float = 0.7
    reasoning_max_tokens: int = 1024
    call_temperature: float = 0.0
    call_max_tokens: int = 512
    judge_temperature: float = 0.0
    judge_max_tokens: int = 16

    @classmethod
    def from_args(cls, args: dict[str, Any]) -> ToolGTOptions:
        options = cls(**args)
        if options.template not in prompts.TEMPLATES:
            hint = (
                "; No-Thought is arm=none (its queries still come from a template)"
                if options.template == "none"
                else ""
            )
            raise ValueError(
                f"toolgt builder: unknown template {options.template!r}; valid: {', '.join(prompts.TEMPLATES)}{hint}"
            )
        if options.arm not in ARMS:
            raise ValueError(f"toolgt builder: unknown arm {options.arm!r}; valid: {', '.join(ARMS)}")
        if options.arm_data not in ARM_DATA:
            raise ValueError(f"toolgt builder: unknown arm_data {options.arm_data!r}; valid: {', '.join(ARM_DATA)}")
        options.teacher = dict(options.teacher or {"kind": "offline"})
        problem = teacher_config_problem(options.teacher, "toolgt builder")
        if problem:
            raise ValueError(problem)
        return options

    def verified_templates(self) -> tuple[str, ...]:
        """The templates whose reasoning must pass stages 1-3 for a sample to be kept (``arm_data``)."""
        if self.arm_data == "paper":
            return ("cot",) if self.arm == "cot" else (self.template,)
        return (self.template,) if self.template == "cot" else (self.template, "cot")

    def trained_template(self) -> str | None:
        return {"none": None, "cot": "cot", "template": self.template}[self.arm]


@dataclass
class Sample:
    id: str
    source_id: str
    turn: int
    query: str
    tools: list[Tool]
    gold: list[ToolCall]  # [] for a relevance sample: no function is called

    @property
    def relevance(self) -> bool:
        return not self.gold


def split(conv: Conversation, on_drop: Any) -> Iterator[Sample]:
    """The conversation's call turns and text answers as single-turn samples (see the module docstring)."""
    users: list[str] = []  # since the previous call turn: a call may need what the user said turns before
    fresh: list[str] = []  # since the previous assistant turn: what a text answer replies to
    found = False
    for index, message in enumerate(conv.messages):
        if message.role == "user":
            users.append(message.content or "")
            fresh.append(message.content or "")
        elif message.role == "assistant" and message.tool_calls:
            found = True
            if not users:
                on_drop("split: call turn follows tool results without a user turn of its own")
            else:
                calls = [ToolCall(c.name, dict(c.arguments)) for c in message.tool_calls]
                yield Sample(f"{conv.id}#{index}", conv.id, index, "\n".join(users), list(conv.tools), calls)
            users, fresh = [], []
        elif message.role == "assistant":
            if fresh and conv.tools:  # a text answer to the user where functions were offered: no call fits
                found = True
                yield Sample(f"{conv.id}#{index}", conv.id, index, "\n".join(fresh), list(conv.tools), [])
            fresh = []
    if not found:
        on_drop(NO_TOOLS if not conv.tools else "split: no call turn and no text answer to a user turn")


class ToolGTBuilder:
    """Runs stages 1-3 for every sample and counts every drop by stage and reason (``report``)."""

    def __init__(self, options: ToolGTOptions, seed: int, teacher: Teacher | None = None):
        self.options, self.seed = options, seed
        self.teacher = teacher or Teacher(
            make_backend(options.teacher, prompts.OFFLINE_WRITERS, prompts.OFFLINE_VERSION),
            default_cache(options.teacher.get("kind", "offline"), options.cache_dir),
        )
        self.index = EvalIndex(options.decontaminate) if options.decontaminate else None
        self.counts: Counter = Counter()
        self.dropped: Counter = Counter()  # reason -> samples (and conversations without a call turn)
        self.decontaminated: Counter = Counter()
        self.stages: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))

    def _params(self, stage: str) -> StageParams:
        o = self.options
        temperature, tokens = {
            "reasoning": (o.reasoning_temperature, o.reasoning_max_tokens),
            "call": (o.call_temperature, o.call_max_tokens),
            "judge": (o.judge_temperature, o.judge_max_tokens),
        }[stage]
        return StageParams(temperature=float(temperature), max_tokens=int(tokens), seed=self.seed)

    def _ask(self, stage: str, system_user: tuple[str, str], context: dict[str, Any]) -> str:
        name = {"reasoning": prompts.REASONING_STAGE, "call": prompts.CALL_STAGE, "judge": prompts.JUDGE_STAGE}[stage]
        return self.teacher.ask(TeacherRequest(name, *system_user, self._params(stage), context))

    def verify(self, sample: Sample, template: str) -> tuple[str | None, str]:
        """(reasoning, how it was verified) when it passes stages 1-3, else (None, "stageN: reason")."""
        counts = self.stages[template]
        try:
            answer = self._ask(
                "reasoning",
                prompts.reasoning_prompts(sample.query, sample.tools, sample.gold, template),
                {"query": sample.query, "tools": sample.tools, "gold": sample.gold, "template": template},
            )
        except TeacherError as err:
            return None, f"stage1: teacher failed: {str(err)[:120]}"
        found = THINKING.search(answer)
        reasoning = found.group(1).strip() if found else ""
        if not found or not reasoning:
            return None, "stage1: no <thinking> block" if not found else "stage1: empty reasoning"
        leaked = leaks(reasoning)
        if leaked:
            return None, f"stage1: leaks the answer ({leaked!r})"
        counts["stage1"]["passed"] += 1
        try:
            answer = self._ask(
                "call",
                prompts.call_prompts(sample.query, sample.tools, reasoning),
                {"query": sample.query, "tools": sample.tools, "reasoning": reasoning},
            )
        except TeacherError as err:
            return None, f"stage2: teacher failed: {str(err)[:120]}"
        found = FUNCTION.search(answer)
        text = (found.group(1) if found else answer).strip()
        try:
            calls = [] if found and not text else prompts.read_call_list(text)  # <function></function>: no call
        except PySyntaxError:
            return None, "stage2: no readable call list" if found else "stage2: no <function> block"
        if not calls and sample.gold:
            return None, "stage2: no call"
        counts["stage2"]["passed"] += 1
        if text == prompts.call_list_text(sample.gold):
            return reasoning, "exact"
        if equivalent(calls, sample.gold, {t.name: t for t in sample.tools}):
            return reasoning, "ast"
        if not self.options.judge:
            return None, "stage3: differs from the gold (no judge)"
        try:
            verdict = self._ask("judge", prompts.judge_prompts(sample.query, sample.tools, sample.gold, text), {})
        except TeacherError as err:
            return None, f"stage3: judge failed: {str(err)[:120]}"
        if prompts.CAN_REPLACE in verdict.upper():
            return reasoning, "judge"
        if prompts.TOTALLY_INCORRECT in verdict.upper():
            return None, "stage3: judge says TOTALLY INCORRECT"
        return None, "stage3: judge gave no label"

    def sample(self, sample: Sample, on_drop: Any) -> Conversation | None:
        if self.index is not None:
            matched = self.index.match(sample.query, sample.gold)
            if matched:
                self.decontaminated[matched] += 1
                on_drop(f"decontaminated: {matched} match an eval item")
                return None
        reasonings, verified = {}, {}
        for template in self.options.verified_templates():
            reasoning, how = self.verify(sample, template)
            stage = how.split(":", 1)[0] if reasoning is None else "stage3"
            if reasoning is None:
                self.stages[template][stage]["dropped: " + how.split(": ", 1)[1]] += 1
                on_drop(f"{template} {how}")
                return None
            self.stages[template]["stage3"][how] += 1
            reasonings[template], verified[template] = reasoning, how
        trained = self.options.trained_template()
        answer = prompts.call_list_text(sample.gold)  # the GOLD call, never the regenerated one
        content = answer if trained is None else f"<thinking>{reasonings[trained]}</thinking>\n{answer}"
        meta = {
            "gold_calls": [{"name": c.name, "arguments": c.arguments} for c in sample.gold],
            "template": self.options.template,
            "arm": self.options.arm,
            "arm_data": self.options.arm_data,
            "source_id": sample.source_id,
            "turn": sample.turn,
            "verified": verified,
        }
        return Conversation(
            id=sample.id,
            tools=sample.tools,
            meta=meta,
            messages=[
                Message(role="system", content=prompts.train_system_prompt(sample.tools)),
                Message(role="user", content=sample.query),
                Message(role="assistant", content=content),
            ],
        )

    def build(self, conversations: Iterable[Conversation], on_drop: Any = None) -> Iterator[Conversation]:
        """The kept samples. Every dropped sample is counted by reason in ``dropped``; ``on_drop(reason)`` is called
        once for each conversation that gives no sample at all (the builders' contract: a conversation is read
        once), with its first sample's reason."""
        from tqdm.auto import tqdm

        bar = tqdm(
            desc=f"toolgt {self.options.template}/{self.options.arm}",
            unit="sample",
            disable=None,
            leave=False,
            dynamic_ncols=True,
        )
        for conv in conversations:
            self.counts["conversations"] += 1
            reasons: list[str] = []

            def drop(reason: str, reasons: list[str] = reasons) -> None:
                self.dropped[reason] += 1
                reasons.append(reason)

            yielded = 0
            for sample in split(conv, drop):
                self.counts["samples"] += 1
                self.counts["relevance samples"] += sample.relevance
                out = self.sample(sample, drop)
                bar.update(1)
                if out is not None:
                    self.counts["kept"] += 1
                    self.counts["relevance kept"] += sample.relevance
                    yielded += 1
                    yield out
                bar.set_postfix_str(f"kept {self.counts['kept'] / self.counts['samples']:.0%}")
            if not yielded and on_drop is not None:
                on_drop(reasons[0])
        bar.close()

    def report(self) -> dict[str, Any]:
        stages = {
            template: {stage: dict(sorted(counter.items())) for stage, counter in sorted(by_stage.items())}
            for template, by_stage in self.stages.items()
        }
        decontamination: Any = "not checked"
        if self.index is not None:
            decontamination = {
                "origin": DECONTAMINATION_ORIGIN,
                **self.index.report(),
                "matched": {k: self.decontaminated.get(k, 0) for k in ("query", "calls")},
            }
        return {
            "conversations": self.counts["conversations"],
            "samples": self.counts["samples"],
            "kept": self.counts["kept"],
            # the no-call samples among them (Table 2's relevance column: the model learns to abstain)
            "relevance": {"samples": self.counts["relevance samples"], "kept": self.counts["relevance kept"]},
            "verified": list(self.options.verified_templates()),  # whose reasoning a kept sample passed (arm_data)
            "dropped": dict(sorted(self.dropped.items())),
            "decontamination": decontamination,
            "stages": stages,
            "teacher": {"backend": self.teacher.kind, "model": str(self.teacher.backend.model)},
        }


def build(
    conversations: Iterable[Conversation], *, seed: int, on_drop: Any = None, **args: Any
) -> Iterator[Conversation]:
    """``data.builder: toolgt``: the training samples of ``arm`` (see the module docstring)."""
    yield from ToolGTBuilder(ToolGTOptions.from_args(args), seed).build(conversations, on_drop)


__all__ = [
    "ARMS",
    "ARM_DATA",
    "BUILDER_VERSION",
    "DECONTAMINATION_ORIGIN",
    "NO_TOOLS",
    "Sample",
    "ToolGTBuilder",
    "ToolGTOptions",
    "build",
    "split",
]
