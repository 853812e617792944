"""Every verb but `train` (data *, eval *, export, bench *, demo, launch), tried as a new user would: a missing
input, a folder or a dangling link given for a file, malformed or empty JSON, an unknown value, an output that
is a folder or sits under a file, a folder that is not a run, a negative, zero or nan number. Each must end
with one `error:` line and a non-zero exit, never a traceback, never a changed input, never a hang.

The cases run the verb in this process (`train.cli.main`, as `tooltrain` calls it: same exit code, same
stderr) under a time limit; the ones that could block a process for good (a FIFO, /dev/zero) run
`python -m train` with `timeout=`. The wording of each message is tested beside its verb; here only the
shape: argparse's own refusals (`usage:` then `tooltrain VERB: error: ...`) count as the one error line."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from train.cli import main

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
ASSETS = REPO / "train" / "assets"
# One in-process case: the first to import torch and transformers takes most (tens of seconds on a busy machine).
SECONDS = 120
# `error: ...` from tooltrain, or argparse's `tooltrain data stats: error: ...` after its usage line
ERROR_LINE = re.compile(r"^(tooltrain[\w ]*: )?error: ")


@dataclass
class Ws:
    """The inputs a case may name, all in one folder whose files are hashed before and after."""

    root: Path
    conv: Path = field(init=False)  # canonical conversations
    glaive: Path = field(init=False)  # a source file for `data convert glaive`
    preds: Path = field(init=False)  # heldout predictions and references
    refs: Path = field(init=False)
    queries: Path = field(init=False)  # ToolQuery rows and their library
    library: Path = field(init=False)
    ptr: Path = field(init=False)  # eval recommend's --data folder
    malformed: Path = field(init=False)  # a JSON Lines file cut inside its first record
    malformed_json: Path = field(init=False)  # a JSON document cut short
    empty: Path = field(init=False)
    folder: Path = field(init=False)  # a folder holding a JSON Lines file
    dangling: Path = field(init=False)  # a symbolic link to nothing (tests run as root: chmod 000 reads anyway)
    blocker: Path = field(init=False)  # a plain file; blocker/x.jsonl cannot exist
    missing: Path = field(init=False)
    not_a_run: Path = field(init=False)  # a folder with a file in it, no config, no checkpoint
    fake_run: Path = field(init=False)  # looks like a run: garbled config, an empty adapter

    def __post_init__(self) -> None:
        root = self.root
        self.conv = copy(FIXTURES / "parity" / "corpus.jsonl", root / "conv.jsonl")
        self.glaive = copy(ASSETS / "demo" / "glaive_sample.json", root / "glaive.json")
        self.preds = copy(FIXTURES / "evaluation" / "heldout" / "predictions.jsonl", root / "preds.jsonl")
        self.refs = copy(FIXTURES / "evaluation" / "heldout" / "references.jsonl", root / "refs.jsonl")
        self.queries = copy(FIXTURES / "retrieval" / "tiny.jsonl", root / "queries.jsonl")
        self.library = copy(FIXTURES / "retrieval" / "tiny.library.jsonl", root / "queries.library.jsonl")
        self.ptr = root / "ptr"
        shutil.copytree(ASSETS / "ptr_tiny", self.ptr)
        self.malformed = write(root / "malformed.jsonl", '{"id": "x", "messages": [{"role": "user", "cont\n')
        self.malformed_json = write(root / "malformed.json", '[{"id": "x", "conversations": [')
        self.empty = write(root / "empty.jsonl", "")
        self.folder = root / "folder"
        copy(self.conv, self.folder / "a.jsonl")
        self.dangling = root / "dangling.jsonl"
        self.dangling.symlink_to(root / "gone.jsonl")
        self.blocker = write(root / "blocker.txt", "mine\n")
        self.missing = root / "missing.jsonl"
        self.not_a_run = root / "not_a_run"
        write(self.not_a_run / "notes.txt", "not a run\n")
        self.fake_run = root / "fake_run"
        write(self.fake_run / ".hydra" / "config.yaml", "model: [unclosed\n")
        write(self.fake_run / "final" / "adapter_config.json", "{")
        write(self.fake_run / "final" / "adapter_model.safetensors", "")

    @property
    def under(self) -> Path:
        return self.blocker / "x.jsonl"

    def damaged_run(self) -> Path:
        """A run folder whose config is the tiny recipe's and whose final/ weights are damaged (empty files): export
        gets past the config, as it would on a real run, to the output folder and the weights."""
        run = self.root / "damaged_run"
        write(run / "config.yaml", tiny_config())
        write(run / "final" / "config.json", "")
        write(run / "final" / "model.safetensors", "")
        return run

    def hashes(self) -> dict[str, str]:
        return {
            str(path.relative_to(self.root)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(self.root.rglob("*"))
            if path.is_file()
        }


@functools.cache
def tiny_config() -> str:
    from train.engine.config import compose, to_yaml

    return to_yaml(compose(["recipe=tiny"]))


def copy(source: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@dataclass
class Case:
    argv: Callable[[Ws], list[str]]
    says: Callable[[Ws], object] | None = None  # what the error line must name, where the point is one path
    first: bool = False  # refused before any work: nothing on stdout (an output checked before the input is read)


def s(*parts: object) -> list[str]:
    return [str(part) for part in parts]


# ---------------------------------------------------------------- the cases, verb by verb


DATA = {
    # data convert
    "convert-missing-input": Case(lambda w: s("data", "convert", "glaive", w.missing, "-o", w.root / "o.jsonl")),
    "convert-dangling-input": Case(lambda w: s("data", "convert", "glaive", w.dangling, "-o", w.root / "o.jsonl")),
    "convert-input-under-a-file": Case(lambda w: s("data", "convert", "glaive", w.under, "-o", w.root / "o.jsonl")),
    "convert-malformed-json": Case(
        lambda w: s("data", "convert", "glaive", w.malformed_json, "-o", w.root / "o.jsonl")
    ),
    "convert-empty-input": Case(
        lambda w: s("data", "convert", "glaive", w.empty, "-o", w.root / "o.jsonl"),
    ),
    "convert-canonical-malformed": Case(
        lambda w: s("data", "convert", "canonical", w.malformed, "-o", w.root / "o.jsonl")
    ),
    "convert-unknown-source": Case(lambda w: s("data", "convert", "nope", w.glaive, "-o", w.root / "o.jsonl")),
    "convert-unknown-module-source": Case(
        lambda w: s("data", "convert", "no_such_module:reader", w.glaive, "-o", w.root / "o.jsonl")
    ),
    "convert-output-is-a-folder": Case(lambda w: s("data", "convert", "glaive", w.glaive, "-o", w.folder)),
    "convert-output-under-a-file": Case(lambda w: s("data", "convert", "glaive", w.glaive, "-o", w.under)),
    "convert-output-is-the-input": Case(lambda w: s("data", "convert", "glaive", w.glaive, "-o", w.glaive)),
    "convert-rejects-is-the-input": Case(
        lambda w: s("data", "convert", "glaive", w.glaive, "-o", w.root / "o.jsonl", "--rejects", w.glaive)
    ),
    # data validate
    "validate-missing": Case(lambda w: s("data", "validate", w.missing)),
    "validate-folder": Case(lambda w: s("data", "validate", w.folder)),
    "validate-dangling": Case(lambda w: s("data", "validate", w.dangling)),
    "validate-under-a-file": Case(lambda w: s("data", "validate", w.under)),
    "validate-unknown-severity-code": Case(lambda w: s("data", "validate", w.conv, "--severity", "nope=error")),
    "validate-unknown-severity-level": Case(
        lambda w: s("data", "validate", w.conv, "--severity", "consecutive-user=fatal")
    ),
    "validate-max-report-nan": Case(lambda w: s("data", "validate", w.conv, "--max-report", "nan")),
    "validate-max-report-negative": Case(
        lambda w: s("data", "validate", w.conv, "--max-report", "-1"),
    ),
    "validate-library-missing": Case(lambda w: s("data", "validate", w.queries, "--library", w.missing)),
    "validate-library-folder": Case(lambda w: s("data", "validate", w.queries, "--library", w.folder)),
    "validate-library-malformed": Case(lambda w: s("data", "validate", w.queries, "--library", w.malformed)),
    # data stats
    "stats-missing": Case(lambda w: s("data", "stats", w.missing)),
    "stats-folder": Case(lambda w: s("data", "stats", w.folder)),
    "stats-dangling": Case(lambda w: s("data", "stats", w.dangling)),
    "stats-under-a-file": Case(lambda w: s("data", "stats", w.under)),
    # data render
    "render-missing": Case(lambda w: s("data", "render", w.missing, "--format", "chatml", "-o", w.root / "r.jsonl")),
    "render-folder": Case(lambda w: s("data", "render", w.folder, "--format", "chatml", "-o", w.root / "r.jsonl")),
    "render-dangling": Case(lambda w: s("data", "render", w.dangling, "--format", "chatml", "-o", w.root / "r.jsonl")),
    "render-malformed": Case(
        lambda w: s("data", "render", w.malformed, "--format", "chatml", "-o", w.root / "r.jsonl")
    ),
    "render-empty": Case(
        lambda w: s("data", "render", w.empty, "--format", "chatml", "-o", w.root / "r.jsonl"),
    ),
    "render-unknown-format": Case(lambda w: s("data", "render", w.conv, "--format", "nope", "-o", w.root / "r.jsonl")),
    "render-tokenizer-not-a-folder": Case(
        lambda w: s("data", "render", w.conv, "--format", "chatml", "--tokenizer", w.missing, "-o", w.root / "r.jsonl")
    ),
    "render-tokenizer-folder-not-a-tokenizer": Case(
        lambda w: s("data", "render", w.conv, "--format", "chatml", "--tokenizer", w.folder, "-o", w.root / "r.jsonl")
    ),
    "render-weight-nan": Case(
        lambda w: s("data", "render", w.conv, "--format", "chatml", "-o", w.root / "r.jsonl", "--weights", "text=nan")
    ),
    "render-weight-negative": Case(
        lambda w: s("data", "render", w.conv, "--format", "chatml", "-o", w.root / "r.jsonl", "--weights", "text=-1")
    ),
    "render-show-negative": Case(
        lambda w: s("data", "render", w.conv, "--format", "chatml", "-o", w.root / "r.jsonl", "--show", "-1"),
    ),
    "render-unknown-format-option": Case(
        lambda w: s("data", "render", w.conv, "--format", "chatml", "-o", w.root / "r.jsonl", "--format-option", "x=1")
    ),
    "render-output-is-the-input": Case(lambda w: s("data", "render", w.conv, "--format", "chatml", "-o", w.conv)),
    "render-output-is-a-folder": Case(lambda w: s("data", "render", w.conv, "--format", "chatml", "-o", w.folder)),
    # data build
    "build-unknown-builder": Case(lambda w: s("data", "build", "nope", w.conv, "--out-dir", w.root / "b")),
    "build-missing-input": Case(lambda w: s("data", "build", "metatool", w.missing, "--out-dir", w.root / "b")),
    "build-folder-input": Case(lambda w: s("data", "build", "metatool", w.folder, "--out-dir", w.root / "b")),
    "build-malformed-input": Case(lambda w: s("data", "build", "metatool", w.malformed, "--out-dir", w.root / "b")),
    "build-unknown-argument": Case(
        lambda w: s("data", "build", "metatool", w.conv, "bogus=1", "--out-dir", w.root / "b")
    ),
    "build-holdout-nan": Case(
        lambda w: s("data", "build", "metatool", w.conv, "holdout_fraction=nan", "--out-dir", w.root / "b")
    ),
    "build-out-dir-is-a-file": Case(lambda w: s("data", "build", "metatool", w.conv, "--out-dir", w.blocker)),
    "build-out-dir-under-a-file": Case(lambda w: s("data", "build", "metatool", w.conv, "--out-dir", w.under)),
    "build-seed-nan": Case(lambda w: s("data", "build", "metatool", w.conv, "--out-dir", w.root / "b", "--seed", "x")),
}


def score(w: Ws, *extra: object, preds: object = None, refs: object = None) -> list[str]:
    return s("eval", "score", "heldout", "--predictions", preds or w.preds, "--references", refs or w.refs, *extra)


def recommend(w: Ws, *extra: object) -> list[str]:
    return s("eval", "recommend", "rectools", "--data", w.ptr, "--limit", "2", "--seeds", "1", *extra)


def retrieval(w: Ws, *extra: object, queries: object = None, embedder: str = "hash-bow") -> list[str]:
    return s(
        "eval", "retrieval", "--method", "keyword", "--queries", queries or w.queries, "--embedder", embedder, *extra
    )


ONE_TOKEN = ("--limit", "1", "--max-new-tokens", "1")  # where a case reaches generation: the least of it

EVALS = {
    # eval score
    "score-predictions-missing": Case(lambda w: score(w, preds=w.missing)),
    "score-predictions-folder": Case(lambda w: score(w, preds=w.folder)),
    "score-predictions-dangling": Case(lambda w: score(w, preds=w.dangling)),
    "score-references-missing": Case(lambda w: score(w, refs=w.missing)),
    "score-references-under-a-file": Case(lambda w: score(w, refs=w.under)),
    "score-references-empty": Case(
        lambda w: score(w, refs=w.empty),
    ),
    "score-unknown-bench": Case(lambda w: s("eval", "score", "nope", "--predictions", w.preds, "--references", w.refs)),
    "score-summary-for-another-bench": Case(lambda w: score(w, "--summary", "itc")),
    "score-output-is-the-predictions": Case(lambda w: score(w, "-o", w.preds)),
    "score-per-item-is-the-references": Case(lambda w: score(w, "--per-item", w.refs)),
    "score-output-is-a-folder": Case(lambda w: score(w, "-o", w.folder)),
    "score-output-under-a-file": Case(lambda w: score(w, "-o", w.under)),
    # eval run: every refusal comes before a model is loaded, or on a folder that is no model
    "run-unknown-bench": Case(lambda w: s("eval", "run", "nope", "tiny", "--data", w.conv)),
    "run-model-missing": Case(lambda w: s("eval", "run", "heldout", w.missing, "--data", w.conv)),
    "run-model-not-a-run": Case(lambda w: s("eval", "run", "heldout", w.not_a_run, "--data", w.conv)),
    "run-model-fake-run": Case(
        lambda w: s("eval", "run", "heldout", w.fake_run, "--data", w.conv),
    ),
    "run-model-is-a-file": Case(lambda w: s("eval", "run", "heldout", w.conv, "--data", w.conv)),
    "run-data-missing": Case(lambda w: s("eval", "run", "heldout", "tiny", "--data", w.missing)),
    "run-data-empty": Case(lambda w: s("eval", "run", "heldout", "tiny", "--data", w.empty)),
    "run-limit-zero": Case(lambda w: s("eval", "run", "heldout", "tiny", "--data", w.conv, "--limit", "0")),
    "run-batch-size-negative": Case(
        lambda w: s("eval", "run", "heldout", "tiny", "--data", w.conv, "--batch-size", "-1")
    ),
    "run-max-new-tokens-zero": Case(
        lambda w: s("eval", "run", "heldout", "tiny", "--data", w.conv, "--max-new-tokens", "0")
    ),
    "run-temperature-nan": Case(
        lambda w: s("eval", "run", "heldout", "tiny", "--data", w.conv, "--temperature", "nan", *ONE_TOKEN)
    ),
    "run-temperature-negative": Case(
        lambda w: s("eval", "run", "heldout", "tiny", "--data", w.conv, "--temperature", "-1", *ONE_TOKEN),
    ),
    "run-unknown-format": Case(lambda w: s("eval", "run", "heldout", "tiny", "--data", w.conv, "--format", "nope")),
    "run-unknown-option": Case(lambda w: s("eval", "run", "heldout", "tiny", "--data", w.conv, "--option", "x=1")),
    "run-output-is-the-data": Case(lambda w: s("eval", "run", "heldout", "tiny", "--data", w.conv, "-o", w.conv)),
    "run-predictions-under-a-file": Case(
        lambda w: s("eval", "run", "heldout", "tiny", "--data", w.conv, "--predictions", w.under, *ONE_TOKEN),
        first=True,
    ),
    # eval retrieval
    "retrieval-queries-missing": Case(
        lambda w: s("eval", "retrieval", "--method", "keyword", "--queries", w.missing, "--embedder", "hash-bow")
    ),
    "retrieval-queries-folder": Case(
        lambda w: s("eval", "retrieval", "--method", "keyword", "--queries", w.folder, "--embedder", "hash-bow")
    ),
    "retrieval-queries-malformed": Case(
        lambda w: s("eval", "retrieval", "--method", "keyword", "--queries", w.malformed, "--embedder", "hash-bow")
    ),
    "retrieval-queries-empty": Case(
        lambda w: s("eval", "retrieval", "--method", "keyword", "--queries", w.empty, "--embedder", "hash-bow")
    ),
    "retrieval-library-missing": Case(lambda w: retrieval(w, "--library", w.missing)),
    "retrieval-library-malformed": Case(lambda w: retrieval(w, "--library", w.malformed)),
    "retrieval-no-method": Case(lambda w: s("eval", "retrieval", "--queries", w.queries)),
    "retrieval-alpha-nan": Case(lambda w: retrieval(w, "--alpha", "nan")),
    "retrieval-alpha-out-of-range": Case(lambda w: retrieval(w, "--alpha", "2")),
    "retrieval-k-zero": Case(lambda w: retrieval(w, "--k", "0")),
    "retrieval-k-words": Case(lambda w: retrieval(w, "--k", "one")),
    "retrieval-sample-negative": Case(lambda w: retrieval(w, "--sample", "-1")),
    "retrieval-unknown-embedder": Case(lambda w: retrieval(w, "--keyword-scoring", "dense", embedder="nope")),
    "retrieval-output-is-the-queries": Case(lambda w: retrieval(w, "-o", w.queries)),
    "retrieval-per-item-is-the-library": Case(lambda w: retrieval(w, "--per-item", w.library)),
    "retrieval-unknown-override": Case(
        lambda w: s("eval", "retrieval", "retrieval.nope=1"),
    ),
    # eval recommend
    "recommend-unknown-dataset": Case(lambda w: s("eval", "recommend", "nope", "--data", w.ptr)),
    "recommend-data-missing": Case(lambda w: s("eval", "recommend", "rectools", "--data", w.missing)),
    "recommend-data-is-a-file": Case(lambda w: s("eval", "recommend", "rectools", "--data", w.conv)),
    "recommend-data-empty-folder": Case(lambda w: s("eval", "recommend", "rectools", "--data", w.not_a_run)),
    "recommend-stages-out-of-range": Case(lambda w: recommend(w, "--stages", "4")),
    "recommend-stages-words": Case(lambda w: recommend(w, "--stages", "one")),
    "recommend-limit-negative": Case(lambda w: recommend(w, "--limit", "-1")),
    "recommend-seeds-zero": Case(lambda w: recommend(w, "--seeds", "0")),
    "recommend-llm-not-a-run": Case(lambda w: recommend(w, "--llm", w.not_a_run)),
    "recommend-llm-fake-run": Case(lambda w: recommend(w, "--llm", w.fake_run)),
    "recommend-output-in-the-data": Case(lambda w: recommend(w, "-o", w.ptr / "rectools_ptr" / "MetaTool_QT.json")),
    "recommend-per-item-is-a-folder": Case(lambda w: recommend(w, "--per-item", w.folder)),
}

BENCH = {
    "bench-render-missing": Case(lambda w: s("bench", "render", w.missing, "--format", "chatml")),
    "bench-render-folder": Case(lambda w: s("bench", "render", w.folder, "--format", "chatml")),
    "bench-render-dangling": Case(lambda w: s("bench", "render", w.dangling, "--format", "chatml")),
    "bench-render-malformed": Case(lambda w: s("bench", "render", w.malformed, "--format", "chatml")),
    "bench-render-empty": Case(lambda w: s("bench", "render", w.empty, "--format", "chatml")),
    "bench-render-unknown-format": Case(lambda w: s("bench", "render", w.conv, "--format", "nope")),
    "bench-render-tokenizer-missing": Case(
        lambda w: s("bench", "render", w.conv, "--format", "chatml", "--tokenizer", w.missing)
    ),
    "bench-render-limit-zero": Case(lambda w: s("bench", "render", w.conv, "--format", "chatml", "--limit", "0")),
    "bench-render-limit-negative": Case(lambda w: s("bench", "render", w.conv, "--format", "chatml", "--limit", "-1")),
    "bench-render-repeat-zero": Case(lambda w: s("bench", "render", w.conv, "--format", "chatml", "--repeat", "0")),
    "bench-data-missing": Case(lambda w: s("bench", "data", w.missing, "--format", "chatml")),
    "bench-data-folder": Case(lambda w: s("bench", "data", w.folder, "--format", "chatml")),
    "bench-data-malformed": Case(lambda w: s("bench", "data", w.malformed, "--format", "chatml")),
    "bench-data-empty": Case(lambda w: s("bench", "data", w.empty, "--format", "chatml")),
    "bench-data-workers-zero": Case(lambda w: s("bench", "data", w.conv, "--format", "chatml", "--workers", "0")),
    "bench-data-limit-negative": Case(lambda w: s("bench", "data", w.conv, "--format", "chatml", "--limit", "-1")),
    "bench-data-max-seq-len-zero": Case(
        lambda w: s("bench", "data", w.conv, "--format", "chatml", "--max-seq-len", "0")
    ),
    "bench-data-tokenizer-missing": Case(
        lambda w: s("bench", "data", w.conv, "--format", "chatml", "--tokenizer", w.missing)
    ),
    "bench-train-steps-zero": Case(lambda w: s("bench", "train", "recipe=tiny", "--steps", "0")),
    "bench-train-warmup-negative": Case(lambda w: s("bench", "train", "recipe=tiny", "--warmup", "-1")),
    "bench-train-unknown-recipe": Case(lambda w: s("bench", "train", "recipe=nope", "--out-dir", w.root / "bt")),
    "bench-train-unknown-key": Case(
        lambda w: s("bench", "train", "recipe=tiny", "nope.key=1", "--out-dir", w.root / "bt")
    ),
    "bench-train-not-an-override": Case(lambda w: s("bench", "train", "recipe=tiny", w.conv, "--out-dir", w.root)),
    "bench-train-out-dir-is-a-file": Case(lambda w: s("bench", "train", "recipe=tiny", "--out-dir", w.blocker)),
    "bench-train-out-dir-under-a-file": Case(lambda w: s("bench", "train", "recipe=tiny", "--out-dir", w.under)),
    "bench-train-micro-batch-zero": Case(
        lambda w: s("bench", "train", "recipe=tiny", "train.micro_batch_size=0", "--out-dir", w.root / "bt")
    ),
}

OTHERS = {
    # train: an override that does not compose is one line naming what would (Hydra's report has no error:)
    "train-unknown-key": Case(
        lambda w: s("train", "recipe=tiny", "train.nope=1", f"output_dir={w.root / 'run'}"),
        says=lambda w: "train has: objective, epochs, max_steps, micro_batch_size",
    ),
    "train-unknown-recipe": Case(lambda w: s("train", "recipe=nope"), says=lambda w: "valid in 'recipe': demo,"),
    "train-bad-value": Case(lambda w: s("train", "recipe=tiny", "train.micro_batch_size=abc")),
    "train-bad-syntax": Case(lambda w: s("train", "recipe=tiny", "train=[")),
    # export
    "export-run-missing": Case(lambda w: s("export", w.missing)),
    "export-run-is-a-file": Case(lambda w: s("export", w.conv)),
    "export-not-a-run": Case(lambda w: s("export", w.not_a_run)),
    "export-garbled-config": Case(
        lambda w: s("export", w.fake_run, "--out-dir", w.root / "merged"),
    ),
    "export-damaged-weights": Case(
        lambda w: s("export", w.damaged_run(), "--out-dir", w.root / "merged"),
        says=lambda w: w.root / "damaged_run" / "final" / "model.safetensors",  # the first damaged file a load reads
    ),
    "export-out-dir-is-a-file": Case(
        lambda w: s("export", w.damaged_run(), "--out-dir", w.blocker),
        says=lambda w: w.blocker,
    ),
    "export-out-dir-is-the-run": Case(
        lambda w: s("export", w.damaged_run(), "--out-dir", w.root / "damaged_run"),
        says=lambda w: f"refusing to export into {w.root / 'damaged_run'}: it is the run folder",
    ),
    "export-unknown-dtype": Case(lambda w: s("export", w.fake_run, "--dtype", "int3")),
    # demo
    "demo-out-dir-is-a-file": Case(lambda w: s("demo", "--out-dir", w.blocker)),
    "demo-out-dir-under-a-file": Case(lambda w: s("demo", "--out-dir", w.under)),
    "demo-unknown-format": Case(lambda w: s("demo", "--out-dir", w.root / "d", "--format", "nope")),
    # launch (--dry-run: nothing is started)
    "launch-no-recipe": Case(lambda w: s("launch", "--dry-run")),
    "launch-unknown-recipe": Case(lambda w: s("launch", "recipe=nope", "--dry-run")),
    "launch-nodes-zero": Case(lambda w: s("launch", "recipe=tiny", "--nodes", "0", "--dry-run")),
    "launch-gpus-negative": Case(lambda w: s("launch", "recipe=tiny", "--gpus-per-node", "-1", "--dry-run")),
    "launch-nodes-words": Case(lambda w: s("launch", "recipe=tiny", "--nodes", "two", "--dry-run")),
    "launch-unknown-launcher": Case(lambda w: s("launch", "recipe=tiny", "--launcher", "mpirun", "--dry-run")),
    "launch-unknown-key": Case(lambda w: s("launch", "recipe=tiny", "nope.key=1", "--dry-run")),
    "launch-output-dir-is-a-file": Case(
        lambda w: s("launch", "recipe=tiny", f"output_dir={w.blocker}", "--dry-run"),
    ),
    "launch-job-name-with-a-newline": Case(
        lambda w: s("launch", "recipe=tiny", f"output_dir={w.root}", "launcher.job_name='a\nrm -rf /'", "--dry-run"),
    ),
    "launch-micro-batch-zero": Case(
        lambda w: s("launch", "recipe=tiny", f"output_dir={w.root / 'l'}", "train.micro_batch_size=0", "--dry-run"),
    ),
}

CASES = {**DATA, **EVALS, **BENCH, **OTHERS}


def params() -> Iterator:
    for name, case in CASES.items():
        yield pytest.param(case, id=name)


class Hung(BaseException):
    """Not an OSError (TimeoutError is one): a verb's own `except OSError` must not turn it into an error line."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Fails the case when the verb runs longer than ``seconds`` (a SIGALRM in this, the main, thread)."""

    def expire(signum, frame):
        raise Hung(f"the verb ran longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def assert_one_error(code: object, out: str, err: str) -> str:
    errors = [line for line in err.splitlines() if ERROR_LINE.match(line)]
    tail = (out + err)[-3000:]
    assert "Traceback" not in out + err, tail
    assert code not in (0, None), f"exit {code}\n{tail}"
    assert len(errors) == 1, f"{len(errors)} error lines\n{tail}"
    return errors[0]


@pytest.fixture
def ws(tmp_path) -> Ws:
    return Ws(tmp_path)


@pytest.mark.parametrize("case", params())
def test_a_user_error_is_one_error_line(case, ws, capsys, monkeypatch):
    monkeypatch.chdir(ws.root)  # a default output (runs/...) lands in the case's own folder
    argv = case.argv(ws)
    before = ws.hashes()
    started = time.monotonic()
    with time_limit(SECONDS):
        try:
            code = main(argv)
        except SystemExit as stop:  # argparse's refusals
            code = stop.code
    captured = capsys.readouterr()
    error = assert_one_error(code, captured.out, captured.err)
    if case.says is not None:
        assert str(case.says(ws)) in error
    if case.first:
        assert captured.out == ""
    after = ws.hashes()
    assert {name: after.get(name) for name in before} == before, "an input was changed"
    assert time.monotonic() - started < SECONDS


# ---------------------------------------------------------------- bad lines counted, not fatal

# A reader that skips what it cannot read says so on the console and goes on (read = accepted + rejected): the
# house rule's other outcome. These exit 0 by design; the count must be there.
COUNTED = {
    "stats-malformed": (lambda w: s("data", "stats", w.malformed), "unreadable lines  1"),
    "stats-empty": (lambda w: s("data", "stats", w.empty), "records     0"),
    "score-predictions-malformed-only": (lambda w: score(w, preds=w.malformed), "unreadable lines (skipped): 1"),
}


@pytest.mark.parametrize("argv, count", COUNTED.values(), ids=COUNTED)
def test_an_unreadable_line_is_counted_on_the_console(argv, count, ws, capsys):
    before = ws.hashes()
    with time_limit(SECONDS):
        assert main(argv(ws)) == 0
    captured = capsys.readouterr()
    assert count in captured.out
    assert "Traceback" not in captured.out + captured.err
    assert ws.hashes() == before


# ---------------------------------------------------------------- inputs that could block a reader for good

HANG_SECONDS = 3  # the verbs' modules are imported by the cases above: a refusal takes well under a second

NON_REGULAR = {
    "stats": lambda w, f: s("data", "stats", f),
    "validate": lambda w, f: s("data", "validate", f),
    "convert-canonical": lambda w, f: s("data", "convert", "canonical", f, "-o", w.root / "o.jsonl"),
    "convert-glaive": lambda w, f: s("data", "convert", "glaive", f, "-o", w.root / "o.jsonl"),
    "render": lambda w, f: s("data", "render", f, "--format", "chatml", "-o", w.root / "r.jsonl"),
    "score": lambda w, f: score(w, preds=f),
    "retrieval": lambda w, f: retrieval(w, queries=f),
    "bench-render": lambda w, f: s("bench", "render", f, "--format", "chatml"),
    "bench-data": lambda w, f: s("bench", "data", f, "--format", "chatml"),
}


@pytest.mark.parametrize("verb", list(NON_REGULAR))
def test_a_fifo_given_as_an_input_is_refused_not_waited_on(verb, ws, capsys):
    fifo = ws.root / "fifo.jsonl"
    os.mkfifo(fifo)
    with time_limit(HANG_SECONDS):  # a SIGALRM ends the open() that waits for a writer
        try:
            code = main(NON_REGULAR[verb](ws, fifo))
        except SystemExit as stop:
            code = stop.code
    captured = capsys.readouterr()
    assert str(fifo) in assert_one_error(code, captured.out, captured.err)


def tooltrain(*argv: object, cwd: Path, memory: int | None = None, **popen) -> subprocess.Popen:
    """``python -m train ARGV`` as a user runs it; ``memory``: an address-space limit in bytes (a reader of an
    endless input fails at it instead of filling the machine)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}

    def limit() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.Popen(
        [sys.executable, "-m", "train", *map(str, argv)],
        cwd=cwd,
        env={**env, "WANDB_MODE": "offline", "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=limit,  # noqa: PLW1509 - it only calls setrlimit, safe between fork and exec
        **popen,
    )


def finish(process: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """Its stdout and stderr, or a failure after ``timeout`` seconds (the process killed: no test leaves one)."""
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        pytest.fail(f"{process.args[3:]} still running after {timeout} s")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_an_endless_device_is_refused(tmp_path):
    process = tooltrain("data", "validate", "/dev/zero", cwd=tmp_path, memory=2 << 30)
    out, err = finish(process, timeout=15)  # ~3 s of imports, then a refusal takes no time
    assert "/dev/zero" in assert_one_error(process.returncode, out, err)


@pytest.mark.slow  # waits 8 s for the benchmark to start before the SIGINT
def test_ctrl_c_is_one_error_line_and_exit_130(ws):
    """SIGINT while a verb works (a benchmark with a pass count that would take hours)."""
    process = tooltrain("bench", "render", ws.conv, "--format", "chatml", "--repeat", "1000000", cwd=ws.root)
    time.sleep(8)  # imports, the tokenizer, then the timed passes
    assert process.poll() is None, process.communicate()
    process.send_signal(signal.SIGINT)
    out, err = finish(process, timeout=60)
    assert assert_one_error(process.returncode, out, err) == "error: interrupted (Ctrl-C)"
    assert process.returncode == 130
