"""What ``data convert`` and ``data render`` say about the records they rejected.

The first few rejects are printed as they are (``rejected FILE:LINE: reason``), so a user sees real
reasons, not a pattern. When there are more rejects than that, the reasons are also counted by
kind, each kind shown with the real text of its first reject. A run that rejected every record of
a non-empty input wrote nothing usable: ``nothing_written`` says so and the verb exits 1 without
touching its outputs (the likely cause is the wrong source reader or inputs in the wrong order).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path
from typing import TextIO

from train.sources import Rejected

EXAMPLES = 3  # rejects printed in full
KINDS = 5  # kinds of reason counted
LONGEST = 300  # characters of one printed reason

# Quoted values and numbers vary from record to record; set aside, the rest of a reason is its kind.
_VARYING = re.compile(r"'[^']*'|\"[^\"]*\"|\d+")


def reason_kind(reason: str) -> str:
    """The key two rejects share when they failed the same way (never printed: it is not real text)."""
    return _VARYING.sub("#", reason)


def shorten(text: str) -> str:
    return text if len(text) <= LONGEST else text[: LONGEST - 1] + "…"


class RejectReport:
    """Rejects as they come: the first few in full, and a count and first reason per kind."""

    def __init__(self) -> None:
        self.count = 0
        self.examples: list[Rejected] = []
        self.kinds: Counter[str] = Counter()
        self.first_of_kind: dict[str, str] = {}

    def add(self, item: Rejected) -> None:
        self.count += 1
        if len(self.examples) < EXAMPLES:
            self.examples.append(item)
        kind = reason_kind(item.reason)
        self.kinds[kind] += 1
        self.first_of_kind.setdefault(kind, item.reason)

    def lines(self) -> list[str]:
        """The indented lines printed under the ``read N, ... rejected R`` summary."""
        out = [f"  rejected {item.location}: {shorten(item.reason)}" for item in self.examples]
        if self.count > len(self.examples):
            for kind, count in self.kinds.most_common(KINDS):
                out.append(f"  rejected {count} like: {shorten(self.first_of_kind[kind])}")
            if len(self.kinds) > KINDS:
                out.append(f"  ... and {len(self.kinds) - KINDS} more kinds of reason")
        return out


def where_rejects_are(rejects_path: Path | None) -> str:
    """The last line of a report with rejects: their file, or why there is none."""
    if rejects_path is not None:
        return f"  reasons per record: {rejects_path}"
    return "  rejects not written (the output is not a regular file): give --rejects PATH to keep them"


def nothing_written(read: int, output: Path, hint: str, stream: TextIO | None = None) -> int:
    """Every one of ``read`` records rejected, or none read at all (an empty input): one ``error:`` line, a
    ``hint:`` line, exit code 1. An earlier output is kept either way: an empty file never replaces it."""
    stream = stream or sys.stderr
    unchanged = "" if str(output) == "-" else f"; {output} is unchanged"
    what = f"all {read} records were rejected" if read else "the input holds no record"
    print(f"error: nothing written: {what}{unchanged}", file=stream)
    print(f"hint: {hint}", file=stream)
    return 1
