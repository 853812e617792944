"""Issue 28 item 3: mixing. ``data.sources.*.weight`` repeats or downsamples each source's conversations
deterministically (``train.data.dataset.copies``), copies are named ``<id>#k`` and follow their original's side of the
eval split (left out of eval: a held-out conversation is evaluated once and never trained), the build report and the
summary count each source, and a default weight leaves the cache key as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from train.data.dataset import BuildReport, build_dataset, read_conversations
from train.data.ids import is_eval, split_id
from train.data.inputs import cache_key
from train.data.mixing import copies, mixing_problems, source_weights
from train.engine.config import ConfigError, compose
from train.engine.summary import format_summary
from train.tokenizers import load_tokenizer

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def record(rid: str, city: str = "Paris") -> dict:
    call = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": city}}}
    messages = [
        {"role": "user", "content": f"Weather in {city}?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    return {"id": rid, "tools": [TOOL], "messages": messages}


def export(path: Path, *records: dict) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def spec(file: str, weight: float = 1.0) -> dict:
    return {"name": "canonical", "inputs": [file], "limit": None, "weight": weight}


def data_config(specs: list[dict], eval_fraction: float = 0.0, workers: int = 1) -> dict:
    return {
        "name": "mix",
        "sources": specs,
        "builder": None,
        "builder_args": {},
        "max_seq_len": 512,
        "overlong": "drop",
        "packing": False,
        "last_turn_only": False,
        "part_weights": {},
        "eval_fraction": eval_fraction,
        "cache_dir": None,
        "num_workers": workers,
    }


def test_whole_and_fractional_weights_give_exact_copies_and_ids(tmp_path):
    a = export(tmp_path / "a.jsonl", record("a0"), record("a1"))
    b = export(tmp_path / "b.jsonl", *(record(f"b{n}", f"C{n}") for n in range(200)))
    report = BuildReport()
    ids = [conv.id for conv in read_conversations([spec(a, 3), spec(b, 0.5)], report)]
    assert ids[:6] == ["a0", "a0#2", "a0#3", "a1", "a1#2", "a1#3"]
    kept = ids[6:]
    assert kept == [f"b{n}" for n in range(200) if copies(f"b{n}", 1, 0.5) == 1]  # the seeded half, in order
    assert 70 < len(kept) < 130  # about half
    assert report.per_source == [
        {"source": 0, "name": "canonical", "weight": 3.0, "read": 2, "accepted": 2, "rejected": 0, "weighted": 6},
        {
            "source": 1,
            "name": "canonical",
            "weight": 0.5,
            "read": 200,
            "accepted": 200,
            "rejected": 0,
            "weighted": len(kept),
        },
    ]
    # 2.5: twice each, and a third time for a seeded share (the same draw on every run)
    assert [copies(f"b{n}", 0, 2.5) for n in range(200)] == [copies(f"b{n}", 0, 2.5) for n in range(200)]
    assert {copies(f"b{n}", 0, 2.5) for n in range(200)} == {2, 3}


def test_a_file_listed_twice_with_weights_3_and_1_is_two_sources():
    glaive = "pkg://train/assets/demo/glaive_sample.json"
    report = BuildReport()
    specs = [
        {"name": "glaive", "inputs": [glaive], "limit": 4, "weight": 3},
        {"name": "glaive", "inputs": [glaive], "limit": 4, "weight": 1},
    ]
    ids = [conv.id for conv in read_conversations(specs, report)]
    assert len(ids) == 16 and len(set(ids)) == 16  # 4 x 3 + 4 x 1, every id unique
    assert [entry["weighted"] for entry in report.per_source] == [12, 4]
    assert report.renamed_ids == 4 and all(i.startswith("s1/") for i in ids[12:])


def test_copies_follow_their_original_and_are_never_held_out_twice(tmp_path, tok):
    file = export(tmp_path / "a.jsonl", *(record(f"c{n}", f"City{n}") for n in range(40)))
    built = build_dataset(data_config([spec(file, 2)], eval_fraction=0.3), "chatml", tok, tmp_path / "cache")
    train_ids, eval_ids = built.train.ids(), [row["id"] for row in built.eval]
    assert eval_ids and all("#" not in i for i in eval_ids)  # held out once, the copy left out
    assert not {split_id(i) for i in train_ids} & set(eval_ids)  # no copy of a held-out conversation is trained
    assert sorted(train_ids) == sorted(i for n in range(40) if not is_eval(f"c{n}", 0.3) for i in (f"c{n}", f"c{n}#2"))
    summary = format_summary({"status": "completed", "data": built.report.to_dict()}, [], tmp_path).splitlines()
    assert "  source 0  canonical x2: 40 read, 40 accepted, 0 rejected -> 80 after weighting" in summary


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("tiny_chatml")


def test_the_weighted_build_is_the_same_with_one_or_two_workers(tmp_path, tok):
    a = export(tmp_path / "a.jsonl", *(record(f"a{n}", f"A{n}") for n in range(30)))
    b = export(tmp_path / "b.jsonl", *(record(f"b{n}", f"B{n}") for n in range(30)))
    specs = [spec(a, 2.5), spec(b, 0.5)]
    one = build_dataset(data_config(specs, 0.2, workers=1), "chatml", tok, tmp_path / "one")
    two = build_dataset(data_config(specs, 0.2, workers=2), "chatml", tok, tmp_path / "two")
    assert one.train.ids() == two.train.ids() and one.report.per_source == two.report.per_source
    assert [row["id"] for row in one.eval] == [row["id"] for row in two.eval]


def test_a_default_weight_leaves_the_cache_key_as_it_was(tok):
    glaive = {"name": "glaive", "inputs": ["pkg://train/assets/demo/glaive_sample.json"]}
    before = {"name": "t", "sources": [glaive], "max_seq_len": 1024, "overlong": "truncate"}  # no weight key
    weighted_one = {**before, "sources": [{**glaive, "weight": 1.0}]}
    assert cache_key(weighted_one, "chatml", tok) == cache_key(before, "chatml", tok)
    assert cache_key({**before, "sources": [{**glaive, "weight": 3.0}]}, "chatml", tok) != cache_key(
        before, "chatml", tok
    )


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_a_bad_weight_fails_at_compose_time_with_the_range(value):
    with pytest.raises(ConfigError) as err:
        compose(["recipe=tiny", f"data.sources.0.weight={value}"])
    assert "data.sources.0.weight must be > 0 (copies of each conversation" in str(err.value), str(err.value)


def test_fractions_become_the_weights_that_make_each_source_its_share_of_the_mix(tmp_path):
    # 30 + 10 read; 0.25 / 0.75 of 40 -> 10 from a (weight 1/3), 30 from b (weight 3)
    a = export(tmp_path / "a.jsonl", *(record(f"a{n}", f"A{n}") for n in range(30)))
    b = export(tmp_path / "b.jsonl", *(record(f"b{n}", f"B{n}") for n in range(10)))
    specs = [{**spec(a), "fraction": 0.25}, {**spec(b), "fraction": 0.75}]
    assert source_weights(specs) == [pytest.approx(1 / 3), 3.0]
    report = BuildReport()
    ids = [conv.id for conv in read_conversations(specs, report)]
    assert ids[-30:] == [f"b{n}{suffix}" for n in range(10) for suffix in ("", "#2", "#3")]
    assert ids[:-30] == [f"a{n}" for n in range(30) if copies(f"a{n}", 0, 1 / 3) == 1]
    assert [entry["fraction"] for entry in report.per_source] == [0.25, 0.75]
    assert [entry["weighted"] for entry in report.per_source] == [len(ids) - 30, 30]
    lines = format_summary({"status": "completed", "data": report.to_dict()}, [], tmp_path).splitlines()
    assert "  source 1  canonical 0.75 of the mix (x3): 10 read, 10 accepted, 0 rejected -> 30 after weighting" in lines


def test_a_source_limit_counts_toward_its_fraction(tmp_path):
    a = export(tmp_path / "a.jsonl", *(record(f"a{n}", f"A{n}") for n in range(30)))
    b = export(tmp_path / "b.jsonl", *(record(f"b{n}", f"B{n}") for n in range(10)))
    specs = [{**spec(a), "limit": 10, "fraction": 0.5}, {**spec(b), "fraction": 0.5}]
    assert source_weights(specs) == [1.0, 1.0]  # 10 and 10 read: already half and half


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        ([{"fraction": 0.5}, {}], "a fraction is set on some sources but not on data.sources.1"),
        ([{"fraction": 0.5}, {"fraction": 0.4}], "data.sources.*.fraction must sum to 1, not 0.5 + 0.4 = 0.9"),
        ([{"fraction": 0.5, "weight": 2}, {"fraction": 0.5}], "data.sources.0 sets both weight and fraction"),
    ],
)
def test_a_mix_spelled_two_ways_or_not_summing_to_one_is_refused(sources, message):
    problems = mixing_problems(sources)
    assert any(message in problem for problem in problems), problems
    assert mixing_problems([{"fraction": 0.3}, {"fraction": 0.7}]) == []
    assert mixing_problems([{}, {"weight": 2}]) == []


def test_a_bad_fraction_fails_at_compose_time():
    with pytest.raises(ConfigError) as err:
        compose(["recipe=tiny", "data.sources.0.fraction=0.5"])
    assert "data.sources.*.fraction must sum to 1, not 0.5" in str(err.value), str(err.value)
    with pytest.raises(ConfigError) as err:
        compose(["recipe=tiny", "data.sources.0.fraction=1.5"])
    assert "data.sources.0.fraction must be in (0, 1]" in str(err.value), str(err.value)
