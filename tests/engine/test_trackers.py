"""Trackers (train/engine/tracking.py): which integrations the ``tracking`` switches turn on (several at once), the
keys a tracker receives for an evaluation's log (``eval/<bench>/<metric>``, not transformers' ``train/eval/...``),
and the composed config each receives (W&B's run config, TensorBoard's HParams and text). The integrations are
transformers' own, run on a fake W&B module and a real TensorBoard event file: no network, no training run."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
from hydra.errors import MissingConfigException
from transformers import TrainerControl, TrainerState, TrainingArguments
from transformers.integrations import TensorBoardCallback, WandbCallback
from transformers.integrations.integration_utils import rewrite_logs
from transformers.trainer_callback import CallbackHandler, DefaultFlowCallback

from train.engine.callbacks import MetricsFile
from train.engine.config import CONF_DIR, Tracker, TrackingConfig, compose
from train.engine.tracking import (
    TensorBoardTracker,
    WandbTracker,
    composed_config,
    flat_hparams,
    report_to,
    tracker_logs,
    use_trackers,
)

EVAL_LOG = {"eval/heldout/call_accuracy": 0.5, "eval/heldout/by_kind/call/total": 7, "epoch": 1.0}
CONFIG = {
    "run_name": "tiny",
    "seed": 42,
    "model": {"name": "tiny_llama", "lora_target_modules": ["q_proj", "v_proj"], "path": None},
    "optim": {"lr": 0.001, "betas": [0.9, 0.999]},
    "tracking": {"tensorboard": True, "wandb": False},
    "eval": {"benchmarks": []},
}


# ---- which trackers


def test_tracking_with_a_list_of_options_turns_on_each():
    tracking = compose(["recipe=tiny", "tracking=[tensorboard,wandb]"]).tracking
    assert (tracking.tensorboard, tracking.wandb) == (True, True)
    assert compose(["recipe=tiny", "tracking.wandb=true"]).tracking.wandb is True


def test_report_to_names_each_switched_on_tracker_and_points_it_at_the_run(tmp_path, monkeypatch):
    for name in ("TENSORBOARD_LOGGING_DIR", "WANDB_PROJECT", "WANDB_DIR"):
        monkeypatch.delenv(name, raising=False)
    both = compose(["recipe=tiny", "tracking=[wandb,tensorboard]", "tracking.project=mine"]).tracking
    assert report_to(both, tmp_path) == ["tensorboard", "wandb"]
    import os

    assert os.environ["TENSORBOARD_LOGGING_DIR"] == str(tmp_path / "tensorboard")
    assert (os.environ["WANDB_PROJECT"], os.environ["WANDB_DIR"]) == ("mine", str(tmp_path))
    assert report_to(compose(["recipe=tiny", "tracking=none"]).tracking, tmp_path) == []


def test_a_tracker_tooltrain_does_not_have_fails_at_compose_naming_the_valid_ones():
    with pytest.raises(MissingConfigException, match="(?s)Available options in 'tracking'.*none.*tensorboard.*wandb"):
        compose(["recipe=tiny", "tracking=mlflow"])


def test_a_bad_name_in_a_list_of_trackers_is_one_line_naming_the_valid_ones():
    from train.engine.overrides import override_problem

    assert override_problem("train", ["recipe=tiny", "tracking=[tensorboard,mlflow]"]) == (
        "In 'train': Could not load 'tracking/mlflow'; valid in tracking: none, tensorboard, wandb"
    )
    assert override_problem("train", ["recipe=tiny", "tracking=[tensorboard,wandb]"]) is None


def test_every_tracker_is_a_switch_with_its_config_group_option():
    fields = set(TrackingConfig.__dataclass_fields__)
    assert [tracker.value for tracker in Tracker] == ["tensorboard", "wandb"]
    for tracker in Tracker:
        assert tracker.value in fields and TrackingConfig.__dataclass_fields__[tracker.value].default is False
        assert (Path(CONF_DIR) / "tracking" / f"{tracker.value}.yaml").is_file()


# ---- the keys a tracker receives


def test_an_evaluation_reaches_a_tracker_under_eval_not_train_eval():
    assert rewrite_logs(EVAL_LOG) == {  # transformers alone: what W&B showed before
        "train/eval/heldout/call_accuracy": 0.5,
        "train/eval/heldout/by_kind/call/total": 7,
        "train/epoch": 1.0,
    }
    assert rewrite_logs(tracker_logs(EVAL_LOG)) == {
        "eval/heldout/call_accuracy": 0.5,
        "eval/heldout/by_kind/call/total": 7,
        "train/epoch": 1.0,
    }
    loss = {"loss": 1.25, "learning_rate": 1e-3, "eval_loss": 0.75}  # the Trainer's own keys are left as they are
    assert tracker_logs(loss) == loss


def trainer_objects(tmp_path: Path, step: int = 3) -> tuple[TrainingArguments, TrainerState, TrainerControl]:
    args = TrainingArguments(output_dir=str(tmp_path / "run"), report_to=[], run_name="tiny", use_cpu=True)
    state = TrainerState()
    state.global_step = step
    return args, state, TrainerControl()


def read_events(folder: Path) -> tuple[object, Path]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = list(folder.rglob("events.out.tfevents.*"))
    assert len(events) == 1  # the config in the integration's own event file, not one of its own
    accumulator = EventAccumulator(str(events[0].parent), size_guidance={"tensors": 0})
    accumulator.Reload()
    return accumulator, events[0]


def test_tensorboard_gets_eval_keys_and_the_composed_config(tmp_path, monkeypatch):
    from tensorboard.plugins.hparams import plugin_data_pb2

    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "tensorboard"))
    args, state, control = trainer_objects(tmp_path)
    tracker = TensorBoardTracker(CONFIG)
    tracker.on_train_begin(args, state, control)
    tracker.on_log(args, state, control, logs={**EVAL_LOG, "loss": 1.25})
    tracker.on_train_end(args, state, control)

    accumulator, _ = read_events(tmp_path / "tensorboard")
    scalars = accumulator.Tags()["scalars"]
    assert sorted(scalars) == [
        "eval/heldout/by_kind/call/total",
        "eval/heldout/call_accuracy",
        "train/epoch",
        "train/loss",
    ]
    assert [(e.step, e.value) for e in accumulator.Scalars("eval/heldout/call_accuracy")] == [(3, 0.5)]
    content = accumulator.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    start = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    hparams = {
        key: value.WhichOneof("kind") and getattr(value, value.WhichOneof("kind"))
        for key, value in start.hparams.items()
    }
    assert hparams == {
        "run_name": "tiny",
        "seed": 42.0,
        "model.name": "tiny_llama",
        "model.lora_target_modules": '["q_proj", "v_proj"]',
        "model.path": "null",
        "optim.lr": 0.001,
        "optim.betas": "[0.9, 0.999]",
        "tracking.tensorboard": True,
        "tracking.wandb": False,
        "eval.benchmarks": "[]",
    }
    assert "tooltrain/text_summary" in accumulator.Tags()["tensors"]  # the YAML, in the text tab
    text = accumulator.Tensors("tooltrain/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "    model:\n      name: tiny_llama\n" in text


class FakeWandb(types.SimpleNamespace):
    """What transformers' WandbCallback calls of the ``wandb`` module, recorded."""

    def __init__(self):
        super().__init__(run=None, config=FakeConfig(), logged=[], inits=[])

    def init(self, **kwargs):
        self.inits.append(kwargs)
        self.run = types.SimpleNamespace(_label=lambda **_: None, summary={})

    def define_metric(self, *args, **kwargs):
        pass

    def log(self, values):
        self.logged.append(values)

    def termwarn(self, *args, **kwargs):
        pass


class FakeConfig(dict):
    def update(self, values, allow_val_change=False):
        super().update(values)


def test_wandb_gets_the_composed_config_and_eval_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_PROJECT", "mine")
    args, state, control = trainer_objects(tmp_path)
    tracker = WandbTracker(CONFIG)
    tracker._wandb = fake = FakeWandb()
    tracker.on_train_begin(args, state, control, model=None)
    tracker.on_log(args, state, control, logs=dict(EVAL_LOG))

    assert fake.inits == [{"project": "mine", "name": "tiny"}]
    assert fake.config["tooltrain"] == CONFIG  # nested, beside the TrainingArguments the integration sends
    assert fake.config["learning_rate"] == args.learning_rate and fake.config["run_name"] == "tiny"
    assert fake.logged == [
        {
            "eval/heldout/call_accuracy": 0.5,
            "eval/heldout/by_kind/call/total": 7,
            "train/epoch": 1.0,
            "train/global_step": 3,
        }
    ]


def test_only_the_main_process_sends_the_config(tmp_path):
    args, state, control = trainer_objects(tmp_path)
    state.is_world_process_zero = False
    tracker = WandbTracker(CONFIG)
    tracker._wandb = fake = FakeWandb()
    tracker.on_train_begin(args, state, control, model=None)
    tracker.on_log(args, state, control, logs=dict(EVAL_LOG))
    assert (fake.inits, dict(fake.config), fake.logged) == ([], {}, [])


# ---- the Trainer's integrations swapped for tooltrain's


def test_use_trackers_swaps_each_integration_in_its_place(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "tensorboard"))
    metrics = MetricsFile(tmp_path / "metrics.jsonl")
    handler = CallbackHandler(
        [DefaultFlowCallback, TensorBoardCallback, WandbCallback, metrics], None, None, None, None
    )
    trainer = types.SimpleNamespace(callback_handler=handler)
    ours = use_trackers(trainer, compose(["recipe=tiny", "tracking=[tensorboard,wandb]"]))
    assert [type(callback) for callback in handler.callbacks] == [
        DefaultFlowCallback,
        TensorBoardTracker,
        WandbTracker,
        MetricsFile,
    ]
    assert ours == handler.callbacks[1:3] and handler.callbacks[3] is metrics
    config = ours[0].config
    assert ours[1].config is config and config["tracking"]["wandb"] is True
    assert config["model"]["source"] == "config"  # enums by name, interpolations resolved
    assert "${" not in config["output_dir"] and config["output_dir"].endswith(config["run_name"])


def test_use_trackers_without_trackers_changes_nothing():
    handler = CallbackHandler([DefaultFlowCallback], None, None, None, None)
    before = list(handler.callbacks)
    assert use_trackers(types.SimpleNamespace(callback_handler=handler), {"seed": 1}) == []
    assert handler.callbacks == before


def test_flat_hparams_keeps_every_leaf_as_tensorboard_takes_it():
    assert flat_hparams({"a": {"b": 1, "c": {}}, "d": None, "e": [1, "x"], "f": True}) == {
        "a.b": 1,
        "a.c": "{}",
        "d": "null",
        "e": '[1, "x"]',
        "f": True,
    }
    assert composed_config({"seed": 1}) == {"seed": 1}
