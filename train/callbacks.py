"""Small Trainer callbacks, each with one job: metrics file, throughput, checkpoint completion,
preemption signals. They compose with the HF Trainer; none subclasses it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

COMPLETE_MARKER = "tooltrain_complete.json"
# EX_TEMPFAIL: "try again later". launch/slurm/train.sbatch requeues the job on this code.
REQUEUE_EXIT_CODE = 75


class TokenMeter:
    """Counts real (non-padding) tokens, row slots and sample lengths of the batches the model actually ran.

    The collator knows each batch's counts but runs ahead of the model (the dataloader
    prefetches), so it queues them; a forward pre-hook on the model pops one entry per training
    forward. ``take`` returns what ran since the last call.
    """

    def __init__(self) -> None:
        self._queue: deque[tuple[int, int, list[int]]] = deque()
        self.real = 0
        self.slots = 0
        self.lengths: list[int] = []

    def add_batch(self, real: int, slots: int, lengths: list[int] | None = None) -> None:
        self._queue.append((real, slots, list(lengths or [])))

    def attach(self, model: Any) -> None:
        def count(module, args, kwargs):
            if module.training and self._queue:
                real, slots, lengths = self._queue.popleft()
                self.real += real
                self.slots += slots
                self.lengths += lengths

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
        from train.report import read_metrics

        kept = [row for row in read_metrics(self.path) if isinstance(row.get("step"), int) and row["step"] <= state.global_step]
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

    MFU = the training FLOPs of the samples this rank ran (``flops(lengths)``, train/flops.py: real
    tokens only, attention by each sample's own length) per second, over the device's peak FLOP/s.
    """

    def __init__(self, meter: TokenMeter, flops: Callable[[list[int]], float] | None, peak_flops: float | None,
                 world_size: int):
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
    Here old checkpoints go only once the new one and its marker are on disk (fsync).
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
            mark_complete(folder, state.global_step)
            rotate_checkpoints(Path(args.output_dir), self.keep)
        self.barrier()


def sync_tree(folder: Path) -> None:
    """fsync every file under ``folder``, then the folders themselves."""
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as fh:
                os.fsync(fh.fileno())
    for path in [*sorted(p for p in folder.rglob("*") if p.is_dir()), folder]:
        _sync_dir(path)


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def mark_complete(folder: Path, step: int) -> None:
    """Write the completion marker durably: fsync'd file, atomic rename, fsync'd folder."""
    tmp = folder / (COMPLETE_MARKER + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps({"step": step, "time": time.time()}))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, folder / COMPLETE_MARKER)
    _sync_dir(folder)


def rotate_checkpoints(output_dir: Path, keep: int | None) -> list[Path]:
    """Delete the oldest complete checkpoints beyond ``keep``; the newest complete one always stays.

    Unfinished folders are left alone (one may be a save in progress; resume removes stale ones). A
    deleted checkpoint loses its marker first, so a kill mid-delete leaves an unfinished folder,
    never a "complete" one with files missing. Returns the folders deleted.
    """
    if keep is None or keep <= 0:
        return []
    doomed = complete_checkpoints(output_dir)[:-keep]
    for folder in doomed:
        (folder / COMPLETE_MARKER).unlink()
        _sync_dir(folder)
        shutil.rmtree(folder, ignore_errors=True)
    return doomed


def complete_checkpoints(output_dir: Path) -> list[Path]:
    """The checkpoint folders carrying the completion marker, oldest step first."""
    found = []
    for folder in output_dir.glob("checkpoint-*"):
        try:
            step = int(folder.name.split("-")[-1])
        except ValueError:
            continue
        if (folder / COMPLETE_MARKER).exists():
            found.append((step, folder))
    return [folder for _, folder in sorted(found)]


# SIGTERM: Slurm's preemption and scancel, torchrun's shutdown. SIGUSR1: launch/slurm/train.sbatch's time-limit
# warning (--signal=B:USR1@N, forwarded to the ranks). SIGUSR2: what submitit asks Slurm to send before the time
# limit (--signal=USR2@signal_delay_s) in `-m launcher=slurm` sweeps, and what its job._interrupt() sends.
PREEMPTION_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)


class EarlySignals:
    """Records the preemption signals from the moment the entry point starts, before ``Preemption`` exists.

    SIGUSR1's and SIGUSR2's default action ends the process: a scheduler's warning during imports or
    setup would otherwise kill the run instead of letting it checkpoint at its first step.
    """

    received: int | None = None  # the signal number

    @classmethod
    def install(cls, signals: tuple[int, ...] = PREEMPTION_SIGNALS) -> None:
        for sig in signals:
            signal.signal(sig, cls._record)

    @classmethod
    def _record(cls, signum, frame) -> None:
        cls.received = signum


class Preemption(TrainerCallback):
    """SIGTERM / SIGUSR1 / SIGUSR2 -> finish the current step, save a checkpoint, stop.

    Schedulers signal ranks at slightly different times (or only some of them), so the decision
    is agreed across ranks at every step end; otherwise a rank would wait forever in a collective.
    ``received`` keeps which signal came (first): what happens after the save depends on who sent it
    (``train.entry``: exit with the requeue code, or let submitit requeue its job).
    """

    def __init__(self, any_rank: Any, signals: tuple[int, ...] = PREEMPTION_SIGNALS):
        self.any_rank = any_rank
        self.received: int | None = EarlySignals.received
        self.stopped_by_signal = False
        # Installed now, not at train begin: a signal during the (long) setup still ends in a clean save.
        self._previous = {sig: signal.signal(sig, self._handle) for sig in signals}

    @property
    def requested(self) -> bool:
        return self.received is not None

    def _handle(self, signum, frame):
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


def latest_complete_checkpoint(output_dir: Path) -> Path | None:
    """The newest checkpoint folder carrying the completion marker."""
    complete = complete_checkpoints(output_dir)
    return complete[-1] if complete else None


def incomplete_checkpoints(output_dir: Path) -> list[Path]:
    return [f for f in output_dir.glob("checkpoint-*") if f.is_dir() and not (f / COMPLETE_MARKER).exists()]


def completed_run(output_dir: Path) -> dict | None:
    """The summary of a run that already finished in ``output_dir`` (final model saved), else None."""
    summary = output_dir / "summary.json"
    if not summary.is_file() or not (output_dir / "final").is_dir():
        return None
    try:
        data = json.loads(summary.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("status") == "completed" else None
