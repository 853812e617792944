"""Where a meta_tool query comes from when there is no model to write one: hypotheses for evaluation.

Retrieval is evaluated on tool-query datasets (ToolLens, MetaTool), which hold a user request and
its gold tools but no meta_tool call. Three sources of the call's arguments:

* ``gold`` — the gold tool's own description and required-parameter texts (the texts the index
  compares, ``index.description_text`` / ``index.required_param_texts``): a model that guessed the
  tool perfectly. An upper bound; one hypothesis per gold tool, as a model calls meta_tool once per
  tool it misses (the paper's Figure 17).
* ``rewrite`` — the gold hypothesis rewritten by the data builder's teacher
  (``train.papers.metatool.teacher``; offline: its seeded rule-based paraphrase, the paper's Figure 7
  "noise"): what MT-LLaMA is trained to write.
* ``teacher`` — the configured teacher (``train.papers.metatool.teacher``: offline, http, hf) answers the
  *request text* with a meta_tool call (``teacher.hypothesis``; LLM teachers get
  ``HYPOTHESIS_PROMPT``). Its answer passes A.3's JSON-structure check (``verify_meta_call``; one
  Markdown fence tolerated) or the request retrieves nothing and the failure is counted. One
  hypothesis per request. The offline teacher's answer is the deterministic rule-based reading
  below (``RuleTeacher``):

  - description: the request with its opening courtesy and request phrases removed ("Can you
    please", "I'm looking for", "I would like to", "Hi,"...), first letter upper-cased, ending in
    one period;
  - parameters: up to three prepositional objects of the cleaned request — the words after
    for/of/in/on/about/from/with/using/by/near/at/between, up to the next preposition, "and" or
    punctuation, without a leading article or possessive — each written "The <phrase>";
  - ToolSearcher keywords (the keyword baseline): the content words of the cleaned request
    (bm25 stop words dropped, repeats dropped), at most ten, joined by spaces.
"""

from __future__ import annotations

import re

from train.papers.metatool.baselines import bm25_tokens
from train.papers.metatool.retrieve import ToolHypothesis
from train.papers.metatool.special import meta_tool_call, parse_rewrite, verify_meta_call
from train.retrieval.index import description_text, required_param_texts
from train.schema import Tool

MAX_PARAMS = 3
MAX_KEYWORDS = 10
_OPENERS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"^(hi|hello|hey|wow|oh|ok|okay|well|so|um|yes)\b[\s,!.]*",
        r"^(can|could|would|will)\s+you\s+(please\s+)?(help\s+me\s+)?(to\s+)?",
        r"^please\s+",
        r"^i\s*(?:'m|’m|am)\s+(looking|searching|trying|planning|hoping|interested|wondering)\s+(for|to|in|if|whether)?\s*",
        r"^i\s*(?:'d|’d|would)\s+(like|love)\s+(to\s+)?",
        r"^i\s+(want|need|wish|have)\s+(to\s+)?",
        r"^(is|are)\s+there\s+(a|an|any)\s+(way|tool|app|plugin)\s+(to|for|that)\s+",
        r"^(tell|show|give|get)\s+me\s+",
    )
]
_PREPOSITIONS = "for|of|in|on|about|from|with|using|by|near|at|between"
_OBJECT = re.compile(
    rf"\b(?:{_PREPOSITIONS})\s+(?:(?:the|a|an|my|our|your|their|some|any)\s+)?"
    rf"(.+?)(?=\s+(?:{_PREPOSITIONS}|and|to)\b|[,.;:!?]|$)",
    re.IGNORECASE,
)
_MAX_PHRASE_WORDS = 6


def gold_hypothesis(tool: Tool) -> ToolHypothesis:
    return ToolHypothesis(description_text(tool), tuple(required_param_texts(tool)))


def rewritten_hypothesis(tool: Tool, teacher, key: str) -> ToolHypothesis:
    """The builder's teacher rewrites the gold meta_tool call; ValueError when its answer is not a valid call."""
    return _checked_call(teacher.rewrite(meta_tool_call(gold_hypothesis(tool)), key=key, attempt=0), "rewrite")


def teacher_hypothesis(request: str, teacher, key: str) -> ToolHypothesis:
    """The teacher's meta_tool call for a request; ValueError (or TeacherError) says why there is none."""
    return _checked_call(teacher.hypothesis(request, key=key), "hypothesis")


def _checked_call(text: str, what: str) -> ToolHypothesis:
    try:
        call = parse_rewrite(text)
    except ValueError as err:  # json.JSONDecodeError
        raise ValueError(f"the teacher's {what} is not JSON: {err}") from None
    reason = verify_meta_call(call)
    if reason:
        raise ValueError(f"the teacher's {what} is not a meta_tool call: {reason}")
    return ToolHypothesis.from_arguments(call["parameters"])


def clean_request(text: str) -> str:
    """The request without its opening courtesy and request phrases, whitespace collapsed."""
    out = " ".join(text.split())
    changed = True
    while changed:
        changed = False
        for opener in _OPENERS:
            stripped = opener.sub("", out, count=1)
            if stripped != out and stripped.strip():
                out, changed = stripped.strip(), True
    return out


class RuleTeacher:
    """The deterministic request -> hypothesis rules of this module's docstring."""

    kind = "rules"

    def hypothesis(self, request: str) -> ToolHypothesis:
        cleaned = clean_request(request)
        description = cleaned.rstrip(" .!?") or cleaned
        description = (description[:1].upper() + description[1:] + ".") if description else request
        return ToolHypothesis(description, tuple(f"The {p}" for p in objects(cleaned)))

    def keywords(self, request: str) -> str:
        return " ".join(list(dict.fromkeys(bm25_tokens(clean_request(request))))[:MAX_KEYWORDS])


def objects(text: str) -> list[str]:
    """Up to three distinct prepositional objects of at most six words, each with a content word."""
    found: list[str] = []
    for match in _OBJECT.finditer(text):
        phrase = match.group(1).strip(" '\"")
        if (
            bm25_tokens(phrase)
            and len(phrase.split()) <= _MAX_PHRASE_WORDS
            and phrase.lower() not in (p.lower() for p in found)
        ):
            found.append(phrase)
        if len(found) == MAX_PARAMS:
            break
    return found
