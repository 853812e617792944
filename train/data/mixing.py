"""Mixing sources: how many times each conversation of a ``data.sources`` entry is kept.

A source sets ``weight`` (3 repeats each conversation three times, 0.5 keeps a seeded half) or, for the whole mix,
``fraction`` on every source (its share of the conversations the build trains on, summing to 1), which becomes a
weight once the sources are counted. Copies are deterministic: the same conversations are repeated or left out on
every run, whatever the worker count.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Iterator
from typing import Any

from train.data.inputs import resolve_input
from train.schema import Conversation
from train.sources import get_reader
from train.sources.tables import read_renamed


def copies(conv_id: str, index: int, weight: float) -> int:
    """How many times a conversation of source ``index`` is kept under its source's ``weight``: the whole part of the
    weight always, one more for a seeded share of them equal to the fraction (2.5: 2, or 3 for half of them; 0.5: 1
    for half of them, else 0). Seeded by a stable hash of the source's position and the id, so the choice is the same
    on every run and every worker count, and does not depend on what else the source holds."""
    whole = int(weight)
    share = weight - whole
    if share == 0:
        return whole
    draw = zlib.crc32(f"{index}/{conv_id}".encode()) % 1_000_000 / 1_000_000
    return whole + (1 if draw < share else 0)


def weighted(item: Conversation, index: int, weight: float) -> Iterator[Conversation]:
    """``item`` and its copies under ``weight`` (``copies``); copy k > 1 is named ``<id>#k``, and the eval split puts it
    on its original's side (``train.data.ids.split_id``), so a held-out conversation never has a copy in train.
    Applied to what the source reads, before the recipe's builder: a builder sees the copies as conversations of
    their own (ids unique), as it would the same records written twice under other ids."""
    for k in range(copies(item.id, index, weight)):
        yield item if k == 0 else dataclasses.replace(item, id=f"{item.id}#{k + 1}")


FRACTION_SUM_TOLERANCE = 1e-6


def mixing_problems(sources: list[dict[str, Any]]) -> list[str]:
    """What is wrong with how ``sources`` ask to be mixed: one spelling for the whole mix, either ``weight`` per source
    (default 1) or ``fraction`` on every source, summing to 1."""
    with_fraction = [i for i, spec in enumerate(sources) if spec.get("fraction") is not None]
    if not with_fraction:
        return []
    problems = []
    if len(with_fraction) != len(sources):
        unset = ", ".join(f"data.sources.{i}" for i in range(len(sources)) if i not in with_fraction)
        problems.append(f"a fraction is set on some sources but not on {unset}: set one on every source, or use weight")
    weighted_too = [i for i in with_fraction if float(sources[i].get("weight") or 1.0) != 1.0]
    problems += [f"data.sources.{i} sets both weight and fraction: keep one" for i in weighted_too]
    total = sum(float(sources[i]["fraction"]) for i in with_fraction)
    if len(with_fraction) == len(sources) and abs(total - 1.0) > FRACTION_SUM_TOLERANCE:
        shares = " + ".join(f"{float(sources[i]['fraction']):g}" for i in with_fraction)
        problems.append(f"data.sources.*.fraction must sum to 1, not {shares} = {total:g}")
    return problems


def conversations_read(spec: dict[str, Any]) -> int:
    """How many conversations source ``spec`` yields (its ``limit`` applied; rejects not counted): a streaming pass,
    so a fraction can be turned into a weight before the build reads the source for good."""
    inputs = [resolve_input(p) for p in spec["inputs"]]
    records = read_renamed(get_reader(spec["name"]), inputs, spec.get("columns") or None)
    limit = spec.get("limit")
    count = 0
    for item in records:
        if isinstance(item, Conversation):
            count += 1
            if limit is not None and count >= limit:
                break
    return count


def source_weights(sources: list[dict[str, Any]]) -> list[float]:
    """Each source's weight: its ``weight``, or, where the mix is given in fractions, the weight that makes it that
    share of the mix at the size the sources have together (fraction x all read / read from it). A source that
    yields nothing keeps weight 1 (there is nothing to repeat)."""
    if all(spec.get("fraction") is None for spec in sources):
        return [float(spec.get("weight") or 1.0) for spec in sources]  # a spec from before weights has none
    counts = [conversations_read(spec) for spec in sources]
    total = sum(counts)
    return [float(spec["fraction"]) * total / n if n else 1.0 for spec, n in zip(sources, counts, strict=True)]
