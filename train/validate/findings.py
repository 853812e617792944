"""What a check finds and how severe it is: ``(code, where, reason)`` findings, their ``Problem`` with a severity
(defaults in ``DEFAULT_SEVERITIES``, overridable per code, ``"ignore"`` drops a code), and ``json_path``, the
path inside a record each finding names. The rule families (``text``, ``tools``, ``open_world``, ``calls``,
``turns``) yield findings; ``train.validate`` turns them into problems here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]
Setting = Literal["error", "warning", "ignore"]
SETTINGS: tuple[str, ...] = ("error", "warning", "ignore")

DEFAULT_SEVERITIES: dict[str, Severity] = {
    # conversations
    "undefined-tool": "error",
    "arguments-schema": "error",
    "pattern-timeout": "error",
    "invalid-tool-schema": "error",
    "duplicate-tool": "error",
    "orphan-tool-result": "error",
    "unanswered-call": "warning",
    "result-name-mismatch": "warning",
    "role-order": "error",
    "assistant-first": "warning",
    "consecutive-user": "warning",
    "empty-assistant": "error",
    "duplicate-call-id": "error",
    "text-encoding": "error",
    "replacement-char": "warning",
    "call-markup-in-text": "warning",  # tool-call markup kept as text (train.base.call_markers)
    # across records of one file (``data validate``): the eval split and held-out set go by id
    "duplicate-id": "error",
    # tool queries (retrieval datasets); "no tool needed" queries have empty gold sets
    "empty-query": "error",
    "empty-gold": "warning",
    "duplicate-gold-tool": "warning",
    "unknown-gold-tool": "error",
}

MAX_REASON = 200  # a reason quotes values; a 5 MB argument must not become a 5 MB report line

Finding = tuple[str, str, str]  # (code, where, reason)


@dataclass(frozen=True)
class Problem:
    severity: Severity
    code: str  # stable rule name, e.g. "undefined-tool"
    where: str  # path inside the record, e.g. "messages[3].tool_calls[0]"
    message: str

    def __str__(self) -> str:
        return f"{self.code} at {self.where}: {self.message}"


def resolve_severities(overrides: Mapping[str, str] | None = None, strict: bool = False) -> dict[str, Setting]:
    """Defaults, then every warning raised to an error when ``strict``, then explicit overrides
    (an explicit ``CODE=warning`` wins over ``strict``). Unknown codes and levels raise ValueError."""
    settings: dict[str, Setting] = dict(DEFAULT_SEVERITIES)
    if strict:
        settings = {code: "error" if level == "warning" else level for code, level in settings.items()}
    for code, level in (overrides or {}).items():
        if code not in DEFAULT_SEVERITIES:
            raise ValueError(f"unknown check {code!r}; valid checks: {', '.join(DEFAULT_SEVERITIES)}")
        if level not in SETTINGS:
            raise ValueError(f"unknown severity {level!r} for {code}; valid: {', '.join(SETTINGS)}")
        settings[code] = level  # type: ignore[assignment]
    return settings


def apply_severities(findings: Iterable[Finding], severities: Mapping[str, str] | None) -> list[Problem]:
    settings = resolve_severities(severities)
    problems = []
    for code, where, reason in findings:
        level = settings[code]
        if level != "ignore":
            problems.append(Problem(level, code, where, _clip(reason)))  # type: ignore[arg-type]
    return problems


def _clip(text: str, limit: int = MAX_REASON) -> str:
    if len(text) <= limit:
        return text
    suffix = f"... ({len(text)} chars)"
    return text[: limit - len(suffix)] + suffix


def json_path(base: str, segments: Iterable[str | int]) -> str:
    """``base`` extended by keys (``.city`` or ``["two words"]``) and indexes (``[0]``)."""
    out = base
    for seg in segments:
        if isinstance(seg, int):
            out += f"[{seg}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", seg):
            out += f".{seg}" if out else seg
        else:
            out += "[" + json.dumps(seg, ensure_ascii=False) + "]"
    return out
