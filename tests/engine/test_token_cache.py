"""The memory-mapped tokenized cache (issue 18): the same bytes and report from 1 or N build workers, the rows the
JSON Lines cache held, the packing the lists gave, the same training losses, and no process materialising all rows.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from train.data import dataset
from train.data.dataset import BuildReport, build_dataset, build_rows, read_conversations
from train.data.inputs import cache_key
from train.data.ordered_pool import ordered_map
from train.data.packing import PackedCollator, PackedRows, best_fit_pack, pack_samples
from train.data.token_store import TokenizedRows
from train.formats import get_format
from train.formats.tokenize import IGNORE_INDEX
from train.tokenizers import load_tokenizer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
OUTCOMES = ("rejected_by_reader", "dropped_by_builder", "invalid", "unrenderable", "dropped_overlong")
OUTCOMES += ("dropped_untrained", "train_rows", "eval_rows")


def data_config(**changes) -> dict:
    cfg = {
        "name": "t",
        "sources": [
            {"name": "glaive", "inputs": ["pkg://train/assets/demo/glaive_en_300.json"], "limit": None},
            {"name": "canonical", "inputs": [str(FIXTURES / "engine_cache" / "accounting.jsonl")], "limit": None},
        ],
        "builder": None,
        "builder_args": {},
        "max_seq_len": 256,
        "overlong": "drop",
        "packing": True,
        "last_turn_only": False,
        "part_weights": {"call_args": 2.0},
        "eval_fraction": 0.2,
        "cache_dir": None,
    }
    return {**cfg, **changes}


@pytest.fixture(scope="module")
def llama3(built_tokenizer):
    return built_tokenizer("llama3")


def cache_files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


# slow tier: starts worker processes; test_ordered_map_keeps_the_order_runs_in_workers... has their ordering and
# test_the_number_of_workers_is_not_in_the_cache_key the key
@pytest.mark.slow
def test_one_and_two_workers_write_the_same_bytes_and_report(llama3, tmp_path, monkeypatch):
    monkeypatch.setattr(dataset, "BUILD_CHUNK", 16)  # 20 chunks: the two workers take turns many times
    one = build_dataset(data_config(num_workers=1), "llama3_1", llama3, tmp_path / "one")
    two = build_dataset(data_config(num_workers=2), "llama3_1", llama3, tmp_path / "two")
    assert one.cache_dir.name == two.cache_dir.name  # the number of workers is not in the key: same data
    assert cache_files(one.cache_dir) == cache_files(two.cache_dir)
    assert one.report == two.report
    report = one.report
    assert report.read == sum(getattr(report, key) for key in OUTCOMES) == 314
    assert (report.rejected_by_reader, report.unrenderable) == (2, 1) and report.train_rows and report.eval_rows
    assert {"train.weights.f32", "eval.weights.f32", "layout.json"} <= set(cache_files(one.cache_dir))


def test_the_cache_holds_the_rows_the_json_lines_cache_held(llama3, tmp_path, monkeypatch):
    monkeypatch.setattr(dataset, "BUILD_CHUNK", 16)
    cfg = data_config(num_workers=2)
    built = build_dataset(cfg, "llama3_1", llama3, tmp_path / "cache")
    report = BuildReport()
    rows = build_rows(read_conversations(cfg["sources"], report), get_format("llama3_1"), llama3, cfg, report)
    assert report == built.report  # the single-process, in-memory build counts the same, reasons in the same order
    assert list(built.train) == [json.loads(json.dumps(row)) for row in rows.train]  # weights 2.0/1.0: exact in f32
    assert list(built.eval) == rows.eval
    assert [conv.id for conv in built.eval_conversations] == [conv.id for conv in rows.eval_conversations]
    reopened = build_dataset(cfg, "llama3_1", llama3, tmp_path / "cache")
    assert reopened.from_cache and list(reopened.train) == list(built.train) and reopened.report == built.report


def test_the_number_of_workers_is_not_in_the_cache_key(llama3):
    assert cache_key(data_config(num_workers=1), "llama3_1", llama3) == cache_key(data_config(), "llama3_1", llama3)


def old_packed_collator(rows: list[dict], pad_id: int, width: int) -> dict[str, torch.Tensor]:
    """The collator of the JSON Lines cache (Python lists, before the memory-mapped cache), kept as the reference."""
    batch = {"input_ids": [], "labels": [], "position_ids": []}
    for row in rows:
        pad = width - len(row["input_ids"])
        batch["input_ids"].append(list(row["input_ids"]) + [pad_id] * pad)
        batch["labels"].append(list(row["labels"]) + [IGNORE_INDEX] * pad)
        batch["position_ids"].append(list(row["position_ids"]) + list(range(pad)))
    tensors = {key: torch.tensor(value, dtype=torch.long) for key, value in batch.items()}
    if any("loss_weights" in row for row in rows):
        weights = [list(row["loss_weights"]) + [0.0] * (width - len(row["loss_weights"])) for row in rows]
        tensors["loss_weights"] = torch.tensor(weights, dtype=torch.float32)
    return tensors


# the weighted case is the slow tier's: test_recipe_tiny_trains_to_the_same_losses... has weights in the default one
@pytest.mark.parametrize("weights", [{}, pytest.param({"call_args": 2.0, "text": 0.5}, marks=pytest.mark.slow)])
def test_packing_from_lengths_gives_the_rows_and_batches_the_lists_gave(weights, tmp_path):
    tiny = load_tokenizer("tiny_chatml")
    cfg = data_config(part_weights=weights, max_seq_len=1024, overlong="truncate", num_workers=1)
    cfg["sources"] = cfg["sources"][:1]
    built = build_dataset(cfg, "chatml", tiny, tmp_path / "cache")
    lists = [json.loads(json.dumps(row)) for row in build_rows(
        read_conversations(cfg["sources"], BuildReport()), get_format("chatml"), tiny, cfg, BuildReport()
    ).train]  # fmt: skip
    bins = best_fit_pack(built.train.lengths.tolist(), 1024)
    assert bins == best_fit_pack([len(row["input_ids"]) for row in lists], 1024)
    packed = PackedRows(built.train, bins)
    assert len(packed) == len(bins) > 10 and packed.has_loss_weights == bool(weights)
    for index in range(len(bins)):
        new, old = packed[index], pack_samples(lists, bins[index])
        assert set(new) == set(old)
        for key in old:
            assert np.array_equal(new[key], np.asarray(old[key], dtype=new[key].dtype)), key
    for start in range(0, len(bins), 4):
        members = list(range(start, min(start + 4, len(bins))))
        new_batch = PackedCollator(0, pad_to=1024)([packed[i] for i in members])
        old_batch = old_packed_collator([pack_samples(lists, bins[i]) for i in members], 0, 1024)
        assert new_batch.keys() == old_batch.keys()
        assert all(torch.equal(new_batch[key], old_batch[key]) for key in old_batch)


def test_training_rows_are_cut_from_the_maps_never_all_materialised(tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    from train.engine.run import make_rows

    cfg = data_config(max_seq_len=1024, overlong="truncate", num_workers=1, part_weights={})
    cfg["sources"] = cfg["sources"][:1]
    built = build_dataset(cfg, "chatml", load_tokenizer("tiny_chatml"), tmp_path / "cache")

    def refuse(self, index):
        raise AssertionError("a whole row was materialised as Python lists")

    monkeypatch.setattr(TokenizedRows, "__getitem__", refuse)
    rows, info = make_rows(built, OmegaConf.create({"packing": True, "max_seq_len": 1024}))
    assert info["samples"] == len(built.train) and len(rows) == info["rows"]
    assert sum(len(rows[i]["input_ids"]) for i in range(len(rows))) == int(built.train.lengths.sum())


def test_ordered_map_keeps_the_order_runs_in_workers_and_reads_ahead_boundedly():
    pulled = []

    def items():
        for number in range(30):
            pulled.append(number)
            yield number

    lead = []
    results = []
    for item, result in ordered_map(lambda: lambda x: (x * x, os.getpid()), items(), workers=2, window=3):
        lead.append(len(pulled) - item)
        results.append(result)
    assert [square for square, _ in results] == [x * x for x in range(30)]
    assert os.getpid() not in {pid for _, pid in results}
    assert max(lead) <= 3  # never more than the window in flight: a long stream is mapped in bounded memory
    in_process = list(ordered_map(lambda: lambda x: os.getpid(), range(5), workers=1))
    assert {pid for _, pid in in_process} == {os.getpid()}


SMALL_TINY = ["recipe=tiny", "data.sources.0.limit=16", "data.max_seq_len=256", "peft.dropout=0", "eval=none"]


@pytest.mark.parametrize(
    "weights",
    [
        [],
        # slow tier: the packing test above gives the weighted batches the lists gave, and the unweighted case here
        # trains on them alike: this run adds nothing the two do not pin
        pytest.param(["+data.part_weights.call_args=2.0"], marks=pytest.mark.slow),
    ],
)
def test_recipe_tiny_trains_to_the_same_losses_from_the_json_lines_rows(
    weights, tooltrain_cache, tmp_path, monkeypatch
):
    """A few steps of recipe=tiny from the memory-mapped cache, and from the rows as the JSON Lines cache gave them
    (Python lists, packed by pack_samples, collated by the old collator): the same losses, exactly."""
    from omegaconf import OmegaConf

    import train.engine.run as run_module
    from train.engine.config import compose

    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tooltrain_cache))
    overrides = [*SMALL_TINY, "train.max_steps=3", "train.save_steps=100", *weights]

    def losses(name: str) -> list[float]:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            result = run_module.run(compose([*overrides, f"output_dir={tmp_path / name}"]))
        finally:
            torch.set_num_threads(threads)
        assert result.status == "completed"
        return result.losses

    new = losses("new")

    class JsonlRows(list):
        has_loss_weights = False

    def jsonl_make_rows(built, data_cfg):
        cfg = OmegaConf.to_container(data_cfg, resolve=True, enum_to_str=True)
        split = build_rows(
            read_conversations(cfg["sources"], BuildReport()), get_format("chatml"), tokenizer, cfg, BuildReport()
        )
        samples = [json.loads(json.dumps(row)) for row in split.train]  # what train.jsonl gave back
        bins = best_fit_pack([len(row["input_ids"]) for row in samples], cfg["max_seq_len"])
        rows = JsonlRows(pack_samples(samples, members) for members in bins)
        rows.has_loss_weights = any("loss_weights" in row for row in rows)
        return rows, {"samples": len(samples), "rows": len(rows), "padding_efficiency": 0.0}

    class OldCollator:
        def __init__(self, pad_token_id, pad_to=None):
            self.pad_token_id, self.pad_to = pad_token_id, pad_to

        def __call__(self, rows):
            return old_packed_collator(rows, self.pad_token_id, self.pad_to)

    tokenizer = load_tokenizer("tiny_chatml")
    monkeypatch.setattr(run_module, "make_rows", jsonl_make_rows)
    monkeypatch.setattr(run_module, "PackedCollator", OldCollator)
    assert losses("old") == new and len(new) == 3


@pytest.mark.slow  # a benchmark's smoke run (`tooltrain bench data`), as the other benchmarks' smoke runs are
def test_the_cache_benchmark_measures_a_build_and_a_reader(tmp_path):
    from train.data.cache_bench import corpus_config, measure_build, measure_reader, replicated_cache, synthetic_corpus

    corpus = synthetic_corpus(tmp_path / "corpus.jsonl", 70, inputs=("pkg://train/assets/demo/glaive_sample.json",))
    ids = [json.loads(line)["id"] for line in corpus.open(encoding="utf-8")]
    assert len(ids) == len(set(ids)) == 70
    build = measure_build(corpus_config(corpus, max_seq_len=512), "chatml", "tiny_chatml", tmp_path / "cache", 1)
    assert build["report"]["read"] == 70 and build["peak_rss_mib"] > 0 and build["conversations_per_s"] > 0
    reader = measure_reader(Path(build["cache_dir"]), 512, micro_batch=4)
    assert reader["samples"] == build["report"]["train_rows"] and reader["rows"] > 0
    assert reader["rss_anon_peak_mib"] >= reader["rss_anon_opened_mib"] > 0
    copies = TokenizedRows(replicated_cache(Path(build["cache_dir"]), tmp_path / "x3", 3), "train")
    original = TokenizedRows(Path(build["cache_dir"]), "train")
    assert np.array_equal(copies.lengths, np.tile(original.lengths, 3)) and copies.id_of(0).endswith("-x0")


def test_data_num_workers_is_checked_at_compose_time_and_free_on_resume():
    from train.engine.config import ConfigError, compose
    from train.engine.resume_config import FREE, rule_for

    assert compose(["recipe=tiny", "data.num_workers=3"]).data.num_workers == 3
    assert compose(["recipe=tiny"]).data.num_workers is None  # every available core
    with pytest.raises(ConfigError, match=r"data.num_workers must be >= 1"):
        compose(["recipe=tiny", "data.num_workers=0"])
    assert rule_for("data.num_workers")[0] == FREE
