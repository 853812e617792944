"""Issue 24 items 12 and 24: a damaged dataset cache is found, named and rebuilt; never a traceback, never trained on.

Before: a truncated column crashed the memory map (``ValueError: mmap length is greater than file size``), a deleted
``layout.json`` was a ``FileNotFoundError``, a deleted ``report.json`` made the rebuild's rename fail, a cache folder
that is a file was a ``FileExistsError``, a same-size corruption of a column was trained on silently, and a rank that
may not build waited forever for a builder that never came. Now ``layout.json`` records each file's size and checksum,
the cache is verified before it is mapped, a damaged one is rebuilt with a warning naming the file and the reason, and
what cannot be used or waited for is one ``CacheError`` (printed by ``tooltrain train`` as one ``error:`` line).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from train.data.dataset import build_dataset
from train.sources import SourceError
from train.tokenizers import load_tokenizer

CFG = {
    "name": "integrity",
    "sources": [{"name": "glaive", "inputs": ["pkg://train/assets/demo/glaive_sample.json"], "limit": None}],
    "builder": None,
    "builder_args": {},
    "max_seq_len": 256,
    "overlong": "truncate",
    "packing": True,
    "last_turn_only": False,
    "part_weights": {},
    "eval_fraction": 0.3,
    "cache_dir": None,
    "num_workers": 1,
}


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny_chatml")


@pytest.fixture(scope="module")
def reference(tokenizer, tmp_path_factory):
    """The rows of an undamaged build, as lists, to compare each rebuild with."""
    built = build_dataset(CFG, "chatml", tokenizer, tmp_path_factory.mktemp("reference"))
    assert len(built.train) > 5 and len(built.eval) > 1
    return list(built.train), list(built.eval)


def build(tokenizer, root: Path, **kwargs):
    return build_dataset(CFG, "chatml", tokenizer, root, **kwargs)


def truncate(folder: Path) -> None:
    path = folder / "train.tokens.i32"
    path.write_bytes(path.read_bytes()[:-40])


def garble_same_size(folder: Path) -> None:
    """Same size, other bytes: every token id of the middle rows becomes 7 (the sizes alone cannot tell)."""
    path = folder / "train.tokens.i32"
    tokens = np.fromfile(path, "<i4")
    tokens[len(tokens) // 3 : 2 * len(tokens) // 3] = 7
    tokens.tofile(path)


def remove(name: str):
    return lambda folder: (folder / name).unlink()


def replace_with_a_file(folder: Path) -> None:
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()
    folder.write_text("not a cache\n")


def garble_layout(folder: Path) -> None:
    (folder / "layout.json").write_text('{"version": 2, "splits": ', encoding="utf-8")


DAMAGE = {
    "truncated column": (truncate, "train.tokens.i32 has "),
    "same-size garbled column": (garble_same_size, "train.tokens.i32 does not match its xxh3_128 checksum"),
    "layout.json deleted": (remove("layout.json"), "layout.json is missing"),
    "layout.json garbled": (garble_layout, "layout.json is unreadable"),
    "report.json deleted": (remove("report.json"), "report.json is missing"),
    "eval conversations deleted": (remove("eval_conversations.jsonl"), "eval_conversations.jsonl is missing"),
    "cache folder replaced by a file": (replace_with_a_file, "it is not a folder"),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_cache_is_named_and_rebuilt_never_trained_on(case, tokenizer, reference, tmp_path, capsys):
    damage, reason = DAMAGE[case]
    first = build(tokenizer, tmp_path)
    folder = first.cache_dir
    del first  # its maps: the damage is done to files no one holds open
    damage(folder)
    capsys.readouterr()
    rebuilt = build(tokenizer, tmp_path)
    err = capsys.readouterr().err
    assert f"warning: dataset cache {folder} is damaged ({reason}" in err, err
    assert err.rstrip().endswith("rebuilding it")
    assert not rebuilt.from_cache and rebuilt.cache_dir == folder
    assert (list(rebuilt.train), list(rebuilt.eval)) == reference
    assert [conv.id for conv in rebuilt.eval_conversations] == [row["id"] for row in reference[1]]
    again = build(tokenizer, tmp_path)  # the rebuilt cache verifies: loaded, nothing said
    assert again.from_cache and capsys.readouterr().err == ""


def test_a_cache_folder_that_is_a_file_is_one_error(tokenizer, tmp_path):
    root = tmp_path / "datasets"
    root.write_text("a file where the cache folder should be\n")
    with pytest.raises(SourceError) as caught:
        build(tokenizer, root)
    assert str(caught.value) == f"the dataset cache folder {root} is not a folder (data.cache_dir)"
    assert root.read_text() == "a file where the cache folder should be\n"  # untouched


def test_a_rank_that_may_not_build_waits_a_bounded_time(tokenizer, tmp_path):
    started = time.monotonic()
    with pytest.raises(SourceError) as caught:
        build(tokenizer, tmp_path, may_build=False, idle_wait_s=1.0)
    assert time.monotonic() - started < 30
    message = str(caught.value)
    assert message.startswith("waited 1 s for the dataset cache ") and "with no process building it" in message
    assert "(it has not been built)" in message and "local rank 0" in message


def test_a_rank_that_may_not_build_names_a_damaged_cache_nobody_rebuilds(tokenizer, tmp_path):
    folder = build(tokenizer, tmp_path).cache_dir
    garble_same_size(folder)
    with pytest.raises(SourceError) as caught:
        build(tokenizer, tmp_path, may_build=False, idle_wait_s=1.0)
    assert "it is damaged: train.tokens.i32 does not match its xxh3_128 checksum" in str(caught.value)


def test_the_layout_records_every_file_with_its_size_and_checksum(tokenizer, tmp_path):
    folder = build(tokenizer, tmp_path).cache_dir
    layout = json.loads((folder / "layout.json").read_text())
    names = sorted(path.name for path in folder.iterdir() if path.name != "layout.json")
    assert sorted(layout["files"]) == names and "report.json" in names
    for name, entry in layout["files"].items():
        assert entry["bytes"] == (folder / name).stat().st_size
        assert len(entry["xxh3_128"]) == 32


@pytest.mark.slow
def test_tooltrain_train_with_a_cache_folder_that_is_a_file_is_one_error_line(tmp_path):
    """Through the CLI: one ``error:`` line, exit 2, no traceback, the file untouched (before: FileExistsError)."""
    import os
    import subprocess
    import sys

    cache = tmp_path / "cache"
    cache.write_text("a file\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "train",
            "train",
            "recipe=tiny",
            f"data.cache_dir={cache}",
            f"output_dir={tmp_path / 'run'}",
        ],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert (
        done.stderr.strip().splitlines()[-1]
        == f"error: the dataset cache folder {cache} is not a folder (data.cache_dir)"
    )
    assert "Traceback" not in done.stderr and cache.read_text() == "a file\n"
