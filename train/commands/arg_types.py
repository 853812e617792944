"""argparse types for the verbs' numbers: a count below its least, or a NaN, is refused when the command line is
parsed (argparse's own ``usage:`` and ``error:`` lines, exit 2), before any file is read or model loaded. A verb
refuses its counts here, not by a check of its own after parsing."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def count(least: int) -> Callable[[str], int]:
    """An integer of at least ``least`` (``--limit``, ``--show``, ``--max-report``, ``--repeat``, ``--steps``, batch
    sizes, worker counts)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value

    parse.__name__ = "count"  # argparse names the type in its messages
    return parse


def non_negative_number(text: str) -> float:
    """A finite number >= 0 (``--temperature``: 0 is greedy)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value
