"""The papers tooltrain reproduces, one wing each (``train/papers/<paper>/``), and ``PAPERS``, their registry.

A wing holds everything only its paper needs: its data builder and builder spec (registered in ``train.builders``),
teacher prompts, the paper's tables and summaries, its config section with its checks, resume rule and number
ranges, an after-training step, an evaluation-only job. Its ``paper.py`` gathers what the engine, the config and
the CLI need in one ``PaperSpec`` (``train.papers.spec``), registered here once by name as a lazy ``module:attr``,
and they iterate the registry: none of them names a paper. A new paper is one folder, one registration, its
recipe (docs/extending.md, "Add a paper"). The dependency runs one way: a wing imports the engine, never the
reverse.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from train.base.errors import ConfigError
from train.papers.spec import PaperSpec, Summary
from train.registry import Registry

PAPERS: Registry[PaperSpec] = Registry("paper", "papers", lambda obj: isinstance(obj, PaperSpec), ConfigError)
# Registration order is the order of their config checks, their schema nodes and their --summary choices.
PAPERS.register("metatool", "train.papers.metatool.paper:PAPER")  # Meta-Tool / MT-LLaMA: tool retrieval by a call
PAPERS.register("toolgt", "train.papers.toolgt.paper:PAPER")  # ToolGT: template-guided reasoning (seed 004)
PAPERS.register("itc", "train.papers.itc.paper:PAPER")  # International Tool Calling (seed 002)
PAPERS.register("ptr", "train.papers.ptr.paper:PAPER")  # PTR: precision-driven tool recommendation (seed 001)
PAPERS.register("toolverifier", "train.papers.toolverifier.paper:PAPER")  # ToolVerifier: self-verification (seed 003)


def specs() -> Iterator[tuple[str, PaperSpec]]:
    """``(name, spec)`` of every registered paper, in registration order."""
    for name in PAPERS.names():
        yield name, PAPERS.get(name)


def active(cfg: Any) -> Iterator[tuple[str, PaperSpec]]:
    """The papers whose config node ``cfg`` sets: those a run with this config is about."""
    return ((name, spec) for name, spec in specs() if spec.node_of(cfg) is not None)


def in_run(cfg: Any) -> Iterator[tuple[str, PaperSpec]]:
    """The papers a run with ``cfg`` reproduces: those ``active`` and those whose builder makes its data
    (``PaperSpec.in_run``); for what every such run ends with, its paper's table."""
    return ((name, spec) for name, spec in specs() if spec.in_run(cfg))


def summaries() -> dict[str, Summary]:
    """``--summary NAME`` -> the paper's ``Summary``, for every paper that has one."""
    return {name: spec.summary for name, spec in specs() if spec.summary is not None}


__all__ = ["PAPERS", "PaperSpec", "Summary", "active", "in_run", "specs", "summaries"]
