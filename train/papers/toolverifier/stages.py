"""Which model serves which ToolVerifier stage (seed 003, §2.2-2.3, §3.3, A.6.4-A.6.7; issue 27 item 5).

The paper uses three models: the fine-tuned Llama-2 70B selects the tool (top-1, top-2 and the verified choice,
§2.2), Llama-2-Chat-70B asks and answers the contrastive question and settles each parameter (A.6.4, §2.2, A.6.5:
``[INST] <<SYS>> ...`` prompts), and the base Llama-2 70B writes the parameters by few-shot prompting and builds the
call with A.6.7's completion prompt ending ``API:`` (§2.3, §3.3). The second parameter set is "ReAct-style prompting
with Llama-2 70B" in §2.3 and §3.3 but "obtained from ... Llama-2-Chat-70B" in A.6.5: its own stage, routed either
way. ``backends`` (``eval.toolbench_verify.backends``, ``eval run toolbench MODEL --verify ... --backends``) routes
them; a stage it does not name asks the ``teacher`` (one model for all, the default, offline: no model)::

    backends:
      selector: trained                    # trained (the run's model / MODEL) | gold | a teacher mapping
      question: &chat {kind: http, base_url: http://localhost:8001/v1, model: meta-llama/Llama-2-70b-chat-hf}
      answer: *chat
      verify: *chat
      params: &base {kind: http, base_url: http://localhost:8000/v1, model: meta-llama/Llama-2-70b-hf,
                     completion: true}
      params_sampled: *base                # §2.3's reading (A.6.5's: *chat)
      call: *base

Each mapping is ``train.teacher.make_backend``'s (``BACKEND_SETTINGS``); ``completion: true`` sends a base model
the prompt alone as plain text (``/v1/completions``), an ``hf`` teacher with ``chat_format: llama2`` prompts with
Llama-2-Chat's template. The selector:

* ``trained`` (default): the model the run trained (``eval run``: MODEL), ToolSelect's plain-completion prompt.
* ``gold``: the case's gold tool, the "tool selection upperbound" of Table 5 (A.2): only the parameters are
  generated, so ``verify`` may not hold ``tool``.
* a teacher mapping: a served selector. With ``completion: true`` it gets ToolSelect's prompt (a fine-tuned selector
  behind vLLM); a chat model gets A.6.6's 0-shot prompt ("Respond with just the name of the tool"), the
  "Two-Step Llama-2-Chat-70B (0-shot tool selection)" baseline, and with ``--verify`` a chat model with
  ToolVerifier's verification (Tables 3 and 4's reading here, docs/toolverifier.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from train.papers.toolverifier import teacher as prompts
from train.papers.toolverifier.labels import paper_label
from train.schema import Conversation, Tool

STAGES = {  # the key in ``backends`` -> the teacher stage it routes
    "question": prompts.QUESTION_STAGE,
    "answer": prompts.ANSWER_STAGE,
    "params": prompts.PARAMS_STAGE,
    "params_sampled": prompts.SAMPLED_PARAMS_STAGE,
    "verify": prompts.VERIFY_STAGE,
    "call": prompts.CALL_STAGE,
}
SELECTOR = "selector"
SELECTORS = ("trained", "gold")  # or a teacher mapping of a model kind
KEYS = (SELECTOR, *STAGES)
SELECT_STAGE = "toolverifier.select"  # a served selector's questions (the response cache keys them by stage)

CHAT_SELECT_USER = (  # A.6.6 (the PDF lost its line breaks; the words are the paper's)
    "Here are the list of available tools:\n{tools}\n"
    'A user said, "{instruction}"\n'
    "What tool to use for the above instruction? Respond with just the name of the tool"
)


def backends_problems(backends: Any, where: str, verify: Iterable[str] = ()) -> list[str]:
    """What is wrong with a ``backends`` mapping (plain values), each naming the valid choices; ``verify``: the
    stages switched on (``gold`` refuses ``tool``)."""
    from train.teacher.factory import config_problem

    if not isinstance(backends, dict):
        return [f"{where} must be a mapping of {', '.join(KEYS)} to a backend, got {backends!r}"]
    problems = [f"{where}.{key}: unknown stage; valid: {', '.join(KEYS)}" for key in backends if key not in KEYS]
    for key, value in backends.items():
        if key not in KEYS:
            continue
        if key == SELECTOR and value in SELECTORS:
            if value == "gold" and "tool" in verify:
                problems.append(f"{where}.selector=gold gives the tool: nothing to verify; drop tool from verify")
            continue
        if not isinstance(value, dict):
            valid = f"{' | '.join(SELECTORS)} | a teacher mapping" if key == SELECTOR else "a teacher mapping"
            problems.append(f"{where}.{key}={value!r}: valid: {valid} ({{kind: http|hf, ...}})")
            continue
        problem = config_problem(value)
        if problem is None and key == SELECTOR and value.get("kind", "offline") == "offline":
            problem = "the offline teacher cannot select a tool; valid: trained, gold, an http or hf mapping"
        if problem is not None:
            problems.append(f"{where}.{key}: {problem}")
    return problems


def read_backends(text: str) -> dict[str, Any]:
    """``--backends``: a JSON object, or a YAML / JSON file holding one. ValueError when it is neither."""
    if text.lstrip().startswith("{"):
        try:
            value = json.loads(text)
        except ValueError as err:
            raise ValueError(f"--backends: not a JSON object: {err}") from None
    else:
        import yaml

        path = Path(text)
        if not path.is_file():
            raise ValueError(f"--backends {text}: neither a JSON object nor a file")
        try:
            value = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as err:
            raise ValueError(f"--backends {text}: {err}") from None
    if not isinstance(value, dict):
        raise ValueError(f"--backends: a mapping of {', '.join(KEYS)} to a backend, got {value!r}")  # noqa: TRY004
    return value


def make_teachers(teacher: Mapping[str, Any] | None, backends: Mapping[str, Any]) -> Any:
    """The stages' teachers: each stage ``backends`` names asks its own (equal mappings share one), the others
    ``teacher``. A ``train.teacher.StageTeachers`` (asked as one ``Teacher``)."""
    from train.teacher import stage_teachers

    routes = {STAGES[key]: dict(value) for key, value in backends.items() if key in STAGES}
    return stage_teachers(teacher, routes, prompts.OFFLINE_WRITERS, prompts.OFFLINE_VERSION)


def selector_kind(backends: Mapping[str, Any]) -> str:
    """``trained``, ``gold``, or the served selector's ``kind model``."""
    chosen = backends.get(SELECTOR, "trained")
    if isinstance(chosen, str):
        return chosen
    return f"{chosen.get('kind')} {chosen.get('model') or chosen.get('path')}"


def make_selector(
    backends: Mapping[str, Any],
    trained: Callable[[], Any],
    references: Iterable[Conversation],
    max_new_tokens: int,
) -> Any:
    """The selector ``backends`` names: ``trained()`` (called only then: it loads the model), the gold tool of each
    case of ``references``, or a served model through its own teacher (answers cached as the stages' are)."""
    from train.papers.toolverifier.verify import text_selector

    chosen = backends.get(SELECTOR, "trained")
    if chosen == "trained":
        return trained()
    if chosen == "gold":
        return gold_selector(references)
    from train.teacher import Teacher, TeacherRequest, default_cache, make_backend
    from train.teacher.backends import StageParams

    backend = make_backend(dict(chosen))
    teacher = Teacher(backend, default_cache(backend.kind))
    params = StageParams(temperature=0.0, max_tokens=int(max_new_tokens))

    def complete(system: str | None, user: str) -> str:
        return teacher.ask(TeacherRequest(SELECT_STAGE, system, user, params))

    if getattr(backend, "completion", False):
        return text_selector(lambda prompt: complete(None, prompt))
    return chat_selector(lambda user: complete(prompts.SYSTEM, user))


def chat_select_prompt(instruction: str, tools: list[Tool]) -> str:
    """A.6.6's user prompt; the candidate list as A.6.8 writes one: ``name = description`` per line."""
    listed = "\n".join(f"{tool.name} = {tool.description}" for tool in tools)
    return CHAT_SELECT_USER.replace("{tools}", listed).replace("{instruction}", instruction)


def read_tool_name(text: str, names: list[str]) -> str:
    """A chat model's "just the name of the tool" -> a candidate: the answer itself (quotes, brackets and a final
    full stop off), else the longest candidate named in it; "" when none is."""
    answer = text.strip().strip("\"'`[]* ").rstrip(".").strip()
    folded = {name.casefold(): name for name in names}
    if answer.casefold() in folded:
        return folded[answer.casefold()]
    found = [name for name in names if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE)]
    return max(found, key=len) if found else ""


def chat_selector(complete: Callable[[str], str]) -> Callable[[str, list[Tool]], str]:
    """A selector from a chat completer (user prompt -> answer): A.6.6's prompt, the answer read back."""

    def select(instruction: str, tools: list[Tool]) -> str:
        return read_tool_name(complete(chat_select_prompt(instruction, tools)), [tool.name for tool in tools])

    return select


def gold_selector(references: Iterable[Conversation]) -> Callable[[str, list[Tool]], str]:
    """Table 5's upper bound: each case's gold tool under the name it is offered as (``paper_label``), looked up by
    the case's instruction; ValueError when one instruction has two gold tools. "" for an instruction it does not
    know or a gold tool not among the candidates (the trace then says so)."""
    gold: dict[str, str] = {}
    for case in references:
        instruction = case.messages[0].content or ""
        label = paper_label(str((case.meta or {}).get("gold_tool") or ""))
        if gold.setdefault(instruction, label) != label:
            raise ValueError(
                f"selector gold: {case.id}'s instruction has two gold tools ({gold[instruction]}, {label})"
            )

    def select(instruction: str, tools: list[Tool]) -> str:
        label = gold.get(instruction, "")
        return label if label in {tool.name for tool in tools} else ""

    return select


__all__ = [
    "KEYS",
    "SELECTORS",
    "STAGES",
    "backends_problems",
    "chat_select_prompt",
    "chat_selector",
    "gold_selector",
    "make_selector",
    "make_teachers",
    "read_backends",
    "read_tool_name",
    "selector_kind",
]
