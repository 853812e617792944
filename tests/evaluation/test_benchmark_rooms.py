"""One room per benchmark: each holds its scorer, its task and its ``ScorerSpec``, registered in ``SCORERS`` by a
lazy ``module:attr`` line. Asking for one benchmark imports its room only (checked in a fresh interpreter), and
the engine and data layers reach benchmarks through the registry, never by importing a benchmark's module."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from train.evaluation import SCORERS, ScorerSpec
from train.evaluation.task_base import Task

REPO = Path(__file__).resolve().parents[2]

# each benchmark's room: the modules only it needs (a new benchmark adds its line here)
ROOMS = {
    "heldout": ("train.evaluation.heldout",),
    "metabench": ("train.papers.metatool.metabench",),
    "toolselect": ("train.evaluation.toolselect",),
    "bfcl": (
        "train.evaluation.bfcl.task",
        "train.evaluation.bfcl.scorer",
        "train.evaluation.bfcl.values",
        "train.evaluation.bfcl.literals",
        "train.evaluation.bfcl.summary",
    ),
    "bfcl_multi_turn": (
        "train.evaluation.bfcl.multi_turn.task",
        "train.evaluation.bfcl.multi_turn.check",
        "train.evaluation.bfcl.multi_turn.episode",
        "train.evaluation.bfcl.multi_turn.execute",
    ),
    "itc": ("train.evaluation.itc", "train.evaluation.itc_metrics"),
    "toolbench": ("train.evaluation.toolbench", "train.evaluation.pyprogram"),
    "nexus": ("train.evaluation.nexus",),
    "tracc": ("train.papers.ptr.scorer",),
}
ALL_ROOMS = {module for modules in ROOMS.values() for module in modules}

# Resolves one benchmark the way `eval run`, `eval score` and the config check do, then lists the benchmark
# modules that got imported.
PROBE = """
import json, sys
from train.evaluation import SCORERS, get_scorer
from train.evaluation.tasks import task_class
rooms = set(json.loads(sys.argv[2]))
before = sorted(rooms & set(sys.modules))
name = sys.argv[1]
spec = SCORERS.get(name)
get_scorer(name)
if spec.task is not None:
    task_class(name)
print(json.dumps({"before": before, "after": sorted(rooms & set(sys.modules))}))
"""


def test_every_benchmark_has_a_room():
    assert set(ROOMS) == set(SCORERS.names())


@pytest.mark.parametrize("name", list(ROOMS))
def test_a_benchmark_resolves_without_importing_the_others(name):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    probe = [sys.executable, "-c", PROBE, name, json.dumps(sorted(ALL_ROOMS))]
    done = subprocess.run(probe, check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    imported = json.loads(done.stdout)
    assert imported["before"] == []  # the registry itself imports no benchmark
    assert set(imported["after"]) <= set(ROOMS[name])
    assert ROOMS[name][0] in imported["after"]  # its spec lives in its own room


@pytest.mark.parametrize("name", list(ROOMS))
def test_each_room_holds_its_scorer_task_and_spec(name):
    spec = SCORERS.get(name)
    assert isinstance(spec, ScorerSpec)
    assert callable(spec.score) and spec.score.__module__ in ROOMS[name]
    if spec.task is not None:
        assert issubclass(spec.task, Task) and spec.task.__module__ == ROOMS[name][0]
    assert spec.layout.strip()


def _imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function (``from a.b import c`` counts a.b and a.b.c)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_engine_and_data_layers_reach_benchmarks_only_through_the_registry():
    folders = [REPO / "train" / "engine", REPO / "train" / "data"]
    benchmark = ALL_ROOMS | {"train.evaluation.bfcl"}
    reaching = {
        f"{path.relative_to(REPO)}: {module}"
        for folder in folders
        for path in sorted(folder.rglob("*.py"))
        for module in _imported_modules(path)
        if module in benchmark
    }
    assert reaching == set()
