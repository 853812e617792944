"""ToolGT's teacher questions (the paper's Tables 5 and 8-11) and the offline teacher's deterministic answers.

Stage 1 (Table 8) asks for a reasoning from (query, tools, gold call) following a template (Table 5: Detail,
Claude, Simple; ``cot``: plain "Think step-by-step"), pretending not to know the answer, in ``<thinking>`` tags.
Stage 2 (Table 9) asks for the call from (query, tools, reasoning), without the template, in ``<function>`` tags.
Stage 3 (Table 10) asks a judge whether a differing call ``CAN REPLACE GROUND TRUTH`` or is ``TOTALLY INCORRECT``.
The PDF's extraction lost the prompts' line breaks; the words are the paper's, the breaks ours.

The offline writers (``OFFLINE_WRITERS``, stage name -> writer) answer without a model: stage 1 writes the
template's steps from the structured context, the draft call on a line of its own (Detail: step 6); stage 2 reads
the last call list it finds at the end of a reasoning line back out of the reasoning (it never sees the gold), so
a reasoning without a readable draft gives no call; the judge says ``TOTALLY INCORRECT``. For a relevance sample
(the gold is no call) stage 1 writes the template's steps concluding that no function is called, because none
fits the request or the request lacks what the functions require (a rule cannot tell which), and drafts ``[]``.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from train.base.pysyntax import PyCall, PySyntaxError, parse_call_list
from train.formats.text_answers import call_list_text, python_value
from train.formats.text_answers import text_system_prompt as toolgt_system_prompt
from train.schema import Tool, ToolCall
from train.teacher.backends import TeacherRequest

REASONING_STAGE, CALL_STAGE, JUDGE_STAGE = "toolgt.reasoning", "toolgt.call", "toolgt.judge"
OFFLINE_VERSION = "toolgt-1"  # bump when an offline writer's text changes (it is the cache's model name)

TEMPLATES: dict[str, str] = {  # Table 5, verbatim; cot is the CoT arm's free-form instruction (§3.2)
    "detail": (
        "1.Identify which function or set of functions best fit the user query based on function descriptions. "
        "2.Pick that function or set of functions to fulfill the user's request. 3. After selecting the "
        "function(s), carefully examine the function documentation. 4. Analyze the provided parameters, "
        "considering descriptions, parameter types, and optionality. 5.Extract relevant information from user "
        "queries, performing necessary type conversions. 6. Draft the function call(s) fulfilling the user's "
        "request. 7. Revalidate the composed functions, ensuring they satisfy both documentation and the user's "
        "query."
    ),
    "claude": (
        "First, determine the most relevant tool provided to answer the user's request. Then, review each required "
        "parameter for the selected tool, verifying if the user explicitly provided or implicitly offered "
        "sufficient information for inference. If all required parameters can be directly or reasonably inferred, "
        "proceed to invoke the function. If a required parameter is missing, do not invoke the function and "
        "instead request the missing parameters from the user. Avoid requesting optional parameters if not "
        "explicitly provided."
    ),
    "simple": (
        "First, identify the appropriate tool(s) for answering the user's request. Then analyze the query to "
        "formulate the necessary function call parameters. If no suitable tools are available or insufficient "
        "information is provided, refrain from making a function call."
    ),
    "cot": "Think step-by-step.",
}

STAGE1_SYSTEM = (  # Table 8
    "You are an expert in composing functions. You are given a question, a set of possible functions and the ground "
    "truth function call(s). Based on the question and the ground truth function call(s), you will need to generate "
    "the analysis and thought following the given curriculum steps by steps, however, you must pretend that you do "
    "not know the ground truth information and assumptions. If none of the function can be used, point it out. If "
    "the given question lacks the parameters required by the function, also point it out.\n"
    "Here is a list of functions in JSON format that you can invoke.\n{FUNCTIONS}\n"
    "When composing your analysis, you SHOULD follow this curriculum to have a correct function calling and put "
    "your analysis followed this curriculum in <thinking></thinking> tags.\n{TEMPLATE}\n"
    "The output format of all user requests are: <thinking>[Put your thought based on the curriculum step by step "
    "here]</thinking>"
)
STAGE1_USER = "User request: {QUERY}\nGround truth function calling(s):{GOLD}"
STAGE2_SYSTEM = (  # Table 9
    "You are an expert in composing functions. You are given a question, a set of possible functions and an "
    "analysis to come up with correct function calling(s). Based on the question and provided thinking process, you "
    "will need to make one or more function/tool calls to achieve the purpose. You should only return the function "
    "call in tools call sections. If you decide to invoke any of the function(s), you MUST put it in the format of "
    "Put it in the format of [func1(params_name=params_value, params_name2=params_value2), func2(params)] in "
    "<function></function> tags\n"
    "Here is a list of functions in JSON format that you can invoke.\n{FUNCTIONS}\n"
    "The output format of all user requests are: <function>[Put function callings (if any) here]</function>"
)
STAGE2_USER = "User request: {QUERY}\nGiven Thinking Process or Analysis:{REASONING}"
JUDGE_SYSTEM = (  # Table 10
    "You are an expert in composing functions. You are given a question, a set of possible functions and the ground "
    "truth function call(s), and a candidate for the correct function call. Based on the question and the ground "
    "truth function call(s), you will need to identify if the provided candidate is also a correct alternative "
    "function calling to the ground truth function callings to the question and provided functions. You must pay "
    "attention to the functions and parameters were used, if the candidate provide different numbers of functions "
    "from the ground truth, it is totally incorrect\n"
    "Here is a list of functions in JSON format that you can invoke.\n{FUNCTIONS}\n"
    "You must only output one of the two label ['CAN REPLACE GROUND TRUTH', 'TOTALLY INCORRECT'].\n"
    "The output format of all user requests are: [PUT YOUR LABEL ONLY HERE]"
)
JUDGE_USER = "User request: {QUERY}\nGround Truth Function Calling:{GOLD}\nCandidate Function Calling: {CANDIDATE}"
CAN_REPLACE, TOTALLY_INCORRECT = "CAN REPLACE GROUND TRUTH", "TOTALLY INCORRECT"


# ---------------------------------------------------------------- Python-style call lists


def read_call_list(text: str) -> list[PyCall]:
    """A call list written as text (lenient: names with spaces, JSON literals); PySyntaxError when it is none."""
    return parse_call_list(text.strip(), lenient=True)


def functions_json(tools: list[Tool]) -> str:
    """The functions as BFCL lists them in its prompts: ``[{"name", "description", "parameters"}]``."""
    return json.dumps(
        [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools], ensure_ascii=False
    )


# ---------------------------------------------------------------- the three questions


def reasoning_prompts(query: str, tools: list[Tool], gold: list[ToolCall], template: str) -> tuple[str, str]:
    system = STAGE1_SYSTEM.replace("{FUNCTIONS}", functions_json(tools)).replace("{TEMPLATE}", TEMPLATES[template])
    return system, STAGE1_USER.replace("{GOLD}", call_list_text(gold)).replace("{QUERY}", query)


def call_prompts(query: str, tools: list[Tool], reasoning: str) -> tuple[str, str]:
    system = STAGE2_SYSTEM.replace("{FUNCTIONS}", functions_json(tools))
    return system, STAGE2_USER.replace("{REASONING}", reasoning).replace("{QUERY}", query)


def judge_prompts(query: str, tools: list[Tool], gold: list[ToolCall], candidate: str) -> tuple[str, str]:
    system = JUDGE_SYSTEM.replace("{FUNCTIONS}", functions_json(tools))
    user = JUDGE_USER.replace("{GOLD}", call_list_text(gold)).replace("{CANDIDATE}", candidate)
    return system, user.replace("{QUERY}", query)


def train_system_prompt(tools: list[Tool]) -> str:
    """Table 11's system prompt: the one ``answer_style=toolgt_text`` recognises and composes at eval time."""
    return toolgt_system_prompt(tools)


# ---------------------------------------------------------------- the offline writers


def _excerpt(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit].rsplit(" ", 1)[0] + " ..."


def _names(calls: list[ToolCall]) -> str:
    names = list(dict.fromkeys(f'"{c.name}"' for c in calls))
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _parameter_notes(call: ToolCall, tool: Tool | None) -> str:
    properties = (tool.parameters.get("properties") or {}) if tool else {}
    required = set((tool.parameters.get("required") or []) if tool else [])
    notes = []
    for name, spec in properties.items():
        spec = spec if isinstance(spec, dict) else {}
        kind = spec.get("type", "any")
        state = (
            "required"
            if name in required
            else "optional"
            + (f", default {python_value(spec['default'])}" if "default" in spec and _jsonable(spec["default"]) else "")
        )
        notes.append(f'"{name}" ({kind}, {state})')
    return f'"{call.name}" takes ' + ("; ".join(notes) if notes else "no parameters")


def _jsonable(value: Any) -> bool:
    try:
        python_value(value)
    except TypeError:
        return False
    return True


def _extractions(call: ToolCall) -> str:
    if not call.arguments:
        return f'"{call.name}" needs no values from the request'
    pairs = ", ".join(f"{k} = {python_value(v)}" for k, v in call.arguments.items())
    return f'for "{call.name}": {pairs}'


REVALIDATIONS = (
    (
        "Revalidating: every required parameter is set and every value matches its documented type, so the call(s) "
        "satisfy the documentation and the user's query."
    ),
    (
        "Revalidating the composed call(s) against the documentation and the query: the required parameters are "
        "present and the types match."
    ),
)


def _tool_notes(tool: Tool) -> str:
    required = [str(name) for name in (tool.parameters.get("required") or [])]
    return f'"{tool.name}" requires ' + (", ".join(f'"{name}"' for name in required) if required else "nothing")


def offline_abstention(query: str, tools: list[Tool], template: str, rng: random.Random) -> str:
    """Stage 1 for a relevance sample (no call is the gold): the template's steps, concluding with no call."""
    names = ", ".join(f'"{t.name}"' for t in tools)
    purpose = rng.choice(("The request is", "The user asks"))
    verdict = (
        f"none of the functions ({names}) can fulfill it as given: it asks for something they do not do, or it "
        "lacks the parameters they require"
    )
    if template == "detail":
        steps = [
            f'{purpose}: "{query}". Based on the function descriptions, {verdict}.',
            "So I pick no function; this is pointed out instead.",
            "Examining the documentation: "
            + " ".join(f'"{t.name}": {_excerpt(t.description, 100).rstrip(".") or "no description"}.' for t in tools),
            "Analyzing the parameters: " + "; ".join(_tool_notes(t) for t in tools) + ".",
            "Extracting the values from the request: it gives none that a function above needs for this request.",
            "Draft of the function call(s): no call, []",
            "Revalidating: no function call would fulfill the user's query, so none is made.",
        ]
        return "\n".join(f"{i}. {step}" for i, step in enumerate(steps, 1))
    if template == "simple":
        return (
            f'First, the appropriate tool(s) for "{query}": {verdict}.\n'
            "So I refrain from making a function call.\nFunction call(s): []"
        )
    if template == "claude":
        return (
            f'The most relevant tool(s) for "{query}": {verdict}.\n'
            "Reviewing the required parameters: " + "; ".join(_tool_notes(t) for t in tools) + ".\n"
            "So I do not invoke a function and point this out to the user: []"
        )
    return f'Let me think step by step. {purpose}: "{query}".\nHere {verdict}.\nSo no function is called: []'


def offline_reasoning(request: TeacherRequest) -> str:
    """Stage 1 without a model: the template's steps, written from the context (query, tools, gold, template)."""
    context = request.context
    query, template = _excerpt(str(context["query"])), str(context["template"])
    gold: list[ToolCall] = list(context["gold"])
    rng = random.Random(request.digest())
    if not gold:
        return f"<thinking>{offline_abstention(query, list(context['tools']), template, rng)}</thinking>"
    tools = {t.name: t for t in context["tools"]}
    names, draft = _names(gold), call_list_text(gold)
    purpose = rng.choice(("The request is", "The user asks"))
    if template == "detail":
        steps = [
            (
                f'{purpose}: "{query}". Based on the function descriptions, {names} best '
                f"{'fits' if len({c.name for c in gold}) == 1 else 'fit'} this request."
            ),
            f"I pick {names} to fulfill the user's request.",
            "Examining the documentation: "
            + " ".join(
                f'"{n}": {_excerpt(tools[n].description if n in tools else "", 100).rstrip(".") or "no description"}.'
                for n in dict.fromkeys(c.name for c in gold)
            ),
            "Analyzing the parameters: " + "; ".join(_parameter_notes(c, tools.get(c.name)) for c in gold) + ".",
            "Extracting the values from the request, converted to the documented types: "
            + "; ".join(_extractions(c) for c in gold)
            + ".",
            f"Draft of the function call(s): {draft}",
            rng.choice(REVALIDATIONS),
        ]
        body = "\n".join(f"{i}. {step}" for i, step in enumerate(steps, 1))
    elif template == "simple":
        body = (
            f'First, the appropriate tool(s) for "{query}": {names}.\n'
            "Then the parameters the query gives: " + "; ".join(_extractions(c) for c in gold) + ".\n"
            f"Function call(s): {draft}"
        )
    elif template == "claude":
        body = (
            f'The most relevant tool(s) for "{query}": {names}.\n'
            "Reviewing the parameters: " + "; ".join(_parameter_notes(c, tools.get(c.name)) for c in gold) + ".\n"
            "Each required parameter is given or can be inferred: "
            + "; ".join(_extractions(c) for c in gold)
            + ". Optional parameters the user did not give are left out.\n"
            f"So I invoke: {draft}"
        )
    else:  # cot: free-form
        body = (
            f'Let me think step by step. {purpose}: "{query}".\n'
            f"The functions that can do this are {names}, and the request gives "
            + "; ".join(_extractions(c) for c in gold)
            + ".\n"
            f"So the call(s) to make are: {draft}"
        )
    return f"<thinking>{body}</thinking>"


def draft_from_reasoning(reasoning: str, tool_names: set[str]) -> str | None:
    """The last call list written at the end of a reasoning line whose calls all name known tools, as written."""
    for line in reversed(reasoning.splitlines()):
        for start in [m.start() for m in re.finditer(r"\[", line)]:
            candidate = line[start:].strip()
            try:
                calls = read_call_list(candidate)
            except PySyntaxError:
                continue
            if calls and all(c.name in tool_names for c in calls):
                return candidate
    return None


def offline_call(request: TeacherRequest) -> str:
    """Stage 2 without a model: the draft read back out of the reasoning (no draft: no call)."""
    names = {t.name for t in request.context["tools"]}
    draft = draft_from_reasoning(str(request.context["reasoning"]), names)
    return f"<function>{draft or '[]'}</function>"


def offline_judge(request: TeacherRequest) -> str:
    """Stage 3 without a model: a rule cannot tell a valid alternative, so nothing replaces the gold."""
    return TOTALLY_INCORRECT


OFFLINE_WRITERS = {REASONING_STAGE: offline_reasoning, CALL_STAGE: offline_call, JUDGE_STAGE: offline_judge}

__all__ = [
    "CALL_STAGE",
    "CAN_REPLACE",
    "JUDGE_STAGE",
    "OFFLINE_VERSION",
    "OFFLINE_WRITERS",
    "REASONING_STAGE",
    "TEMPLATES",
    "TOTALLY_INCORRECT",
    "call_list_text",
    "call_prompts",
    "draft_from_reasoning",
    "functions_json",
    "judge_prompts",
    "python_value",
    "read_call_list",
    "reasoning_prompts",
    "train_system_prompt",
]
