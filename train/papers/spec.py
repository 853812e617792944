"""What a paper's wing tells the engine, the config and the CLI: ``PaperSpec``, one per paper (``PAPERS``).

The engine never names a paper. Everything a paper adds to a run goes through its spec: a config node of its own
(``toolgt:``, or ``eval.toolbench_verify``), the compose-time checks of that node, its row in the resume rules and its
number ranges, the inputs it reads (checked with the run's other inputs before training), an after-training step,
an evaluation-only job that replaces training, the ``--summary NAME`` tables of ``eval run`` / ``eval score``, verbs of
its own (``tooltrain eval recommend``) and a form of ``eval run`` of its own (``--verify``).
Each is optional: a paper that only registers a builder (``train.builders``) has a spec with a title and nothing else.

Callables here take plain arguments and import what they need when called, so loading every spec (which the config
schema does) costs no more than importing their small ``paper.py`` modules. Verbs are named by module path, never
imported here: they sit above the papers (the commands layer), and the CLI imports only the verb being run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

RESUME_KINDS = ("fixed", "free")  # train.engine.resume_config.FIXED / FREE: may a resumed run change the node?


@dataclass(frozen=True)
class Summary:
    """``eval run BENCH MODEL --summary NAME`` and ``eval score BENCH --summary NAME`` (NAME: the paper's name): the
    paper's own numbers for the measured ``metrics`` beside the paper's table rows.

    ``lines(bench, metrics, names) -> (lines, data)``: what is printed and what the metrics JSON keeps (under
    ``NAME_summary``); ``names`` say which model was measured (a paper row is picked by them). ``run_benches``: the
    benches ``eval run`` takes it for; ``score_benches``: those ``eval score`` takes it for (bfcl: its folder form)."""

    lines: Callable[[str, dict[str, Any], list[str]], tuple[list[str], dict[str, Any]]]
    run_benches: tuple[str, ...]
    score_benches: tuple[str, ...] = ()
    help: str = ""

    def problem(self, name: str, bench: str, benches: tuple[str, ...]) -> str | None:
        """Why ``--summary NAME`` cannot go with ``bench`` (``benches``: those of the verb asking), or None."""
        if bench in benches:
            return None
        valid = " and ".join(filter(None, [", ".join(benches[:-1]), benches[-1] if benches else ""]))
        return f"--summary {name} is for {valid or 'no bench'}, not {bench}"


@dataclass(frozen=True)
class PaperSpec:
    """One paper's wing, as the engine sees it (``train.papers.PAPERS``; docs/extending.md, "Add a paper").

    * ``node``: the dotted config key the paper's recipes set (``toolgt``, or ``eval.toolbench_verify`` below an
      engine section); the paper is *on* in a run when that node is set (not null, not empty).
    * ``section``: the node's type in the schema: a dataclass (the node is null outside the paper's recipes) or
      ``dict`` (a free-form mapping, empty outside them).
    * ``checks(cfg) -> problems``: compose-time checks of a config where the node is set, one message each.
    * ``resume``: ``(fixed|free, why)``: whether a resumed run may change the node (train.engine.resume_config).
    * ``ranges``: node-relative key -> ``train.engine.config_ranges.Range`` of the node's numbers.
    * ``inputs(cfg) -> [(key, path)]``: files or folders the paper reads, checked before training.
    * ``after_training(cfg, model, tokenizer, out, world_size) -> dict``: run on rank 0 after a completed run; what
      it returns is added to ``summary.json``.
    * ``job(cfg) -> RunResult``: an evaluation-only job: ``tooltrain train`` runs it instead of training.
    * ``summary``: the ``--summary NAME`` of ``eval run`` / ``eval score``.
    * ``verbs``: ``"GROUP VERB"`` -> ``(module, one-line help)``: the paper's own verbs (``tooltrain GROUP VERB``),
      each a module of its wing's ``verbs/`` package exposing ``add_arguments(parser)`` and ``run(args) -> int``, as
      the CLI's own verbs do; listed after the CLI's own under their group (``train.cli.verb_tables``).
    * ``table(cfg, summary) -> PaperTable | None``: the paper's main table with the run's measured rows beside the
      paper's (``train.engine.paper_table``), from the finished run's ``summary`` (its ``eval`` before/after and
      what ``after_training`` added); printed at the end of the run, kept in summary.json, drawn in report.png.
    * ``builders``: the data builders of the wing: a run whose ``data.builder`` is one of them is the paper's run
      for ``table`` even with no config node (Meta-Tool's recipes set none).
    * ``eval_run_form``: the module of a form of ``eval run`` of the paper's own (ToolVerifier's ``--verify``):
      ``add_arguments(parser)`` (its options), ``chosen(args) -> bool`` (the command line asks for it),
      ``problem(args) -> str | None`` (why its options cannot run as given; None when none is given) and
      ``run(args, load_model, inputs) -> int`` (``load_model()``: MODEL loaded, ``inputs``: what ``eval run`` reads).
    """

    title: str
    node: str | None = None
    section: Any = None
    checks: Callable[[Any], list[str]] | None = None
    resume: tuple[str, str] | None = None
    ranges: dict[str, Any] = field(default_factory=dict)
    inputs: Callable[[Any], list[tuple[str, str]]] | None = None
    after_training: Callable[..., dict[str, Any]] | None = None
    job: Callable[[Any], Any] | None = None
    summary: Summary | None = None
    verbs: dict[str, tuple[str, str]] = field(default_factory=dict)
    eval_run_form: str | None = None
    table: Callable[[Any, dict[str, Any]], Any] | None = None
    builders: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for command, entry in self.verbs.items():
            if len(command.split()) != 2 or command != " ".join(command.split()):
                raise ValueError(f"{self.title}: verb {command!r}: 'GROUP VERB' (tooltrain GROUP VERB)")
            if not (isinstance(entry, tuple) and len(entry) == 2 and all(isinstance(part, str) for part in entry)):
                raise ValueError(f"{self.title}: verb {command!r}: (module, one-line help), got {entry!r}")
        if (self.node is None) != (self.section is None):
            raise ValueError(f"{self.title}: a config node needs its section type, and a section its node")
        if self.resume is not None and self.resume[0] not in RESUME_KINDS:
            raise ValueError(f"{self.title}: resume must be (fixed|free, why), got {self.resume!r}")
        if self.node is None and (self.checks or self.resume or self.ranges or self.inputs or self.job):
            raise ValueError(f"{self.title}: checks, resume, ranges, inputs and job belong to a config node")
        if self.node is not None and self.node.count(".") > 1:
            raise ValueError(f"{self.title}: node {self.node!r}: top level or one section deep (eval.NAME)")

    def node_of(self, cfg: Any) -> Any:
        """The paper's node in ``cfg`` when it is set there, else None (a DictConfig or a plain dict)."""
        if self.node is None:
            return None
        value: Any = cfg
        for part in self.node.split("."):
            value = value.get(part) if value is not None and hasattr(value, "get") else None
        return value if value else None  # null, or an empty mapping: the paper is off

    def in_run(self, cfg: Any) -> bool:
        """Is a run with ``cfg`` this paper's run: its node is set, or its data comes from one of its builders."""
        builder = (cfg.get("data") or {}).get("builder") if hasattr(cfg, "get") else None
        return self.node_of(cfg) is not None or (builder is not None and builder in self.builders)


def fed_to_builder(cfg: Any, section: str, keys: tuple[str, ...]) -> list[str]:
    """A recipe's choice section (``section.*``) feeds the builder of its name through ``data.builder_args``:
    another builder, or an argument set there directly, would contradict it (a check papers share)."""
    if cfg.data.builder != section:
        feeds = f"(the {section} choices feed data.builder: {section})"
        return [f"{section}.* is set but data.builder={cfg.data.builder} {feeds}"]
    chosen, args = cfg[section], cfg.data.builder_args
    return [
        f"data.builder_args.{key}={args.get(key)} differs from {section}.{key}={chosen[key]}; choose it "
        f"with {section}.{key}=..."
        for key in keys
        if args.get(key) != chosen[key]
    ]
