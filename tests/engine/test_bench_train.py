"""``tooltrain bench train``: runs its three paths on the tiny recipe and prints the table and ratios.
A smoke test of the benchmark, not a timing test: the numbers are not asserted, their presence is."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from train.commands.bench_train import Measurement, ratio, table
from train.config import REPO_ROOT

SMALL = ["recipe=tiny", "data.sources.0.limit=16", "data.max_seq_len=384"]
HEADER = ["path", "steps", "real tokens", "seconds", "tokens/s", "cpu s", "tokens/cpu s", "padding eff", "peak mem MiB"]


def test_table_and_ratios_from_measurements():
    packed = Measurement("tooltrain packed", steps=2, real_tokens=3000, slots=3072, seconds=2.0, cpu_seconds=3.0,
                         peak_memory_mib=600.4)
    padded = Measurement("tooltrain padded", steps=2, real_tokens=3000, slots=4000, seconds=6.0, cpu_seconds=12.0,
                         peak_memory_mib=610)
    failed = Measurement("trl packed", error="ValueError: no")
    assert table([packed, padded, failed]).splitlines() == [
        "path              steps  real tokens  seconds  tokens/s  cpu s  tokens/cpu s  padding eff  peak mem MiB",
        "tooltrain packed      2        3,000      2.0    1500.0    3.0        1000.0        97.7%           600",
        "tooltrain padded      2        3,000      6.0     500.0   12.0         250.0        75.0%           610",
        "trl packed            -            -        -         -      -             -            -             -",
    ]
    assert ratio(packed, padded) == "3.00x tokens/s, 4.00x tokens/cpu s"
    assert (ratio(packed, failed), ratio(failed, packed)) == ("n/a", "n/a")


@pytest.mark.slow
def test_bench_train_runs_the_three_paths_on_the_tiny_recipe(engine, tmp_path):
    command = [sys.executable, "-m", "train", "bench", "train", *SMALL, "--steps", "2", "--warmup", "1", "--out-dir", str(tmp_path)]
    result = subprocess.run(command, cwd=REPO_ROOT, env=engine.env, capture_output=True, text=True, check=False, timeout=900)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    lines = result.stdout.splitlines()
    assert lines[0].startswith("training benchmark: model tiny_llama, data tiny (max_seq_len 384), micro batch 2, "
                               "global batch 4, 2 timed steps after 1 warm-up, on CPU")
    start = lines.index(next(line for line in lines if line.startswith("path ")))
    assert re.split(r"\s{2,}", lines[start]) == HEADER
    number = r"[0-9][0-9,.]*"
    for line, path in zip(lines[start + 1 : start + 4], ("tooltrain packed", "tooltrain padded", "trl packed")):
        cells = re.split(r"\s{2,}", line)
        assert cells[0] == path and cells[1] == "2", line
        assert all(re.fullmatch(number + "%?", cell) for cell in cells[1:]), line
        assert float(cells[4]) > 0
    both = rf"{number}x tokens/s, {number}x tokens/cpu s"
    assert re.fullmatch(rf"ratio tooltrain packed / tooltrain padded: {both}", lines[start + 4])
    assert re.fullmatch(rf"ratio tooltrain packed / trl packed: {both}", lines[start + 5])
    assert "trl packed: trl qwen2_5_training.jinja, assistant-only loss" in lines
    assert lines[-1] == "memory: peak RSS of each path's process, model loading included"
    for path in ("tooltrain_packed", "tooltrain_padded", "trl_packed"):
        assert (tmp_path / f"{path}.log").is_file()
    assert (tmp_path / "tooltrain_packed" / "summary.json").is_file()
