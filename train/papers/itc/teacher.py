"""ITC's prompts and answer text (seed 002, Figs 4, 14 and 17-20) and the offline teacher's Thought writer.

* ``SYSTEM_PROMPT``: the system prompt of every ITC task (Fig. 17; Figs 18-20 repeat it). The PDF's extraction
  kept its line breaks; two spellings differ between the figures and we follow Figs 18-20 in both: "API(s)"
  (Fig. 17 prints "API (s)") and the answer envelope ``json{...}`` (Fig. 17 prints ``json({...})``; the ITC reader
  accepts both). ``{api_list}`` is replaced by the Fig. 4 records of the offered APIs as one JSON line.
* ``api_record``: one canonical tool as a Fig. 4 record ``{tool_name, tool_description, country, api_list: [{name,
  url, description, method, required_parameters, optional_parameters}]}``; parameters are ``{name, type,
  description}`` plus ``default`` when the schema has one (Fig. 16, the paper's real record, leaves it out when
  there is none). A canonical tool carries no URL nor HTTP method: both are "".
* ``answer_text``: ``json{"Thought": "...", "Action": "[api(p='v'), api(q=1)]"}`` as Figs 18-20 write it: the
  Action is a Python-style call list with single-quoted strings (``repr``), ``[]`` when nothing is called.
* The teacher writes the Thought only (the Action is always the gold): ``thought_prompts`` is Fig. 14's QA
  generation prompt, given the gold Action and asked for the Thought in the query's language; its answer is read
  with the ITC reader's ``parse_answer``. ``OFFLINE_WRITERS`` answer without a model in English and Chinese
  (``OFFLINE_LANGUAGES``), from the structured context: the query, the called API and parameter names, the task
  type. A query in another language has no offline Thought: the builder rejects it, counted, with that reason
  (an English Thought would fail LM by construction).
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

from train.schema import Tool, ToolCall
from train.teacher.backends import TeacherError, TeacherRequest

THOUGHT_STAGE = "itc.thought"
OFFLINE_VERSION = "itc-1"  # bump when an offline writer's text changes (it is the cache's model name)
OFFLINE_LANGUAGES = ("en", "zh")
# Table 10's 29 task languages (what the builder's langid may answer; the ITC scorer keeps the same list)
TABLE10_LANGUAGES = (
    "en", "zh", "hi", "fr", "vi", "pt", "de", "ja", "es", "ar", "id", "th", "ko", "nl", "sw",
    "sl", "xh", "ur", "cs", "la", "tl", "ms", "it", "rw", "fi", "hr", "gl", "kn", "zu",
)  # fmt: skip

SYSTEM_PROMPT = (  # Fig. 17 (Figs 18-20's "API(s)" and json{ spellings)
    "You are an advanced AI assistant with expertise in:\n"
    "1. Intelligent tool and API selection\n"
    "2. Multilingual problem-solving\n"
    "3. Systematic analytical thinking\n"
    "Task Guidelines:\n"
    "- Carefully analyze the problem presented\n"
    "- Select the most appropriate tool(s) or API(s) to solve the task\n"
    "- Provide clear, structured reasoning for your tool selection\n"
    "- Ensure precise and efficient problem resolution\n"
    "\n"
    "Important Principles:\n"
    "- If no suitable tool exists, clearly explain the limitations\n"
    "- Prioritize accuracy and relevance in tool selection\n"
    "- Consider potential alternative approaches\n"
    "- Maintain a logical and methodical approach\n"
    "\n"
    "When tools are insufficient or parameters are incomplete:\n"
    "- Explicitly state the gaps in available tools or information\n"
    "- Provide constructive suggestions for obtaining resources\n"
    '- Return an empty list in the "Action" section\n'
    "\n"
    "Note: Please respond in the same national language as the problem while maintaining clarity, logic, and "
    "structure in your answers.\n"
    "Below is the list of functions you can invoke (in JSON format):\n"
    "{api_list}\n"
    "\n"
    "Please strictly follow the format below, without additional text:\n"
    "\n"
    'json{"Thought": "Respond in same language as problem. Provide analysis, reasoning for tool selection, and '
    'challenges.",\n'
    "\"Action\": \"[function_name1(param_1='val1', param_2='val2'), function_name2(param_1='val1', "
    "param_2='val2')]\"}"
)

QA_GENERATION_SYSTEM = (  # Fig. 14, asked for the Thought of a known Action
    "You are an expert in using APIs as tools and are highly knowledgeable in multilingual environments. For each "
    "task I provide, along with the corresponding API information, you will use the API to complete it. Your "
    "response should follow this format:\n"
    '```json\n{\n "Thought": "Your thought process when facing a problem.",\n "Action": "The API you chose and its '
    'parameter information. For example [api_name(parameter_1=\\"\\", parameter_2=\\"\\") , '
    'api_name(parameter_1=\\"\\", parameter_2=\\"\\")]"\n}\n```\n'
    "Please strictly respond in the language of the task ({language})."
)
QA_GENERATION_USER = (
    "The API information is as follows:\n{api_info}\n\n"
    "The task is as follows:\n{query}\n\n"
    "The correct Action is: {action}\n"
    "Write the Thought that leads to exactly this Action (an empty list: explain what is missing), then repeat the "
    "Action unchanged.\n\n"
    "Your response:"
)
LANGUAGE_NAMES = {"en": "English", "zh": "Chinese"}


# ---------------------------------------------------------------- records, prompt and answer text


def _parameter(name: str, spec: Any) -> dict[str, Any]:
    spec = spec if isinstance(spec, dict) else {}
    kind = spec.get("type", "")
    out: dict[str, Any] = {
        "name": name,
        "type": kind if isinstance(kind, str) else "/".join(map(str, kind)),
        "description": str(spec.get("description", "")),
    }
    if "default" in spec:
        out["default"] = spec["default"]
    return out


def api_record(tool: Tool, country: str) -> dict[str, Any]:
    """One canonical tool as a Fig. 4 API record with one API."""
    properties = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    return {
        "tool_name": tool.name,
        "tool_description": tool.description,
        "country": country,
        "api_list": [
            {
                "name": tool.name,
                "url": "",
                "description": tool.description,
                "method": "",
                "required_parameters": [_parameter(n, s) for n, s in properties.items() if n in required],
                "optional_parameters": [_parameter(n, s) for n, s in properties.items() if n not in required],
            }
        ],
    }


def api_list_json(tools: list[Tool], country: str) -> str:
    return json.dumps([api_record(tool, country) for tool in tools], ensure_ascii=False)


def system_prompt(tools: list[Tool], country: str) -> str:
    """Fig. 17's system prompt with the offered APIs in it."""
    return SYSTEM_PROMPT.replace("{api_list}", api_list_json(tools, country))


def action_value(value: Any) -> str:
    """A JSON value as the Python literal an Action writes (strings single-quoted by ``repr``)."""
    if value is None or isinstance(value, (bool, str)):
        return repr(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"non-finite number {value!r} has no literal")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(action_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{str(k)!r}: {action_value(v)}" for k, v in value.items()) + "}"
    raise ValueError(f"{type(value).__name__} value has no literal")


def action_text(calls: list[ToolCall]) -> str:
    """``[api(p='v'), api2(q=1)]``; ``[]`` for no call. A key that is no identifier is quoted (Fig. 17's
    ``'target_lang'='fr'``; the reader's lenient mode unquotes it)."""
    written = []
    for call in calls:
        arguments = ", ".join(
            f"{key if key.isidentifier() else repr(key)}={action_value(value)}" for key, value in call.arguments.items()
        )
        written.append(f"{call.name}({arguments})")
    return "[" + ", ".join(written) + "]"


def answer_text(thought: str, calls: list[ToolCall]) -> str:
    """The assistant's answer as Figs 18-20 write it: ``json{"Thought": ..., "Action": "[...]"}``."""
    return "json" + json.dumps({"Thought": thought, "Action": action_text(calls)}, ensure_ascii=False)


# ---------------------------------------------------------------- the teacher's question


def thought_prompts(query: str, tools: list[Tool], calls: list[ToolCall], language: str, country: str) -> tuple:
    """(system, user) of Fig. 14's QA generation prompt, given the gold Action."""
    system = QA_GENERATION_SYSTEM.replace("{language}", LANGUAGE_NAMES.get(language, language))
    user = (
        QA_GENERATION_USER.replace("{api_info}", api_list_json(tools, country))
        .replace("{action}", action_text(calls))
        .replace("{query}", query)
    )
    return system, user


# ---------------------------------------------------------------- the offline writer


def _join(items: list[str], language: str) -> str:
    if language == "zh":
        return "、".join(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _plan(calls: list[ToolCall], language: str) -> str:
    """What the Action does, by API and parameter names (values stay in the Action: they may be in any language)."""
    parts = []
    for name in dict.fromkeys(c.name for c in calls):
        mine = [c for c in calls if c.name == name]
        keys = list(dict.fromkeys(k for c in mine for k in c.arguments))
        times = len(mine)
        if language == "zh":
            count = f"（共{times}次）" if times > 1 else ""
            given = f"，填写参数{_join(keys, language)}" if keys else "，不需要参数"
            parts.append(f"{name} 接口可以完成这个请求，调用它{count}{given}")
        else:
            count = f" {times} times" if times > 1 else ""
            given = f" with {_join(keys, language)}" if keys else " without parameters"
            parts.append(f'the "{name}" API fits this request, so I call it{count}{given}')
    return ("；" if language == "zh" else "; ").join(parts)


NO_CALL = {
    "en": (
        (
            "None of the available APIs ({names}) can fulfil this request with the information given, so I call no "
            "API and explain what is missing."
        ),
        "The available APIs ({names}) cannot do what the user asks with the information given: no API is called.",
    ),
    "zh": (
        "现有的接口（{names}）在当前信息下都无法完成这个请求，因此不调用任何接口，并说明缺少的工具或信息。",
        "用户的请求无法用现有的接口（{names}）和已知信息完成，所以不调用接口。",
    ),
}
AFTER_RESULT = {"en": "the previous call returned its result; with it, ", "zh": "上一步调用已经返回结果，据此"}
CLOSING = {
    "en": ("This answers the request.", "The call covers what the user asked for."),
    "zh": ("这样即可完成用户的请求。", "这些调用涵盖了用户的需求。"),
}


def offline_thought(request: TeacherRequest) -> str:
    """The Thought without a model, in the query's language (``OFFLINE_LANGUAGES``), as a full ITC answer: which
    API and parameters answer the request (the query itself is not repeated: short answers decode fast)."""
    context = request.context
    language = str(context["language"])
    if language not in OFFLINE_LANGUAGES:
        raise TeacherError(f"the offline teacher writes no Thought in {language!r} (it writes {OFFLINE_LANGUAGES})")
    calls: list[ToolCall] = list(context["calls"])
    tools: list[Tool] = list(context["tools"])
    rng = random.Random(request.digest())
    if not calls:
        thought = rng.choice(NO_CALL[language]).replace("{names}", _join([t.name for t in tools], language))
    else:
        plan = (AFTER_RESULT[language] if context.get("after_result") else "") + _plan(calls, language)
        if language == "en":
            thought = plan[:1].upper() + plan[1:] + ". " + rng.choice(CLOSING["en"])
        else:
            thought = plan + "。" + rng.choice(CLOSING["zh"])
    return answer_text(thought, calls)


OFFLINE_WRITERS = {THOUGHT_STAGE: offline_thought}

__all__ = [
    "OFFLINE_LANGUAGES",
    "OFFLINE_VERSION",
    "OFFLINE_WRITERS",
    "SYSTEM_PROMPT",
    "TABLE10_LANGUAGES",
    "THOUGHT_STAGE",
    "action_text",
    "action_value",
    "answer_text",
    "api_list_json",
    "api_record",
    "offline_thought",
    "system_prompt",
    "thought_prompts",
]
