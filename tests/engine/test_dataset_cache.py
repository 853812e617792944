"""The cached dataset build: a second build with the same inputs loads, any change to what the rows
depend on (data config, chat format, input bytes) gives a new key; and every conversation read is
accounted for exactly once in the report."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
from session_cache import shared_tokenizer

from train.data.dataset import build_dataset
from train.data.inputs import cache_key
from train.tokenizers import load_tokenizer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "engine_cache"
# every way a conversation read can end: the build's report must account for each read exactly once
OUTCOMES = (
    "rejected_by_reader",
    "dropped_by_builder",
    "invalid",
    "unrenderable",
    "dropped_overlong",
    "dropped_untrained",
    "train_rows",
    "eval_rows",
)


def data_config(inputs: list[str], **changes) -> dict:
    cfg = {
        "name": "t",
        "sources": [{"name": "glaive", "inputs": inputs, "limit": None}],
        "builder": None,
        "builder_args": {},
        "max_seq_len": 1024,
        "overlong": "truncate",
        "packing": True,
        "last_turn_only": False,
        "part_weights": {},
        "eval_fraction": 0.1,
        "cache_dir": None,
    }
    cfg.update(changes)
    return cfg


@pytest.fixture(scope="module")
def tiny():
    return load_tokenizer("tiny_chatml")


@pytest.fixture
def sample(tmp_path) -> Path:
    """A private copy of the shipped 60-conversation glaive sample (its bytes get edited below)."""
    from train.data.inputs import resolve_input

    path = tmp_path / "glaive_sample.json"
    shutil.copy(resolve_input("pkg://train/assets/demo/glaive_sample.json"), path)
    return path


def test_a_second_build_with_the_same_config_loads_the_cached_rows(tiny, sample, tmp_path):
    cfg = data_config([str(sample)])
    first = build_dataset(cfg, "chatml", tiny, tmp_path / "cache")
    second = build_dataset(copy.deepcopy(cfg), "chatml", tiny, tmp_path / "cache")
    assert (first.from_cache, second.from_cache) == (False, True)
    assert second.cache_dir == first.cache_dir
    assert second.train == first.train and second.eval == first.eval
    assert second.report == first.report
    assert (first.report.train_rows, first.report.eval_rows) == (len(first.train), len(first.eval)) == (55, 4)


def test_a_changed_data_config_format_or_input_gives_a_new_key(tiny, sample):
    base = cache_key(data_config([str(sample)]), "chatml", tiny)
    assert cache_key(data_config([str(sample)]), "chatml", tiny) == base  # deterministic
    changed_config = [
        data_config([str(sample)], max_seq_len=512),
        data_config([str(sample)], overlong="drop"),
        data_config([str(sample)], packing=False),
        data_config([str(sample)], eval_fraction=0.2),
        data_config([str(sample)], part_weights={"call_args": 2.0}),
    ]
    keys = {cache_key(cfg, "chatml", tiny) for cfg in changed_config}
    assert len(keys) == len(changed_config) and base not in keys
    assert cache_key(data_config([str(sample)]), "qwen2_5", tiny) != base
    assert cache_key(data_config([str(sample)]), "chatml", tiny, extra={"seed": 1}) != base
    sample.write_bytes(sample.read_bytes().replace(b"chicken", b"Chicken", 1))  # one byte of the input
    assert cache_key(data_config([str(sample)]), "chatml", tiny) != base


def test_an_edited_input_file_is_rebuilt_not_loaded(tiny, sample, tmp_path):
    cfg = data_config([str(sample)])
    first = build_dataset(cfg, "chatml", tiny, tmp_path / "cache")
    sample.write_bytes(sample.read_bytes().replace(b"chicken", b"Chicken", 1))
    edited = build_dataset(cfg, "chatml", tiny, tmp_path / "cache")
    assert edited.from_cache is False and edited.cache_dir != first.cache_dir
    assert sorted(p.name for p in (tmp_path / "cache").iterdir() if p.is_dir()) == sorted(
        [first.cache_dir.name, edited.cache_dir.name]
    )


def test_every_conversation_read_is_counted_once(tmp_path):
    """The fixture reaches every outcome (its README lists the cases), so each counter is checked."""
    cfg = data_config([str(FIXTURES / "accounting.jsonl")], max_seq_len=256, overlong="drop", eval_fraction=0.25)
    cfg["sources"][0]["name"] = "canonical"
    built = build_dataset(cfg, "llama3_1", shared_tokenizer("llama3"), tmp_path / "cache")
    report = built.report
    assert {key: getattr(report, key) for key in ("read", *OUTCOMES, "truncated")} == {
        "read": 14,
        "rejected_by_reader": 2,
        "dropped_by_builder": 0,
        "invalid": 1,
        "unrenderable": 1,
        "dropped_overlong": 1,
        "dropped_untrained": 1,
        "train_rows": 6,
        "eval_rows": 2,
        "truncated": 0,
    }
    assert report.read == sum(getattr(report, key) for key in OUTCOMES)
    assert sorted(row["id"] for row in [*built.train, *built.eval]) == [f"good-{i}" for i in range(8)]
    assert [row["id"] for row in built.eval] == ["good-3", "good-4"]
    assert report.trained_tokens == sum(
        sum(1 for label in row["labels"][1:] if label != -100) for row in [*built.train, *built.eval]
    )
    assert report.trained_tokens + report.masked_tokens == sum(
        len(row["input_ids"]) for row in [*built.train, *built.eval]
    )
    assert sorted(report.reasons.values()) == [1, 1, 1, 1, 1, 1]
    assert sum(report.reasons.values()) == report.read - report.train_rows - report.eval_rows


def test_the_shipped_demo_data_adds_up_with_truncation(tiny, tmp_path):
    built = build_dataset(
        data_config(["pkg://train/assets/demo/glaive_en_300.json"], max_seq_len=256), "chatml", tiny, tmp_path / "cache"
    )
    report = built.report
    assert (report.read, report.invalid, report.truncated, report.dropped_untrained) == (300, 1, 299, 221)
    assert (report.train_rows, report.eval_rows) == (len(built.train), len(built.eval)) == (65, 13)
    assert report.read == sum(getattr(report, key) for key in OUTCOMES)
