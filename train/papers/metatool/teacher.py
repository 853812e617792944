"""The teacher behind the Meta-Tool data builder: reasoning before calls, and rewrites of meta_tool calls.

The seed paper (Meta-Tool, §3.2, A.2) asks a stronger LLM for two things, with the prompts of its
Figures 7 and 8 (``REWRITE_PROMPT``, ``REASONING_PROMPT``, verbatim):

* a three-sentence reasoning before each call turn ("Briefly analyze the current state, select
  suitable tools and specifies parameters of tools"), joined to the calls by ``<|python_tag|>``;
* a rewrite of each inserted meta_tool call's JSON, so the hypothesised tool does not mirror the
  retrieved one word for word ("noise" for robustness).

Three interchangeable teachers, chosen by ``make_teacher(config)``, whose settings are those of every teacher
(``train.teacher.make_backend``, the one factory, and ``BACKEND_SETTINGS``, the one table; ``--teacher-*`` options
from ``train.teacher.add_teacher_arguments``):

* ``offline`` (default): deterministic templates for the reasoning and a rule-based paraphrase of
  the descriptions (a seeded choice of synonym and phrase substitutions). No model, no network: the
  tests and the tiny recipe use it, and a rebuild with the same seed is byte-identical.
* ``http``: an OpenAI-compatible ``/chat/completions`` endpoint (``base_url``, ``model``; the key
  is read from the environment variable named by ``api_key_env``, never from the config), asked through the
  ``openai`` client: each read within ``timeout``, the client's retries (``retries``; Retry-After honoured) and the
  whole question within a wall-clock deadline (``max_time``), an endpoint that keeps failing given up on with one
  error (``train.teacher.HttpBackend``, which ToolGT shares).
* ``hf``: a local Hugging Face causal LM (``path``, ``chat_format``, ``tokenizer``), prompted through a tooltrain
  chat format and decoded greedily.

A third request, not in the paper, serves retrieval evaluation (``tooltrain eval retrieval --hypothesis
teacher``): ``hypothesis(request)`` answers a user request with the meta_tool call that would find a tool
for it (``HYPOTHESIS_PROMPT``; the offline teacher reads the request with the rules of
``train.papers.metatool.hypothesis.RuleTeacher``).

A teacher returns text; it never decides what is kept. The builder verifies every rewrite (JSON
structure, A.3; similarity to the original) and counts every failure. A teacher that cannot answer
raises ``TeacherError`` with the reason.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from train.schema import Message, Tool, ToolCall
from train.teacher.backends import HFBackend, HttpBackend, StageParams, TeacherError, TeacherRequest
from train.teacher.factory import make_backend

REWRITE_PROMPT = (
    "Could you please help me rewrite the following json of func? Some modifications can be made to the tool name, "
    "parameter name and their description, but make sure not to deviate from the original meaning.\n"
    "{ORIGINAL_FUNCTION}\n"
    "Your output should have only the json of this func and nothing else."
)
REASONING_PROMPT = (
    "I need you to add an reasoning section to the dataset about function calls. Here is one of my pieces of data, "
    "please add an reasoning section to the last one turn.\n"
    "{INPUT_CONVS}\n"
    "Note that:\n"
    "1. Your output should have only the content of reasoning.\n"
    '2. Please assume that you are the assistant, replace "the user" with "you", replace "to achieve this" with '
    '"to help you".\n'
    "3. The reasoning should in three sentences: Briefly analyze the current state, select suitable tools and "
    "specifies parameters of tools."
)
HYPOTHESIS_PROMPT = (
    "A user asks: {REQUEST}\n"
    "None of your functions can help, but you can call meta_tool, which searches an external tool library "
    "for the tool you describe:\n"
    "{META_TOOL}\n"
    "Hypothesize the tool that would answer the request: describe what it does and the parameters it needs.\n"
    'Your output should have only the json of the meta_tool call, {"name": "meta_tool", "parameters": '
    '{"tool_description": ..., "param_description": [...]}}, and nothing else.'
)
META_TOOL = "meta_tool"


@dataclass
class CallTurn:
    """One assistant call turn and what came before it: what a reasoning is written for."""

    conv_id: str
    index: int  # the turn's position in the conversation
    history: list[Message]  # messages before the turn
    calls: list[ToolCall]
    tools: dict[str, Tool]  # the definitions the calls refer to (retrieved ones included)


# ---------------------------------------------------------------- the paper's transcript layout


def call_list_json(calls: list[ToolCall]) -> str:
    """Calls as the paper writes them: ``[{"name": ..., "parameters": {...}}]``."""
    return json.dumps([{"name": c.name, "parameters": c.arguments} for c in calls], ensure_ascii=False)


def transcript(turn: CallTurn) -> str:
    """The dialogue up to and including the call turn, in the layout of the paper's Figures 11-13."""
    lines = []
    for message in [*turn.history, Message(role="assistant", tool_calls=turn.calls)]:
        if message.role == "tool":
            lines.append(f"Tool: {message.content or ''}")
        elif message.role == "assistant":
            text = (message.content or "").strip()
            if message.tool_calls:
                text = (text + " " if text else "") + call_list_json(message.tool_calls)
            lines.append(f"Assistant: {text}")
        else:
            lines.append(f"{message.role.capitalize()}: {message.content or ''}")
    return "\n\n".join(lines)


# ---------------------------------------------------------------- the offline teacher

# Seeded substitutions for the rule-based paraphrase: (pattern, replacements). Word-bounded and
# case-aware at the start of a description; every replacement keeps the meaning.
_LEADING_VERBS: dict[str, tuple[str, ...]] = {
    "search for": ("look for", "find"),
    "look up": ("find", "search for"),
    "look for": ("search for", "find"),
    "get": ("retrieve", "fetch", "obtain"),
    "fetch": ("retrieve", "get", "obtain"),
    "retrieve": ("get", "fetch"),
    "calculate": ("compute", "work out"),
    "compute": ("calculate", "work out"),
    "search": ("look up", "find"),
    "find": ("look up", "search for", "locate"),
    "check": ("verify", "look up"),
    "convert": ("transform", "change"),
    "create": ("make", "generate"),
    "generate": ("create", "produce"),
    "send": ("deliver", "transmit"),
    "book": ("reserve",),
    "translate": ("render",),
    "analyze": ("examine", "assess"),
    "list": ("show", "enumerate"),
    "update": ("modify", "change"),
    "delete": ("remove",),
    "schedule": ("plan", "arrange"),
    "play": ("start",),
    "provide": ("give", "supply"),
    "return": ("give back", "provide"),
    "track": ("follow", "monitor"),
    "add": ("append", "insert"),
    "set": ("configure",),
    "recommend": ("suggest",),
    "show": ("display",),
}
_PHRASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"\bbased on\b", ("according to", "using")),
    (r"\bspecified\b", ("given", "requested")),
    (r"\bspecific\b", ("particular", "given")),
    (r"\binformation\b", ("details", "info")),
    (r"\bdetails\b", ("information",)),
    (r"\bthe user\b", ("the person", "the requester")),
    (r"\bcurrent\b", ("latest", "present")),
    (r"\blatest\b", ("most recent", "current")),
    (r"\bnumber of\b", ("count of", "amount of")),
    (r"\bin order to\b", ("to",)),
    (r"\bmovie\b", ("film",)),
    (r"\bcity\b", ("town or city",)),
    (r"\bidentifier\b", ("ID",)),
    (r"\bID\b", ("identifier",)),
    (r"\be\.g\.", ("for example", "such as")),
)


def _match_case(word: str, like: str) -> str:
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def paraphrase(text: str, rng: random.Random) -> str:
    """A rule-based paraphrase: a synonym for the leading verb, some phrase swaps, the final period toggled."""
    out = text.strip()
    head = re.match(r"[A-Za-z]+(?: (?:for|up))?", out)
    if head and head.group(0).lower() not in _LEADING_VERBS:
        head = re.match(r"[A-Za-z]+", out)
    if head and head.group(0).lower() in _LEADING_VERBS and rng.random() < 0.8:
        choice = rng.choice(_LEADING_VERBS[head.group(0).lower()])
        out = _match_case(choice, head.group(0)) + out[head.end() :]
    for pattern, replacements in _PHRASES:
        if rng.random() < 0.6:
            found = re.search(pattern, out, flags=re.IGNORECASE)
            if found:
                swap = _match_case(rng.choice(replacements), found.group(0))
                out = out[: found.start()] + swap + out[found.end() :]
    if rng.random() < 0.5:
        out = out[:-1] if out.endswith(".") else (out + "." if out and out[-1].isalnum() else out)
    return out


def _excerpt(text: str | None, limit: int = 120) -> str:
    flat = " ".join((text or "").split())
    if len(flat) <= limit:
        return flat
    return flat[:limit].rsplit(" ", 1)[0] + " ..."


def _value(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 4] + " ..."


def _settings(arguments: dict[str, Any]) -> str:
    items = [f'"{key}" set to {_value(value)}' for key, value in arguments.items()]
    if not items:
        return "no parameters"
    if len(items) == 1:
        return f"the parameter {items[0]}"
    return "the parameters " + ", ".join(items[:-1]) + " and " + items[-1]


def _last_user(history: list[Message]) -> str | None:
    return next((m.content for m in reversed(history) if m.role == "user"), None)


class OfflineTeacher:
    """Template reasoning and rule-based rewrites: deterministic given the seed, the turn and the attempt."""

    kind = "offline"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def _rng(self, *key: Any) -> random.Random:
        return random.Random(json.dumps([self.seed, *key], ensure_ascii=False))

    def reasoning(self, turn: CallTurn) -> str:
        rng = self._rng("reasoning", turn.conv_id, turn.index)
        request = _excerpt(_last_user(turn.history))
        after_results = bool(turn.history) and turn.history[-1].role == "tool"
        if after_results:
            state = rng.choice(
                (
                    "The results so far give me what I need for the next step of your request.",
                    "With the results I have now, I can continue with your request.",
                )
            )
        else:
            state = rng.choice(
                (
                    f'You are asking me to help with this request: "{request}"',
                    f'I understand that you need help with the following: "{request}"',
                )
            )
            state += "" if request[-1:] in ".?!" else "."
        if all(call.name == META_TOOL for call in turn.calls):
            return " ".join([state, *self._meta_sentences(turn.calls, rng)])
        names = list(dict.fromkeys(call.name for call in turn.calls))
        if len(names) == 1:
            select = rng.choice(
                (
                    f'To help you, I will invoke the "{names[0]}" function.',
                    f'The "{names[0]}" function can help you, so I will invoke it.',
                )
            )
        else:
            select = "To help you, I will invoke " + " and ".join(f'the "{name}" function' for name in names) + "."
        if len(turn.calls) == 1:
            params = f"I will call it with {_settings(turn.calls[0].arguments)}"
        else:
            params = "; ".join(
                f'for call {i + 1} ("{c.name}") I will use {_settings(c.arguments)}' for i, c in enumerate(turn.calls)
            )
            params = params[:1].upper() + params[1:]
        return f"{state} {select} {params}."

    @staticmethod
    def _meta_sentences(calls: list[ToolCall], rng: random.Random) -> list[str]:
        described = [str(call.arguments.get("tool_description", "")).strip().rstrip(".") for call in calls]
        wanted = "; ".join(f'"{d}"' for d in described)
        missing = rng.choice(
            (
                "There is not a suitable function in the current list",
                "None of the functions in the current list can do this",
            )
        )
        params = [json.dumps(call.arguments.get("param_description", []), ensure_ascii=False) for call in calls]
        search = (
            f"{missing}, so I will use the meta_tool function to search for an external function that can help you."
        )
        settings = (
            f"I will set the parameters of the meta_tool function with the tool_description {wanted} "
            f"and the param_description {' and '.join(params)}."
        )
        return [search, settings]

    def hypothesis(self, request: str, *, key: str) -> str:
        """The meta_tool call JSON the rule-based reading of ``request`` gives (``RuleTeacher``)."""
        from train.papers.metatool.hypothesis import RuleTeacher
        from train.papers.metatool.special import meta_tool_call

        return json.dumps(meta_tool_call(RuleTeacher().hypothesis(request)), ensure_ascii=False)

    def rewrite(self, original: dict[str, Any], *, key: str, attempt: int) -> str:
        """The meta_tool call JSON with paraphrased tool and parameter descriptions."""
        rng = self._rng("rewrite", key, attempt)
        params = original.get("parameters", {})
        rewritten = {
            "name": original.get("name"),
            "parameters": {
                "tool_description": paraphrase(str(params.get("tool_description", "")), rng),
                "param_description": [paraphrase(str(p), rng) for p in params.get("param_description", [])],
            },
        }
        return json.dumps(rewritten, ensure_ascii=False)


# ---------------------------------------------------------------- LLM teachers


def rewrite_prompt(original: dict[str, Any]) -> str:
    return REWRITE_PROMPT.replace("{ORIGINAL_FUNCTION}", json.dumps(original, ensure_ascii=False))


def reasoning_prompt(turn: CallTurn) -> str:
    return REASONING_PROMPT.replace("{INPUT_CONVS}", transcript(turn))


def hypothesis_prompt(request: str) -> str:
    from train.papers.metatool.special import META_TOOL as META_TOOL_DEFINITION
    from train.retrieval.index import tool_json

    definition = json.dumps(tool_json(META_TOOL_DEFINITION), ensure_ascii=False)
    return HYPOTHESIS_PROMPT.replace("{META_TOOL}", definition).replace("{REQUEST}", " ".join(request.split()))


class _PromptedTeacher:
    """A teacher that answers the paper's prompts with a language model: a backend from ``train.teacher.make_backend``
    (the one factory and settings table every teacher shares) and the sampling of these prompts (``params``)."""

    kind = "prompted"

    def __init__(self, backend: Any, params: StageParams):
        self.backend, self.params = backend, params

    def complete(self, prompt: str) -> str:
        raise NotImplementedError

    def reasoning(self, turn: CallTurn) -> str:
        text = self.complete(reasoning_prompt(turn)).strip()
        if not text:
            raise TeacherError("empty reasoning")
        return text

    def rewrite(self, original: dict[str, Any], *, key: str, attempt: int) -> str:
        return self.complete(rewrite_prompt(original))

    def hypothesis(self, request: str, *, key: str) -> str:
        return self.complete(hypothesis_prompt(request))


class HttpTeacher(_PromptedTeacher):
    """An OpenAI-compatible chat-completions endpoint (``train.teacher.HttpBackend``: the openai client's retries,
    a wall-clock deadline per question; ``TeacherUnavailable``, a ValueError, once it fails question after question),
    sampled at ``temperature`` up to ``max_tokens``."""

    kind = "http"

    def __init__(self, backend: HttpBackend, temperature: float = 0.7, max_tokens: int = 512):
        super().__init__(backend, StageParams(temperature=float(temperature), max_tokens=int(max_tokens)))
        self.url, self.model = backend.url, backend.model

    def complete(self, prompt: str) -> str:
        # the Meta-Tool prompts are one user message, sent without a seed as they always were
        body = self.backend.body(TeacherRequest("metatool", None, prompt, self.params))
        body.pop("seed")
        return self.backend.post(json.dumps(body).encode("utf-8"))


class HFTeacher(_PromptedTeacher):
    """A local causal LM, prompted through a tooltrain chat format, greedy decoding (``train.teacher.HFBackend``) up to
    ``max_new_tokens``."""

    kind = "hf"

    def __init__(self, backend: HFBackend, max_new_tokens: int = 256):
        super().__init__(backend, StageParams(temperature=0.0, max_tokens=int(max_new_tokens)))
        self.format, self.tokenizer, self.model = backend.format, backend.tokenizer, backend.lm

    def complete(self, prompt: str) -> str:
        return self.backend.complete(TeacherRequest("metatool", None, prompt, self.params))


def make_teacher(config: dict[str, Any] | None, seed: int) -> OfflineTeacher | HttpTeacher | HFTeacher:
    """``{"kind": "offline"|"http"|"hf", ...settings}`` -> a teacher, through ``train.teacher.make_backend``: the
    settings every teacher takes (``train.teacher.BACKEND_SETTINGS``); unknown kinds and keys are errors."""
    backend = make_backend(config)
    if isinstance(backend, HttpBackend):
        return HttpTeacher(backend)
    if isinstance(backend, HFBackend):
        return HFTeacher(backend)
    return OfflineTeacher(seed)  # the paper's offline teacher writes from the seed, not from stage writers


__all__ = [
    "CallTurn",
    "HFTeacher",
    "HttpTeacher",
    "OfflineTeacher",
    "TeacherError",
    "hypothesis_prompt",
    "make_teacher",
    "paraphrase",
    "reasoning_prompt",
    "rewrite_prompt",
    "transcript",
]
