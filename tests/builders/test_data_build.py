"""``tooltrain data build metatool``: outputs, exact counts, byte-identical rebuilds, the shipped tiny bench."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from train.cli import main
from train.engine.config import compose

OUTPUTS = ("train.jsonl", "bench.jsonl", "library.jsonl", "report.json")
ASSETS = Path(__file__).resolve().parents[2] / "train" / "assets" / "metatool_tiny"
TINY = "pkg://train/assets/metatool_tiny"
# the command written in conf/data/mt_llama_tiny.yaml's header: it made the shipped bench
TINY_BUILD = [
    "glaive:pkg://train/assets/demo/glaive_sample.json",
    *(
        f"bfcl:{TINY}/bfcl/BFCL_v2_{c}.json,{TINY}/bfcl/possible_answer/BFCL_v2_{c}.json"
        for c in ("simple", "multiple", "parallel", "parallel_multiple")
    ),
    f"toolace:{TINY}/toolace_tiny.json",
    "holdout_fraction=0.15",
    "embedder=hash-bow",
    "pool_size=30",
    "--seed",
    "42",
]


def build(out: Path, *args: str) -> int:
    return main(["data", "build", "metatool", *args, "--out-dir", str(out)])


def small_inputs(fixtures: Path) -> list[str]:
    return [
        str(fixtures / "builders" / "dialogues.jsonl"),
        str(fixtures / "builders" / "broken.jsonl"),
        "glaive:train/assets/demo/glaive_sample.json",
        "holdout_fraction=0.2",
        "embedder=hash-bow",
        "pool_size=10",
        "--seed",
        "7",
    ]


def test_build_writes_every_count(tmp_path, fixtures, capsys):
    assert build(tmp_path, *small_inputs(fixtures)) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["read"] == 68  # 6 fixture dialogues + 2 broken records + 60 glaive
    assert report["rejected"] == {"a tool_query, not a conversation": 1, "invalid JSON": 1}
    assert report["skipped"] == {
        "invalid dialogue (arguments-schema)": 1,
        "invalid dialogue (undefined-tool)": 1,
        "no assistant turn (nothing to train on or to score)": 1,
    }
    train = report["train"]
    assert (report["held_out"], train["rows"], train["open"], train["closed"]) == (14, 49, 24, 25)
    assert (
        report["read"]
        == sum(report["rejected"].values()) + sum(report["skipped"].values()) + report["held_out"] + train["rows"]
    )
    assert (train["meta_tool_insertions"], train["rewrites_kept"], train["rewrites_dropped"]) == (10, 9, 1)
    assert train["rewrite_failures"] == {"similarity below 0.9": 4} and train["rewrite_attempts"] == 13
    bench = report["bench"]
    assert (bench["dialogues"], bench["rows"]) == (14, 50)
    assert bench["by_category"] == {
        "chat": 18,
        "function_existing": 8,
        "function_missing": 16,
        "multi_call": 1,
        "single_call": 7,
    }
    assert bench["by_world"] == {"closed": 17, "open": 33} and sum(bench["by_difficulty"].values()) == 50
    assert report["library"] == {"tools": 31, "name_conflicts": 17}
    # the files hold what the report says
    lines = {name: (tmp_path / name).read_text(encoding="utf-8").splitlines() for name in OUTPUTS[:3]}
    assert (len(lines["train.jsonl"]), len(lines["bench.jsonl"]), len(lines["library.jsonl"])) == (49, 50, 1)
    worlds = [json.loads(line)["meta"]["world"] for line in lines["train.jsonl"]]
    assert (worlds.count("open"), worlds.count("closed")) == (24, 25)
    assert len(json.loads(lines["library.jsonl"][0])["tools"]) == 31
    out = capsys.readouterr().out
    assert out.startswith("read 68: training rows 49 (open 24, closed 25), held out 14, skipped 3, rejected 2\n")


def test_rebuild_with_the_same_seed_is_byte_identical(tmp_path, fixtures):
    assert build(tmp_path / "a", *small_inputs(fixtures)) == 0
    assert build(tmp_path / "b", *small_inputs(fixtures)) == 0
    for name in OUTPUTS:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    other = [*small_inputs(fixtures)]
    other[other.index("--seed") + 1] = "8"
    assert build(tmp_path / "c", *other) == 0
    assert (tmp_path / "a" / "train.jsonl").read_bytes() != (tmp_path / "c" / "train.jsonl").read_bytes()


def test_bad_inputs_and_arguments_exit_2(tmp_path, capsys):
    assert build(tmp_path, str(tmp_path / "missing.jsonl")) == 2
    assert f"error: {tmp_path / 'missing.jsonl'}: no such file" in capsys.readouterr().err
    assert build(tmp_path, "glaive:" + str(tmp_path / "missing.json")) == 2
    assert f"error: {tmp_path / 'missing.json'}: cannot read (No such file or directory)" in capsys.readouterr().err
    assert build(tmp_path, "train/assets/demo/glaive_sample.json", "holdout_fraction=1") == 2
    assert "holdout_fraction (the share of dialogues held out for Meta-Bench) must be in (0, 1), got 1.0" in (
        capsys.readouterr().err
    )
    assert build(tmp_path, "glaive:train/assets/demo/glaive_sample.json", "open_fraction=2") == 2
    assert "open_fraction must be in [0, 1], got 2.0" in capsys.readouterr().err


def test_shipped_tiny_bench_is_what_the_command_builds(tmp_path):
    assert build(tmp_path, *TINY_BUILD) == 0
    for name in ("bench.jsonl", "library.jsonl", "report.json"):
        assert (tmp_path / name).read_bytes() == (ASSETS / name).read_bytes(), (
            f"{name}: rerun the command in conf/data/mt_llama_tiny.yaml"
        )
    header = (Path(__file__).resolve().parents[2] / "conf" / "data" / "mt_llama_tiny.yaml").read_text()
    assert (
        "holdout_fraction=0.15 embedder=hash-bow pool_size=30 --out-dir train/assets/metatool_tiny --seed 42" in header
    )


def test_the_recipe_trains_on_exactly_the_commands_training_rows(tmp_path):
    """builder: metatool over the tiny data config == the CLI's train.jsonl; its held-out dialogues == the bench's."""
    from train.builders import bind
    from train.data.dataset import BuildReport, read_conversations
    from train.schema import dumps

    cfg = compose(["recipe=mt_llama_tiny"])
    assert cfg.seed == 42 and cfg.data.builder == "metatool"
    args = OmegaConf.to_container(cfg.data.builder_args, resolve=True)
    assert (args["holdout_fraction"], args["embedder"]) == (0.15, "hash-bow")
    report = BuildReport()
    dropped: list[str] = []
    sources = OmegaConf.to_container(cfg.data.sources, resolve=True)
    rows = [
        dumps(c) + "\n" for c in bind("metatool", 42, args)(read_conversations(sources, report), on_drop=dropped.append)
    ]
    assert build(tmp_path, *TINY_BUILD) == 0
    assert "".join(rows) == (tmp_path / "train.jsonl").read_text(encoding="utf-8")
    built = json.loads((ASSETS / "report.json").read_text())
    assert dropped.count("held out for Meta-Bench") == built["held_out"] == 13
    assert len(dropped) + len(rows) == report.read == built["read"] == 84
    bench_dialogues = {
        json.loads(line)["meta"]["dialogue"] for line in (ASSETS / "bench.jsonl").read_text().splitlines()
    }
    train_ids = {json.loads(row)["id"] for row in rows}
    assert len(bench_dialogues) == 13 and not bench_dialogues & train_ids


@pytest.mark.parametrize("recipe", ["mt_llama", "mt_llama_tiny"])
def test_recipes_compose_with_the_papers_settings(recipe):
    cfg = compose([f"recipe={recipe}"])
    assert cfg.model.chat_format == "llama3_1_metatool" and cfg.data.builder == "metatool"
    assert [b.name for b in cfg.eval.benchmarks] == ["metabench"] and cfg.eval.at_end
    assert str(cfg.peft.kind.value) == "lora" and not cfg.data.last_turn_only
    if recipe == "mt_llama":
        assert cfg.model.path == "meta-llama/Llama-3.1-8B-Instruct" and str(cfg.distributed.strategy.value) == "ddp"
        assert (
            cfg.train.epochs,
            cfg.train.global_batch_size,
            cfg.optim.lr,
            cfg.optim.warmup_ratio,
            cfg.optim.scheduler,
            cfg.data.max_seq_len,
        ) == (3, 128, 5e-5, 0.04, "cosine", 4096)
