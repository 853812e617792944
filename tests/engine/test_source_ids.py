"""Issue 24 item 1: mixing sources never drops data silently.

Before: a conversation whose id an earlier source used was left out (``invalid``, ``duplicate-id``), so two Hugging
Face exports numbered 0, 1, 2 ... lost the second one's conversations, a file listed twice lost its second copy, and
the console said only ``left out N: N invalid``. Now an id an earlier source used is kept under ``s<i>/<id>`` (both
trained; the eval split goes by the source's own id, so the two copies of a conversation are on the same side), and a
real duplicate inside one source is left out and named on the console with its reason and first ids.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from train.data import dataset
from train.data.dataset import BuildReport, build_dataset, read_conversations
from train.data.ids import is_eval
from train.engine.summary import format_summary
from train.schema import Conversation
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
    """A canonical JSON Lines file, as a Hugging Face export writes it (its own ids)."""
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def sources(*files: str) -> list[dict]:
    return [{"name": "canonical", "inputs": [file], "limit": None} for file in files]


def data_config(files: list[str], eval_fraction: float = 0.0) -> dict:
    return {
        "name": "ids",
        "sources": sources(*files),
        "builder": None,
        "builder_args": {},
        "max_seq_len": 512,
        "overlong": "drop",
        "packing": False,
        "last_turn_only": False,
        "part_weights": {},
        "eval_fraction": eval_fraction,
        "cache_dir": None,
        "num_workers": 1,
    }


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny_chatml")


def test_two_exports_numbered_alike_are_both_trained(tmp_path, tokenizer):
    cities = ["Paris", "Rome", "Oslo", "Lima", "Kyiv", "Quito"]
    first = export(tmp_path / "a.jsonl", *(record(str(n), cities[n]) for n in range(3)))
    second = export(tmp_path / "b.jsonl", *(record(str(n), cities[3 + n]) for n in range(3)))
    built = build_dataset(data_config([first, second]), "chatml", tokenizer, tmp_path / "cache")
    report = built.report
    assert (report.read, report.invalid, report.train_rows, report.renamed_ids) == (6, 0, 6, 3)
    # the first source keeps its ids; the second's are namespaced by its position in data.sources
    assert built.train.ids() == ["0", "1", "2", "s1/0", "s1/1", "s1/2"]
    lines = format_summary({"status": "completed", "data": report.to_dict()}, [], tmp_path).splitlines()
    renamed = "  ids       3 renamed s<i>/<id>: an earlier data.sources entry used the id; both are trained "
    assert renamed + "(e.g. 's1/0', 's1/1', 's1/2')" in lines


def test_a_file_listed_twice_trains_both_copies_on_the_same_side_of_the_eval_split(tmp_path, tokenizer):
    file = export(tmp_path / "a.jsonl", *(record(f"c{n}", f"City{n}") for n in range(40)))
    built = build_dataset(data_config([file, file], eval_fraction=0.3), "chatml", tokenizer, tmp_path / "cache")
    report = built.report
    assert (report.read, report.invalid, report.accepted) == (80, 0, 80)
    train_ids, eval_ids = set(built.train.ids()), [row["id"] for row in built.eval]
    assert eval_ids and train_ids  # both sides are used ...
    for n in range(40):  # ... and each conversation's two copies are on one side: none trained and held out
        copies = {f"c{n}", f"s1/c{n}"}
        assert copies <= train_ids or copies <= set(eval_ids), copies
    assert [conv.id for conv in built.eval_conversations] == eval_ids


def test_a_duplicate_inside_one_source_is_left_out_and_named_on_the_console(tmp_path, tokenizer):
    file = export(tmp_path / "a.jsonl", record("a"), record("b"), record("a", "Rome"), record("b", "Oslo"))
    built = build_dataset(data_config([file]), "chatml", tokenizer, tmp_path / "cache")
    report = built.report
    assert (report.read, report.invalid, report.train_rows) == (4, 2, 2)
    assert built.train.ids() == ["a", "b"]  # the first of each is kept
    summary = format_summary({"status": "completed", "data": report.to_dict()}, [], tmp_path)
    assert "left out 2: 2 invalid" in summary
    assert "  left out  2 invalid: duplicate-id: repeated within data.sources.N (e.g. 'a', 'b')" in summary.splitlines()


def test_first_source_ids_stay_and_a_taken_renamed_id_is_a_counted_duplicate(monkeypatch):
    """The first source's ids are never renamed (caches and goldens of builds whose sources never collided stay as
    they were); if an earlier source already holds ``s1/x`` as well as ``x``, the second ``x`` has no name left."""
    report = BuildReport()
    first, second = [record("x"), record("s1/x"), record("y")], [record("x"), record("z")]
    specs = [{"name": "mem", "records": first}, {"name": "mem", "records": second}]

    def reader(spec):
        return lambda inputs: (Conversation.from_dict(r) for r in spec["records"])

    readers = iter([reader(specs[0]), reader(specs[1])])
    monkeypatch.setattr(dataset, "get_reader", lambda name: next(readers))
    ids = [conv.id for conv in read_conversations([{"name": "a", "inputs": []}] * 2, report)]
    assert ids == ["x", "s1/x", "y", "z"]
    assert (report.read, report.invalid, report.renamed_ids) == (5, 1, 0)
    reason = "invalid: duplicate-id: used by an earlier source, renamed s<i>/<id> is taken too (data.sources.N)"
    assert report.examples == {reason: ["s1/x"]}


def test_the_split_goes_by_the_id_the_source_gave():
    from train.data.ids import split_id

    assert split_id("s1/0") == "0" and split_id("s12/a/b") == "a/b" and split_id("glaive-3") == "glaive-3"
    assert all(is_eval(f"s3/{n}", 0.5) == is_eval(str(n), 0.5) for n in range(200))
