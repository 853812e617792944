"""ToolVerifier's self-verification at inference (seed 003, §2.2-2.3, §3.3) as one composable pipeline.

Per item (an instruction and the candidate tools), with the switches ``verify.tool`` and ``verify.params``:

1. the selector picks top-1 among all candidates;
2. [tool] it is removed and the selector picks again among the rest: top-2;
3. [tool] a contrastive question from the two tools' names and descriptions only (A.6.4), asked once per ORDERED
   pair (an in-run memo, and the teacher's on-disk cache across runs: the prompt holds nothing else);
4. [tool] the teacher answers it for this instruction (our prompt; the paper gives none);
5. [tool] the answer is appended to the instruction (a new line) and the selector re-selects among top-1 and top-2;
6. parameters for the chosen tool: a first set by few-shot prompting with the tool's demonstrations (greedy);
   [params] a second set by sampling the same prompt (top-p, temperature 0.7, A.6);
7. [params] only the parameters where the two sets differ are verified (A.6.5, multiple choice); "None" leaves the
   parameter unset; an unreadable verdict keeps the first set's value (and says so in the trace);
8. the call is built from the final parameters by few-shot prompting (A.6.7); a completion that runs on into another
   demonstration is cut at its ``INS:`` line (``read_call``).

With ``tool`` off, steps 2-5 are skipped (top-1 is the tool, no question is asked); with ``params`` off, step 6
makes one set and step 7 is skipped (no verification prompt). Both off is Table 1's "without verification" row.

The paper is not consistent about the second parameter set: §2.3 says it comes from "ReAct-style prompting with
Llama-2 70B", §3.3 "standard few-shot and ReAct-style prompting Llama-2 70B with three demonstrations", A.6.5 says
the two predictions are "obtained from Llama-2 70B and Llama-2-Chat-70B, respectively", and §4.1 (other models)
uses "two different sampling parameters". No ReAct prompt is given, so we implement §4.1's variant: the same
few-shot prompt, greedy then sampled (``train.papers.toolverifier.teacher.GREEDY`` / ``SAMPLED``, separate stages so a
backend may route them to different models, which is A.6.5's reading).

The selector is any callable ``(instruction, candidate tools) -> tool name``: a trained model through
``text_selector`` (ToolSelect's plain-completion prompt and the ``toolselect_text`` parser) or a scripted one.
Questions, answers, parameters and the call come from a ``train.teacher.Teacher`` (offline / HTTP / HF).
Demonstrations come from a callable ``(tool name, item id) -> list[Demonstration]`` (the caller decides where they
come from, e.g. leave-one-out from the test set without the item being scored).

Each item gives a ``VerifierTrace`` (``to_dict`` is one JSON Lines row, written beside the scores;
``to_prediction`` the ToolBench scorer's row). ``run_rows`` gives Table 1's four rows (``ROWS``) for an item from one
selection pass; Table 2's selection accuracy without and with tool verification is the scorer's tool accuracy of
rows ``"none"`` (top-1) and ``"tool"``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from train.papers.toolverifier import teacher as prompts
from train.papers.toolverifier.format import CHOICES, SECTION, USER, ToolSelectTextFormat
from train.papers.toolverifier.teacher import Demonstration
from train.schema import Tool
from train.teacher import Teacher, TeacherError, TeacherRequest

Selector = Callable[[str, list[Tool]], str]
Demonstrations = Callable[[str, str], list[Demonstration]]


@dataclass(frozen=True)
class VerifySwitches:
    """``verify.tool`` (steps 2-5) and ``verify.params`` (the second set and step 7)."""

    tool: bool = True
    params: bool = True

    @classmethod
    def parse(cls, text: str) -> VerifySwitches:
        """``"tool,params"``, ``"tool"``, ``"params"`` or ``""``/``"none"``; ValueError naming an unknown part."""
        parts = {p.strip() for p in text.split(",") if p.strip() and p.strip() != "none"}
        unknown = sorted(parts - {"tool", "params"})
        if unknown:
            raise ValueError(f"unknown verification stage(s) {unknown}; valid: tool, params")
        return cls(tool="tool" in parts, params="params" in parts)


@dataclass
class VerifierTrace:
    """What one item went through; unset fields are stages that did not run."""

    id: str
    instruction: str
    top1: str | None = None
    top2: str | None = None
    question: str | None = None
    answer: str | None = None
    tool: str | None = None  # the final choice
    params_fewshot: dict[str, str | None] | None = None
    params_sampled: dict[str, str | None] | None = None
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)  # parameter -> options, response, verdict
    params: dict[str, str | None] | None = None  # the final set (None values are unset)
    call: str | None = None
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_prediction(self) -> dict[str, Any]:
        """The ToolBench scorer's prediction row (``train.evaluation.toolbench``): the call and the chosen tool."""
        return {"id": self.id, "program": self.call or "", "tool": self.tool or ""}


def parameter_names(tool: Tool) -> list[str]:
    properties = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
    return list(properties) if isinstance(properties, dict) else []


def parameter_definition(tool: Tool, name: str) -> str:
    """A.6.5's "parameter definition" line: ``name (type): description``."""
    spec = (tool.parameters.get("properties") or {}).get(name)
    spec = spec if isinstance(spec, dict) else {}
    kind = f" ({spec['type']})" if isinstance(spec.get("type"), str) else ""
    return f"{name}{kind}: {spec.get('description') or 'no description'}"


def tool_head(tool: Tool) -> str:
    """The head of the parameter and call prompts (ours): the tool's name, description and parameter definitions."""
    names = parameter_names(tool)
    return "\n".join([f"Tool: {tool.name} - {tool.description}", *(parameter_definition(tool, n) for n in names)])


def no_demonstrations(tool: str, item_id: str) -> list[Demonstration]:
    return []


class ToolVerifier:
    """The pipeline: ``run(item_id, instruction, tools) -> VerifierTrace``."""

    def __init__(
        self,
        selector: Selector,
        teacher: Teacher,
        switches: VerifySwitches = VerifySwitches(),
        demonstrations: Demonstrations = no_demonstrations,
    ):
        self.selector, self.teacher, self.switches = selector, teacher, switches
        self.demonstrations = demonstrations
        self.questions: dict[tuple[str, str], str] = {}  # ordered pair -> question (step 3's memo)
        self._memo: dict[tuple[str, str, Any], str] | None = None

    # ---------------------------------------------------------------- tool selection (§2.2)

    def _select(self, instruction: str, tools: list[Tool], trace: VerifierTrace, step: str) -> str | None:
        name = self.selector(instruction, tools)
        if name in {t.name for t in tools}:
            return name
        trace.errors.append(f"{step}: the selector chose {name!r}, not one of the {len(tools)} candidates")
        return None

    def _ask(self, stage: str, user: str, params: Any, **context: Any) -> str:
        if self._memo is None:
            return self.teacher.ask(TeacherRequest(stage, prompts.SYSTEM, user, params, context))
        key = (stage, user, params)  # within run_rows: a prompt two rows share is asked once
        if key not in self._memo:
            self._memo[key] = self.teacher.ask(TeacherRequest(stage, prompts.SYSTEM, user, params, context))
        return self._memo[key]

    def question(self, first: Tool, second: Tool) -> str:
        key = (first.name, second.name)
        if key not in self.questions:
            pair = ((first.name, first.description), (second.name, second.description))
            user = prompts.question_prompt(first.name, first.description, second.name, second.description)
            self.questions[key] = self._ask(prompts.QUESTION_STAGE, user, prompts.GREEDY, pair=pair).strip()
        return self.questions[key]

    def select_tool(self, instruction: str, tools: list[Tool], trace: VerifierTrace) -> Tool | None:
        by_name = {t.name: t for t in tools}
        trace.top1 = self._select(instruction, tools, trace, "top-1")
        trace.tool = trace.top1
        if trace.top1 is None or not self.switches.tool:
            return by_name.get(trace.tool) if trace.tool else None
        rest = [t for t in tools if t.name != trace.top1]
        trace.top2 = self._select(instruction, rest, trace, "top-2") if rest else None
        if trace.top2 is None:
            return by_name[trace.top1]
        first, second = by_name[trace.top1], by_name[trace.top2]
        trace.question = self.question(first, second)
        pair = ((first.name, first.description), (second.name, second.description))
        user = prompts.answer_prompt(instruction, pair, trace.question)
        trace.answer = self._ask(
            prompts.ANSWER_STAGE, user, prompts.GREEDY, pair=pair, instruction=instruction, question=trace.question
        ).strip()
        final = self._select(f"{instruction}\n{trace.answer}", [first, second], trace, "verified")
        trace.tool = final or trace.top1  # a verified choice outside the pair keeps top-1
        return by_name[trace.tool]

    # ---------------------------------------------------------------- parameters (§2.3)

    def _params(self, stage: str, params: Any, instruction: str, tool: Tool, demos: list) -> dict:
        names = parameter_names(tool)
        user = prompts.params_prompt(tool_head(tool), instruction, names, demos)
        text = self._ask(stage, user, params, instruction=instruction, names=names)
        return prompts.read_params(text, names)

    def choose_params(self, item_id: str, instruction: str, tool: Tool, trace: VerifierTrace) -> list[Demonstration]:
        names, demos = parameter_names(tool), list(self.demonstrations(tool.name, item_id))
        trace.params_fewshot = self._params(prompts.PARAMS_STAGE, prompts.GREEDY, instruction, tool, demos)
        final = dict(trace.params_fewshot)
        if self.switches.params:
            trace.params_sampled = self._params(prompts.SAMPLED_PARAMS_STAGE, prompts.SAMPLED, instruction, tool, demos)
            for name in names:
                first, second = trace.params_fewshot[name], trace.params_sampled[name]
                if first == second:
                    continue  # only the parameters where the two sets differ are verified
                options = (first or prompts.UNSET, second or prompts.UNSET)
                user = prompts.verify_prompt(instruction, name, parameter_definition(tool, name), *options)
                response = self._ask(
                    prompts.VERIFY_STAGE, user, prompts.GREEDY, instruction=instruction, predictions=options
                )
                verdict, value = prompts.read_verdict(response, *options)
                if verdict == "unreadable":
                    value = first
                final[name] = None if value == prompts.UNSET else value
                trace.verdicts[name] = {"options": list(options), "response": response, "verdict": verdict}
        trace.params = final
        return demos

    # ---------------------------------------------------------------- one item

    def run(self, item_id: str, instruction: str, tools: list[Tool]) -> VerifierTrace:
        trace = VerifierTrace(id=item_id, instruction=instruction)
        try:
            tool = self.select_tool(instruction, tools, trace)
        except TeacherError as err:  # one item's failure is counted in its trace, the run goes on
            trace.errors.append(f"teacher: {err}")
            return trace
        return self._finish(item_id, instruction, tool, trace)

    def _finish(self, item_id: str, instruction: str, tool: Tool | None, trace: VerifierTrace) -> VerifierTrace:
        """Steps 6-8 for the chosen tool (nothing when there is none)."""
        if tool is None:
            return trace
        try:
            demos = self.choose_params(item_id, instruction, tool, trace)
            user = prompts.call_prompt(tool_head(tool), instruction, parameter_names(tool), trace.params or {}, demos)
            trace.call = prompts.read_call(
                self._ask(
                    prompts.CALL_STAGE, user, prompts.GREEDY, tool=tool.name, values=trace.params or {}, demos=demos
                )
            )
        except TeacherError as err:
            trace.errors.append(f"teacher: {err}")
        return trace

    def run_rows(
        self, item_id: str, instruction: str, tools: list[Tool], keys: Iterable[str] = ()
    ) -> dict[str, VerifierTrace]:
        """Table 1's four rows (``ROWS``; ``keys``, when given, only those) for one item from one pass: the selector
        runs once (top-1, and top-2 and the verified choice when a row verifies the tool), and a prompt that two
        rows share (the same tool's parameters, the same call) is asked once. Row ``"none"`` is top-1 with the
        first parameter set, ``"tool,params"`` is ``run`` with both on. ValueError for an unknown key."""
        wanted = list(keys) or list(ROWS)
        unknown = [key for key in wanted if key not in ROWS]
        if unknown:
            raise ValueError(f"unknown Table 1 row(s) {unknown}; valid: {', '.join(ROWS)}")
        selection = VerifierTrace(id=item_id, instruction=instruction)
        saved, self._memo = self.switches, {}
        try:  # no row verifies the tool: no top-2, no question (what run() with verify.tool off asks)
            self.switches = VerifySwitches(tool=any(ROWS[key].tool for key in wanted), params=True)
            try:
                self.select_tool(instruction, tools, selection)
            except TeacherError as err:
                selection.errors.append(f"teacher: {err}")
            by_name = {t.name: t for t in tools}
            rows = {}
            for key in wanted:
                switches = self.switches = ROWS[key]
                if switches.tool:
                    trace = replace(selection, verdicts={}, errors=list(selection.errors))
                else:  # what run() with verify.tool off records: top-1 only, no question
                    errors = [e for e in selection.errors if e.startswith("top-1")]
                    trace = VerifierTrace(item_id, instruction, top1=selection.top1, tool=selection.top1, errors=errors)
                rows[key] = self._finish(item_id, instruction, by_name.get(trace.tool or ""), trace)
            return rows
        finally:
            self.switches, self._memo = saved, None


# Table 1's rows: the --verify spelling -> its switches (the paper's row names in ROW_NAMES)
ROWS: dict[str, VerifySwitches] = {
    "none": VerifySwitches(tool=False, params=False),
    "tool": VerifySwitches(tool=True, params=False),
    "params": VerifySwitches(tool=False, params=True),
    "tool,params": VerifySwitches(tool=True, params=True),
}
ROW_NAMES = {
    "none": "without verification",
    "tool": "tool selection verification only",
    "params": "param selection verification only",
    "tool,params": "tool verification+param verification",
}


def text_selector(complete: Callable[[str], str], fmt: ToolSelectTextFormat | None = None) -> Selector:
    """A selector from a text completer: ToolSelect's prompt (``User: …\\n###\\nTool Choices: …\\n###\\n``, no BOS:
    the completer's tokenizer adds it) -> the completion -> the ``toolselect_text`` parser's Act ("" when none)."""
    fmt = fmt or ToolSelectTextFormat()

    def select(instruction: str, tools: list[Tool]) -> str:
        choices = "\n".join(f"{t.name} = {t.description}" for t in tools)
        _, calls = fmt.parse(complete(f"{USER}{instruction}{SECTION}{CHOICES}{choices}{SECTION}"))
        return calls[0].name if calls else ""

    return select


def write_traces(traces: Iterable[VerifierTrace], path: str | Path) -> int:
    """One JSON object per line; the number written."""
    count = 0
    with Path(path).open("w", encoding="utf-8") as fh:
        for trace in traces:
            fh.write(json.dumps(trace.to_dict(), ensure_ascii=False) + "\n")
            count += 1
    return count


def pooled_rate(cells: Mapping[str, tuple[float, int]]) -> float:
    """Table 1's "Average": per task (success rate in %, cases) -> the rate over all cases, to two decimals.
    A task's successes are its rate times its cases, rounded to a whole case (84.17% of 120 is 101)."""
    successes = sum(round(rate * n / 100) for rate, n in cells.values())
    cases = sum(n for _, n in cells.values())
    return round(100 * successes / cases, 2)


__all__ = [
    "ROWS",
    "ROW_NAMES",
    "Demonstrations",
    "Selector",
    "ToolVerifier",
    "VerifierTrace",
    "VerifySwitches",
    "no_demonstrations",
    "parameter_definition",
    "parameter_names",
    "pooled_rate",
    "text_selector",
    "tool_head",
    "write_traces",
]
