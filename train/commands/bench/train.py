"""``tooltrain bench train recipe=NAME [key=value ...] [--steps N] [--warmup W]``.

Training throughput of one recipe three ways, on the same model, data and optimizer settings, for
the same number of optimizer steps after an untimed warm-up:

* ``tooltrain packed``: ``run(cfg)`` with ``data.packing=true`` (best-fit packed rows of
  ``data.max_seq_len`` tokens, position ids restarting per sample);
* ``tooltrain padded``: ``run(cfg)`` with ``data.packing=false`` (one sample per row, right-padded
  to the longest in the batch);
* ``trl packed``: trl's own ``SFTTrainer`` path on the same conversations: HF messages
  (``to_hf_messages``) tokenized by trl through ``apply_chat_template`` with trl's copy of the
  family's template (ChatML: ``qwen2_5_training.jinja``, which has ``{% generation %}`` markers,
  so ``assistant_only_loss=True``), packed by trl (``packing=True``, ``packing_strategy="bfd"``,
  which makes its collator padding-free).

Each path runs in a fresh process, so peak memory is its own: peak RSS on CPU,
``torch.cuda.max_memory_allocated`` on a GPU (both include loading the model). Real tokens are
the tokens of the samples in the batches the model ran (padding excluded); padding efficiency is
real tokens / tokens computed. Both come from the same meter for the three paths
(``train.engine.callbacks.Throughput``, logged every step); the rate is real tokens over the wall time
of the steps after the warm-up, and over this process's CPU time in those steps (steadier than
wall time when other work shares the machine). The conversations trl gets are the ones tooltrain's
build kept.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from train.commands.outputs import add_out_dir, make_folder

PATHS = ("tooltrain packed", "tooltrain padded", "trl packed")
NEVER = 10**9  # save_steps: no checkpoints inside a benchmark


@dataclass
class Measurement:
    path: str
    steps: int = 0  # timed steps (after the warm-up)
    real_tokens: int = 0
    slots: int = 0  # tokens computed, padding included
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # this process's CPU time over the same steps: steadier than wall time on a shared machine
    peak_memory_mib: float = 0.0
    memory_kind: str = ""
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="training config overrides, e.g. recipe=demo")
    parser.add_argument("--steps", type=int, default=8, metavar="N", help="timed optimizer steps per path (default 8)")
    parser.add_argument("--warmup", type=int, default=2, metavar="W", help="untimed steps before them (default 2)")
    add_out_dir(
        parser,
        "-o",
        "--output-dir",
        default=Path("runs/bench_train"),
        help="the folder each path's run directory and log go to (default runs/bench_train)",
    )


class StepClock:
    """Sums real tokens, slots and seconds over the logged steps after the warm-up.

    ``Throughput`` (which runs first on every log) turns each step's metered tokens into
    ``tokens_per_s_per_device`` and ``padding_efficiency`` over the time since the previous log;
    this clock times the same interval, so rate x interval gives the step's real tokens back.
    """

    def __init__(self, warmup: int):
        from transformers import TrainerCallback

        self.warmup = warmup
        self.totals = Measurement(path="")
        self._last = (0.0, 0.0)
        clock = self

        class _Callback(TrainerCallback):
            def on_train_begin(self, args, state, control, **kwargs):
                clock._last = (time.perf_counter(), time.process_time())

            def on_log(self, args, state, control, logs=None, **kwargs):
                if not logs or "loss" not in logs:
                    return
                now = (time.perf_counter(), time.process_time())
                elapsed, cpu = now[0] - clock._last[0], now[1] - clock._last[1]
                clock._last = now
                if state.global_step <= clock.warmup or "tokens_per_s_per_device" not in logs:
                    return
                real = logs["tokens_per_s_per_device"] * elapsed
                clock.totals.steps += 1
                clock.totals.seconds += elapsed
                clock.totals.cpu_seconds += cpu
                clock.totals.real_tokens += round(real)
                clock.totals.slots += round(real / logs["padding_efficiency"]) if logs["padding_efficiency"] else 0

        self.callback = _Callback()


def peak_memory() -> tuple[float, str]:
    """MiB: the CUDA allocator's peak on a GPU, else this process's peak resident set."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20, "max CUDA allocated"
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10, "peak RSS"  # bytes on macOS, KiB on Linux


def step_overrides(overrides: list[str], warmup: int, steps: int, out: Path) -> list[str]:
    return [*overrides, f"train.max_steps={warmup + steps}", f"train.save_steps={NEVER}", f"output_dir={out}"]


def measure_tooltrain(overrides: list[str], packed: bool, warmup: int, steps: int, out: Path) -> Measurement:
    from train.engine.config import compose
    from train.engine.run import run

    clock = StepClock(warmup)
    cfg = compose([*step_overrides(overrides, warmup, steps, out), f"data.packing={str(packed).lower()}"])
    run(cfg, extra_callbacks=[clock.callback])
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


def measure_trl(overrides: list[str], warmup: int, steps: int, out: Path) -> Measurement:
    import torch
    from trl import SFTConfig, SFTTrainer

    from train.commands.chat_setup import reference_for
    from train.engine import distributed
    from train.engine.callbacks import Throughput, TokenMeter
    from train.engine.config import compose
    from train.engine.model import apply_lora, build_model, resolve_attn_implementation, resolve_dtype
    from train.engine.run import MeteredCollator
    from train.engine.training_args import training_arguments
    from train.tokenizers import load_tokenizer

    cfg = compose(step_overrides(overrides, warmup, steps, out))
    tokenizer = load_tokenizer(cfg.model.tokenizer, trust_remote_code=bool(cfg.model.trust_remote_code))
    reference = reference_for(cfg.model.chat_format, tokenizer)
    if reference is None:
        return Measurement(path="", note=f"no trl chat template for format {cfg.model.chat_format}")
    dataset = hf_dataset(cfg, tokenizer)
    tokenizer.chat_template = reference.template
    gpu = distributed.on_gpu()
    dtype = resolve_dtype(cfg.model.dtype, gpu)
    model = build_model(
        cfg.model, len(tokenizer), dtype, resolve_attn_implementation(cfg.model.attn_implementation, gpu), seed=cfg.seed
    )
    model = apply_lora(model, cfg.peft, list(cfg.model.lora_target_modules))
    grad_accum = distributed.gradient_accumulation_steps(cfg.train.global_batch_size, cfg.train.micro_batch_size, 1)
    args = SFTConfig(
        **training_arguments(
            cfg,
            out,
            grad_accum,
            dtype == torch.bfloat16,
            max_length=cfg.data.max_seq_len,
            packing=True,
            packing_strategy="bfd",
            assistant_only_loss=reference.masks,
            # SFTConfig's own default differs from TrainingArguments': match what run(cfg) trains with
            gradient_checkpointing=bool(cfg.distributed.gradient_checkpointing),
            logging_steps=1,
            save_strategy="no",
            report_to=[],
        )
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    meter = TokenMeter()
    trainer.data_collator = MeteredCollator(trainer.data_collator, meter, None)
    meter.attach(model)
    clock = StepClock(warmup)
    trainer.callback_handler.callbacks.insert(0, Throughput(meter, None, None, 1))
    trainer.add_callback(clock.callback)
    trainer.train()
    masks = "assistant-only loss" if reference.masks else "loss on every token: the template has no generation markers"
    clock.totals.note = f"{reference.label}, {masks}"
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


def run_isolated(path: str, overrides: list[str], warmup: int, steps: int, out: Path) -> Measurement:
    shutil.rmtree(out, ignore_errors=True)  # a finished run in OUT would make run(cfg) a no-op
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return Measurement(**pool.submit(measure, path, overrides, warmup, steps, out).result())


def table(results: list[Measurement]) -> str:
    rows = [
        ("path", "steps", "real tokens", "seconds", "tokens/s", "cpu s", "tokens/cpu s", "padding eff", "peak mem MiB")
    ]
    for r in results:
        if r.error or not r.steps:
            rows.append((r.path, *["-"] * (len(rows[0]) - 1)))
            continue
        rows.append(
            (
                r.path,
                str(r.steps),
                f"{r.real_tokens:,}",
                f"{r.seconds:.1f}",
                f"{r.tokens_per_s:.1f}",
                f"{r.cpu_seconds:.1f}",
                f"{r.tokens_per_cpu_s:.1f}",
                f"{r.padding_efficiency:.1%}",
                f"{r.peak_memory_mib:,.0f}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        row[0].ljust(widths[0]) + "".join(f"  {c.rjust(w)}" for c, w in zip(row[1:], widths[1:])) for row in rows
    )


def ratio(numerator: Measurement, denominator: Measurement) -> str:
    if numerator.error or denominator.error or not denominator.tokens_per_s or not numerator.steps:
        return "n/a"
    by_cpu = (
        f"{numerator.tokens_per_cpu_s / denominator.tokens_per_cpu_s:.2f}x" if denominator.tokens_per_cpu_s else "n/a"
    )
    return f"{numerator.tokens_per_s / denominator.tokens_per_s:.2f}x tokens/s, {by_cpu} tokens/cpu s"


def run(args: argparse.Namespace) -> int:
    from train.engine.config import compose

    if args.steps < 1 or args.warmup < 0:
        print("error: --steps must be >= 1 and --warmup >= 0", file=sys.stderr)
        return 2
    make_folder(args.out_dir)  # a file in the way is an OutputError (one line) before any training process starts
    try:
        cfg = compose(step_overrides(args.overrides, args.warmup, args.steps, args.out_dir / "check"))
    except Exception as err:  # noqa: BLE001 - a bad override: Hydra's message lists the valid choices
        print(f"error: {err}", file=sys.stderr)
        return 2
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU, {torch.get_num_threads()} threads"
    print(
        f"training benchmark: model {cfg.model.name}, data {cfg.data.name} (max_seq_len {cfg.data.max_seq_len}), "
        f"micro batch {cfg.train.micro_batch_size}, global batch {cfg.train.global_batch_size}, "
        f"{args.steps} timed steps after {args.warmup} warm-up, on {device}",
        flush=True,
    )
    results = []
    for path in PATHS:
        started = time.perf_counter()
        result = run_isolated(
            path, list(args.overrides), args.warmup, args.steps, args.out_dir / path.replace(" ", "_")
        )
        results.append(result)
        status = (
            f"failed: {result.error} (log: {args.out_dir / path.replace(' ', '_')}.log)" if result.error else "done"
        )
        print(f"  {path}: {status} in {time.perf_counter() - started:.0f} s", flush=True)
    print(table(results))
    by_path = {r.path: r for r in results}
    print(
        f"ratio tooltrain packed / tooltrain padded: {ratio(by_path['tooltrain packed'], by_path['tooltrain padded'])}"
    )
    print(f"ratio tooltrain packed / trl packed: {ratio(by_path['tooltrain packed'], by_path['trl packed'])}")
    for r in results:
        if r.note:
            print(f"{r.path}: {r.note}")
    print(f"memory: {results[0].memory_kind or 'peak RSS'} of each path's process, model loading included")
    return 1 if any(r.error for r in results) else 0
