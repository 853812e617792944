"""The house's layers, read from package patterns: every module of ``train/`` takes the layer of its folder, imports
only its own layer or lower ones, and no import circle exists. Imports are read with ``ast`` from the source (nothing
is imported), top-level and inside functions alike: a lazy import is still a dependency, it only moves when it is
paid for. A registration is a ``"module:attr"`` string, not an import: registries name higher modules without an
arrow to them (the way ``train.builders`` names each paper's builder).

Lowest to highest (``ls train/`` shows them): the base (record contract, registries, small shared pieces) < the
readers < tokenizers and model files < retrieval < formats < the teacher < data < evaluation < the engine < the papers'
wings < the verbs (a paper's own verbs too, in its wing's ``verbs/`` package) < the CLI. The papers sit on top of the
engine, as torchtitan's experiments on its core: the
engine and the data layer never import a paper (docs STYLE 16), they reach it through a registry in the base
(``PAPERS``, ``BUILDERS``) or their own (``TASKS``). Besides the order, three rules: a paper's wing never imports
another paper's wing; nothing but the CLI imports a verb (what two verbs share lives in a helper module of
``train.commands``); and the data layer never imports the builders registry.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TRAIN = Path(__file__).resolve().parents[1] / "train"

# The layers, lowest first, each with the modules it holds: "pkg.*" is a package and every module under it, a bare
# name one module, and a "*" inside a name any one part of it ("train.papers.*.verbs.*": every wing's verbs package);
# the most specific entry wins (a name over a pattern, a longer pattern over a shorter one).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # the record contract (schema, validate, record reading), the registries every concept registers through, and
    # small shared pieces (errors, progress bars, the cache root, call syntax): everything may import them
    (
        "base",
        (
            *("train", "train.base.*", "train.schema", "train.validate", "train.validate.*"),
            *("train.registry", "train.builders"),
        ),
    ),
    ("sources", ("train.sources.*",)),  # the readers: a source file -> canonical conversations
    # tokenizers, and the model files fetched without a hub: SmolLM2's GGUF is both its tokenizer (read by
    # train.tokenizers.smollm2) and its weights (train.models.smollm2 loads them with that tokenizer), so peers
    ("tokenizers", ("train.tokenizers.*", "train.models.*")),
    ("retrieval", ("train.retrieval.*",)),  # the shared embedders and indexes
    ("formats", ("train.formats.*",)),  # conversations -> segments -> tokens, and a family's text back to calls
    ("teacher", ("train.teacher.*",)),  # the prompted teacher: backends, transport, response cache
    ("data", ("train.data.*",)),  # the dataset build, the token store, packing
    ("evaluation", ("train.evaluation.*",)),  # the benchmarks: tasks, generation, scorers
    ("engine", ("train.engine.*",)),  # a training run: config, model, run folder, checkpoints, callbacks, launch
    ("papers", ("train.papers.*",)),  # one wing per paper, on top of the core it uses
    # the verbs, and the helpers two verbs share; a paper's own verbs (PaperSpec.verbs, eval_run_form) sit in its wing
    # but use the verbs' helpers (train.commands.outputs): they are verbs, above every wing
    ("commands", ("train.commands.*", "train.papers.*.verbs.*")),
    ("cli", ("train.cli", "train.__main__")),
)
# The registries of higher layers sit in the base: they hold "module:attr" strings, so they import nothing above
# them, and the engine may iterate them without naming a paper. (name -> why)
BASE_REGISTRIES = {
    "train.papers": "the PAPERS registry (the package's __init__): the engine iterates it, each wing registers there",
    "train.papers.spec": "what a PAPERS entry is (PaperSpec, Summary): the wings fill one in, the engine reads it",
}

# Modules placed outside their folder's layer: module -> (layer, why). Keep it empty: move the module instead.
EXCEPTIONS: dict[str, tuple[str, str]] = {}

# The modules the CLI dispatches besides its VERBS tables: main runs these itself.
MAIN_VERBS = {"train.commands.launch", "train.commands.demo", "train.engine.entry"}
VERB_RULE = "nothing but the CLI imports a verb: what two verbs share lives in a helper module of train.commands"
WING_RULE = "a paper's wing never imports another's: what two papers share belongs below the papers"

# Imports the layer order allows but the design does not: (importer prefix, imported prefix) -> why.
FORBIDDEN = {
    ("train.data", "train.builders"): "the data layer never imports the builders registry: the engine binds a "
    "recipe's builder and hands it in as the conversation transform",
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


def _type_checking(node: ast.AST) -> bool:
    """An ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``) block."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


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
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        guarded = [stmt for block in ast.walk(tree) if _type_checking(block) for stmt in block.body]
        typing_only = {id(n) for stmt in guarded for n in ast.walk(stmt)}
        for node in ast.walk(tree):
            if id(node) in typing_only:  # ``if TYPE_CHECKING:`` imports never run: annotations only, no edge
                continue
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


def _placements() -> dict[str, str]:
    """Every entry -> its layer: the layers' patterns, the base registries, the exceptions."""
    placed = {entry: layer for layer, entries in LAYERS for entry in entries}
    placed |= {name: "base" for name in BASE_REGISTRIES}
    placed |= {name: layer for name, (layer, _) in EXCEPTIONS.items()}
    return placed


def matches(entry: str, module: str) -> bool:
    """Whether a LAYERS entry holds ``module``: a name itself, "pkg.*" the package and all under it, "*" one part."""
    pattern, parts = entry.split("."), module.split(".")
    if pattern[-1] == "*":
        pattern = pattern[:-1]
        parts = parts[: len(pattern)]
    return len(parts) == len(pattern) and all(want in ("*", part) for want, part in zip(pattern, parts))


def layer_of(module: str) -> str | None:
    """The layer of the most specific entry holding ``module``: a name over a pattern, then the longest pattern."""
    placed = _placements()
    holding = [entry for entry in placed if matches(entry, module)]
    if not holding:
        return None
    return placed[max(holding, key=lambda entry: ("*" not in entry, entry.count(".")))]


def rank(layer: str) -> int:
    return [name for name, _ in LAYERS].index(layer)


def wing(module: str) -> str | None:
    """The paper whose wing holds ``module`` (``train.papers.ptr.data`` -> ``ptr``), None outside the wings."""
    parts = module.split(".")
    in_wing = len(parts) > 2 and parts[:2] == ["train", "papers"] and module not in BASE_REGISTRIES
    return parts[2] if in_wing else None


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


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


def layering_problems(edges: dict[str, set[str]], verbs: set[str]) -> list[str]:
    """Every import against the layers or the three rules; ``verbs`` are the CLI's."""
    problems = []
    for importer in sorted(edges):
        for imported in sorted(edges[importer]):
            low, high = layer_of(imported), layer_of(importer)
            if low is None or high is None:
                continue  # an unplaced module is reported by test_every_module_has_a_layer
            if rank(low) > rank(high):
                problems.append(f"{importer} ({high}) imports {imported} ({low}): upward")
            if imported in verbs and importer != "train.cli":
                problems.append(f"{importer} imports the verb {imported}: {VERB_RULE}")
            if wing(importer) and wing(imported) and wing(importer) != wing(imported):
                problems.append(f"{importer} imports {imported}: {WING_RULE}")
            for (who, prefix), why in FORBIDDEN.items():
                if _under(importer, who) and _under(imported, prefix):
                    problems.append(f"{importer} imports {imported}: {why}")
    return problems


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return imports(module_files())


@pytest.fixture(scope="module")
def verbs() -> set[str]:
    """Every verb the CLI runs: its own, the papers' (``PaperSpec.verbs``) and their forms of ``eval run``."""
    from train.cli import TOP_VERBS, verb_tables
    from train.papers import specs

    found = {module for group in verb_tables().values() for module, _ in group.values()}
    forms = {spec.eval_run_form for _, spec in specs() if spec.eval_run_form}
    return found | {module for module, _ in TOP_VERBS.values()} | forms | MAIN_VERBS


def test_every_module_has_a_layer(graph):
    unplaced = sorted(module for module in graph if layer_of(module) is None)
    assert not unplaced, (
        f"{len(unplaced)} module(s) of train/ have no layer: {', '.join(unplaced)}. A new folder or top-level module "
        f"takes a place in LAYERS in tests/test_layers.py (lowest first: {' < '.join(name for name, _ in LAYERS)})"
    )


def test_every_entry_names_modules_that_exist(graph):
    assert [entry for entry in _placements() if not any(matches(entry, module) for module in graph)] == []
    assert {layer for layer, _ in EXCEPTIONS.values()} <= {name for name, _ in LAYERS}


def test_no_import_circle(graph):
    circles = import_circles(graph)
    assert not circles, "import circles in train/:\n" + "\n".join(" -> ".join(circle) for circle in circles)


def test_no_upward_import(graph, verbs):
    problems = layering_problems(graph, verbs)
    order = " < ".join(name for name, _ in LAYERS)
    assert not problems, f"imports against the layers ({order}):\n" + "\n".join(problems)


def test_every_verb_the_cli_runs_is_a_module(graph, verbs):
    assert sorted(verbs - set(graph)) == []


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


def test_a_registration_string_is_no_edge(tmp_path):
    edges = _package(tmp_path, {"registry.py": 'NAMES = {"x": "train.papers.x.builder:build"}\n'})
    assert edges["train.registry"] == set()


def test_a_type_checking_import_is_no_edge_but_the_same_import_at_run_time_is(tmp_path):
    edges = _package(
        tmp_path,
        {
            "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from train.b import B\n",
            "c.py": "import typing\nif typing.TYPE_CHECKING:\n    import train.b\nelse:\n    import train.a\n",
            "b.py": "def f():\n    from train.a import x\n",
        },
    )
    assert edges["train.a"] == set() and edges["train.c"] == {"train.a"} and edges["train.b"] == {"train.a"}


def test_each_rule_is_reported():
    edges = {
        "train.schema": {"train.data.dataset"},
        "train.data.dataset": {"train.builders", "train.papers.metatool.builder"},
        "train.engine.run": {"train.papers", "train.evaluation.tasks"},  # the registry is in the base: allowed
        "train.papers.ptr.backbone": {"train.engine.export", "train.papers.toolgt.checks"},
        "train.commands.eval.run": {"train.commands.eval.score", "train.commands.outputs"},
        "train.papers.ptr.job": {"train.papers.ptr.verbs.recommend"},  # a wing's module importing its own verb
        "train.papers.ptr.verbs.recommend": {"train.commands.outputs", "train.papers.metatool.retrieval_eval"},
    }
    verbs = {"train.commands.eval.score", "train.commands.eval.run", "train.papers.ptr.verbs.recommend"}
    assert layering_problems(edges, verbs) == [
        "train.commands.eval.run imports the verb train.commands.eval.score: " + VERB_RULE,
        "train.data.dataset imports train.builders: " + FORBIDDEN[("train.data", "train.builders")],
        "train.data.dataset (data) imports train.papers.metatool.builder (papers): upward",
        "train.papers.ptr.backbone imports train.papers.toolgt.checks: " + WING_RULE,
        "train.papers.ptr.job (papers) imports train.papers.ptr.verbs.recommend (commands): upward",
        "train.papers.ptr.job imports the verb train.papers.ptr.verbs.recommend: " + VERB_RULE,
        "train.papers.ptr.verbs.recommend imports train.papers.metatool.retrieval_eval: " + WING_RULE,
        "train.schema (base) imports train.data.dataset (data): upward",
    ]


def test_a_module_takes_its_folders_layer_unless_named():
    assert layer_of("train.sources.newreader") == "sources"
    assert layer_of("train.papers.newpaper.builder") == "papers"
    assert layer_of("train.papers") == "base"  # the registry of the wings, not a wing
    assert layer_of("train.commands.data.newverb") == "commands"  # a verb or a helper: the CLI's tables say which
    assert layer_of("train.papers.newpaper.verbs.newverb") == "commands"  # a paper's own verb: above every wing
    assert layer_of("train.papers.newpaper.verbs") == "commands" and layer_of("train.papers.newpaper") == "papers"
    assert layer_of("train.papers.newpaper.verbsy") == "papers"  # a pattern's parts are whole names
    assert layer_of("train.newthing") is None
    assert wing("train.papers.ptr.data") == "ptr" and wing("train.papers") is None and wing("train.papers.spec") is None
