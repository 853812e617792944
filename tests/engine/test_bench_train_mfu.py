"""``tooltrain bench train`` reports MFU for both sides and runs trl with tooltrain's kernels and settings
(``train.engine.bench_train``, ``train.commands.bench.train``): the peak by the engine's one rule, FLOPs from the
engine's ``Throughput``, trl's packed rows read sample by sample (``flops.sample_lengths``)."""

from __future__ import annotations

import json

import pytest

from train.commands.bench.train import as_json, mfu_lines, table
from train.engine import distributed
from train.engine.bench_train import Measurement, StepClock, bench_peak, sft_arguments
from train.engine.flops import PEAK_ENV, sample_lengths

TINY = ["recipe=tiny", "eval=none", "tracking=none", "train.logging_steps=1"]


def test_sample_lengths_reads_trls_packed_rows():
    from datasets import Dataset
    from trl.data_utils import pack_dataset

    packed = pack_dataset(Dataset.from_dict({"input_ids": [[1, 2, 3], [4, 5], [6, 7, 8, 9], [10]]}), 5, "bfd")
    rows = list(packed)
    assert any(len(row["seq_lengths"]) > 1 for row in rows)  # a row that holds two samples
    for row in rows:
        assert sample_lengths(row) == row["seq_lengths"] and sum(sample_lengths(row)) == len(row["input_ids"])
    assert sample_lengths({"input_ids": [7] * 5, "position_ids": [0, 1, 2, 0, 1]}) == [3, 2]  # tooltrain's rows
    assert sample_lengths({"input_ids": [7] * 4}) == [4]


@pytest.mark.parametrize(
    ("gpu", "env", "peak", "why"),
    [
        (None, "500", None, "no GPU: the engine measures MFU on a GPU only"),
        ("NVIDIA H100 80GB HBM3", None, 989e12, ""),
        ("NVIDIA H100 PCIe", "123", 123e12, ""),  # the override wins over the table
        ("NVIDIA Mystery", None, None, f"unknown peak for NVIDIA Mystery: set {PEAK_ENV}=<dense bf16 TFLOP/s>"),
        ("NVIDIA Mystery", "7.5", 7.5e12, ""),
    ],
)
def test_the_benchs_peak_is_the_engines(monkeypatch, gpu, env, peak, why):
    from train.engine.run import run_peak_flops

    monkeypatch.setattr(distributed, "device_name", lambda: gpu)
    if env is None:
        monkeypatch.delenv(PEAK_ENV, raising=False)
    else:
        monkeypatch.setenv(PEAK_ENV, env)
    one = distributed.World(rank=0, local_rank=0, world_size=1, local_world_size=1, node_rank=0)
    assert bench_peak() == (peak, why)
    assert run_peak_flops(one) == peak  # what run(cfg)'s Throughput divides by on the same machine


def test_the_step_clock_turns_the_logged_mfu_back_into_flops():
    clock = StepClock(warmup=1, peak=2e12)
    logs = {"loss": 1.0, "tokens_per_s_per_device": 100.0, "padding_efficiency": 1.0}
    clock.add(1, {**logs, "mfu": 0.9}, elapsed=1.0, cpu=1.0)  # warm-up: not counted
    clock.add(2, {**logs, "mfu": 0.25}, elapsed=2.0, cpu=1.0)
    clock.add(3, {**logs, "mfu": 0.5}, elapsed=1.0, cpu=1.0)
    m = clock.totals
    assert m.flops == pytest.approx(0.25 * 2.0 * 2e12 + 0.5 * 1.0 * 2e12) and m.peak_tflops == 2.0
    assert m.mfu == pytest.approx(m.flops / 3.0 / 2e12) == pytest.approx(1 / 3)
    unknown = StepClock(warmup=0, peak=None, why="no GPU")
    unknown.add(1, {**logs, "mfu": 0.5}, elapsed=1.0, cpu=1.0)
    assert (unknown.totals.flops, unknown.totals.mfu, unknown.totals.mfu_note) == (0.0, None, "no GPU")


def test_trl_gets_tooltrains_kernels_and_settings(tmp_path):
    from trl import SFTConfig

    from train.engine.config import compose

    for kernels in ("liger", "none"):
        cfg = compose([*TINY, f"kernels={kernels}", "distributed.gradient_checkpointing=true"])
        args = sft_arguments(cfg, tmp_path, {"bf16": False, "fp16": False}, assistant_only_loss=True)
        assert args["use_liger_kernel"] is (kernels == "liger")
        assert args["gradient_checkpointing"] and args["gradient_checkpointing_kwargs"] == {"use_reentrant": False}
        assert (args["packing"], args["packing_strategy"], args["max_length"]) == (True, "bfd", cfg.data.max_seq_len)
        assert (args["per_device_train_batch_size"], args["seed"]) == (cfg.train.micro_batch_size, cfg.seed)
        config = SFTConfig(**args)  # no Liger needed to configure it: trl applies the kernels when training starts
        assert config.use_liger_kernel is (kernels == "liger") and config.padding_free is False


def test_the_table_and_json_show_mfu_or_why_not():
    packed = Measurement(
        "tooltrain packed", steps=2, real_tokens=3000, slots=3000, seconds=2.0, flops=5e12, peak_tflops=10.0
    )
    padded = Measurement("tooltrain padded", steps=2, real_tokens=3000, slots=4000, seconds=6.0, mfu_note="no GPU")
    trl = Measurement("trl packed", steps=2, real_tokens=3000, slots=3000, seconds=3.0, flops=4e12, peak_tflops=10.0)
    lines = table([packed, padded, trl]).splitlines()
    assert " MFU " in lines[0] and lines[0].endswith("peak mem MiB  vs trl")
    assert lines[1].split()[-3] == "25.0%" and lines[1].endswith("1.50x")  # 5e12 / 2 s / 10e12
    assert lines[2].split()[-3] == "n/a" and lines[2].endswith("0.50x")
    assert lines[3].split()[-3] == "13.3%" and lines[3].endswith("1.00x")
    assert mfu_lines([packed, padded, trl]) == [
        "MFU n/a (tooltrain padded): no GPU",
        "MFU: training FLOPs / seconds / dense bf16 peak of 10 TFLOP/s",
    ]
    data = json.loads(json.dumps(as_json({"device": "x"}, [packed, padded, trl])))
    by_path = {p["path"]: p for p in data["paths"]}
    assert by_path["tooltrain packed"]["mfu"] == pytest.approx(0.25) and by_path["tooltrain packed"]["vs_trl"] == 1.5
    assert by_path["tooltrain padded"]["mfu"] is None and by_path["tooltrain padded"]["mfu_note"] == "no GPU"
    assert by_path["trl packed"]["tokens_per_s"] == 1000.0 and data["device"] == "x"


def short_conversations(path, n: int) -> list[str]:
    """Overrides for ``n`` short canonical conversations in ``path``, several to a 512-token row."""
    rows = [
        {
            "id": f"c{i}",
            "tools": [],
            "messages": [
                {"role": "user", "content": f"What is {i} plus {i}?"},
                {"role": "assistant", "content": f"{i} plus {i} is {2 * i}."},
            ],
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return [
        f"data.sources=[{{name:canonical,inputs:[{path}]}}]",
        "data.max_seq_len=512",
        "data.eval_fraction=0",
        "train.micro_batch_size=1",
        "train.global_batch_size=1",
    ]


class CountedFlops:
    """Wraps ``flops.flops_counter``: every count the engine's Throughput makes, with the lengths it counted."""

    def __init__(self, counter):
        self.counter = counter
        self.calls: list[tuple[list[int], float]] = []

    def __call__(self, model, lora):
        count = self.counter(model, lora)

        def counted(lengths):
            self.calls.append((list(lengths), count(lengths)))
            return self.calls[-1][1]

        return counted


@pytest.mark.slow  # trains the tiny model twice (tooltrain, then trl): ~30 s of CPU
def test_both_sides_report_mfu_from_the_flops_they_counted(monkeypatch, tmp_path):
    import train.engine.run as engine_run
    from train.engine import flops
    from train.engine.bench_train import measure_tooltrain, measure_trl

    peak_tflops = 1e-6  # a faked peak (1 MFLOP/s): the tiny model on a CPU is far above it, so MFU >> 1
    monkeypatch.setattr(distributed, "device_name", lambda: "NVIDIA Test GPU")  # the engine reports MFU on a GPU
    monkeypatch.setenv(PEAK_ENV, str(peak_tflops))
    overrides = [*TINY, *short_conversations(tmp_path / "short.jsonl", 24)]
    warmup = 1
    counted = {"tooltrain": CountedFlops(flops.flops_counter), "trl": CountedFlops(flops.flops_counter)}
    monkeypatch.setattr(engine_run, "flops_counter", counted["tooltrain"])  # run.py binds it at import
    ours = measure_tooltrain(overrides, True, warmup, 2, tmp_path / "tooltrain")
    monkeypatch.setattr(flops, "flops_counter", counted["trl"])  # measure_trl imports it when it runs
    theirs = measure_trl(overrides, warmup, 2, tmp_path / "trl")
    for side, m in (("tooltrain", ours), ("trl", theirs)):
        calls = counted[side].calls
        assert len(calls) == warmup + 2, side  # one count per logged step
        timed = sum(f for _, f in calls[warmup:])  # the FLOPs of the timed steps, by hand
        assert m.steps == 2 and m.peak_tflops == peak_tflops and m.mfu is not None, (side, m)
        # the clock times each step from its own place among the callbacks, a few ms after Throughput: on these
        # ~0.1 s steps that moves a step's share of time (and so its tokens and FLOPs) by up to a percent or so
        assert m.flops == pytest.approx(timed, rel=2e-2), side
        assert m.mfu == pytest.approx(timed / m.seconds / (peak_tflops * 1e12), rel=2e-2), side
        lengths = [n for step, _ in calls[warmup:] for n in step]
        assert sum(lengths) == pytest.approx(m.real_tokens, rel=2e-2) and max(lengths) < 256, side
        assert any(len(step) > 1 for step, _ in calls), side  # a row of several samples, each counted on its own


def test_the_gpu_kits_peak_is_the_engines_rule_with_its_flag_first(monkeypatch):
    import importlib.util
    import os
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "bench_one.py"
    spec = importlib.util.spec_from_file_location("gpu_kit_bench_one", path)
    bench_one = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_one)
    h100 = "NVIDIA H100 80GB HBM3"
    monkeypatch.delenv(PEAK_ENV, raising=False)
    assert bench_one.peak_and_source(None, h100) == (989e12, "data sheet (bf16 dense)")
    assert bench_one.peak_and_source(None, None) == (None, "none: no peak known for a CPU")
    assert bench_one.peak_and_source(None, "NVIDIA Mystery") == (None, "none: no peak known for NVIDIA Mystery")
    monkeypatch.setenv(PEAK_ENV, "500")
    assert bench_one.peak_and_source(None, h100) == (500e12, PEAK_ENV)  # the override the engine reads
    assert bench_one.peak_and_source(835.0, h100) == (835e12, "--peak-tflops")  # the flag wins ...
    assert os.environ[PEAK_ENV] == "835.0"  # ... and the engine's per-step MFU then divides by it too
