"""Training throughput of one recipe three ways, measured (``tooltrain bench train``; the verb prints the table).

Same model, data and optimizer settings, the same number of optimizer steps after an untimed warm-up:

* ``tooltrain packed``: ``run(cfg)`` with ``data.packing=true`` (best-fit packed rows of ``data.max_seq_len``
  tokens, position ids restarting per sample);
* ``tooltrain padded``: ``run(cfg)`` with ``data.packing=false`` (one sample per row, right-padded to the longest
  in the batch);
* ``trl packed``: trl's own ``SFTTrainer`` on the same conversations: HF messages (``to_hf_messages``) tokenized by
  trl through ``apply_chat_template`` with trl's copy of the family's template (``train.data.bench_render``'s
  reference: ChatML uses ``qwen2_5_training.jinja``, which has ``{% generation %}`` markers, so
  ``assistant_only_loss=True``), packed by trl (``packing=True``, ``packing_strategy="bfd"``, which makes its
  collator padding-free).

Each path runs in a fresh process (``run_isolated``), so peak memory is its own: peak RSS on CPU,
``torch.cuda.max_memory_allocated`` on a GPU (both include loading the model). Real tokens are the tokens of the
samples in the batches the model ran (padding excluded); padding efficiency is real tokens / tokens computed. Both
come from the same meter for the three paths (``train.engine.callbacks.Throughput``, logged every step): the rate
is real tokens over the wall time of the steps after the warm-up, and over this process's CPU time in those steps
(steadier than wall time when other work shares the machine). The conversations trl gets are the ones tooltrain's
build kept.

Both sides run the same kernels and settings as far as trl has them (``sft_arguments``): the model is built the same
way (dtype, attention implementation, LoRA), the strategy's fields (gradient checkpointing, ...) and mixed precision
are ``run(cfg)``'s, and ``kernels=liger`` turns on trl's ``use_liger_kernel`` (Liger's layer kernels; trl keeps its
own chunked LM-head loss, which it does not let Liger's fused cross-entropy replace).

MFU is the engine's on both sides: ``Throughput`` logs each step's MFU, its training FLOPs (``train.engine.flops``,
attention by each sample's own length: trl's rows list their samples in ``seq_lengths``) over its seconds and the
peak, and ``StepClock`` sums the FLOPs back over the timed steps; the peak is the engine's one rule (``bench_peak``:
``flops.peak_flops`` of the GPU's name, ``PEAK_ENV`` first). Without a GPU, or on a GPU of unknown peak, MFU is n/a
and the measurement says why.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from train.engine.flops import PEAK_ENV

PATHS = ("tooltrain packed", "tooltrain padded", "trl packed")
TRL = "trl packed"  # the path every other one is compared with
NEVER = 10**9  # save_steps: no checkpoints inside a benchmark


@dataclass
class Measurement:
    """One path's timed steps (after the warm-up)."""

    path: str
    steps: int = 0  # timed steps (after the warm-up)
    real_tokens: int = 0
    slots: int = 0  # tokens computed, padding included
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # this process's CPU time over the same steps: steadier than wall time on a shared machine
    peak_memory_mib: float = 0.0
    memory_kind: str = ""
    flops: float = 0.0  # training FLOPs of the timed steps, as the engine's Throughput counted them (0: not counted)
    peak_tflops: float | None = None  # the device's dense bf16 peak MFU divides by (bench_peak), None: unknown
    mfu_note: str = ""  # why there is no MFU
    note: str = ""
    error: str = ""

    @property
    def tokens_per_s(self) -> float:
        return self.real_tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def tokens_per_cpu_s(self) -> float:
        return self.real_tokens / self.cpu_seconds if self.cpu_seconds > 0 else 0.0

    @property
    def padding_efficiency(self) -> float:
        return self.real_tokens / self.slots if self.slots else 0.0

    @property
    def mfu(self) -> float | None:
        """Model FLOPs utilization over the timed steps: their FLOPs / their seconds / the peak; None without a peak
        or a counted step (``mfu_note`` says why)."""
        if not self.peak_tflops or not self.flops or self.seconds <= 0:
            return None
        return self.flops / self.seconds / (self.peak_tflops * 1e12)

    def figures(self) -> dict[str, Any]:
        """Every field and rate, for the benchmark's JSON."""
        return {
            **asdict(self),
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_cpu_s": self.tokens_per_cpu_s,
            "padding_efficiency": self.padding_efficiency,
            "mfu": self.mfu,
        }


def bench_peak() -> tuple[float | None, str]:
    """The peak FLOP/s that MFU divides by, by the engine's rule (``run.gpu_peak``), and why there is none: no GPU,
    or one the table lacks."""
    from train.engine.run import gpu_peak

    name, peak = gpu_peak()
    if name is None:
        return None, "no GPU: the engine measures MFU on a GPU only"
    if peak is None:
        return None, f"unknown peak for {name}: set {PEAK_ENV}=<dense bf16 TFLOP/s>"
    return peak, ""


class StepClock:
    """Sums real tokens, slots, seconds and FLOPs over the logged steps after the warm-up.

    ``Throughput`` (which runs first on every log) turns each step's metered tokens into
    ``tokens_per_s_per_device``, ``padding_efficiency`` and, given a peak, ``mfu`` over the time since the previous
    log; this clock times the same interval, so rate x interval gives the step's real tokens back, and
    mfu x interval x peak its FLOPs (``mfu`` is logged to 4 decimals: 5e-5 of MFU at most off a step's).
    """

    def __init__(self, warmup: int, peak: float | None = None, why: str = ""):
        self.warmup = warmup
        self.peak = peak
        self.totals = Measurement(path="", peak_tflops=peak / 1e12 if peak else None, mfu_note=why)
        self._last = (0.0, 0.0)

    def callback(self) -> Any:
        """The Trainer callback that feeds this clock (transformers is imported here, not with the clock)."""
        from transformers import TrainerCallback

        clock = self

        class _Callback(TrainerCallback):
            def on_train_begin(self, args, state, control, **kwargs):
                clock._last = (time.perf_counter(), time.process_time())

            def on_log(self, args, state, control, logs=None, **kwargs):
                if not logs or "loss" not in logs:
                    return
                now = (time.perf_counter(), time.process_time())
                clock.add(state.global_step, logs, now[0] - clock._last[0], now[1] - clock._last[1])
                clock._last = now

        return _Callback()

    def add(self, step: int, logs: dict[str, float], elapsed: float, cpu: float) -> None:
        """One logged training step that took ``elapsed`` seconds (``cpu`` of CPU time); warm-up steps are not
        counted, nor a log without the meter's rate."""
        if step <= self.warmup or "tokens_per_s_per_device" not in logs:
            return
        real = logs["tokens_per_s_per_device"] * elapsed
        self.totals.steps += 1
        self.totals.seconds += elapsed
        self.totals.cpu_seconds += cpu
        self.totals.real_tokens += round(real)
        self.totals.slots += round(real / logs["padding_efficiency"]) if logs["padding_efficiency"] else 0
        if self.peak and "mfu" in logs:
            self.totals.flops += logs["mfu"] * elapsed * self.peak


def peak_memory() -> tuple[float, str]:
    """MiB: the CUDA allocator's peak on a GPU, else this process's peak resident set."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20, "max CUDA allocated"
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10, "peak RSS"  # bytes on macOS, KiB on Linux


def step_overrides(overrides: list[str], warmup: int, steps: int, out: Path) -> list[str]:
    """The user's overrides, then the benchmark's: warm-up + timed steps, no checkpoint, the run in ``out``."""
    return [*overrides, f"train.max_steps={warmup + steps}", f"train.save_steps={NEVER}", f"output_dir={out}"]


def measure_tooltrain(overrides: list[str], packed: bool, warmup: int, steps: int, out: Path) -> Measurement:
    from train.engine.config import compose
    from train.engine.run import run

    clock = StepClock(warmup, *bench_peak())  # the peak run(cfg)'s Throughput finds by the same rule
    cfg = compose([*step_overrides(overrides, warmup, steps, out), f"data.packing={str(packed).lower()}"])
    run(cfg, extra_callbacks=[clock.callback()])
    return clock.totals


def hf_dataset(cfg: Any, tokenizer: Any) -> Any:
    """The conversations tooltrain's build kept for training, as trl's conversational dataset.

    ``Json`` features keep messages and tools as Python objects: Arrow structs would unify the
    keys of different tools' schemas and calls' arguments, and templates would render the extra
    keys as nulls.
    """
    from datasets import Dataset, Features, Json, List
    from omegaconf import OmegaConf

    from train.base.cache import cache_root
    from train.data.dataset import BuildReport, build_dataset, read_conversations
    from train.formats.hf import to_hf_messages

    data_cfg = OmegaConf.to_container(cfg.data, resolve=True, enum_to_str=True)
    built = build_dataset(
        data_cfg, cfg.model.chat_format, tokenizer, Path(cfg.data.cache_dir or cache_root() / "datasets")
    )
    kept = {row["id"] for row in built.train}
    records = []
    for conv in read_conversations(data_cfg["sources"], BuildReport()):
        if conv.id in kept:
            messages, tools = to_hf_messages(conv)
            records.append({"messages": messages, "tools": tools})
    return Dataset.from_list(records, features=Features({"messages": List(Json()), "tools": Json()}))


def sft_arguments(cfg: Any, out: Path, precision: dict[str, bool], assistant_only_loss: bool) -> dict[str, Any]:
    """trl's ``SFTConfig`` fields: the ``TrainingArguments`` fields ``run(cfg)`` trains with on one rank (the
    config's, its mixed precision ``precision``, the strategy's: gradient checkpointing, DeepSpeed, FSDP), the same
    kernels (``kernels=liger``: ``use_liger_kernel``), then trl's packing (best-fit, which makes its collator
    padding-free) and the benchmark's logging."""
    from train.base.errors import choice
    from train.engine import distributed
    from train.engine.training_args import training_arguments

    one_rank = distributed.World(rank=0, local_rank=0, world_size=1, local_world_size=1, node_rank=0)
    grad_accum = distributed.gradient_accumulation_steps(cfg.train.global_batch_size, cfg.train.micro_batch_size, 1)
    strategy = distributed.training_arguments_for(
        cfg.distributed, one_rank, cfg.train.micro_batch_size, grad_accum, cfg.optim.max_grad_norm, precision["bf16"]
    )
    return training_arguments(
        cfg,
        out,
        grad_accum,
        precision["bf16"],
        fp16=precision["fp16"],
        **strategy,
        use_liger_kernel=choice(cfg.kernels) == "liger",
        max_length=cfg.data.max_seq_len,
        packing=True,
        packing_strategy="bfd",
        assistant_only_loss=assistant_only_loss,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
    )


def trl_trainer(cfg: Any, out: Path, tokenizer: Any, dataset: Any, assistant_only_loss: bool) -> tuple[Any, Any]:
    """trl's ``SFTTrainer`` on ``dataset`` with the model (dtype, attention implementation), LoRA and training
    arguments ``run(cfg)`` would use (``sft_arguments``); the trainer and the model it was given."""
    from trl import SFTConfig, SFTTrainer

    from train.base.errors import choice
    from train.engine import distributed
    from train.engine.model import (
        apply_lora,
        build_model,
        precision_flags,
        resolve_attn_implementation,
        resolve_dtype,
        weight_dtype,
    )

    gpu = distributed.on_gpu()
    compute = resolve_dtype(cfg.model.dtype, gpu)
    weights = weight_dtype(compute, choice(cfg.peft.kind) == "none", choice(cfg.distributed.strategy))
    attn = resolve_attn_implementation(cfg.model.attn_implementation, gpu, compute)
    model = build_model(cfg.model, len(tokenizer), weights, attn, seed=cfg.seed)
    model = apply_lora(model, cfg.peft, list(cfg.model.lora_target_modules))
    args = SFTConfig(**sft_arguments(cfg, out, precision_flags(compute, weights), assistant_only_loss))
    return SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer), model


def measure_trl(overrides: list[str], warmup: int, steps: int, out: Path) -> Measurement:
    from train.base.errors import choice
    from train.data.bench_render import reference_for
    from train.engine import distributed
    from train.engine.callbacks import Throughput, TokenMeter
    from train.engine.config import compose
    from train.engine.flops import flops_counter
    from train.engine.run import MeteredCollator
    from train.tokenizers import load_tokenizer

    cfg = compose(step_overrides(overrides, warmup, steps, out))
    distributed.check_kernels(choice(cfg.kernels))  # what run(cfg) refuses (liger without a GPU), refused here too
    tokenizer = load_tokenizer(cfg.model.tokenizer, trust_remote_code=bool(cfg.model.trust_remote_code))
    reference = reference_for(cfg.model.chat_format, tokenizer)
    if reference is None:
        return Measurement(path="", note=f"no trl chat template for format {cfg.model.chat_format}")
    dataset = hf_dataset(cfg, tokenizer)
    tokenizer.chat_template = reference.template
    trainer, model = trl_trainer(cfg, out, tokenizer, dataset, reference.masks)
    meter = TokenMeter()
    trainer.data_collator = MeteredCollator(trainer.data_collator, meter, None)
    meter.attach(model)
    peak, why = bench_peak()
    clock = StepClock(warmup, peak, why)
    # as run(cfg) builds it: the FLOPs of the samples each step ran over its seconds and the peak
    flops = flops_counter(model, choice(cfg.peft.kind) == "lora") if peak else None
    trainer.callback_handler.callbacks.insert(0, Throughput(meter, flops, peak, 1))
    trainer.add_callback(clock.callback())
    trainer.train()
    masks = "assistant-only loss" if reference.masks else "loss on every token: the template has no generation markers"
    kernels = "; Liger's layer kernels, trl's own chunked LM-head loss" if choice(cfg.kernels) == "liger" else ""
    clock.totals.note = f"{reference.label}, {masks}{kernels}"
    return clock.totals


def measure(path: str, overrides: list[str], warmup: int, steps: int, out: Path) -> dict[str, Any]:
    """One path in this (fresh) process; its output goes to OUT.log. Returns a Measurement as a dict."""
    import traceback

    out.parent.mkdir(parents=True, exist_ok=True)
    log = (out.parent / f"{out.name}.log").open("w")
    os.dup2(log.fileno(), 1)  # this process is the path's own: route everything it prints to its log
    os.dup2(log.fileno(), 2)
    try:
        if path == "trl packed":
            result = measure_trl(overrides, warmup, steps, out)
        else:
            result = measure_tooltrain(overrides, path == "tooltrain packed", warmup, steps, out)
    except BaseException:  # noqa: BLE001 - reported in the table; the other paths still run
        traceback.print_exc()
        result = Measurement(path=path, error=traceback.format_exc().strip().splitlines()[-1])
    result.path = path
    result.peak_memory_mib, result.memory_kind = peak_memory()
    return asdict(result)


def path_folder(out_dir: Path, path: str) -> Path:
    """The run folder of one path (its log is that folder's name + ``.log`` beside it)."""
    return out_dir / path.replace(" ", "_")


def run_isolated(path: str, overrides: list[str], warmup: int, steps: int, out: Path) -> Measurement:
    """``measure`` in a fresh (spawned) process, its run folder ``out`` emptied first."""
    shutil.rmtree(out, ignore_errors=True)  # a finished run in OUT would make run(cfg) a no-op
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return Measurement(**pool.submit(measure, path, overrides, warmup, steps, out).result())
