"""GRPO on multi-turn episodes (``grpo.episode=bfcl_multi_turn``): BFCL v4 multi_turn_base entries from the installed
bfcl-eval package played by the tiny model against BFCL's own environments, scored by BFCL's multi-turn verdict
(reward ``bfcl_multi_turn``), one step, end to end in this process. Each rollout plays every user turn of its entry;
its trace trains what the format shows as it was sampled (the random model's turns seldom end, so the render of the
next turn mostly shows them otherwise and the trace closes after the first: ``rollout/closed``). Slow tier (~2 min)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("bfcl_eval")

SOURCE = (
    "data.sources=[{name:bfcl,inputs:[pkg://bfcl_eval/data/BFCL_v4_multi_turn_base.json,"
    "pkg://bfcl_eval/data/possible_answer/BFCL_v4_multi_turn_base.json],limit:4}]"
)


def test_multi_turn_episodes_are_played_scored_by_bfcl_and_trained(engine, tmp_path):
    from train.engine.config import compose
    from train.engine.run import run

    overrides = [
        "recipe=grpo_tiny",
        SOURCE,
        "grpo.episode=bfcl_multi_turn",
        "grpo.rewards=[bfcl_multi_turn]",
        "+grpo.episode_options={max_steps:2,max_turns:5}",
        "grpo.max_new_tokens=16",
        "grpo.num_generations=2",
        "data.max_seq_len=8192",
        "train.max_steps=1",
        "train.micro_batch_size=2",
        "train.global_batch_size=4",
        f"output_dir={tmp_path / 'run'}",
    ]
    with engine.in_process():
        result = run(compose(overrides))
    assert (result.status, result.global_step) == ("completed", 1)
    (step,) = [row for row in engine.metrics(tmp_path / "run") if "reward" in row]
    assert step["rewards/bfcl_multi_turn/mean"] == 0.0  # random answers never reach BFCL's end state
    assert step["rollout/turns_played"] > 1  # every user turn of the entry is played
    # a turn that ran into max_new_tokens is shown ended at the next prompt: most traces close after one turn
    assert 1.0 <= step["rollout/turns_trained"] < step["rollout/turns_played"] and step["rollout/closed"] > 0
    summary = result.summary
    assert summary["prompts"] == {"read": 4, "used": 4, "rows": 4}
    assert summary["grpo"]["episode"] == "bfcl_multi_turn"
