"""The training loop's console output: ``StepLines`` prints ``train.engine.console``'s per-step and eval lines on
global rank 0, and ``use_step_lines`` puts it in place of the HF Trainer's progress bar and log printer."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import PrinterCallback, ProgressCallback

from train.engine.console import eval_line, step_line


class StepLines(TrainerCallback):
    """A line per logged step (with the time left at the pace since training began) and per evaluation."""

    def __init__(self, print_fn: Callable[..., Any] = print):
        self.print = print_fn
        self._started: float | None = None
        self._first_step = 0

    def on_step_begin(self, args, state, control, **kwargs):
        # The pace counts from this process's first step: not the setup or a step-0 evaluation before it,
        # and on a resumed run only the steps trained here.
        if self._started is None:
            self._started, self._first_step = time.monotonic(), state.global_step

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        if "loss" in logs:
            done, left = state.global_step - self._first_step, state.max_steps - state.global_step
            eta = (time.monotonic() - self._started) / done * left if self._started and done > 0 and left > 0 else None
            self.print(step_line(state.global_step, state.max_steps, logs, args.world_size, eta), flush=True)
        elif any(key.startswith("eval/") for key in logs):
            self.print(eval_line(state.global_step, state.max_steps, logs), flush=True)


def use_step_lines(trainer: Any) -> StepLines:
    """The Trainer prints through StepLines only: its progress bar (rank 0) and its log printer (the local
    rank 0 of other nodes, where the bar is off) are removed."""
    for kind in (ProgressCallback, PrinterCallback):
        trainer.remove_callback(kind)
    lines = StepLines()
    trainer.add_callback(lines)
    return lines
