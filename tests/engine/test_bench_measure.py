"""The benchmarks' measurement pieces, without timing anything: ``train.engine.bench_train`` (the step clock, the
overrides every path runs with) and ``train.engine.bench_data`` (the data node, the fresh-interpreter runner)."""

from __future__ import annotations

from pathlib import Path

import pytest

from train.engine.bench_data import data_config, default_workers, in_child, rss_now, rss_peak
from train.engine.bench_train import NEVER, Measurement, StepClock, path_folder, step_overrides


def test_step_overrides_come_after_the_users_and_save_nothing(tmp_path):
    assert step_overrides(["recipe=tiny", "train.max_steps=99"], 2, 8, tmp_path) == [
        "recipe=tiny",
        "train.max_steps=99",
        "train.max_steps=10",  # Hydra: the last one wins
        f"train.save_steps={NEVER}",
        f"output_dir={tmp_path}",
    ]
    assert path_folder(tmp_path, "tooltrain packed") == tmp_path / "tooltrain_packed"


def test_measurement_rates_are_zero_without_time():
    m = Measurement("p", steps=2, real_tokens=300, slots=400, seconds=3.0, cpu_seconds=6.0)
    assert (m.tokens_per_s, m.tokens_per_cpu_s, m.padding_efficiency) == (100.0, 50.0, 0.75)
    assert (Measurement("p").tokens_per_s, Measurement("p").tokens_per_cpu_s, Measurement("p").padding_efficiency) == (
        0.0,
        0.0,
        0.0,
    )


def test_the_step_clock_counts_only_metered_steps_after_the_warm_up():
    clock = StepClock(warmup=2)
    logs = {"loss": 1.0, "tokens_per_s_per_device": 100.0, "padding_efficiency": 0.5}
    clock.add(2, logs, elapsed=1.0, cpu=2.0)  # a warm-up step
    clock.add(3, {"loss": 1.0}, elapsed=1.0, cpu=2.0)  # no meter on this log
    clock.add(3, logs, elapsed=2.0, cpu=3.0)
    clock.add(4, {**logs, "padding_efficiency": 0.0}, elapsed=1.0, cpu=1.0)
    totals = clock.totals
    assert (totals.steps, totals.seconds, totals.cpu_seconds) == (2, 3.0, 4.0)
    assert (totals.real_tokens, totals.slots) == (300, 400)  # 200 + 100 real; 400 + 0 slots (no efficiency: none)


def test_data_config_reads_the_files_as_one_canonical_source(tmp_path):
    files = [Path("a.jsonl"), tmp_path / "b.jsonl"]
    cfg = data_config(files, None, 512, 3)
    assert cfg["sources"] == [{"name": "canonical", "inputs": [str(f.resolve()) for f in files]}]
    assert (cfg["max_seq_len"], cfg["num_workers"], cfg["packing"], cfg["eval_fraction"]) == (512, 3, True, 0.0)
    assert data_config(files, 5, 512, 3)["sources"][0]["limit"] == 5


def test_memory_and_cores_are_positive():
    assert default_workers() >= 1
    assert rss_now() > 0 and rss_peak() >= rss_now() // 2  # both in bytes (ru_maxrss is KiB on Linux)


def test_in_child_returns_the_childs_result_or_its_error_as_one_line(tmp_path):
    assert in_child(data_config, [tmp_path / "c.jsonl"], 1, 8, 1)["sources"][0]["limit"] == 1
    with pytest.raises(RuntimeError, match=r"^TypeError: .*data_config"):
        in_child(data_config)


def test_the_step_clocks_callback_times_each_logged_step():
    from types import SimpleNamespace

    clock = StepClock(warmup=0)
    callback = clock.callback()
    callback.on_train_begin(None, None, None)
    logs = {"loss": 1.0, "tokens_per_s_per_device": 1000.0, "padding_efficiency": 1.0}
    callback.on_log(None, SimpleNamespace(global_step=1), None, logs={"learning_rate": 1.0})  # not a training log
    callback.on_log(None, SimpleNamespace(global_step=1), None, logs=logs)
    assert clock.totals.steps == 1 and clock.totals.seconds > 0
    assert clock.totals.real_tokens == round(1000.0 * clock.totals.seconds)
