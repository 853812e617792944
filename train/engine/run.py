"""``run(cfg)``: one training run, top to bottom, in five stages: setup -> data -> model -> train -> finish.

Each stage is a plain function that takes the config and what the earlier stages returned
(``Environment``, ``Data``, ``Model``, ``Trained``) and says its contract in its docstring.

Called by the Hydra entry point (``tooltrain train ...``) and directly by tests with a composed
config. The HF Trainer (with accelerate, DeepSpeed and peft) is the engine; tooltrain hands it
pre-tokenized, packed rows and a few small callbacks.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from train.base.cache import cache_root
from train.base.errors import ConfigError, choice
from train.data.dataset import BuildReport, BuiltDataset, build_dataset
from train.data.packing import (
    PackedCollator,
    PackedRows,
    PaddedCollator,
    SampleBoundaries,
    SampleRows,
    best_fit_pack,
    packing_stats,
)
from train.engine import distributed
from train.engine.attention import is_flash_family
from train.engine.callbacks import CheckpointComplete, MetricsFile, Preemption, Throughput, TokenMeter, early_stopping
from train.engine.checkpoints import completed_run
from train.engine.eval_callback import build_eval_callback
from train.engine.flops import PEAK_ENV, flops_counter, peak_flops, sample_lengths
from train.engine.loss import WeightedLoss
from train.engine.memory_plan import describe, plan, refusal
from train.engine.model import (
    AdapterSaveError,
    apply_lora,
    build_model,
    check_model_tokenizer,
    count_parameters,
    expected_adapter_shapes,
    precision_flags,
    quantization_config,
    resolve_attn_implementation,
    resolve_dtype,
    saved_adapter_problems,
    weight_dtype,
)
from train.engine.report import read_metrics
from train.engine.resume_config import check_rerun, record_config
from train.engine.run_dir import RunSetupError, check_inputs, evaluation_hint, hold_run_dir, resume_point
from train.engine.run_folder import run_tokenizer
from train.engine.signals import EarlySignals
from train.engine.summary import eval_before_after, run_identity
from train.engine.tracking import rank_zero_print, report_to, use_trackers


@dataclass
class RunResult:
    output_dir: Path
    status: str  # "completed" | "preempted" | "stopped" | "evaluated" (a paper's evaluation-only job: nothing trained)
    global_step: int
    losses: list[float]
    adapter_dir: Path | None
    summary: dict[str, Any]
    stop_signal: int | None = None  # status "preempted": the signal that stopped it


class MeteredCollator:
    """Wraps a collator to count real tokens and slots for the throughput metrics: queued in the meter when it runs
    in the training process, carried in the batch from a data loader worker (``TokenMeter``)."""

    def __init__(self, collator: Any, meter: TokenMeter, pad_width: int | None):
        self.collator, self.meter, self.pad_width = collator, meter, pad_width

    def __call__(self, rows):
        batch = self.collator(rows)
        real, slots = sum(len(r["input_ids"]) for r in rows), batch["input_ids"].numel()
        lengths = [n for row in rows for n in sample_lengths(row)]
        if torch.utils.data.get_worker_info() is not None:  # a worker process: its meter is a copy nobody reads
            return TokenMeter.tag(batch, real, slots, lengths)
        self.meter.add_batch(real, slots, lengths)
        return batch


def packed_collator(pad_id: int, width: int, attn: str) -> PackedCollator | SampleBoundaries:
    """The packed rows' collator for the attention kernel ``attn``: flash-family kernels read the samples'
    boundaries from the batch (``train.engine.attention``); the others build the mask from the positions."""
    collator = PackedCollator(pad_id, pad_to=width)
    return SampleBoundaries(collator) if is_flash_family(attn) else collator


def make_rows(built: BuiltDataset, data_cfg: Any) -> tuple[PackedRows | SampleRows, dict[str, Any]]:
    """Packed rows (or single samples) and the padding statistics of what the model will see. Packing reads the
    samples' lengths only; each row is cut from the memory-mapped cache when the data loader asks for it."""
    samples = built.train
    lengths = samples.lengths.tolist()
    if data_cfg.packing:
        bins = best_fit_pack(lengths, data_cfg.max_seq_len)
        stats = packing_stats(lengths, bins, data_cfg.max_seq_len)
        rows = PackedRows(samples, bins)
    else:
        rows = SampleRows(samples)
        stats = packing_stats(lengths, [[i] for i in range(len(samples))], max(lengths, default=0))
    return rows, {"samples": stats.samples, "rows": stats.rows, "padding_efficiency": round(stats.efficiency, 4)}


def no_training_rows_message(report: BuildReport) -> str:
    """Why a build gave nothing to train on: the counts, then the commonest reasons (an input error, not a crash)."""
    reasons = sorted(report.reasons.items(), key=lambda item: -item[1])[:3]
    why = "; ".join(f"{count} x {reason}" for reason, count in reasons) or "no conversation was read"
    return (
        f"no training rows: {report.read} conversations read, {report.accepted} accepted, "
        f"{report.eval_rows} held out for eval ({why})"
    )


def data_builder(cfg: DictConfig) -> tuple[Any, dict[str, Any] | None]:
    """The recipe's data builder (``data.builder``) bound to ``data.builder_args`` and the run's seed,
    with what the dataset cache key must add for it (the seed, the builder's version); (None, None) without one."""
    if not cfg.data.builder:
        return None, None
    from train import builders

    args = OmegaConf.to_container(cfg.data.builder_args, resolve=True)
    try:
        transform = builders.bind(cfg.data.builder, int(cfg.seed), args)
    except ValueError as err:  # before any data is read: a bad builder config costs nothing
        raise ConfigError(f"data.builder={cfg.data.builder}: {err}") from None
    return transform, {"builder_seed": int(cfg.seed), "builder_version": builders.version(cfg.data.builder)}


def run(cfg: DictConfig, extra_callbacks: list | None = None) -> RunResult:
    """One training run: setup -> data -> model -> train -> finish. A rerun of a completed run is a no-op."""
    world = distributed.World.from_env()
    out = Path(cfg.output_dir)
    done = completed_run(out)
    if done is not None:  # rerunning the same command is how a preempted run resumes; a finished run stays finished
        check_rerun(out, cfg, world)  # ... but another recipe or setting is not that command: refused, D untouched
        return already_completed(cfg, world, out, done)
    with hold_run_dir(out, world):  # one run at a time in RUN_DIR; a second one is refused (train/engine/run_dir.py)
        env = set_up(cfg, world, out)
        EarlySignals.stop_if_interrupted()  # Ctrl-C before training: nothing to save, stop between stages
        if choice(cfg.train.objective) != "sft":  # the same stages around TRL's DPOTrainer or GRPOTrainer
            return run_trl_objective(cfg, env, extra_callbacks)
        data = prepare_data(cfg, env)
        EarlySignals.stop_if_interrupted()
        args = training_args(cfg, env)  # before the model, kept to the end: ZeRO-3 builds it under zero.Init
        model = prepare_model(cfg, env, data, args)
        EarlySignals.stop_if_interrupted()
        trained = train_model(cfg, env, data, model, args, extra_callbacks)
        return finish(cfg, env, data, model, trained)


def already_completed(cfg: DictConfig, world: distributed.World, out: Path, done: dict[str, Any]) -> RunResult:
    rank_zero_print(
        world,
        f"tooltrain: {out} already holds a completed run ({done.get('steps')} steps, final model in "
        f"{out / 'final'}); nothing to do. Use another output_dir to train again." + evaluation_hint(out, cfg),
    )
    losses = [row["loss"] for row in read_metrics(out / "metrics.jsonl") if "loss" in row]
    return RunResult(
        output_dir=out,
        status="completed",
        global_step=int(done.get("steps") or 0),
        losses=losses,
        adapter_dir=out / "final",
        summary=done,
    )


# ---- setup ----------------------------------------------------------------------------------------


@dataclass
class Environment:
    world: distributed.World
    out: Path
    gpu: bool
    strategy: str
    grad_accum: int
    dtype: Any  # torch dtype of the weights (fp32 for full fine-tuning without ZeRO/FSDP: model.weight_dtype)
    attn: str  # the attention implementation (model.attn_implementation resolved for this machine and dtype)
    strategy_args: dict[str, Any]  # the TrainingArguments fields the strategy and hardware decide
    kernels: str
    compute_dtype: Any = None  # torch dtype of the matmuls (model.dtype resolved); None: the weights' dtype

    def precision(self) -> dict[str, bool]:
        """TrainingArguments' bf16/fp16 flags for these weights and matmuls."""
        return precision_flags(self.compute_dtype or self.dtype, self.dtype)


def set_up(cfg: DictConfig, world: distributed.World, out: Path) -> Environment:
    """Checks everything that can fail cheaply (inputs, strategy, kernels) before any data or model
    work, creates RUN_DIR and records the resolved config in it. Returns what later stages read."""
    check_inputs(cfg)  # one error naming every input that cannot be opened
    gpu = distributed.on_gpu()
    grad_accum = distributed.gradient_accumulation_steps(
        cfg.train.global_batch_size, cfg.train.micro_batch_size, world.world_size
    )
    compute = resolve_dtype(cfg.model.dtype, gpu)
    attn = resolve_attn_implementation(cfg.model.attn_implementation, gpu, compute)  # flash with fp32: ConfigError
    strategy = choice(cfg.distributed.strategy)
    dtype = weight_dtype(compute, choice(cfg.peft.kind) == "none", strategy)  # full fine-tuning: fp32 master weights
    # Strategy errors (fsdp2 or liger on CPU, a world too big for single) surface before any data or model work.
    strategy_args = distributed.training_arguments_for(
        cfg.distributed,
        world,
        cfg.train.micro_batch_size,
        grad_accum,
        cfg.optim.max_grad_norm,
        compute == torch.bfloat16,
    )
    kernels = choice(cfg.kernels)
    distributed.check_kernels(kernels)
    distributed.check_deepspeed(cfg.distributed, choice(cfg.peft.kind) == "lora")  # the installed DeepSpeed's bugs
    check_memory_plan(cfg, world, gpu)
    out.mkdir(parents=True, exist_ok=True)
    # The resolved config, so `tooltrain export RUN_DIR` can rebuild the base model; a resume is checked
    # against it and never rewrites it (train/engine/resume_config.py).
    record_config(out, cfg, world)
    return Environment(world, out, gpu, strategy, grad_accum, dtype, attn, strategy_args, kernels, compute)


def check_memory_plan(cfg: DictConfig, world: distributed.World, gpu: bool) -> None:
    """On a GPU: the per-GPU memory plan for the world that runs (train/engine/memory_plan.py), printed; a plan that
    cannot fit is a ConfigError naming the knob, before any data or model work. On a CPU the plan means nothing."""
    memory = plan(cfg, world.world_size) if gpu else None
    if memory is None:
        return
    rank_zero_print(world, describe(memory))
    problem = refusal(memory)
    if problem:
        raise ConfigError(problem)


# ---- data -----------------------------------------------------------------------------------------


@dataclass
class Data:
    tokenizer: Any
    built: BuiltDataset  # the train rows, the eval split and the build report
    rows: PackedRows | SampleRows  # what the Trainer iterates: packed rows, or single samples
    pack_info: dict[str, Any]
    collator: MeteredCollator
    meter: TokenMeter  # counts the real tokens of every batch for the throughput metrics

    def summary_fields(self, cfg: DictConfig, history: list[dict[str, Any]]) -> dict[str, Any]:
        """What summary.json says of the data (``PreferenceData`` says it for train.objective=dpo)."""
        report = self.built.report
        return {
            "trained_tokens": report.trained_tokens,
            "masked_tokens": report.masked_tokens,
            "data": report.to_dict(),
            "packing": self.pack_info,
        }


def prepare_data(cfg: DictConfig, env: Environment) -> Data:
    """The tokenizer, the built (or cached) dataset with its eval split, the rows the model sees and
    their collator. Exits with the build report when no training row is left."""
    # a random-init model gains the format's missing control tokens (recipe=tiny model.chat_format=qwen3)
    tokenizer = run_tokenizer(cfg)
    check_model_tokenizer(cfg, tokenizer)  # before the data build: a tokenizer the model's embeddings cannot hold
    data_cfg = OmegaConf.to_container(cfg.data, resolve=True, enum_to_str=True)
    transform, key_extra = data_builder(cfg)
    # Node-local rank 0 builds (under the cache's file lock: nodes sharing a filesystem build once); the
    # node's other ranks wait for the cache and load it.
    built = build_dataset(
        data_cfg,
        cfg.model.chat_format,
        tokenizer,
        Path(cfg.data.cache_dir or cache_root() / "datasets"),
        transform=transform,
        key_extra=key_extra,
        may_build=env.world.is_local_main,
    )
    if len(built.train) == 0:
        raise RunSetupError(no_training_rows_message(built.report))
    rows, pack_info = make_rows(built, cfg.data)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    meter = TokenMeter()
    if cfg.data.packing:
        packed = packed_collator(pad_id, cfg.data.max_seq_len, env.attn)
        collator = MeteredCollator(packed, meter, cfg.data.max_seq_len)
    else:
        collator = MeteredCollator(PaddedCollator(pad_id), meter, None)
    return Data(tokenizer, built, rows, pack_info, collator, meter)


# ---- model ----------------------------------------------------------------------------------------


@dataclass
class Model:
    model: Any  # with its LoRA adapter when peft.kind=lora
    lora: bool
    adapter_shapes: dict[str, tuple[int, ...]]  # what the saved adapter must hold (LoRA only)
    trainable: int
    total: int


def prepare_model(cfg: DictConfig, env: Environment, data: Data, args: Any) -> Model:
    """The base model (kernels applied), its adapter, and its parameter counts; the token meter watches it.
    Built where ``distributed.model_placement`` says (under ZeRO-3's zero.Init, on the rank's GPU, or on the CPU),
    in the context ``args`` (the run's TrainingArguments, made first) gives it."""
    lora = choice(cfg.peft.kind) == "lora"
    # LoRA's random-init base is drawn again by export, eval and resume (model config and seed): drawn as they draw it
    placement = distributed.model_placement(cfg.distributed, env.gpu, choice(cfg.model.source) == "config", lora)
    with distributed.build_context(placement, args):
        quantization = quantization_config(cfg.peft, env.gpu)  # QLoRA (peft.quantize); refused without CUDA
        model = build_model(
            cfg.model, len(data.tokenizer), env.dtype, env.attn, seed=cfg.seed, quantization=quantization
        )
    if env.kernels == "liger":
        _apply_liger(model)
    model = apply_lora(model, cfg.peft, list(cfg.model.lora_target_modules))
    adapter_shapes = expected_adapter_shapes(model) if lora else {}
    trainable, total = count_parameters(model)
    data.meter.attach(model)
    return Model(model, lora, adapter_shapes, trainable, total)


# ---- train ----------------------------------------------------------------------------------------


@dataclass
class Trained:
    trainer: Any
    preemption: Preemption
    started: float  # time.time() when training started: the summary's seconds run from here to the saved model


def trainer_arguments(cfg: DictConfig, env: Environment) -> dict[str, Any]:
    """The run's TrainingArguments: the config's (``train.engine.training_args``), its mixed precision
    (``Environment.precision``), saving and logging, and what the strategy decides."""
    from train.engine.training_args import training_arguments

    return training_arguments(
        cfg,
        env.out,
        env.grad_accum,
        save_strategy="steps",
        save_steps=cfg.train.save_steps,
        save_total_limit=None,  # CheckpointComplete rotates, once the new checkpoint is complete
        report_to=report_to(cfg.tracking, env.out),
        run_name=cfg.tracking.run_name or cfg.run_name,
        remove_unused_columns=False,
        disable_tqdm=not env.world.is_main,
        **env.precision(),
        **env.strategy_args,
    )


def training_args(cfg: DictConfig, env: Environment) -> Any:
    """The run's ``TrainingArguments``, made before the model and kept until the run ends: while they live, their
    ZeRO-3 config is registered with transformers, which then builds the model under zero.Init (one partition per
    rank, never the whole model: ``distributed.build_context``)."""
    from transformers import TrainingArguments

    return TrainingArguments(**trainer_arguments(cfg, env))


def gpu_peak() -> tuple[str | None, float | None]:
    """The GPU's name and the dense bf16 peak FLOP/s MFU divides by (``flops.peak_flops`` of the name, ``PEAK_ENV``
    first): the one rule ``run`` and ``bench train`` share. (None, None) on CPU."""
    name = distributed.device_name()
    return name, (peak_flops(name, os.environ.get(PEAK_ENV)) if name is not None else None)


def run_peak_flops(world: distributed.World) -> float | None:
    """The GPU's peak FLOP/s for MFU (``gpu_peak``), None on CPU; a GPU of unknown peak is said once."""
    name, peak = gpu_peak()
    if name is not None and peak is None:
        rank_zero_print(world, f"tooltrain: MFU: unknown peak for {name}; set {PEAK_ENV}=<dense bf16 TFLOP/s> for it")
    return peak


def train_model(
    cfg: DictConfig, env: Environment, data: Data, model: Model, args: Any, extra_callbacks: list | None
) -> Trained:
    """The HF Trainer (``args``: ``training_args``) with tooltrain's callbacks (metrics file, checkpoints, preemption,
    throughput, evaluation), resumed from the latest complete checkpoint; trains until done or stopped."""
    from transformers import Trainer

    from train.engine.step_lines import use_step_lines

    world, out = env.world, env.out
    preemption = Preemption(distributed.any_rank)
    peak = run_peak_flops(world)
    throughput = Throughput(
        data.meter, flops_counter(model.model, model.lora) if peak else None, peak, world.world_size
    )
    callbacks = run_callbacks(cfg, out, preemption, extra_callbacks)
    # data.part_weights other than 0/1 put loss_weights in the rows; only then the weighted loss (train.engine.loss:
    # hooks on the model and its output head, the loss chunked over the head, never the full logits)
    weighted_loss = WeightedLoss() if data.rows.has_loss_weights else None
    if weighted_loss is not None:
        weighted_loss.attach(model.model)
    trainer = Trainer(
        model=model.model,
        args=args,
        train_dataset=data.rows,
        eval_dataset=eval_rows(data.built, cfg),  # train.eval_strategy: eval loss on the held-out split
        data_collator=data.collator,
        callbacks=callbacks,
        compute_loss_func=weighted_loss,
    )
    # Throughput writes its numbers into the log dict, so it must run before every logger sees it.
    trainer.callback_handler.callbacks.insert(0, throughput)
    use_step_lines(trainer)  # formatted per-step lines on rank 0, not the Trainer's bar and dicts
    use_trackers(trainer, cfg)  # the trackers show eval/<bench>/<metric> and get the composed config
    # Generation-based evaluation (the eval group); it logs through the Trainer, so it needs the trainer.
    evaluation = build_eval_callback(
        cfg, data.built, data.tokenizer, world, log=trainer.log, exclude_time=throughput.exclude
    )
    if evaluation is not None:
        trainer.add_callback(evaluation)

    resume = resume_point(out, world)
    pack_info = data.pack_info
    rank_zero_print(
        world,
        f"tooltrain: {cfg.run_name} on {world.world_size} rank(s), {env.strategy}; "
        f"{len(data.rows)} rows from {pack_info['samples']} samples "
        f"(padding efficiency {pack_info['padding_efficiency']:.1%}); "
        f"{model.trainable:,} of {model.total:,} parameters trainable"
        + (f"; resuming from {resume.name}" if resume else ""),
    )
    started = time.time()
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    return Trained(trainer, preemption, started)


def run_callbacks(cfg: DictConfig, out: Path, preemption: Preemption, extra: list | None) -> list:
    """Every run's callbacks: metrics.jsonl, complete checkpoints, preemption, the caller's, early stopping."""
    checkpoints = CheckpointComplete(distributed.barrier, keep=cfg.train.save_total_limit)
    callbacks = [MetricsFile(out / "metrics.jsonl"), checkpoints, preemption, *(extra or [])]
    stop = early_stopping(cfg.train)  # train.early_stopping: any logged metric
    if stop is not None:
        callbacks.append(stop)
    return callbacks


def run_trl_objective(cfg: DictConfig, env: Environment, extra_callbacks: list | None) -> RunResult:
    """train.objective=dpo|grpo: data -> model -> train -> finish around TRL's DPOTrainer
    (``train.engine.preference_run``: preference pairs on tool calls) or GRPOTrainer (``train.engine.grpo_run``:
    rollouts in the run's chat format, scored by rewards), with the run's model, callbacks and resume."""
    if choice(cfg.train.objective) == "dpo":
        from train.engine import preference_run as objective

        prepare, make_args, make_trainer = objective.prepare_pairs, objective.dpo_config, objective.dpo_trainer
    else:
        from train.engine import grpo_run as objective

        prepare, make_args, make_trainer = objective.prepare_prompts, objective.grpo_config, objective.grpo_trainer
    data = prepare(cfg, data_builder(cfg)[0])
    EarlySignals.stop_if_interrupted()
    args = make_args(cfg, trainer_arguments(cfg, env))  # before the model, as ``training_args``
    model = prepare_model(cfg, env, data, args)
    EarlySignals.stop_if_interrupted()
    preemption = Preemption(distributed.any_rank)
    trainer = make_trainer(cfg, env, data, model, args, run_callbacks(cfg, env.out, preemption, extra_callbacks))
    resume = resume_point(env.out, env.world)
    rank_zero_print(
        env.world,
        f"tooltrain: {cfg.run_name} ({data.start_line(cfg)}) on {env.world.world_size} rank(s), {env.strategy}; "
        f"{model.trainable:,} of {model.total:,} parameters trainable"
        + (f"; resuming from {resume.name}" if resume else ""),
    )
    started = time.time()
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    return finish(cfg, env, data, model, Trained(trainer, preemption, started))


def eval_rows(built: BuiltDataset, cfg: DictConfig) -> PackedRows | SampleRows | None:
    """The held-out split's rows for the eval loss (``train.eval_strategy``), one sample per row (packed runs pad it
    to the packed width the collator expects), None when the eval loss is off."""
    if choice(cfg.train.eval_strategy) == "no" or len(built.eval) == 0:
        return None
    if cfg.data.packing:
        return PackedRows(built.eval, [[i] for i in range(len(built.eval))])
    return SampleRows(built.eval)


# ---- finish ---------------------------------------------------------------------------------------


def finish(cfg: DictConfig, env: Environment, data: Any, model: Model, trained: Trained) -> RunResult:
    """Saves the final model (and checks a saved adapter) when the run completed, writes summary.json
    and the report on the main rank, and returns what happened: completed, preempted or stopped."""
    world, out, state = env.world, env.out, trained.trainer.state
    preemption = trained.preemption
    status = (
        "preempted"
        if preemption.stopped_by_signal
        else ("completed" if state.global_step >= state.max_steps else "stopped")
    )
    adapter_dir = None
    if status == "completed":
        adapter_dir = out / "final"
        trained.trainer.save_model(str(adapter_dir))
        if world.is_main:
            data.tokenizer.save_pretrained(str(adapter_dir))
        if model.lora and state.global_step > 0 and weights_moved(state.log_history):
            check_saved_adapter(adapter_dir, model.adapter_shapes, world)
        elif state.global_step > 0 and not weights_moved(state.log_history):
            rank_zero_print(world, "tooltrain: no step had a gradient (every rollout group scored alike): " + UNMOVED)
    losses = [h["loss"] for h in state.log_history if "loss" in h]
    summary = {
        "status": status,
        "steps": state.global_step,
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
        **data.summary_fields(cfg, state.log_history),
        "parameters": {"trainable": model.trainable, "total": model.total},
        "seconds": round(time.time() - trained.started, 1),
        "final": adapter_dir.name if adapter_dir else None,  # paths in summary.json are relative to the run folder
        "dtype": str(env.dtype).removeprefix("torch."),
        "run": run_identity(cfg),
        "eval": eval_before_after(state.log_history),
    }
    if status == "completed" and world.is_main:
        summary.update(after_training(cfg, model.model, data.tokenizer, out, world.world_size))
        summary["paper_tables"] = paper_tables(cfg, summary, state.log_history)
    if world.is_main:
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
        from train.engine.report import write_report

        write_report(out / "metrics.jsonl", out / "report.png", summary["run"], summary.get("paper_tables"))
    distributed.barrier()
    return RunResult(
        output_dir=out,
        status=status,
        global_step=state.global_step,
        losses=losses,
        adapter_dir=adapter_dir,
        summary=summary,
        stop_signal=preemption.received if preemption.stopped_by_signal else None,
    )


def after_training(cfg: DictConfig, model: Any, tokenizer: Any, out: Path, world_size: int) -> dict[str, Any]:
    """The after-training steps of the run's papers (``PaperSpec.after_training``), on rank 0 after a completed run
    (the final model is saved): what each returns goes into summary.json."""
    from train.papers import active

    added: dict[str, Any] = {}
    for _, spec in active(cfg):
        if spec.after_training is not None:
            added.update(spec.after_training(cfg, model, tokenizer, out, world_size))
    return added


def paper_tables(
    cfg: DictConfig, summary: dict[str, Any], history: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The main table of each paper the run reproduces (``PaperSpec.table``), as summary.json keeps it: paper name
    -> ``PaperTable.to_dict()``. Printed last by the end-of-run summary and drawn under report.png's panels.
    A table sees the summary with every section of the evaluations (``history``: the Trainer's log history), not
    only the top-level rates summary.json keeps: a paper's columns are often a benchmark's sections."""
    from train.papers import in_run

    seen = {**summary, "eval": eval_before_after(history, sections=True)} if history is not None else summary
    tables: dict[str, Any] = {}
    for name, spec in in_run(cfg):
        table = spec.table(cfg, seen) if spec.table is not None else None
        if table is not None:
            tables[name] = table.to_dict()
    return tables


UNMOVED = "the final weights are the starting ones"


def weights_moved(history: list[dict[str, Any]]) -> bool:
    """Whether training can have changed the weights: some step's gradient norm was non-zero, or none was logged.
    A GRPO step whose every group of rollouts scored alike has no advantage, so no gradient; a run of only such steps
    leaves LoRA's B at zero, which is then no sign of a failed save."""
    norms = [row["grad_norm"] for row in history if "grad_norm" in row]
    return not norms or any(norm != 0 for norm in norms)


def check_saved_adapter(adapter_dir: Path, expected: dict[str, tuple[int, ...]], world: distributed.World) -> None:
    """Fail loudly, on every rank, when the adapter just saved is empty, partial or untrained."""
    problems = saved_adapter_problems(adapter_dir, expected) if world.is_main else []
    if distributed.any_rank(bool(problems)):
        detail = "; ".join(problems) if problems else "see global rank 0's log"
        raise AdapterSaveError(f"the adapter saved in {adapter_dir} is unusable: {detail}")


def _apply_liger(model: Any) -> None:
    """Liger's kernels for this model; a model type Liger has none for is a ConfigError (Liger itself would only log
    it and train with the plain kernels). The config's own model type was checked at compose time."""
    from train.engine.kernels import liger_model_problem

    problem = liger_model_problem(model.config.model_type, "the loaded model's config")
    if problem:
        raise ConfigError(problem)
    from liger_kernel.transformers import _apply_liger_kernel_to_instance

    _apply_liger_kernel_to_instance(model=model)
