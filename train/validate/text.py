"""Text rules: characters no UTF-8 file or tokenizer should carry (``text-encoding``: lone surrogates, NUL) and text
decoded lossily upstream (``replacement-char``: U+FFFD), found anywhere in a record, keys included."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from train.validate.findings import Finding, json_path

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_TEXT_FAULTS = (
    ("text-encoding", _LONE_SURROGATE, "lone surrogate {code_point}"),
    ("text-encoding", re.compile("\x00"), "NUL character"),
    ("replacement-char", re.compile("\ufffd"), "replacement character U+FFFD (text decoded lossily upstream)"),
)


def iter_strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string in a JSON value, keys included, with its path. Iterative: arguments can be
    nested as deeply as the JSON parser allows, deeper than a recursive walk may go."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            yield where, item
        elif isinstance(item, dict):
            for key, sub in reversed(list(item.items())):
                sub_path = json_path(where, [key])
                yield sub_path, key
                stack.append((sub, sub_path))
        elif isinstance(item, list):
            stack.extend((sub, f"{where}[{i}]") for i, sub in reversed(list(enumerate(item))))


def _may_have_faults(record: dict[str, Any]) -> bool:
    """A cheap C-speed test over the serialized record (where NUL appears escaped) that lets
    clean records, nearly all of them, skip the walk building a path for every string."""
    try:
        text = json.dumps(record, ensure_ascii=False)
        text.encode("utf-8")  # fails on a lone surrogate
    except (RecursionError, ValueError):  # UnicodeEncodeError is a ValueError
        return True
    return "\ufffd" in text or "\\u0000" in text


def check_text(record: dict[str, Any]) -> Iterator[Finding]:
    """text-encoding / replacement-char: characters no UTF-8 file or tokenizer should carry."""
    if not _may_have_faults(record):
        return
    for where, text in iter_strings(record, ""):
        for code, pattern, what in _TEXT_FAULTS:
            found = pattern.search(text)
            if found:
                what = what.format(code_point=f"U+{ord(found.group()):04X}")
                yield code, where or "record", f"{what} at character {found.start()}"
