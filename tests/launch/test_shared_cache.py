"""Nodes sharing a filesystem build the dataset cache once: two processes that start the same build
at the same moment (as the node-local rank 0 of two nodes would) leave one cache, one of them builds
it under the file lock and the other loads what it built."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

BUILD = """
import hashlib, json, sys, time
from pathlib import Path
from omegaconf import OmegaConf
from train.engine.config import compose
from train.data.dataset import build_dataset
from train.tokenizers import load_tokenizer

cache, ready, go = map(Path, sys.argv[1:4])
cfg = compose(["recipe=tiny"])
tokenizer = load_tokenizer(cfg.model.tokenizer)
data_cfg = OmegaConf.to_container(cfg.data, resolve=True, enum_to_str=True)
ready.touch()
while not go.exists():
    time.sleep(0.002)
built = build_dataset(data_cfg, cfg.model.chat_format, tokenizer, cache)
digest = hashlib.sha256(json.dumps(list(built.train), sort_keys=True).encode()).hexdigest()
result = {"from_cache": built.from_cache, "rows": len(built.train), "dir": str(built.cache_dir), "digest": digest}
print(json.dumps(result))
"""


# slow tier: two whole runs in subprocesses; engine/test_cache_integrity has the build lock's waits in process
@pytest.mark.slow
def test_two_concurrent_builds_make_one_cache_and_both_get_the_rows(run_env, tmp_path, repo, monkeypatch):
    from train.tokenizers import load_tokenizer

    monkeypatch.setenv("TOOLTRAIN_CACHE", run_env["TOOLTRAIN_CACHE"])
    load_tokenizer("tiny_chatml")  # built once beforehand: the race under test is the dataset's
    cache = tmp_path / "datasets"
    go = tmp_path / "go"
    processes = []
    for node in (0, 1):
        ready = tmp_path / f"ready{node}"
        processes.append(
            (
                ready,
                subprocess.Popen(
                    [sys.executable, "-c", BUILD, str(cache), str(ready), str(go)],
                    cwd=repo,
                    env=run_env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                ),
            )
        )
    deadline = time.monotonic() + 120
    while not all(ready.exists() for ready, _ in processes):
        assert time.monotonic() < deadline, "the builders never got ready"
        assert all(process.poll() is None for _, process in processes), [p.communicate() for _, p in processes]
        time.sleep(0.01)
    go.touch()  # both start the build now
    results = []
    for _, process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))

    assert sorted(result["from_cache"] for result in results) == [False, True]
    assert results[0]["rows"] == results[1]["rows"] == 59
    assert results[0]["digest"] == results[1]["digest"]
    assert results[0]["dir"] == results[1]["dir"]
    built = sorted(path.name for path in cache.iterdir() if not path.name.endswith(".lock"))
    assert built == [results[0]["dir"].rsplit("/", 1)[1]]  # one cache, no half-written .tmp left behind


def test_a_rank_that_may_not_build_waits_for_its_node_rank_zero_then_loads(run_env, tmp_path, monkeypatch):
    """The engine passes ``may_build=world.is_local_main``: the other ranks of a node never build."""
    import threading

    from omegaconf import OmegaConf

    from train.data.dataset import build_dataset
    from train.engine.config import compose
    from train.tokenizers import load_tokenizer

    monkeypatch.setenv("TOOLTRAIN_CACHE", run_env["TOOLTRAIN_CACHE"])
    cfg = compose(["recipe=tiny"])
    tokenizer = load_tokenizer(cfg.model.tokenizer)
    data_cfg = OmegaConf.to_container(cfg.data, resolve=True, enum_to_str=True)
    cache, loaded = tmp_path / "datasets", []
    waiter = threading.Thread(
        target=lambda: loaded.append(build_dataset(data_cfg, cfg.model.chat_format, tokenizer, cache, may_build=False))
    )
    waiter.start()
    time.sleep(1.5)
    assert waiter.is_alive() and not any(path.is_dir() for path in cache.iterdir())  # waiting, building nothing

    built = build_dataset(data_cfg, cfg.model.chat_format, tokenizer, cache)  # node-local rank 0
    waiter.join(timeout=30)
    assert not waiter.is_alive()
    assert (built.from_cache, loaded[0].from_cache) == (False, True)
    assert loaded[0].train == built.train and loaded[0].cache_dir == built.cache_dir
