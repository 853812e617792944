"""Issue 24 item 22: a build worker that dies (the OOM killer's SIGKILL) is an error naming it, in bounded time.

Before: the pool's executor saw the dead worker and tried to stop the others with SIGTERM, but they had inherited the
training process's SIGTERM handler (preemption: it only sets a flag), so its shutdown waited for them forever and the
build never ended. Each case runs in a fresh interpreter that installs those handlers (``EarlySignals.install``, as
``tooltrain train`` does) and must end within its timeout.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

MAP = """
import os, signal, time
from train.data.ordered_pool import ordered_map
from train.engine.signals import EarlySignals

EarlySignals.install()

def make():
    def work(item):
        if item == 5:  # this task's worker dies as the OOM killer ends a process: SIGKILL, no cleanup
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.01)
        return item * 2
    return work

try:
    results = [result for _, result in ordered_map(make, range(40), 2)]
    print("no error", results)
except Exception as err:
    print(f"{type(err).__name__}: {err}")
"""

BUILD = """
import json, os, signal, sys
from pathlib import Path
from train.data import dataset
from train.engine.signals import EarlySignals
from train.sources import SourceError
from train.tokenizers import load_tokenizer

EarlySignals.install()
dataset.BUILD_CHUNK = 8
tokenize = dataset.ChunkTokenizer.__call__

def dying(self, chunk):  # a test-only work function: the worker of the chunk holding conversation 20 is SIGKILLed
    if any(conv.id.endswith("-20") for conv in chunk):
        os.kill(os.getpid(), signal.SIGKILL)
    return tokenize(self, chunk)

dataset.ChunkTokenizer.__call__ = dying
cfg = {
    "name": "dying", "builder": None, "builder_args": {}, "max_seq_len": 512, "overlong": "drop", "packing": True,
    "sources": [{"name": "glaive", "inputs": ["pkg://train/assets/demo/glaive_sample.json"], "limit": None}],
    "last_turn_only": False, "part_weights": {}, "eval_fraction": 0.0, "cache_dir": None, "num_workers": 2,
}
root = Path(sys.argv[1])
try:
    dataset.build_dataset(cfg, "chatml", load_tokenizer("tiny_chatml"), root)
    print("no error")
except SourceError as err:  # tooltrain train prints it as one error: line (train/engine/entry.py)
    print(f"{type(err).__name__}: {err}")
print(json.dumps(sorted(p.name for p in root.iterdir())))
"""


def run_python(code: str, *args: str, timeout: float) -> str:
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code), *args],
            check=False,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {timeout} s: a dead worker hangs the map")
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_a_killed_worker_ends_the_map_with_an_error_naming_it():
    out = run_python(MAP, timeout=45)
    assert "WorkerDied: worker " in out, out
    assert " of 2 (pid " in out and ") was killed by SIGKILL (the out-of-memory killer sends it)" in out, out


def test_a_killed_build_worker_is_one_cache_error_and_leaves_no_partial_cache(tmp_path):
    out = run_python(BUILD, str(tmp_path / "cache"), timeout=90)
    first = out.splitlines()[0]
    assert first.startswith("CacheError: building the dataset cache "), out
    assert "was killed by SIGKILL" in first and "(pid " in first and "data.num_workers=2" in first, out
    # only the lock file: neither a cache that would load next time nor a partial build
    left = json.loads(out.splitlines()[-1])
    assert left and all(name.endswith(".lock") for name in left), left
