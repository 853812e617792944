"""PTR stage 2, functional coverage mapping (seed 001, §2.2, Appendix D.1-D.2), over a bundle from stage 1.

1. Extraction of key requirements: one D.1 question (``train.papers.ptr.teacher``) on the query.
2. Matching tools to requirements: one D.2 question per requirement, listing the bundle's tools; a requirement is
   matched by the bundle tools its answer names (names outside the bundle are counted, never kept).
3. Assessment of completeness: ``exact`` (every requirement matched, every bundle tool used), ``over`` (every
   requirement matched, some bundle tool unused) or ``partial`` (some requirement unmatched); kept are the bundle
   tools matched by at least one requirement, in bundle order; the others are discarded.
4. Identification of unsolved problems: the unmatched requirements, as D.1 worded them (the paper asks for them
   "without further functional decomposition"; the released code, as here, passes the requirement on unchanged).

The released code reads D.2's answer keeping only lines that start with ``Tool`` and then drops every kept name
that starts with ``tool``: no tool survived stage 2 there, so its stage 2 only ever produced unsolved problems.
Here every matched bundle tool is kept.

Nothing here raises on a bad answer. A teacher failure or an unreadable D.1 answer makes the whole query the one
requirement (the unsolved problem then keeps the query's context); a failed or unreadable D.2 answer leaves its
requirement unmatched. Each case is counted in ``Coverage.issues`` (the trace's counts).
With an empty bundle (stage 1 switched off: Table 2's "w/o tool bundle acquisition", "queries being exclusively
mapped to unresolved problems") no D.2 question is asked and every requirement is an unsolved problem.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from train.papers.ptr.teacher import match_request, read_matches, read_requirements, requirements_request
from train.teacher.backends import StageParams, TeacherError, TeacherRequest

ISSUES = (
    "requirements_failed",  # the teacher gave no answer to D.1
    "requirements_unreadable",  # D.1's answer held no requirement
    "match_failed",  # the teacher gave no answer to a D.2 question
    "match_unreadable",  # a D.2 answer named no tool and did not say None
    "unknown_tools",  # tool names a D.2 answer gave that are not in the bundle
    "bundle_unknown",  # bundle tools the library does not describe (asked about with an empty description)
)


@dataclass
class Coverage:
    requirements: list[str]
    matches: list[dict[str, Any]]  # {"requirement", "tools", "unknown"} per requirement, in requirement order
    kept: list[str]
    unsolved: list[str]
    scenario: str  # exact | over | partial
    issues: Counter = field(default_factory=Counter)


def with_params(request: TeacherRequest, params: StageParams | None) -> TeacherRequest:
    """The request sampled with ``params`` (``--max-new-tokens``), or as ``train.papers.ptr.teacher`` wrote it
    (None)."""
    return request if params is None else replace(request, params=params)


def requirements_from_answer(query: str, answer: str | None, issues: Counter) -> list[str]:
    """D.1's answer (None: the teacher failed) -> the requirements; the query itself when there are none."""
    if answer is None:
        issues["requirements_failed"] += 1
        return [query]
    requirements = read_requirements(answer)
    if not requirements:
        issues["requirements_unreadable"] += 1
        return [query]
    return list(dict.fromkeys(requirements))  # a requirement asked twice is the same question


def bundle_tools(bundle: Sequence[str], library: Mapping[str, str]) -> dict[str, str]:
    """The bundle's tools as D.2 lists them: ``{name: description}`` in bundle order, each name once."""
    return {tool: library.get(tool, "") for tool in dict.fromkeys(bundle)}


def extract_requirements(query: str, teacher: Any, issues: Counter, params: StageParams | None = None) -> list[str]:
    """D.1 -> the requirements; the query itself when the teacher fails or its answer holds none."""
    try:
        answer = teacher.ask(with_params(requirements_request(query), params))
    except TeacherError:
        answer = None
    return requirements_from_answer(query, answer, issues)


def match_requirement(
    requirement: str, tools: Mapping[str, str], teacher: Any, issues: Counter, params: StageParams | None = None
) -> dict[str, Any]:
    """D.2 on one requirement -> {"requirement", "tools" (bundle order), "unknown"}."""
    try:
        answer = teacher.ask(with_params(match_request(requirement, tools), params))
    except TeacherError:
        issues["match_failed"] += 1
        return {"requirement": requirement, "tools": [], "unknown": []}
    names, unknown = read_matches(answer, list(tools))
    issues["unknown_tools"] += len(unknown)
    if not names and not unknown and not re.search(r"\bnone\b|\bn/a\b|\bno tools?\b", answer, re.IGNORECASE):
        issues["match_unreadable"] += 1
    return {"requirement": requirement, "tools": names, "unknown": unknown}


def assess(bundle: Sequence[str], matches: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[str], str]:
    """(kept tools in bundle order, unsolved requirements, scenario) from the per-requirement matches."""
    used = {tool for m in matches for tool in m["tools"]}
    kept = [tool for tool in bundle if tool in used]
    unsolved = [m["requirement"] for m in matches if not m["tools"]]
    scenario = "partial" if unsolved else ("exact" if len(kept) == len(bundle) else "over")
    return kept, unsolved, scenario


def map_coverage(
    query: str, bundle: Sequence[str], library: Mapping[str, str], teacher: Any, params: StageParams | None = None
) -> Coverage:
    """Stage 2 on one query and its bundle (tool names; descriptions from ``library``). ``params``: how both
    questions are sampled (None: ``train.papers.ptr.teacher.PARAMS``, the paper's)."""
    issues: Counter = Counter()
    bundle = list(dict.fromkeys(bundle))
    issues["bundle_unknown"] += sum(1 for tool in bundle if tool not in library)
    tools = bundle_tools(bundle, library)
    requirements = extract_requirements(query, teacher, issues, params)
    if tools:
        matches = [match_requirement(r, tools, teacher, issues, params) for r in requirements]
    else:
        matches = [{"requirement": r, "tools": [], "unknown": []} for r in requirements]
    kept, unsolved, scenario = assess(bundle, matches)
    return Coverage(requirements, matches, kept, unsolved, scenario, +issues)


__all__ = [
    "ISSUES",
    "Coverage",
    "assess",
    "bundle_tools",
    "extract_requirements",
    "map_coverage",
    "match_requirement",
    "requirements_from_answer",
    "with_params",
]
