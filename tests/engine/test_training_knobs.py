"""Issue 28 item 4: the training knobs users expect. The exact TrainingArguments / LoraConfig values a config gives,
the compose-time refusals, early stopping on a logged metric (the callback API with a fake state), QLoRA refused
without CUDA, and the eval loss equal to a hand-computed masked loss on a tiny model. No training runs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from transformers import TrainerControl, TrainerState, TrainingArguments

from train.engine.callbacks import EarlyStopping, early_stopping, higher_is_better
from train.engine.config import ConfigError, compose
from train.engine.model import quantization_config
from train.engine.run import eval_rows
from train.engine.training_args import TRAINER_OWNED, lora_arguments, training_arguments

EVAL = ["train.eval_strategy=steps", "train.eval_steps=7", "data.eval_fraction=0.1"]


@pytest.fixture(scope="module")
def knobs_cfg():
    return compose(
        [
            "recipe=tiny",
            *EVAL,
            "train.neftune_noise_alpha=5",
            "+train.extra_args={label_smoothing_factor: 0.1, lr_scheduler_kwargs: {power: 2.0}}",
            "peft.use_dora=true",
            "+peft.extra_args={use_rslora: true, lora_bias: false}",
            "train.early_stopping.metric=eval_loss",
            "train.early_stopping.patience=2",
        ]
    )


def test_training_arguments_carry_eval_neftune_and_extra_args(knobs_cfg, tmp_path: Path):
    fields = training_arguments(knobs_cfg, tmp_path, 1, False)
    assert fields["eval_strategy"] == "steps" and fields["eval_steps"] == 7
    assert fields["per_device_eval_batch_size"] == knobs_cfg.train.micro_batch_size
    assert fields["prediction_loss_only"] is True  # never the logits of the whole eval split
    assert fields["neftune_noise_alpha"] == 5.0
    assert fields["label_smoothing_factor"] == 0.1 and dict(fields["lr_scheduler_kwargs"]) == {"power": 2.0}
    args = TrainingArguments(**{**fields, "lr_scheduler_kwargs": dict(fields["lr_scheduler_kwargs"])}, use_cpu=True)
    assert args.eval_strategy == "steps" and args.neftune_noise_alpha == 5.0 and args.label_smoothing_factor == 0.1


def test_defaults_add_nothing(tmp_path: Path):
    fields = training_arguments(compose(["recipe=tiny"]), tmp_path, 1, False)
    assert not {"eval_strategy", "neftune_noise_alpha", "prediction_loss_only", "label_smoothing_factor"} & set(fields)


def test_lora_config_carries_dora_and_extra_args(knobs_cfg):
    from peft import LoraConfig

    config = LoraConfig(**lora_arguments(knobs_cfg.peft, ["q_proj", "v_proj"]))
    assert config.use_dora is True and config.use_rslora is True and config.lora_bias is False
    assert (config.r, config.lora_alpha, config.lora_dropout) == (
        knobs_cfg.peft.r,
        knobs_cfg.peft.alpha,
        knobs_cfg.peft.dropout,
    )
    assert set(config.target_modules) == {"q_proj", "v_proj"}
    assert lora_arguments(compose(["recipe=tiny"]).peft, ["q_proj"])["use_dora"] is False


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["+train.extra_args.learning_rat=1"],
            "train.extra_args.learning_rat is not a field of TrainingArguments; did you mean learning_rate",
        ),
        (["+train.extra_args.learning_rate=1"], "tooltrain sets learning_rate itself; use optim.lr"),
        (["+train.extra_args.report_to=none"], "use tracking"),
        (
            ["+peft.extra_args.lora_alph=3"],
            "peft.extra_args.lora_alph is not a field of LoraConfig; did you mean lora_alpha",
        ),
        (["+peft.extra_args.use_dora=true"], "use peft.use_dora"),
        (["peft.quantize=3bit"], "peft.quantize=3bit; valid: 4bit, 8bit or null"),
        (["peft.quantize=4bit"], "it needs model.source=pretrained"),
        (["peft.quantize=4bit", "peft=none"], "it needs peft=lora"),
        (["peft.quantize=4bit", "distributed=zero3"], "does not shard quantized weights (ZeRO-3/FSDP2)"),
        (["train.eval_strategy=steps"], "data.eval_fraction is 0"),
        (["train.early_stopping.metric=eval_loss"], "needs train.eval_strategy=steps or epoch"),
        (["train.early_stopping.metric=x", "train.early_stopping.greater_is_better=maybe"], "valid: auto, true, false"),
        (["train.neftune_noise_alpha=0"], "train.neftune_noise_alpha must be > 0"),
        ([*EVAL[:1], "train.eval_steps=0", "data.eval_fraction=0.1"], "train.eval_steps"),
    ],
)
def test_compose_refuses(overrides, message):
    with pytest.raises(ConfigError, match=None) as caught:
        compose(["recipe=tiny", *overrides])
    assert message in str(caught.value)


def test_every_owned_key_is_a_training_argument():
    from train.engine.training_args import trainer_fields

    assert set(TRAINER_OWNED) <= trainer_fields()


def test_qlora_refused_without_cuda():
    cfg = SimpleNamespace(get=lambda key, default=None: "4bit" if key == "quantize" else default)
    with pytest.raises(ConfigError, match=r"peft.quantize=4bit \(QLoRA\) needs a CUDA GPU; this machine has none"):
        quantization_config(cfg, on_gpu=False)
    assert quantization_config(SimpleNamespace(get=lambda key, default=None: None), on_gpu=False) is None


def test_qlora_config_on_gpu():
    pytest.importorskip("bitsandbytes")
    cfg = SimpleNamespace(get=lambda key, default=None: "4bit" if key == "quantize" else default)
    config = quantization_config(cfg, on_gpu=True)
    assert config.load_in_4bit and config.bnb_4bit_quant_type == "nf4" and config.bnb_4bit_use_double_quant
    assert config.bnb_4bit_compute_dtype == torch.bfloat16


def _log(callback, state, control, step, logs):
    state.global_step = step
    return callback.on_log(None, state, control, logs=logs)


def test_early_stopping_stops_after_patience():
    callback, state, control = EarlyStopping("eval_loss", patience=2), TrainerState(), TrainerControl()
    for step, value in [(10, 1.0), (20, 0.8), (30, 0.85)]:
        _log(callback, state, control, step, {"eval_loss": value})
        _log(callback, state, control, step, {"loss": 0.1})  # other metrics never count
        assert not control.should_training_stop, step
    _log(callback, state, control, 40, {"eval_loss": 0.9})
    assert control.should_training_stop and callback.best == 0.8


def test_early_stopping_counts_on_across_a_resume(tmp_path):
    callback, state, control = EarlyStopping("eval_loss", patience=3), TrainerState(), TrainerControl()
    for step, value in [(10, 1.0), (20, 1.1), (30, 1.2)]:  # best 1.0, then two values without improving
        _log(callback, state, control, step, {"eval_loss": value})
    state.stateful_callbacks = {"EarlyStopping": callback.state()}  # what Trainer._save_checkpoint writes
    state.save_to_json(str(tmp_path / "trainer_state.json"))
    resumed_state = TrainerState.load_from_json(str(tmp_path / "trainer_state.json"))
    resumed, control = EarlyStopping("eval_loss", patience=3), TrainerControl()
    resumed.on_train_begin(None, resumed_state, control)
    assert (resumed.best, resumed.waited) == (1.0, 2)
    _log(resumed, resumed_state, control, 40, {"eval_loss": 1.3})  # the third: stops, as the unbroken run would
    assert control.should_training_stop
    other = EarlyStopping("eval/heldout/exact_match", patience=3)  # another metric: its own count from zero
    other.on_train_begin(None, resumed_state, TrainerControl())
    assert (other.best, other.waited) == (None, 0)


def test_early_stopping_higher_is_better_and_min_delta():
    callback, state, control = (
        EarlyStopping("eval/heldout/exact_match", 1, "auto", min_delta=0.05),
        TrainerState(),
        TrainerControl(),
    )
    _log(callback, state, control, 5, {"eval/heldout/exact_match": 0.5})
    _log(callback, state, control, 10, {"eval/heldout/exact_match": 0.6})  # better by more than min_delta
    assert not control.should_training_stop
    _log(callback, state, control, 15, {"eval/heldout/exact_match": 0.62})  # better, but by less than min_delta
    assert control.should_training_stop


def test_greater_is_better_rule():
    assert higher_is_better("eval/heldout/exact_match", "auto") and not higher_is_better("eval_loss", "auto")
    assert higher_is_better("eval_loss", "true") and not higher_is_better("acc", False)


def test_early_stopping_from_config(knobs_cfg):
    assert early_stopping(compose(["recipe=tiny"]).train) is None
    callback = early_stopping(knobs_cfg.train)
    assert (callback.metric, callback.patience, callback.greater) == ("eval_loss", 2, False)


class _Samples:
    """Two eval samples as the token store gives them (ids, trained mask, no weights)."""

    has_loss_weights = False

    def __init__(self):
        self.rows = [
            (np.array([1, 5, 6, 7, 2], np.int32), np.array([0, 0, 1, 1, 1], bool)),
            (np.array([1, 8, 9], np.int32), np.array([0, 1, 1], bool)),
        ]
        self.lengths = np.array([len(ids) for ids, _ in self.rows])

    def __len__(self):
        return len(self.rows)

    def arrays(self, index):
        ids, trained = self.rows[index]
        return ids, trained, None


def test_eval_loss_is_the_masked_loss(tmp_path: Path):
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer

    from train.data.packing import PaddedCollator

    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=16,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            use_cache=False,
        )
    )
    cfg = compose(["recipe=tiny", *EVAL, "data.packing=false"])
    built = SimpleNamespace(eval=_Samples())
    rows = eval_rows(built, cfg)
    assert eval_rows(built, compose(["recipe=tiny"])) is None  # eval loss off: no eval dataset
    fields = training_arguments(cfg, tmp_path, 1, False, report_to=[], remove_unused_columns=False)
    fields["per_device_eval_batch_size"] = 2
    trainer = Trainer(
        model=model, args=TrainingArguments(**fields, use_cpu=True), eval_dataset=rows, data_collator=PaddedCollator(0)
    )
    got = trainer.evaluate()["eval_loss"]
    batch = PaddedCollator(0)([rows[0], rows[1]])
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    targets = batch["labels"][:, 1:]
    expected = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 16), targets.reshape(-1), ignore_index=-100)
    assert got == pytest.approx(expected.item(), rel=1e-5)


def test_peft_groups():
    dora = compose(["recipe=tiny", "peft=dora"]).peft
    assert dora.use_dora and dora.kind.value == "lora" and dora.quantize is None
    with pytest.raises(ConfigError, match="peft.quantize=4bit quantizes pretrained weights"):
        compose(["recipe=tiny", "peft=qlora"])
