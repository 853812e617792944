"""Trackers and rank-0 printing, decided in one place.

The Trainer's own integrations do the logging (``report_to``): this module picks them from the ``tracking``
config group (one switch per tracker, so ``tracking=[tensorboard,wandb]`` reports to both) and points them at the
run directory. ``use_trackers`` then swaps each integration the Trainer built for tooltrain's subclass of it, which
differs in two things only:

* tooltrain's own namespaced keys reach the tracker as they are. The integrations pass every key through
  transformers' ``rewrite_logs``, which files a key under ``eval/`` only when it starts with ``eval_`` and
  everything else under ``train/``: the generation evaluation's ``eval/<bench>/<metric>`` would show as
  ``train/eval/<bench>/<metric>``. ``tracker_logs`` hands those keys over in the integrations' own convention
  (``eval_<bench>/<metric>``), so the tracker shows ``eval/<bench>/<metric>``, the key metrics.jsonl, summary.json
  and the Trainer's log history keep.
* the run's composed config goes to the tracker: W&B's run config (under ``tooltrain``, beside the
  TrainingArguments the integration sends) and TensorBoard's HParams tab (dotted keys) and text tab (the YAML).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from transformers.integrations import TensorBoardCallback, WandbCallback

from train.engine.config import Tracker

# tooltrain's key prefix -> the prefix transformers' rewrite_logs turns into it (``eval_x`` -> ``eval/x``)
NAMESPACES = {"eval/": "eval_"}
CONFIG_KEY = "tooltrain"  # W&B run config key and TensorBoard text tag of the composed config


def report_to(tracking_cfg: Any, run_dir: Path) -> list[str]:
    """The transformers integrations (``TrainingArguments.report_to``) the ``tracking`` switches turn on, in
    Tracker's order; each pointed at ``run_dir``."""
    chosen = [tracker.value for tracker in Tracker if tracking_cfg.get(tracker.value)]
    if Tracker.tensorboard.value in chosen:
        # transformers 5 removed TrainingArguments(logging_dir=...); the integration reads this variable.
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(run_dir / "tensorboard")
    if Tracker.wandb.value in chosen:
        os.environ.setdefault("WANDB_PROJECT", tracking_cfg.project)
        os.environ.setdefault("WANDB_DIR", str(run_dir))
    return chosen


def tracker_logs(logs: dict[str, Any]) -> dict[str, Any]:
    """``logs`` with tooltrain's namespaced keys in the integrations' convention (``eval/x`` -> ``eval_x``), so
    their ``rewrite_logs`` files them under the namespace (``eval/x``), not under ``train/``."""
    renamed = {}
    for key, value in logs.items():
        prefix = next((prefix for prefix in NAMESPACES if key.startswith(prefix)), None)
        renamed[NAMESPACES[prefix] + key[len(prefix) :] if prefix else key] = value
    return renamed


def composed_config(cfg: Any) -> dict[str, Any]:
    """The run's config as plain nested values (interpolations resolved, enums as their names)."""
    from omegaconf import DictConfig, OmegaConf

    if not isinstance(cfg, DictConfig):
        return dict(cfg)
    return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)


def flat_hparams(config: dict[str, Any], prefix: str = "") -> dict[str, bool | int | float | str]:
    """Dotted key -> value as TensorBoard's HParams take them: numbers, booleans and text as they are; a list,
    an empty section or null as its JSON text (the value the config holds, not left out)."""
    flat: dict[str, bool | int | float | str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flat_hparams(value, f"{name}."))
        elif isinstance(value, (bool, int, float, str)):
            flat[name] = value
        else:
            flat[name] = json.dumps(value, default=str)
    return flat


class TensorBoardTracker(TensorBoardCallback):
    """transformers' TensorBoard integration, with tooltrain's keys (``tracker_logs``) and its composed config."""

    def __init__(self, config: dict[str, Any], tb_writer: Any = None):
        super().__init__(tb_writer)
        self.config = config

    def on_train_begin(self, args, state, control, **kwargs):
        super().on_train_begin(args, state, control, **kwargs)
        if state.is_world_process_zero and self.tb_writer is not None:
            write_config(self.tb_writer, self.config)

    def on_log(self, args, state, control, logs=None, **kwargs):
        return super().on_log(args, state, control, logs=tracker_logs(logs or {}), **kwargs)


def write_config(writer: Any, config: dict[str, Any]) -> None:
    """``config`` into the writer's own event file: the HParams tab (``flat_hparams``) and the text tab (YAML).
    Not ``SummaryWriter.add_hparams``, which writes another event file in a folder of its own."""
    import yaml
    from torch.utils.tensorboard.summary import hparams

    file_writer = writer._get_file_writer()
    for summary in hparams(flat_hparams(config), {}):
        file_writer.add_summary(summary)
    text = yaml.safe_dump(config, sort_keys=False)
    # the text tab renders markdown: indented lines are a code block, so the YAML keeps its layout
    writer.add_text(CONFIG_KEY, "".join(f"    {line}\n" for line in text.splitlines()))
    writer.flush()


class WandbTracker(WandbCallback):
    """transformers' W&B integration, with tooltrain's keys (``tracker_logs``) and its composed config in the run's
    config under ``tooltrain`` (beside the TrainingArguments and model config the integration sends)."""

    def __init__(self, config: dict[str, Any]):
        super().__init__()
        self.config = config

    def setup(self, args, state, model, **kwargs):
        super().setup(args, state, model, **kwargs)
        if state.is_world_process_zero and self._wandb is not None and self._wandb.run is not None:
            self._wandb.config.update({CONFIG_KEY: self.config}, allow_val_change=True)

    def on_log(self, args, state, control, model=None, logs=None, **kwargs):
        return super().on_log(args, state, control, model=model, logs=tracker_logs(logs or {}), **kwargs)


TRACKERS = {TensorBoardCallback: TensorBoardTracker, WandbCallback: WandbTracker}


def use_trackers(trainer: Any, cfg: Any) -> list[Any]:
    """The Trainer's tracker integrations (``report_to``) replaced, each where it was, by tooltrain's subclass
    carrying ``cfg`` (``TRACKERS``); returns them."""
    config = composed_config(cfg)
    callbacks = trainer.callback_handler.callbacks
    ours = []
    for index, callback in enumerate(callbacks):
        tracker = TRACKERS.get(type(callback))
        if tracker is not None:
            callbacks[index] = tracker(config)
            ours.append(callbacks[index])
    return ours


def rank_zero_print(world: Any, message: str) -> None:
    if world.is_main:
        print(message, flush=True)
