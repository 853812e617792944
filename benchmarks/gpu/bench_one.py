"""One throughput measurement of tooltrain (``run(cfg)``) or trl's ``SFTTrainer``, in this process; one JSON file out.

Reuses ``tooltrain bench train``'s measuring code (``train.engine.bench_train``: measure_tooltrain, measure_trl and
their StepClock), with driver-side changes only:
  * the random-init model is built directly on the device (``with torch.device(...)`` around ``build_model``):
    built on the CPU, 8B takes ~2-3 min on one thread and 16 GB of host RAM;
  * MFU computed the same way for both sides with ``train.engine.flops`` (training FLOPs of each step's samples,
    attention by each sample's own length, over the step's seconds and the device's peak), and a linear-only MFU
    (k x N x tokens/s / peak, k = 4 for LoRA); each step's FLOPs are those of the very counts the engine's
    ``Throughput`` took (``TokenMeter.take``, kept for this log).
What ``bench_train`` itself does for both sides: the same kernels (``kernels=liger`` -> trl's ``use_liger_kernel``:
Liger's layer kernels; trl keeps its own chunked LM-head loss, which it does not let Liger replace), the same strategy
and precision, and trl's packed rows read sample by sample (``seq_lengths``, ``flops.sample_lengths``).

The peak (MFU's denominator) follows the engine's rule, ``flops.peak_flops``: ``--peak-tflops`` when given, else
``TOOLTRAIN_PEAK_TFLOPS``, else the data-sheet dense bf16 peak by the GPU's name (none on a CPU or an unknown GPU: MFU
null). The flag is exported as ``TOOLTRAIN_PEAK_TFLOPS`` so the MFU the engine logs per step uses the same peak.

  python benchmarks/gpu/bench_one.py --path tooltrain --attn sdpa --kernels none --out r.json [overrides ...]
  python benchmarks/gpu/bench_one.py --tiny --path trl --out r.json     # the CPU smoke: recipe=tiny, 1 + 1 steps
Exit 0 when a timed step was measured, 3 on CUDA out-of-memory, 1 on any other failure.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # train/ from this checkout

BASE_8B = [
    "model=llama3_1_8b", "model.source=config", "data=demo", "data.max_seq_len=4096", "data.eval_fraction=0",
    "eval=none", "tracking=none", "train.micro_batch_size=1", "train.global_batch_size=4", "train.logging_steps=1",
]  # fmt: skip
BASE_TINY = ["recipe=tiny", "eval=none", "tracking=none", "train.logging_steps=1"]
VERSIONS = ("torch", "transformers", "peft", "accelerate", "trl", "datasets", "liger-kernel", "triton")


def versions() -> dict[str, str | None]:
    found = {}
    for name in VERSIONS:
        try:
            found[name] = md.version(name)
        except md.PackageNotFoundError:
            found[name] = None
    return found


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", choices=["tooltrain", "tooltrain_padded", "trl"], default="tooltrain")
    ap.add_argument("--attn", default="sdpa")
    ap.add_argument("--kernels", default="none", choices=["none", "liger"])
    ap.add_argument("--gc", type=int, default=0, help="1: gradient checkpointing")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default 5; 1 with --tiny)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 2; 1 with --tiny)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="where the model is built")
    ap.add_argument("--tiny", action="store_true", help="the CPU smoke: recipe=tiny instead of Llama-3.1-8B")
    ap.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help="MFU's denominator (dense bf16 TFLOP/s); default $TOOLTRAIN_PEAK_TFLOPS, else the data-sheet peak",
    )
    ap.add_argument("--out", required=True)
    ap.add_argument("--run-dir", default="/tmp/tt_bench")
    ap.add_argument("overrides", nargs="*", help="config overrides after the base ones")
    a = ap.parse_args(argv)
    a.steps = a.steps or (1 if a.tiny else 5)
    a.warmup = a.warmup if a.warmup is not None else (1 if a.tiny else 2)
    return a


class StepLog:
    """Per-step seconds, tokens and training FLOPs of the run, read after the engine's Throughput callback."""

    def __init__(self, warmup: int):
        self.warmup, self.steps, self.model, self.last_take = warmup, [], {}, None
        self.flops = None

    def callback(self):
        from transformers import TrainerCallback

        from train.engine import flops

        log = self

        class Collect(TrainerCallback):
            def on_train_begin(self, args, state, control, model=None, **kw):
                if model is not None:
                    lora = any("lora_" in n for n, _ in model.named_parameters())
                    log.flops = flops.flops_counter(model, lora=lora)
                    log.model = {
                        "matmul_params": flops.matmul_parameters(model), "lora": lora,
                        "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
                        "attn_impl": getattr(model.config, "_attn_implementation", None),
                    }  # fmt: skip
                self.t = time.perf_counter()

            def on_log(self, args, state, control, logs=None, **kw):
                if not logs or "loss" not in logs:
                    return
                now = time.perf_counter()
                real, _, lengths = log.last_take or (0, 0, [])
                log.steps.append({
                    "step": state.global_step, "sec": round(now - self.t, 4), "loss": logs.get("loss"),
                    "tok_s": logs.get("tokens_per_s_per_device"), "real_tokens": real, "samples": len(lengths),
                    "flops": log.flops(lengths) if log.flops and lengths else None, "mfu_logged": logs.get("mfu"),
                    "pad_eff": logs.get("padding_efficiency"),
                })  # fmt: skip
                self.t = now

        return Collect()

    def mfu(self, peak: float | None) -> dict:
        """MFU over the timed steps (after the warm-up): their FLOPs over their seconds and the peak."""
        timed = [s for s in self.steps if s["step"] > self.warmup and s["flops"]]
        seconds = sum(s["sec"] for s in timed)
        if not timed or not peak or seconds <= 0:
            return {"mfu": None}
        k = 4 if self.model.get("lora") else 6
        tokens = sum(s["real_tokens"] for s in timed)
        return {
            "mfu": round(sum(s["flops"] for s in timed) / seconds / peak, 4),
            "mfu_linear_only": round(tokens / seconds * k * self.model["matmul_params"] / peak, 4),
        }


def patch_engine(a: argparse.Namespace, log: StepLog) -> None:
    """The driver-side changes of the module docstring, made before anything runs."""
    import train.engine.model as tmodel
    import train.engine.run as trun
    from train.engine.callbacks import TokenMeter

    original = tmodel.build_model

    def build_on_device(*args, **kwargs):
        with torch.device(a.device):
            return original(*args, **kwargs)

    tmodel.build_model = trun.build_model = build_on_device  # run.py binds it at import; trl_trainer at each call

    take = TokenMeter.take

    def take_and_keep(self):  # Throughput takes each step's counts: StepLog reads the same ones after it
        log.last_take = take(self)
        return log.last_take

    TokenMeter.take = take_and_keep


def measure(a: argparse.Namespace, overrides: list[str], out_dir: Path, log: StepLog) -> dict:
    import transformers

    import train.engine.run as trun
    from train.engine import bench_train

    if a.path == "trl":
        add = transformers.Trainer.add_callback

        def add_callback(self, cb):  # measure_trl adds its StepClock last: add the step log after it
            add(self, cb)
            if not any(type(c).__name__ == "Collect" for c in self.callback_handler.callbacks):
                add(self, log.callback())

        transformers.Trainer.add_callback = add_callback
        return vars_of(bench_train.measure_trl(overrides, a.warmup, a.steps, out_dir))
    run = trun.run

    def run_with_log(cfg, extra_callbacks=None):
        return run(cfg, extra_callbacks=[*(extra_callbacks or []), log.callback()])

    trun.run = run_with_log  # measure_tooltrain imports run from train.engine.run at each call
    return vars_of(bench_train.measure_tooltrain(overrides, a.path == "tooltrain", a.warmup, a.steps, out_dir))


def vars_of(m) -> dict:
    return {
        "ok": m.steps > 0, "steps": m.steps, "real_tokens": m.real_tokens, "seconds": round(m.seconds, 3),
        "tokens_per_s": round(m.tokens_per_s, 1), "padding_efficiency": round(m.padding_efficiency, 4),
        "note": m.note, **({} if m.steps else {"error": "no timed step was measured"}),
    }  # fmt: skip


def peak_and_source(flag_tflops: float | None, device_name: str | None) -> tuple[float | None, str]:
    """MFU's denominator by the engine's rule (``flops.peak_flops``): the flag, else ``PEAK_ENV``, else the data
    sheet by device name; and where it came from. A flag given is exported as ``PEAK_ENV``, so the engine's own
    per-step MFU (``mfu_logged``) divides by the same peak."""
    from train.engine import flops

    if flag_tflops:
        os.environ[flops.PEAK_ENV] = str(flag_tflops)
    override = os.environ.get(flops.PEAK_ENV)
    peak = flops.peak_flops(device_name or "", override)
    if override:
        return peak, "--peak-tflops" if flag_tflops else flops.PEAK_ENV
    return peak, "data sheet (bf16 dense)" if peak else f"none: no peak known for {device_name or 'a CPU'}"


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    from train.engine import distributed

    log = StepLog(a.warmup)
    patch_engine(a, log)
    overrides = (BASE_TINY if a.tiny else BASE_8B) + [
        f"model.attn_implementation={a.attn}", f"kernels={a.kernels}",  # trl's side: use_liger_kernel (bench_train)
        f"distributed.gradient_checkpointing={'true' if a.gc else 'false'}", *a.overrides,
    ]  # fmt: skip
    out_dir = Path(a.run_dir) / f"{a.path}-{a.attn}-{a.kernels}-gc{a.gc}"
    shutil.rmtree(out_dir, ignore_errors=True)  # a completed run there would make run(cfg) a no-op
    cuda = torch.cuda.is_available() and a.device.startswith("cuda")
    peak, source = peak_and_source(a.peak_tflops, distributed.device_name())
    res = {
        "path": a.path, "attn": a.attn, "kernels": a.kernels, "gc": a.gc, "overrides": overrides,
        "device": torch.cuda.get_device_name() if cuda else "cpu", "versions": versions(),
        "peak_flops": peak, "peak_source": source,
    }  # fmt: skip
    started = time.perf_counter()
    try:
        res.update(measure(a, overrides, out_dir, log))
    except torch.OutOfMemoryError as err:
        res.update(ok=False, error=f"OOM: {str(err).splitlines()[0][:300]}")
    except BaseException as err:  # noqa: BLE001 - reported in the JSON; run.sh goes on with the next bench
        traceback.print_exc()
        res.update(ok=False, error=f"{type(err).__name__}: {str(err)[:500]}")
    res["wall_s"] = round(time.perf_counter() - started, 1)
    if cuda:
        res["peak_alloc_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        res["peak_reserved_gib"] = round(torch.cuda.max_memory_reserved() / 2**30, 2)
    res.update(model=log.model, per_step=log.steps, **(log.mfu(peak) if res.get("ok") else {"mfu": None}))
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    keys = ("path", "attn", "kernels", "gc", "ok", "tokens_per_s", "mfu", "mfu_linear_only", "peak_alloc_gib", "error")
    print(json.dumps({k: res.get(k) for k in keys}))
    return 0 if res.get("ok") else (3 if res.get("error", "").startswith("OOM") else 1)


if __name__ == "__main__":
    sys.exit(main())
