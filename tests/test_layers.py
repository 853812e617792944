"""The house's layers: every module of ``train/`` has a layer, imports only its own layer or lower ones, and no
import circle exists. Imports are read with ``ast`` from the source (nothing is imported), top-level and inside
functions alike: a lazy import is still a dependency, it only moves when it is paid for.

Lowest to highest (issue 12): schema < sources < formats/tokenizers < retrieval + teacher < builders < dataset <
evaluation < run < commands, with ``base`` (console policy, progress bars) below everything and the ``cli`` above.
The commands layer holds the verbs the CLI dispatches; they never import each other (what two verbs share lives in
a ``command_helpers`` module), and no module below the CLI imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TRAIN = Path(__file__).resolve().parents[1] / "train"

LAYERS = (
    "base",
    "schema",
    "sources",
    "formats",
    "retrieval",
    "builders",
    "dataset",
    "evaluation",
    "run",
    "command_helpers",
    "commands",
    "cli",
)

# Module -> layer. "pkg.*" covers every module of a package (the package itself included); an exact name wins
# over a pattern. A module in no entry fails test_every_module_has_a_layer: place it here when you add it.
LAYER_OF: dict[str, str] = {
    "train": "base",
    "train.engine.console": "base",  # the console noise policy: the CLI sets it before importing anything heavy
    "train.base.progress": "base",  # a progress bar any long loop may show
    "train.base.errors": "base",  # ConfigError: a user error any layer may raise
    "train.registry": "base",  # name -> object (or module:attr) lookup every concept registers through
    "train.schema": "schema",
    "train.validate": "schema",  # the record contract every reader checks its output against
    "train.base.json_schema": "schema",  # bounded patterns and local-only references for tool schemas
    "train.sources.*": "sources",
    "train.sources.call_markers": "schema",  # the call-markup markers train.validate checks text for
    "train.data.stats": "sources",  # counts canonical records with the readers' JSON helpers; no format, no model
    "train.formats.*": "formats",
    "train.formats.expansion": "formats",  # per-target-turn expansion: renders and tokenizes, knows no dataset
    "train.formats.mask_checks": "formats",  # a sample's mask against the format's norm; the build calls it
    "train.tokenizers.*": "formats",
    "train.models.*": "formats",  # SmolLM2's GGUF is both its tokenizer and its weights: fetched for either
    "train.retrieval.*": "retrieval",  # teacher (train.papers.metatool.teacher) and PoolRetriever included
    "train.teacher.*": "retrieval",  # the prompted teacher (backends, response cache, ToolGT questions) builders ask
    "train.builders.*": "builders",
    "train.data.dataset": "dataset",
    "train.data.packing": "dataset",
    "train.data.token_store": "dataset",  # the built dataset's memory-mapped columns: numpy only
    "train.data.ordered_pool": "base",  # an ordered, bounded process-pool map: no tooltrain import
    "train.evaluation.*": "evaluation",
    # PTR (seed 001): library/history/splits, stage 1 and its evaluation; it uses retrieval, the teacher and the
    # recommendation metrics, and nothing of a training run
    "train.papers.ptr.*": "evaluation",
    "train.engine.eval_callback": "run",  # the Trainer callback that runs the eval tasks: run machinery
    "train.engine.config": "run",  # the composed run config; it checks task and format names against their registries
    "train.engine.config_ranges": "run",  # every numeric field's valid range, checked by train.engine.config.check
    "train.engine.model_folder": "run",  # a model folder's own tokenizer and chat format, applied at compose time
    "train.engine.distributed": "run",
    "train.engine.model": "run",
    "train.engine.loss": "run",
    "train.engine.flops": "run",
    "train.engine.callbacks": "run",
    "train.engine.checkpoints": "run",
    "train.engine.signals": "run",
    "train.engine.report": "run",
    "train.engine.summary": "run",
    "train.engine.step_lines": "run",
    "train.engine.tracking": "run",
    "train.engine.run_dir": "run",
    "train.engine.resume_config": "run",
    "train.engine.resume_data": "run",  # what a run's build read (content hashes), compared on resume
    "train.engine.overrides": "run",  # a command line's overrides checked before Hydra runs them (one error line)
    "train.engine.run": "run",
    "train.engine.training_args": "run",  # the config -> TrainingArguments mapping run() and bench train share
    "train.engine.export": "run",  # merges a run's adapter into its model: the run's model and checkpoint code
    "train.papers.ptr.backbone": "run",  # a tooltrain run as PTR's backbone: loads it as train.engine.export does
    "train.data.cache_bench": "run",  # the tokenized cache at corpus scale: build time, build and per-rank memory
    "train.engine.launch": "run",  # plans a multi-node run from its config (Slurm script, torchrun, deepspeed)
    "train.commands": "command_helpers",
    "train.commands.outputs": "command_helpers",
    "train.commands.arg_types": "command_helpers",  # the verbs' number types (counts, temperatures)
    "train.commands.data.rejects": "command_helpers",
    "train.commands.eval.score_report": "command_helpers",
    "train.commands.chat_setup": "command_helpers",
    "train.commands.bench.common": "command_helpers",  # what bench render and bench data share
    "train.commands.eval.retrieval_core": "command_helpers",
    "train.commands.eval.retrieval_sweep": "command_helpers",  # the Hydra form of eval retrieval, not a verb
    "train.commands.eval.score_bfcl": "command_helpers",  # the BFCL-folders form of eval score, not a verb
    "train.commands.eval.run_verify": "command_helpers",  # the toolbench --verify form of eval run, not a verb
    "train.engine.entry": "commands",  # tooltrain train: the Hydra main around run(cfg)
    "train.commands.launch": "commands",
    "train.commands.demo": "commands",
    "train.commands.data.convert": "commands",
    "train.commands.data.validate": "commands",
    "train.commands.data.stats": "commands",
    "train.commands.data.render": "commands",
    "train.commands.data.build": "commands",
    "train.commands.eval.score": "commands",
    "train.commands.eval.run": "commands",
    "train.commands.eval.retrieval": "commands",
    "train.commands.eval.recommend": "commands",
    "train.commands.bench.render": "commands",
    "train.commands.bench.data": "commands",
    "train.commands.bench.train": "commands",
    "train.commands.export": "commands",
    "train.cli": "cli",
    "train.__main__": "cli",
}

# Layers whose modules may not import one another (not only no circle: no edge at all).
SIBLINGS_APART = {
    "commands": "a verb never imports another verb; what two verbs share goes in a command_helpers module"
}

# Imports the layer order allows but the design does not: (importer, imported prefix) -> why.
FORBIDDEN = {
    ("train.data.dataset", "train.builders"): "the generic dataset never imports a recipe's builder: run.py binds one "
    "and hands it in as the conversation transform",
}


def module_files(root: Path = TRAIN) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under ``root`` (``root`` is the package ``train``)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the ``train`` modules it imports anywhere in its file (``from pkg import sub`` counts as sub)."""

    def known(name: str) -> str | None:  # the longest module prefix of an imported name
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets.update(known(alias.name) for alias in node.names if alias.name.split(".")[0] == "train")
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from .x import y, from .. import z
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                if base.split(".")[0] != "train":
                    continue
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in modules else known(base))
        edges[name] = {t for t in targets if t and t != name}
    return edges


def layer_of(module: str) -> str | None:
    if module in LAYER_OF:
        return LAYER_OF[module]
    parts = module.split(".")
    for cut in range(len(parts), 0, -1):
        pattern = ".".join(parts[:cut]) + ".*"
        if pattern in LAYER_OF:
            return LAYER_OF[pattern]
    return None


def import_circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One circle (a -> b -> ... -> a) per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return [_circle_through(component, edges) for component in components]


def _circle_through(component: set[str], edges: dict[str, set[str]]) -> list[str]:
    """A shortest circle from the component's first module back to itself, inside the component (BFS)."""
    start = min(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(edges[node] & component):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    return sorted(component)  # not reached: a component of two or more modules has a circle


def layering_problems(edges: dict[str, set[str]]) -> list[str]:
    problems = []
    for importer in sorted(edges):
        for imported in sorted(edges[importer]):
            low, high = layer_of(imported), layer_of(importer)
            if low is None or high is None:
                continue  # reported by test_every_module_has_a_layer
            if LAYERS.index(low) > LAYERS.index(high):
                problems.append(f"{importer} ({high}) imports {imported} ({low}): upward")
            elif low == high and high in SIBLINGS_APART:
                problems.append(f"{importer} imports {imported}, both {high}: {SIBLINGS_APART[high]}")
            for (who, prefix), why in FORBIDDEN.items():
                if importer == who and (imported == prefix or imported.startswith(prefix + ".")):
                    problems.append(f"{importer} imports {imported}: {why}")
    return problems


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return imports(module_files())


def test_every_module_has_a_layer(graph):
    unplaced = sorted(module for module in graph if layer_of(module) is None)
    assert not unplaced, (
        f"{len(unplaced)} module(s) of train/ have no layer: {', '.join(unplaced)}. Add each to LAYER_OF in "
        f"tests/test_layers.py (layers, lowest first: {' < '.join(LAYERS)})"
    )
    assert set(LAYER_OF.values()) <= set(LAYERS)


def test_no_import_circle(graph):
    circles = import_circles(graph)
    assert not circles, "import circles in train/:\n" + "\n".join(" -> ".join(circle) for circle in circles)


def test_no_upward_import(graph):
    problems = layering_problems(graph)
    assert not problems, "imports against the layers (" + " < ".join(LAYERS) + "):\n" + "\n".join(problems)


def test_the_commands_layer_is_exactly_the_verbs_the_cli_runs():
    from train.cli import TOP_VERBS, VERBS

    verbs = {f"train.commands.{module}" for verbs in VERBS.values() for module, _ in verbs.values()}
    verbs |= {f"train.commands.{module}" for module, _ in TOP_VERBS.values()}
    verbs |= {"train.commands.launch", "train.commands.demo", "train.engine.entry"}  # dispatched by main itself
    assert {module for module, layer in LAYER_OF.items() if layer == "commands"} == verbs


# ---------------------------------------------------------------- the checker itself, on made-up packages


def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, set[str]]:
    root = tmp_path / "train"
    for name, text in {"__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return imports(module_files(root))


def test_a_lazy_import_inside_a_function_is_an_edge_and_closes_a_circle(tmp_path):
    edges = _package(
        tmp_path,
        {
            "a.py": "from train.b import x\n",
            "b.py": "def x():\n    from train import a\n    return a\n",
            "pkg/__init__.py": "",
            "pkg/c.py": "from ..a import x\nfrom . import d\n",
            "pkg/d.py": "import train.pkg.c\n",
        },
    )
    assert edges["train.a"] == {"train.b"} and edges["train.b"] == {"train.a"}
    assert edges["train.pkg.c"] == {"train.a", "train.pkg.d"} and edges["train.pkg.d"] == {"train.pkg.c"}
    assert sorted(map(tuple, import_circles(edges))) == [
        ("train.a", "train.b", "train.a"),
        ("train.pkg.c", "train.pkg.d", "train.pkg.c"),
    ]


def test_an_upward_import_and_a_verb_importing_a_verb_are_reported():
    edges = {
        "train.schema": {"train.data.dataset"},
        "train.data.dataset": {"train.papers.metatool.builder"},
        "train.commands.eval.run": {"train.commands.eval.score", "train.commands.outputs"},
    }
    assert layering_problems(edges) == [
        "train.commands.eval.run imports train.commands.eval.score, both commands: " + SIBLINGS_APART["commands"],
        "train.data.dataset imports train.papers.metatool.builder: " + FORBIDDEN[("train.data.dataset",
        "train.builders")],
        "train.schema (schema) imports train.data.dataset (dataset): upward",
    ]


def test_a_module_outside_the_map_is_named():
    assert layer_of("train.sources.newreader") == "sources"
    assert layer_of("train.newthing") is None
    assert layer_of("train.commands.newverb") is None  # a verb or a helper: its author decides
