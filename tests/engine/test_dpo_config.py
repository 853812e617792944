"""train.objective=dpo's knobs fail when the config is composed (a bad loss type lists the valid ones, an absurd beta
names its range, an unknown pair kind lists the kinds, an SFT-only setting it would ignore is refused), and the
preference run's hooks into TRL: DPOConfig from the run's arguments, the ids fed as they are."""

from __future__ import annotations

import pytest

from train.engine.config import ConfigError, compose


def test_the_dpo_tiny_recipe_composes_with_its_knobs():
    cfg = compose(["recipe=dpo_tiny"])
    assert (cfg.train.objective.value, cfg.dpo.beta, cfg.dpo.loss_type.value) == ("dpo", 0.1, "sigmoid")
    assert list(cfg.dpo.pair_kinds) == ["wrong_tool", "wrong_argument", "missing_argument", "spurious_call"]
    assert compose([]).train.objective.value == "sft"  # every other recipe trains as before


def test_an_unknown_loss_type_lists_the_valid_ones():
    with pytest.raises(Exception, match="dpo.loss_type=sigmod") as raised:
        compose(["recipe=dpo_tiny", "dpo.loss_type=sigmod"])
    assert str(raised.value.__cause__).startswith("Invalid value 'sigmod', expected one of [sigmoid, hinge, ipo,")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("dpo.beta=0", "dpo.beta must be in (0, 100] (TRL's DPO beta; 0.1 is usual), got 0.0"),
        ("dpo.beta=-1", "dpo.beta must be in (0, 100]"),
        ("dpo.beta=nan", "dpo.beta must be in (0, 100]"),
        ("dpo.pair_kinds=[wrong_tool,typo]", "dpo.pair_kinds=['wrong_tool', 'typo']: valid kinds are wrong_tool"),
        ("dpo.pair_kinds=[]", "dpo.pair_kinds=[]: valid kinds are"),
        ("+data.part_weights.call_args=2", "train.objective=dpo does not support data.part_weights"),
        ("train.neftune_noise_alpha=5", "train.objective=dpo does not support train.neftune_noise_alpha"),
        ("data.last_turn_only=true", "train.objective=dpo does not support data.last_turn_only"),
        ("train.eval_strategy=steps", "train.objective=dpo does not support train.eval_strategy"),
    ],
)
def test_absurd_dpo_settings_fail_at_compose(override, message):
    with pytest.raises(ConfigError) as raised:
        compose(["recipe=dpo_tiny", override])
    assert message in str(raised.value)


def test_an_sft_run_ignores_the_dpo_section():
    compose(["recipe=tiny", "+data.part_weights.call_args=2"])  # no dpo problem raised for an SFT run


def test_dpo_config_carries_the_runs_arguments_and_the_dpo_knobs(tmp_path):
    from train.engine import distributed
    from train.engine.preference_run import dpo_config
    from train.engine.run import set_up, trainer_arguments

    cfg = compose(["recipe=dpo_tiny", f"output_dir={tmp_path}", "dpo.beta=0.25", "dpo.loss_type=ipo"])
    args = dpo_config(cfg, trainer_arguments(cfg, set_up(cfg, distributed.World.from_env(), tmp_path)))
    assert (args.beta, args.loss_type, args.max_length) == (0.25, ["ipo"], None)
    assert (args.learning_rate, args.per_device_train_batch_size, args.gradient_accumulation_steps) == (1e-3, 2, 2)
    assert (args.gradient_checkpointing, args.remove_unused_columns, args.save_steps) == (False, False, 2)
