"""Generation-based evaluation while training: one callback runs the ``eval`` config group's benchmarks.

Before the first step when ``eval.at_start`` (step 0: the base model, exactly so under LoRA, whose
``lora_B`` starts at zero), every ``eval.every_steps`` optimizer steps, and after the last step when
``eval.at_end``, the model
writes each benchmark's target turns (an episodic benchmark: every answer of each episode, the task answering
in between, bounded by its options), the benchmark's scorer scores them, and every number goes to
the Trainer's ``log`` as ``eval/<bench>/<metric>`` (RUN_DIR/metrics.jsonl through the MetricsFile callback, the
summary, the report's evaluation panels, and the trackers under the same key: ``tracking.tracker_logs``). What
the model wrote goes to RUN_DIR/eval_predictions/<bench>-step<N>.jsonl (the scorer's rows, each with its
generation).
``heldout`` without data evaluates the run's own eval split (``data.eval_fraction``): the dataset
build keeps those conversations.

Ranks share the work: each generates its share of the rows (``distributed.shard_evenly``: the same
number of prompts everywhere, so the same number of ``generate`` calls) and the generations are
gathered on every rank (``distributed.gather_shards``) before scoring, so every rank logs the same
numbers. Under ZeRO-3 and FSDP2 the whole model is gathered once per evaluation (``gather.whole_weights``).
Where ``eval.gather_weights`` or the free memory says no, every forward gathers the sharded weights and
``generate`` runs with ``synced_gpus``: a rank whose sequences are done keeps stepping while others are not.

Evaluation leaves training exactly as it found it: the torch, numpy and Python RNG states are
restored, the model goes back to each module's own train/eval mode, gradients are off. In eval
mode transformers' gradient checkpointing is inactive (it checks ``self.training``), so the KV
cache works; the token meter (``callbacks.TokenMeter``) counts only training-mode forwards.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from train.base.errors import ConfigError, choice
from train.engine import distributed
from train.engine.gather import gather_mode, whole_weights
from train.evaluation.generate import HFBackend, generate, run_episodes
from train.evaluation.tasks import (
    EvalItem,
    Task,
    TaskError,
    evaluate_generations,
    flat_metrics,
    get_task,
    prediction_records,
    read_references,
)
from train.formats import get_format


@dataclass
class Benchmark:
    task: Task
    items: list[EvalItem]
    max_new_tokens: int


@contextmanager
def preserved_rng() -> Iterator[None]:
    """Whatever runs inside draws from copies of the RNGs: training's random stream is untouched."""
    import numpy as np
    import torch

    python_state, numpy_state, torch_state = random.getstate(), np.random.get_state(), torch.get_rng_state()
    cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        torch.set_rng_state(torch_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)


@contextmanager
def inference_mode_of(model: Any) -> Iterator[None]:
    """Eval mode (no dropout, no gradient checkpointing) and no gradients; each module's own mode restored."""
    import torch

    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        for module, training in modes:
            module.training = training


class GenerationEval(TrainerCallback):
    def __init__(
        self,
        benchmarks: dict[str, Benchmark],
        fmt: Any,
        tokenizer: Any,
        log: Callable[[dict[str, float]], None],
        world: distributed.World,
        synced_gpus: bool,
        every_steps: int = 0,
        at_end: bool = True,
        batch_size: int = 8,
        predictions_dir: Path | None = None,
        at_start: bool = False,
        announce: Callable[[str], None] | None = None,
        exclude_time: Callable[[float], None] | None = None,
        gather_weights: str = "auto",
    ):
        self.benchmarks, self.fmt, self.tokenizer, self.log = benchmarks, fmt, tokenizer, log
        self.predictions_dir = predictions_dir
        self.world, self.synced_gpus = world, synced_gpus
        self.every_steps, self.at_end, self.batch_size = every_steps, at_end, batch_size
        self.at_start = at_start
        self.gather_weights = gather_mode(gather_weights)  # whole weights under ZeRO-3: auto, always or never
        self.announce = announce  # says that an evaluation starts (generation takes a while on a CPU)
        self.exclude_time = exclude_time  # told how long each evaluation took: training's tokens/s leaves it out
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def due(self, step: int, max_steps: int) -> bool:
        periodic = self.every_steps > 0 and step % self.every_steps == 0
        return periodic or (self.at_end and step >= max_steps)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        # Only a run that starts at step 0: a resumed run logged its step-0 evaluation before (metrics.jsonl
        # keeps it, and so does the checkpoint's log history).
        if self.at_start and model is not None and state.global_step == 0:
            self.log(self.evaluate(model, 0, write=state.is_world_process_zero, optimizer=kwargs.get("optimizer")))

    def on_step_end(self, args, state, control, model=None, **kwargs):
        # Before the step's checkpoint is saved: a run resumed from it has already logged this step's eval.
        if model is not None and self.due(state.global_step, state.max_steps):
            # Logging resets control.should_log, which the Trainer reads right after this event to
            # log the step's loss: keep its value, so a step with an eval still logs its loss.
            should_log = control.should_log
            write = state.is_world_process_zero
            self.log(self.evaluate(model, state.global_step, write=write, optimizer=kwargs.get("optimizer")))
            control.should_log = should_log
        return control

    def evaluate(self, model: Any, step: int = 0, write: bool = False, optimizer: Any = None) -> dict[str, float]:
        """Every benchmark's metrics as ``eval/<bench>/<metric>``; with ``write``, the predictions too.
        ``optimizer`` is the Trainer's: under ZeRO-3 it holds the hooks taken off while whole weights generate."""
        started = time.perf_counter()
        logged: dict[str, float] = {}
        if self.announce is not None:
            what = ", ".join(f"{name} ({len(bench.items)} items)" for name, bench in self.benchmarks.items())
            self.announce(f"eval step {step}: generating {what} ...")
        with (
            preserved_rng(),
            inference_mode_of(model),
            whole_weights(model, optimizer, self.gather_weights, self.announce) as whole,
        ):
            # Whole weights: no forward runs a collective, so a rank that is done need not keep stepping.
            backend = HFBackend(model, self.pad_id, self.batch_size, synced_gpus=self.synced_gpus and not whole)
            for name, bench in self.benchmarks.items():
                share = distributed.shard_evenly(bench.items, self.world.rank, self.world.world_size)
                if bench.task.episodic:  # as many rounds as the answers need: ranks in lock-step agree on each
                    lockstep = distributed.any_rank if backend.synced_gpus else None
                    episodes = [bench.task.episode(item) for _, item in share]
                    generations = run_episodes(
                        episodes, self.fmt, self.tokenizer, backend, bench.max_new_tokens, lockstep,
                        bench.task.max_prompt_tokens,
                    )  # fmt: skip
                else:
                    prompts = [(item.conversation, item.target) for _, item in share]
                    generations = generate(prompts, self.fmt, self.tokenizer, backend, bench.max_new_tokens)
                gathered = distributed.gather_shards([(index, gen) for (index, _), gen in zip(share, generations)])
                outcome = evaluate_generations(bench.task, bench.items, gathered)
                logged.update(flat_metrics(outcome.metrics, f"eval/{name}/"))
                if write and self.predictions_dir is not None:
                    path = self.predictions_dir / f"{name}-step{step}.jsonl"
                    self.write_predictions(path, prediction_records(outcome, gathered))
        if self.exclude_time is not None:
            self.exclude_time(time.perf_counter() - started)
        return logged

    @staticmethod
    def write_predictions(path: Path, records: list[dict[str, Any]]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records), encoding="utf-8")
        tmp.replace(path)


def task_options(spec: Any) -> dict[str, Any]:
    from omegaconf import DictConfig, OmegaConf

    options = getattr(spec, "options", None) or {}
    return OmegaConf.to_container(options) if isinstance(options, DictConfig) else dict(options)


def load_benchmarks(
    eval_cfg: Any, held_out: list[Any], say: Callable[[str], None] | None = None
) -> dict[str, Benchmark]:
    """The ``eval`` group's benchmarks with their items; ``heldout`` without data takes ``held_out``. ``say`` prints
    what a task's ``prepare`` noted (a limit that cut the bench): given on the main rank only, so a line is printed
    once, not once per rank."""
    benchmarks: dict[str, Benchmark] = {}
    for spec in eval_cfg.benchmarks:
        task = get_task(spec.name, task_options(spec))
        paths: list[Path] = []
        if spec.data is None:
            conversations = list(held_out)
        else:
            from train.data.inputs import resolve_input

            files = [spec.data] if isinstance(spec.data, str) else list(spec.data)
            paths = [resolve_input(str(f)) for f in files]
            conversations, rejected = read_references(paths, spec.source, task)
            if not conversations:
                raise TaskError(
                    f"eval benchmark {spec.name}: no conversation in {', '.join(map(str, files))} "
                    f"({len(rejected)} rejected, e.g. {rejected[:1]})"
                )
        prepared = task.prepare(conversations, spec.limit, paths)
        if say is not None:
            for note in prepared.notes:
                say(note)
        items = prepared.items
        if not items:
            raise TaskError(
                f"eval benchmark {spec.name}: none of its {len(conversations)} conversations has a turn to write"
            )
        key = spec.name if spec.name not in benchmarks else f"{spec.name}_{len(benchmarks)}"
        benchmarks[key] = Benchmark(task=task, items=items, max_new_tokens=int(spec.max_new_tokens))
    return benchmarks


def build_eval_callback(
    cfg: Any,
    built: Any,
    tokenizer: Any,
    world: distributed.World,
    log: Callable,
    exclude_time: Callable[[float], None] | None = None,
) -> GenerationEval | None:
    """The callback for ``cfg.eval``, or None when it lists no benchmark or never runs. ``exclude_time`` is told
    how long each evaluation took (the throughput meter keeps it out of tokens/s)."""
    eval_cfg = cfg.eval
    at_start = bool(eval_cfg.at_start)
    if not eval_cfg.benchmarks or (eval_cfg.every_steps <= 0 and not eval_cfg.at_end and not at_start):
        return None
    strategy = cfg.distributed.strategy
    strategy = choice(strategy)
    say = (lambda line: print(line, flush=True)) if world.is_main else None  # rank-0 policy: one line, not one a rank
    try:
        benchmarks = load_benchmarks(eval_cfg, built.eval_conversations, say)
    except TaskError as err:  # before any training: a bad eval config costs nothing
        raise ConfigError(f"eval: {err}") from None
    return GenerationEval(
        benchmarks,
        get_format(cfg.model.chat_format, cfg.data.get("format_options")),  # prompts as the rows were rendered
        tokenizer,
        log,
        world,
        synced_gpus=distributed.generation_needs_sync(strategy, world),
        every_steps=int(eval_cfg.every_steps),
        at_end=bool(eval_cfg.at_end),
        batch_size=int(eval_cfg.batch_size),
        predictions_dir=Path(cfg.output_dir) / "eval_predictions",
        at_start=at_start,
        announce=say,
        exclude_time=exclude_time,
        # not in EvalConfig's schema yet (train/engine/config.py): auto unless a config carries the key
        gather_weights=eval_cfg.get("gather_weights", "auto"),
    )


__all__ = [
    "Benchmark",
    "GenerationEval",
    "build_eval_callback",
    "inference_mode_of",
    "load_benchmarks",
    "preserved_rng",
]
