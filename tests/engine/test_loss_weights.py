"""data.part_weights reach the engine's loss: the weighted path through rows, packing, collator,
the Trainer's compute_loss_func and its gradient-accumulation normalisation (global batch 4 as 2
micro-batches of 2 rows), checked on the first step, before any update has changed the model."""

from __future__ import annotations

import pytest

from train.formats.base import WEIGHT_PARTS


def test_weighting_every_part_by_two_doubles_the_first_step_loss(engine, tmp_path):
    plain = engine.run(tmp_path / "plain", "train.max_steps=1")
    every_part = [f"+data.part_weights.{part}=2" for part in sorted(WEIGHT_PARTS)]
    doubled = engine.run(tmp_path / "doubled", "train.max_steps=1", *every_part)
    assert plain.status == doubled.status == "completed"
    # the same rows either way, so the same N trained tokens: sum(2 * nll) / N
    assert doubled.summary["trained_tokens"] == plain.summary["trained_tokens"]
    assert doubled.losses[0] == pytest.approx(2 * plain.losses[0], rel=1e-5)


def test_part_weights_are_checked_at_compose_time():
    from train.engine.config import ConfigError, compose

    cfg = compose(["recipe=tiny", "+data.part_weights.reasoning=0.5", "+data.part_weights.call_args=2"])
    assert dict(cfg.data.part_weights) == {"reasoning": 0.5, "call_args": 2.0}
    with pytest.raises(ConfigError, match=r"data.part_weights must be finite and >= 0, got \{'end': -1.0\}"):
        compose(["recipe=tiny", "+data.part_weights.end=-1"])


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", "zero3"])
def test_two_ranks_give_the_single_process_weighted_losses(engine, tmp_path, strategy):
    """One process accumulating 2 micro-batches and 2 ranks with one each see the same rows: the
    weighted loss is normalised by the same global N either way (the Trainer gathers it across ranks),
    and the weights reach the loss through DDP's and DeepSpeed's wrappers of the model."""
    weights = ["+data.part_weights.call_args=3", "+data.part_weights.reasoning=0.5"]
    single = engine.run(tmp_path / "single", "train.max_steps=2", *weights)
    engine.launch(tmp_path / strategy, "train.max_steps=2", f"distributed={strategy}", *weights, ranks=2)
    ranks = engine.losses(tmp_path / strategy)
    assert sorted(ranks) == [1, 2]
    assert [ranks[1], ranks[2]] == pytest.approx(single.losses, rel=1e-6)
