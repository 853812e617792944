"""Small Trainer callbacks, each with one job: metrics file, throughput, checkpoint completion,
preemption signals. They compose with the HF Trainer; none subclasses it."""

from __future__ import annotations

import json
import os
import signal
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

# The checkpoint-folder helpers and the signal constants live in torch-free modules (the command line
# reads them before its slow imports); they are named here too, where callers have always found them.
from train.engine.checkpoints import (  # noqa: F401
    COMPLETE_MARKER,
    complete_checkpoints,
    completed_run,
    incomplete_checkpoints,
    latest_complete_checkpoint,
    mark_complete,
    rotate_checkpoints,
    sync_tree,
)
from train.engine.signals import INTERRUPT_SIGNALS, PREEMPTION_SIGNALS, REQUEUE_EXIT_CODE, EarlySignals  # noqa: F401


class TokenMeter:
    """Counts real (non-padding) tokens, row slots and sample lengths of the batches the model actually ran.

    The collator knows each batch's counts but runs ahead of the model (the dataloader prefetches), and with
    ``train.dataloader_workers > 0`` in other processes, whose counts this process would never see. So a collator
    in this process queues them (``add_batch``); one in a worker process puts them in the batch under
    ``BATCH_KEY`` (``tag``), which travels to the training process with the batch. A forward pre-hook on the model
    takes one entry per training forward: the batch's own, else the queue's. ``take`` returns what ran since the
    last call.
    """

    BATCH_KEY = "tooltrain_token_counts"  # never reaches the model: the hook takes it out of the forward's kwargs

    def __init__(self) -> None:
        self._queue: deque[tuple[int, int, list[int]]] = deque()
        self.real = 0
        self.slots = 0
        self.lengths: list[int] = []

    def add_batch(self, real: int, slots: int, lengths: list[int] | None = None) -> None:
        self._queue.append((real, slots, list(lengths or [])))

    @classmethod
    def tag(cls, batch: dict[str, Any], real: int, slots: int, lengths: list[int]) -> dict[str, Any]:
        """``batch`` carrying its counts (a tuple: the Trainer and accelerate move tensors only, pass it as is)."""
        return {**batch, cls.BATCH_KEY: (real, slots, tuple(lengths))}

    def attach(self, model: Any) -> None:
        def count(module, args, kwargs):
            counts = kwargs.pop(self.BATCH_KEY, None)
            if counts is None and module.training and self._queue:
                counts = self._queue.popleft()
            if counts is not None and module.training:
                real, slots, lengths = counts
                self.real += real
                self.slots += slots
                self.lengths += lengths
            return args, kwargs

        model.register_forward_pre_hook(count, with_kwargs=True)

    def take(self) -> tuple[int, int, list[int]]:
        real, slots, lengths = self.real, self.slots, self.lengths
        self.real = self.slots = 0
        self.lengths = []
        return real, slots, lengths


class MetricsFile(TrainerCallback):
    """Appends every logged step to RUN_DIR/metrics.jsonl (global rank 0 only).

    A resumed run trains again the steps after its checkpoint, so at train begin the lines past the
    checkpoint's step (logged by the interrupted run, maybe cut mid-write) are dropped: the file
    keeps one line per step, for the weights the run actually ends with.
    """

    def __init__(self, path: Path, extra: Any = None):
        self.path = path
        self.extra = extra  # callable returning dict of metrics to merge into each line, or None

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero or not self.path.exists():
            return
        from train.engine.report import read_metrics

        kept = [
            row
            for row in read_metrics(self.path)
            if isinstance(row.get("step"), int) and row["step"] <= state.global_step
        ]
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text("".join(json.dumps(row) + "\n" for row in kept), encoding="utf-8")
        tmp.replace(self.path)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        row = {"step": state.global_step, **{k: v for k, v in logs.items() if isinstance(v, (int, float, str))}}
        if "loss" in row and "train_loss" not in logs:
            row["loss"] = float(row["loss"])
        if self.extra is not None:
            row.update(self.extra())
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")


class Throughput(TrainerCallback):
    """Real tokens/s, padding efficiency and (on GPU) MFU over each logging interval.

    MFU = the training FLOPs of the samples this rank ran (``flops(lengths)``, train/engine/flops.py: real
    tokens only, attention by each sample's own length) per second, over the device's peak FLOP/s.
    """

    def __init__(
        self, meter: TokenMeter, flops: Callable[[list[int]], float] | None, peak_flops: float | None, world_size: int
    ):
        self.meter = meter
        self.flops = flops
        self.peak_flops = peak_flops
        self.world_size = world_size
        self._since = None

    def on_train_begin(self, args, state, control, **kwargs):
        self._since = time.perf_counter()
        self.meter.take()

    def exclude(self, seconds: float) -> None:
        """Time spent on something else than training (an evaluation), kept out of the next tokens/s."""
        if self._since is not None:
            self._since += seconds

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is None or "loss" not in logs or self._since is None:
            return
        now = time.perf_counter()
        elapsed, self._since = now - self._since, now
        real, slots, lengths = self.meter.take()
        if elapsed <= 0 or slots == 0:
            return
        tokens_per_s = real / elapsed  # this rank's
        logs["tokens_per_s_per_device"] = round(tokens_per_s, 2)
        logs["padding_efficiency"] = round(real / slots, 4)
        if self.flops and self.peak_flops:
            logs["mfu"] = round(self.flops(lengths) / elapsed / self.peak_flops, 4)


class CheckpointComplete(TrainerCallback):
    """Marks a checkpoint complete once every rank has written it, then rotates old checkpoints.

    ``on_save`` runs after the Trainer has written the whole checkpoint. A run killed mid-save leaves
    a folder without the marker, and resume skips (and removes) such folders. The Trainer runs with
    ``save_total_limit=None``: its own rotation deletes old checkpoints inside ``_save_checkpoint``,
    before ``on_save``, so with a limit of 1 a kill in between would leave no complete checkpoint.
    Here old checkpoints go only once the new one and its marker are on disk (fsync). The marker lists every
    file of the checkpoint with its size and CRC-32: a resume verifies them (train/engine/checkpoints.py).
    """

    def __init__(self, barrier: Any, keep: int | None = None):
        self.barrier = barrier
        self.keep = keep  # complete checkpoints to keep (train.save_total_limit); None or <= 0: all

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_local_process_zero:
            sync_tree(folder)  # each node flushes what its ranks wrote
        self.barrier()
        if state.is_world_process_zero:
            mark_complete(folder, state.global_step, args.world_size)
            rotate_checkpoints(Path(args.output_dir), self.keep)
        self.barrier()


class Preemption(TrainerCallback):
    """SIGTERM / SIGUSR1 / SIGUSR2 / SIGINT (Ctrl-C) -> finish the current step, save a checkpoint, stop.

    Schedulers signal ranks at slightly different times (or only some of them), so the decision
    is agreed across ranks at every step end; otherwise a rank would wait forever in a collective.
    ``received`` keeps which signal came (first): what happens after the save depends on who sent it
    (``train.engine.entry``: exit with the requeue code, let submitit requeue its job, or, for Ctrl-C, exit 130).
    A second Ctrl-C, at least ``REPEAT_S`` after the first, stops at once without that checkpoint (the
    last complete one stays); one sooner is the same keypress delivered twice (the terminal signals every
    process of the job, and torchrun forwards what it got to its workers).
    """

    REPEAT_S = 2.0

    def __init__(self, any_rank: Any, signals: tuple[int, ...] = PREEMPTION_SIGNALS + INTERRUPT_SIGNALS):
        self.any_rank = any_rank
        self.received: int | None = EarlySignals.received
        self.stopped_by_signal = False
        self._interrupted_at: float | None = None
        # Installed now, not at train begin: a signal during the (long) setup still ends in a clean save.
        self._previous = {sig: signal.signal(sig, self._handle) for sig in signals}

    @property
    def requested(self) -> bool:
        return self.received is not None

    def _handle(self, signum, frame):
        if signum in INTERRUPT_SIGNALS:
            now = time.monotonic()
            if self._interrupted_at is not None:
                if now - self._interrupted_at >= self.REPEAT_S:
                    raise KeyboardInterrupt  # Ctrl-C again: the user does not want to wait for the save
                return
            self._interrupted_at = now
            # os.write, not print: a signal handler may run in the middle of a print to the same stream
            os.write(
                2,
                b"\ntooltrain: Ctrl-C: saving a checkpoint after this step, then stopping "
                b"(Ctrl-C again to stop at once without it)\n",
            )
        if self.received is None:
            self.received = signum

    def on_train_end(self, args, state, control, **kwargs):
        # Give the process its handlers back: a caller running training in-process (tests, a
        # notebook) must not keep ignoring SIGTERM once training is over, and a submitit job gets
        # its own handler back for the requeue.
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)

    def on_step_end(self, args, state, control, **kwargs):
        if self.any_rank(self.requested):
            self.stopped_by_signal = True
            control.should_save = True
            control.should_training_stop = True
        return control


class StopAtStep(TrainerCallback):
    """Stops after a given step, as a kill would, but cleanly (tests of resume)."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= self.step:
            control.should_training_stop = True
        return control


class EarlyStopping(TrainerCallback, ExportableState):
    """Stops training once ``metric`` has gone ``patience`` logged values without improving by more than
    ``min_delta`` (``train.early_stopping``).

    Its count survives a resume: the Trainer writes ``state()`` into each checkpoint's trainer_state.json
    (``stateful_callbacks``), and ``on_train_begin`` takes it back when the checkpoint watched the same metric the
    same way (a resumed run would otherwise wait ``patience`` values again). Only this callback's entry is read:
    transformers' ``restore_callback_states_from_checkpoint`` would restore every callback and the TrainerControl.

    It watches the log (``on_log``), not ``on_evaluate``: transformers' own EarlyStoppingCallback sees only the
    Trainer's ``evaluate`` metrics (eval_loss) and needs load_best_model_at_end, while tooltrain's generation-based
    evaluation logs ``eval/<bench>/<metric>`` through ``Trainer.log``. Every rank logs the same gathered values, so
    every rank stops at the same step."""

    def __init__(self, metric: str, patience: int, greater_is_better: str | bool = "auto", min_delta: float = 0.0):
        self.metric, self.patience, self.min_delta = metric, patience, min_delta
        self.greater = higher_is_better(metric, greater_is_better)
        self.best: float | None = None
        self.waited = 0

    def state(self) -> dict[str, Any]:
        return {
            "args": {"metric": self.metric, "patience": self.patience, "min_delta": self.min_delta},
            "attributes": {"best": self.best, "waited": self.waited, "greater": self.greater},
        }

    def on_train_begin(self, args, state, control, **kwargs):
        stored = state.stateful_callbacks.get(type(self).__name__)
        stored = stored[0] if isinstance(stored, list) and stored else stored
        if isinstance(stored, dict) and stored.get("args", {}).get("metric") == self.metric:
            attributes = stored.get("attributes", {})
            if attributes.get("greater") == self.greater:  # same metric, same direction: the count goes on
                self.best, self.waited = attributes.get("best"), int(attributes.get("waited") or 0)
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        value = (logs or {}).get(self.metric)
        if value is None:
            return control
        improved = self.best is None or (
            value - self.best > self.min_delta if self.greater else self.best - value > self.min_delta
        )
        if improved:
            self.best, self.waited = float(value), 0
        else:
            self.waited += 1
            if self.waited >= self.patience:
                control.should_training_stop = True
                if state.is_world_process_zero:
                    print(
                        f"tooltrain: early stopping at step {state.global_step}: {self.metric} has not improved on "
                        f"{self.best:g} for {self.waited} logged value(s)",
                        flush=True,
                    )
        return control


def higher_is_better(metric: str, setting: str | bool) -> bool:
    """``train.early_stopping.greater_is_better``: auto reads the name (a loss is lower-is-better)."""
    text = str(setting).lower()
    if text == "auto":
        return "loss" not in metric.lower()
    return text == "true"


def early_stopping(train_cfg: Any) -> EarlyStopping | None:
    """The callback ``train.early_stopping`` asks for, None when it names no metric."""
    stop = train_cfg.get("early_stopping")
    if stop is None or stop.get("metric") is None:
        return None
    return EarlyStopping(stop.metric, stop.patience, stop.greater_is_better, stop.min_delta)
