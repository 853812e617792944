"""``tooltrain train recipe=grpo_tiny`` end to end (TRL's GRPOTrainer on the tiny model and the shipped glaive data,
with tooltrain's token-in/token-out rollouts): the reward logged every step per reward function, the rollout counts and
prompt counts in summary.json, checkpoints, report.png; and an interrupted or preempted run resumes to the
uninterrupted run's state, reward for reward and tensor for tensor (#30 item 5: the trust guarantees hold for RL runs;
the run folder's lock is taken before the objective is chosen, in ``run``, as the SFT tests pin).

The random tiny model's answers all score alike under ToolRL's reward (every garbage answer to a text turn is "text,
parsed": 1.0), so no group has a spread and no step a gradient; these runs add a test reward (``tests.grpo_fakes``:
the share of digits) whose spread gives every step a gradient, so resuming has something to get wrong. Slow tier:
each run trains for ~25 s."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

STEPS = 4  # recipes/grpo_tiny.yaml: 4 steps, a checkpoint every 2
SIGNAL = ["grpo.rewards=[toolrl,tests.grpo_fakes:DIGITS]"]
REWARD_KEYS = ("reward", "reward_std", "rewards/toolrl/mean", "rewards/tests.grpo_fakes:DIGITS/mean", "rollout/closed")


def command(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "train", "train", "recipe=grpo_tiny", *SIGNAL, *extra, f"output_dir={out}"]


def launch(engine, out: Path, *extra: str) -> str:
    result = subprocess.run(  # noqa: PLW1510 (the return code is asserted with the output)
        command(out, *extra), cwd=engine.repo, env=engine.env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def rewards(engine, run_dir: Path) -> dict[int, float]:
    return {row["step"]: row["reward"] for row in engine.metrics(run_dir) if "reward" in row}


@pytest.fixture(scope="module")
def cli_run(engine, tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("grpo") / "run"
    return out, launch(engine, out)


def test_grpo_tiny_trains_logs_each_reward_and_counts_its_prompts_and_rollouts(engine, cli_run):
    out, stdout = cli_run
    rows = [row for row in engine.metrics(out) if "reward" in row]
    assert [row["step"] for row in rows] == list(range(1, STEPS + 1))
    assert all(key in row for row in rows for key in REWARD_KEYS)
    assert all(row["grad_norm"] > 0 for row in rows)  # the digits reward spreads every group: every step learns
    # each rollout writes one turn and trains it (one_turn episodes never close early)
    assert all(
        (row["rollout/turns_played"], row["rollout/turns_trained"], row["rollout/closed"]) == (1, 1, 0) for row in rows
    )
    assert stdout.count("  grpo  reward ") == STEPS and "(grpo, 4 rollouts per prompt, rewards toolrl x1, " in stdout

    summary = engine.summary(out)
    assert (summary["status"], summary["objective"], summary["steps"]) == ("completed", "grpo", STEPS)
    prompts = summary["prompts"]
    dropped = sum(count for key, count in prompts.items() if key.startswith("dropped"))
    # the 60 shipped glaive conversations, a prompt per assistant turn (those too long for data.max_seq_len dropped)
    assert prompts["read"] == 60 and prompts["rows"] > 100 and dropped == 17
    assert summary["rollouts"] == {"turns_played": 1.0, "turns_trained": 1.0, "closed": 0.0}
    # 8 rollouts a step, each ran to grpo.max_new_tokens=24 sampled tokens (the random model never ends its turn)
    assert summary["trained_tokens"] == STEPS * 8 * 24
    assert summary["grpo"]["reward_first"] == rows[0]["reward"] and summary["grpo"]["reward_last"] == rows[-1]["reward"]
    assert f"  reward    {rows[0]['reward']:.4f} -> {rows[-1]['reward']:.4f}" in stdout
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    assert (out / "report.png").is_file()
    assert any(tensor.count_nonzero() for key, tensor in engine.adapter(out / "final").items() if "lora_B" in key)


def test_an_interrupted_grpo_run_resumes_to_the_same_final_state(engine, cli_run, tmp_path, capsys):
    reference, _ = cli_run
    run_dir = engine.copy_run(reference, tmp_path / "run", keep_through_step=2)  # killed after checkpoint-2
    from train.engine.config import compose
    from train.engine.run import run

    with engine.in_process():
        result = run(compose(["recipe=grpo_tiny", *SIGNAL, f"output_dir={run_dir}"]))
    assert "resuming from checkpoint-2" in capsys.readouterr().out
    assert (result.status, result.global_step) == ("completed", STEPS)
    # the rollouts sampled after the resume are the ones the uninterrupted run sampled (the RNG state is restored)
    assert rewards(engine, run_dir) == rewards(engine, reference)
    engine.assert_same_tensors(engine.adapter(run_dir / "final"), engine.adapter(reference / "final"))
    resumed, uninterrupted = engine.summary(run_dir), engine.summary(reference)
    for key in ("prompts", "rollouts", "trained_tokens", "grpo"):
        assert resumed[key] == uninterrupted[key], key


def test_a_preempted_grpo_run_saves_exits_75_and_the_rerun_completes_the_same_run(engine, cli_run, tmp_path):
    reference, _ = cli_run
    run_dir = tmp_path / "run"
    stopped = engine.preempt(command(run_dir), run_dir, after_step=2, steps=STEPS)
    assert f"resuming from checkpoint-{stopped}" in launch(engine, run_dir)
    assert engine.summary(run_dir)["status"] == "completed"
    assert rewards(engine, run_dir) == rewards(engine, reference)
    engine.assert_same_tensors(engine.adapter(run_dir / "final"), engine.adapter(reference / "final"))


def test_grpo_on_two_ranks_with_ddp_samples_its_share_on_each_and_completes(engine, tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    command += ["-m", "train", "train", "recipe=grpo_tiny", "distributed=ddp", *SIGNAL, f"output_dir={out}"]
    result = subprocess.run(  # noqa: PLW1510 (the return code is asserted with the output)
        command, cwd=engine.repo, env=engine.env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.count("  grpo  reward ") == STEPS  # rank 0 alone prints
    rows = [row for row in engine.metrics(out) if "reward" in row]
    assert [row["step"] for row in rows] == list(range(1, STEPS + 1)) and all(row["grad_norm"] > 0 for row in rows)
    summary = engine.summary(out)
    assert (summary["status"], summary["prompts"]["rows"]) == ("completed", 183)
    # TRL's length is the mean over both ranks' rollouts: 8 a step in all, 4 on each rank
    assert summary["trained_tokens"] == round(sum(row["completions/mean_length"] * 8 for row in rows))


def test_the_eval_callback_scores_a_grpo_run_before_and_after_as_it_does_an_sft_run(engine, tmp_path):
    from train.engine.config import compose
    from train.engine.run import run

    overrides = ["recipe=grpo_tiny", "eval=heldout", "eval.at_start=true", "data.eval_fraction=0.1"]
    with engine.in_process():
        result = run(compose([*overrides, "train.max_steps=2", f"output_dir={tmp_path / 'run'}"]))
    evaluated = [row for row in engine.metrics(tmp_path / "run") if "eval/heldout/exact_match" in row]
    assert [row["step"] for row in evaluated] == [0, 2]  # the base model, then the trained one
    assert all(row["eval/heldout/total"] == 4 for row in evaluated)  # the held-out conversations, never prompts
    assert result.summary["prompts"]["held_out"] == 4
    assert set(result.summary["eval"]["heldout"]) >= {"before", "after"}
