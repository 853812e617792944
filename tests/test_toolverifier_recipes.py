"""The toolverifier recipes (seed 003, A.7) and the ToolSelect rows the package ships for toolverifier_tiny."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest

from train.base.records import SourceError, read_text
from train.engine.config import compose
from train.sources.toolselect import read

ASSETS = Path(__file__).resolve().parents[1] / "train" / "assets" / "toolverifier_tiny"


def rows(name):
    out = list(read([ASSETS / name]))
    assert all(not hasattr(row, "reason") for row in out)  # no Rejected
    return out


def test_the_shipped_rows_are_toolselect_rows_unchanged_and_the_heldout_ones_never_train(shared_data):
    original = [r["text"] for r in csv.DictReader((shared_data / "toolselect_toolverifier" / "train.csv").open())]
    with gzip.open(ASSETS / "train.csv.gz", "rt", encoding="utf-8") as file:
        train = [r["text"] for r in csv.DictReader(file)]
    heldout = [r["text"] for r in csv.DictReader((ASSETS / "heldout.csv").open(encoding="utf-8"))]
    assert (len(train), len(heldout)) == (400, 50)
    assert set(train) <= set(original) and set(heldout) <= set(original)  # byte for byte
    assert not set(train) & set(heldout)


def test_chance_on_the_heldout_rows_is_the_documented_15_25_percent_and_12_5_on_the_25_scored():
    held = rows("heldout.csv")
    chance = sum(1 / len(conv.tools) for conv in held) / len(held)
    assert round(100 * chance, 2) == 15.25
    assert sorted(len(conv.tools) for conv in held).count(8) == 43  # 7 hard rows: 2, 3 or 4 candidates
    assert len(rows("train.csv.gz")) == 400
    scored = held[: compose(["recipe=toolverifier_tiny"]).eval.benchmarks[0].limit]
    assert (len(scored), sum(1 / len(conv.tools) for conv in scored) / len(scored)) == (25, 0.125)


def test_a_gzipped_input_reads_as_its_text_and_a_broken_one_is_one_clear_error(tmp_path):
    good, bad = tmp_path / "a.csv.gz", tmp_path / "b.csv.gz"
    good.write_bytes(gzip.compress(b"text\nx\n"))
    bad.write_bytes(b"not gzip")
    assert read_text(good) == "text\nx\n"
    with pytest.raises(SourceError, match=r"b.csv.gz: not a readable gzip file"):
        read_text(bad)


def test_the_full_recipe_has_a7s_settings_and_the_closest_batch_16_ranks_allow():
    cfg = compose(["recipe=toolverifier"])
    assert (cfg.model.name, cfg.model.chat_format, cfg.peft.kind.value) == ("llama2_70b", "toolselect_text", "none")
    assert (cfg.distributed.strategy.value, cfg.distributed.zero_stage) == ("zero3", 3)
    assert (cfg.launcher.nodes, cfg.launcher.gpus_per_node) == (2, 8)
    assert (cfg.train.epochs, cfg.optim.lr, cfg.optim.weight_decay) == (3, 1e-5, 0.1)
    assert cfg.optim.warmup_ratio > 0
    ranks = cfg.launcher.nodes * cfg.launcher.gpus_per_node
    assert cfg.train.global_batch_size == cfg.train.micro_batch_size * ranks == 16  # 8 needs 8 ranks
    args = dict(cfg.data.builder_args)
    assert args == {"gold_first": False, "drop_hard": False, "short_notes": False, "heldout": 0}  # A.4 Full Data
    assert -(-555 // 16) * 3 == 105 and round(555 * 3 / 8) == 208  # ours; the paper's ~208


def test_the_lora_alternative_and_the_papers_batch_compose():
    lora = compose(["recipe=toolverifier", "peft=lora", "optim.lr=1e-4", "train.global_batch_size=8"])
    assert (lora.peft.kind.value, lora.train.global_batch_size) == ("lora", 8)
    offload = compose(["recipe=toolverifier", "distributed=zero3_offload", "train.global_batch_size=8"])
    assert offload.distributed.offload_optimizer and offload.distributed.offload_params


def test_the_tiny_recipe_scores_the_heldout_rows_before_and_after():
    cfg = compose(["recipe=toolverifier_tiny"])
    (bench,) = cfg.eval.benchmarks
    assert (bench.name, bench.source, list(bench.data)) == (
        "toolselect",
        "toolselect",
        ["pkg://train/assets/toolverifier_tiny/heldout.csv"],
    )
    assert cfg.eval.at_start and cfg.eval.at_end
    assert [src.inputs for src in cfg.data.sources] == [["pkg://train/assets/toolverifier_tiny/train.csv.gz"]]


def test_the_launch_dry_run_renders_a_2_node_sbatch_script(tmp_path, capsys):
    from train.cli import main

    out = tmp_path / "run"
    code = main(["launch", "recipe=toolverifier", "launcher=slurm", f"output_dir={out}", "--dry-run"])
    assert code == 0
    script = (out / "toolverifier.sbatch").read_text()
    assert "#SBATCH --nodes=2" in script and "#SBATCH --gpus-per-node=8" in script
    assert "--nnodes 2 --nproc-per-node 8" in script
