"""ToolVerifier's teacher questions (seed 003, §2.2-2.3, A.6.4-A.6.7) and the offline teacher's deterministic answers.

Five stages, each one ``TeacherRequest`` (the chat template of the backend wraps system + user; the paper's
``[INST] «SYS» ... «/SYS»`` is Llama-2-Chat's template, so the words inside it are the prompts here):

* ``toolverifier.question`` (A.6.4, verbatim): a contrastive question from the two tools' names and descriptions
  only (no instruction: A.5 finds adding it worse, and without it the question is a function of the ordered pair,
  so the teacher's response cache answers it once per ordered pair, across items and runs).
* ``toolverifier.answer`` (OURS: the paper gives no answer prompt, §2.2 says only that the answers "are obtained
  by further prompting Llama-2-Chat-70B"): the instruction, the two options and the question; the closing
  "Therefore, the answer is:" follows the example answer quoted in §4.2.
* ``toolverifier.params`` (ours in layout: the paper says "few-shot prompting ... utilizing demonstrations specific
  to the selected tool" and shows no prompt; we use A.6.7's demonstration layout, ``INS: A user says, "..."`` then
  one ``name: value`` per parameter, ``none`` for an unset one, and stop before ``API:``; also ours: a head naming
  the tool and defining its parameters, so the prompt is the tool's even without demonstrations).
* ``toolverifier.verify`` (A.6.5, verbatim; the "parameter definition" line there is a placeholder for the
  parameter's description, which we fill in).
* ``toolverifier.call`` (A.6.7's layout: the demonstrations with their ``API:`` line, then the instruction and the
  final ``param_str``; the model completes the ``API:`` line; the same head as the parameters' in front).

The PDF's extraction lost the prompts' line breaks; the words are the paper's, the breaks ours.

Sampling (A.6): "top-p sampling ... with a temperature set to 0.7". ``SAMPLED`` carries both: temperature 0.7 and
``top_p=0.9``. The paper gives no p; 0.9 is the default of Llama-2's reference generation code (Meta's ``llama``
repository, ``text_completion``/``chat_completion``), the models the paper prompts, so it is the p a run with them
would have used unless it said otherwise. ``GREEDY`` is the first parameter set's and the verification questions'
setting (no top-p: it plays no part in greedy decoding).

The offline writers answer without a model, deterministically, from the request's ``context``:
the question names the two tools' descriptions; the answer picks the option whose name or description shares
most words with the instruction (ties: a); the parameter writers read ``name = value`` / ``name: value`` /
``name is value`` spans out of the instruction, the name or a word it begins (``latitude is -19.2`` for ``lat``);
the sampled writer, seeded by the request digest, drops one value now and then so the two sets can differ; the
verifier answers ``[option]`` when the option's text appears in the instruction, else ``None``; the call writer
fills the first demonstration's API line with the new values
(``name(k=v, ...)`` without a demonstration).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from train.teacher.backends import StageParams, TeacherRequest

QUESTION_STAGE, ANSWER_STAGE = "toolverifier.question", "toolverifier.answer"
PARAMS_STAGE, SAMPLED_PARAMS_STAGE = "toolverifier.params", "toolverifier.params_sampled"
VERIFY_STAGE, CALL_STAGE = "toolverifier.verify", "toolverifier.call"
OFFLINE_VERSION = "toolverifier-1"  # bump when an offline writer's text changes (it is the cache's model name)

GREEDY = StageParams(temperature=0.0, max_tokens=256)
SAMPLED = StageParams(temperature=0.7, max_tokens=256, top_p=0.9)  # A.6; p: see the module docstring

SYSTEM = "You are a helpful assistant."
QUESTION_USER = (  # A.6.4
    "I am confused to choose one of these two classes. Here are their names and descriptions:\n"
    "a. {name1} - {description1}\n"
    "b. {name2} - {description2}\n\n"
    "A contrastive question is a question that upon asking would resolve such confusion. Generate a contrastive "
    "question that I can ask myself whose answer would help me make the right choice."
)
ANSWER_USER = (  # ours (see the module docstring)
    'A user said, "{instruction}"\n\n'
    "I am confused to choose one of these two tools for it:\n"
    "a. {name1} - {description1}\n"
    "b. {name2} - {description2}\n\n"
    "Answer the following question strictly based on what the user said above: {question}\n"
    'Answer briefly, then end with "Therefore, the answer is: " followed by the letter and the description of the '
    "chosen option."
)
VERIFY_USER = (  # A.6.5
    'A user said, "{instruction}"\n\n'
    "{definition}\n\n"
    'For the above user instruction, I am confused about choosing one of these two for "{parameter}".\n'
    "a. {prediction1}\n"
    "b. {prediction2}\n\n"
    "What is the answer? Answer the following question strictly based on what the user said above. If there is no "
    'mention, respond with "None". If there is, select the answer from the given options and respond with the '
    "chosen option only in square brackets []."
)
UNSET = "none"  # A.6.7's spelling of a parameter without a value


@dataclass(frozen=True)
class Demonstration:
    """One worked example of a tool: an instruction, its parameter values (None: unset) and its API line."""

    instruction: str
    parameters: Mapping[str, str | None] = field(default_factory=dict)
    api: str = ""


# ---------------------------------------------------------------- the prompts


def question_prompt(name1: str, description1: str, name2: str, description2: str) -> str:
    return (
        QUESTION_USER.replace("{name1}", name1)
        .replace("{description1}", description1)
        .replace("{name2}", name2)
        .replace("{description2}", description2)
    )


def answer_prompt(instruction: str, pair: tuple[tuple[str, str], tuple[str, str]], question: str) -> str:
    (name1, description1), (name2, description2) = pair
    text = ANSWER_USER.replace("{name1}", name1).replace("{description1}", description1)
    text = text.replace("{name2}", name2).replace("{description2}", description2).replace("{question}", question)
    return text.replace("{instruction}", instruction)


def param_str(names: list[str], values: Mapping[str, str | None]) -> str:
    """A.6.7's ``param_str``: ``name: value`` per parameter, in the tool's order, ``none`` for an unset one."""
    return "\n".join(f"{n}: {values.get(n) if values.get(n) is not None else UNSET}" for n in names)


def _demo_block(demo: Demonstration, names: list[str], with_api: bool) -> str:
    block = f'INS: A user says, "{demo.instruction}"\n{param_str(names, demo.parameters)}'
    return block + (f"\nAPI: {demo.api}" if with_api else "")


def params_prompt(tool_head: str, instruction: str, names: list[str], demos: list[Demonstration]) -> str:
    """Few-shot parameter generation: the tool's head (name, description, parameter definitions), the
    demonstrations without their API line, then the instruction."""
    shots = "".join(_demo_block(d, names, with_api=False) + "\n\n" for d in demos)
    return f'{tool_head}\n\n{shots}INS: A user says, "{instruction}"\n'


def verify_prompt(instruction: str, parameter: str, definition: str, prediction1: str, prediction2: str) -> str:
    text = VERIFY_USER.replace("{definition}", definition or f"{parameter}: no description")
    text = text.replace("{parameter}", parameter).replace("{prediction1}", prediction1)
    return text.replace("{prediction2}", prediction2).replace("{instruction}", instruction)


def call_prompt(
    tool_head: str, instruction: str, names: list[str], values: Mapping[str, str | None], demos: list[Demonstration]
) -> str:
    """A.6.7: the tool's head (ours, as in ``params_prompt``), the demonstrations, the instruction and param_str."""
    shots = "".join(_demo_block(d, names, with_api=True) + "\n\n" for d in demos)
    return f'{tool_head}\n\n{shots}INS: A user says, "{instruction}"\n{param_str(names, values)}\nAPI:'


# ---------------------------------------------------------------- reading the answers back


def read_params(text: str, names: list[str]) -> dict[str, str | None]:
    """``name: value`` lines -> values for the tool's parameters (``none``/absent: None); the first line per name
    counts, reading stops at the next ``INS:`` or ``API:`` (a model that runs on into another demonstration)."""
    values: dict[str, str | None] = {}
    for line in text.splitlines():
        if line.lstrip().startswith(("INS:", "API:")):
            break
        name, sep, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if sep and name in names and name not in values:
            values[name] = None if value.lower() in ("", UNSET, "null") else value
    return {n: values.get(n) for n in names}


def read_call(text: str) -> str:
    """A.6.7's completion -> the call: what precedes a next ``INS:`` line (a base model runs on into another
    demonstration), stripped."""
    lines = []
    for line in text.splitlines():
        if line.lstrip().startswith("INS:"):
            break
        lines.append(line)
    return "\n".join(lines).strip()


_BRACKETED = re.compile(r"\[([^\[\]]*)\]")


def read_verdict(text: str, prediction1: str, prediction2: str) -> tuple[str, str | None]:
    """A.6.5's answer -> (verdict, value): ``a``/``b`` with the chosen prediction, ``none`` (the parameter stays
    unset), or ``unreadable`` (None; the caller keeps the first prediction). A bracketed option is matched by its
    text or its letter; "None" outside brackets, or ``[None]``, is none."""
    for inner in (m.group(1).strip() for m in _BRACKETED.finditer(text)):
        for verdict, prediction in (("a", prediction1), ("b", prediction2)):
            if inner == prediction or inner.lower() in (verdict, f"{verdict}.", f"{verdict}. {prediction}".lower()):
                return verdict, prediction
        if inner.lower() in ("none", ""):
            return "none", None
    if re.search(r"\bnone\b", text, re.IGNORECASE):
        return "none", None
    return "unreadable", None


# ---------------------------------------------------------------- the offline writers


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2}


def offline_question(request: TeacherRequest) -> str:
    (name1, description1), (name2, description2) = request.context["pair"]
    return (
        f"Do I need to {description1.rstrip('.').lower() or name1} (a. {name1}), "
        f"or to {description2.rstrip('.').lower() or name2} (b. {name2})?"
    )


def offline_answer(request: TeacherRequest) -> str:
    pair = request.context["pair"]
    asked = _words(str(request.context["instruction"]))
    overlaps = [len(asked & _words(f"{name} {description}")) for name, description in pair]
    pick = 0 if overlaps[0] >= overlaps[1] else 1
    letter, (name, description) = "ab"[pick], pair[pick]
    return f'The user asks for what "{name}" does. Therefore, the answer is: {letter}. {description}'


def _extract(instruction: str, name: str) -> str | None:
    # the name or a word it begins ("lat" in "latitude is -19.2", "lon" in "longitute = 1.9")
    pattern = rf"\b{re.escape(name)}\w*\s*(?:=|:|\bis\b)\s*([^\s,;?!]+)"
    found = re.search(pattern, instruction, re.IGNORECASE)
    return found.group(1).strip("\"'").rstrip(".") or None if found else None


def offline_params(request: TeacherRequest) -> str:
    names, instruction = list(request.context["names"]), str(request.context["instruction"])
    values = {n: _extract(instruction, n) for n in names}
    if request.params.temperature > 0:  # the sampled set: now and then a value is missed
        rng = random.Random(request.digest())
        present = [n for n in names if values[n] is not None]
        if present and rng.random() < 0.5:
            values[rng.choice(present)] = None
    return param_str(names, values)


def offline_verify(request: TeacherRequest) -> str:
    instruction = str(request.context["instruction"]).lower()
    for prediction in request.context["predictions"]:
        if prediction != UNSET and prediction.lower() in instruction:
            return f"[{prediction}]"
    return "None"


def offline_call(request: TeacherRequest) -> str:
    values: Mapping[str, str | None] = request.context["values"]
    demos: list[Demonstration] = list(request.context["demos"])
    if demos and demos[0].api:
        api = demos[0].api
        for name, old in demos[0].parameters.items():
            if old is not None and values.get(name) is not None:
                api = api.replace(f"{name}={old}", f"{name}={values[name]}")
        return f" {api}"
    args = ", ".join(f"{n}={v!r}" for n, v in values.items() if v is not None)
    return f" {request.context['tool']}({args})"


OFFLINE_WRITERS = {
    QUESTION_STAGE: offline_question,
    ANSWER_STAGE: offline_answer,
    PARAMS_STAGE: offline_params,
    SAMPLED_PARAMS_STAGE: offline_params,
    VERIFY_STAGE: offline_verify,
    CALL_STAGE: offline_call,
}

__all__ = [
    "ANSWER_STAGE",
    "CALL_STAGE",
    "GREEDY",
    "OFFLINE_VERSION",
    "OFFLINE_WRITERS",
    "PARAMS_STAGE",
    "QUESTION_STAGE",
    "SAMPLED",
    "SAMPLED_PARAMS_STAGE",
    "SYSTEM",
    "UNSET",
    "VERIFY_STAGE",
    "Demonstration",
    "answer_prompt",
    "call_prompt",
    "param_str",
    "params_prompt",
    "question_prompt",
    "read_call",
    "read_params",
    "read_verdict",
    "verify_prompt",
]
