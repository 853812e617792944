"""The pieces of ``train.objective=grpo`` (``train.engine.grpo_run``), each on hand-made inputs, in the default tier:
compose-time checks, the prompt rows of a conversation, the rollout function's output as TRL reads it, the reward
functions and the rollout statistics they log, summary.json's fields from logged steps, and the report's panels.
The whole loop is tests/engine/test_grpo_run.py (slow tier)."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from train.base.errors import ConfigError
from train.engine import grpo_run
from train.engine.config import compose
from train.evaluation.generate import Generation
from train.formats import get_format
from train.schema import Conversation, Message, ToolCall
from train.tokenizers import load_tokenizer

WEATHER = {"type": "function", "function": {"name": "weather", "description": "d", "parameters": {"type": "object"}}}


def conversation() -> Conversation:
    return Conversation.from_dict(
        {
            "id": "c1",
            "tools": [WEATHER],
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "a", "type": "function", "function": {"name": "weather", "arguments": {}}}],
                },
                {"role": "tool", "tool_call_id": "a", "name": "weather", "content": "sunny"},
                {"role": "assistant", "content": "It is sunny."},
            ],
        }
    )


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        (["grpo.rewards=[nope]"], "grpo.rewards: unknown reward 'nope'; valid rewards: bfcl_ast, toolrl"),
        (["grpo.reward_weights=[1,2]"], "grpo.reward_weights has 2 weights for 1 rewards: one each, or none"),
        (["grpo.rewards=[toolrl,toolrl]"], "names a reward twice (weigh it with grpo.reward_weights)"),
        (["grpo.num_generations=3"], "train.global_batch_size=8 rollouts per step is not a multiple of"),
        (["grpo.num_generations=1"], "grpo.num_generations must be >= 2 (rollouts per prompt), got 1"),
        (["grpo.temperature=0"], "grpo.temperature must be in (0, 10]"),
        (["grpo.rewards=[bfcl_multi_turn]"], "bfcl_multi_turn scores a bfcl_multi_turn episode; set grpo.episode="),
        (["grpo.episode=bfcl"], "grpo.episode=bfcl: valid: one_turn, bfcl_multi_turn"),
        (["grpo.episode=bfcl_multi_turn"], "grpo.episode=bfcl_multi_turn is scored by its episode reward"),
        (["+grpo.episode_options={max_steps:2}"], "grpo.episode=one_turn takes none"),
        (
            ["grpo.episode=bfcl_multi_turn", "grpo.rewards=[bfcl_multi_turn]", "+grpo.episode_options={nope:1}"],
            "grpo.episode_options: unknown option 'nope'",
        ),
        (["+data.part_weights={text:0.5}"], "train.objective=grpo does not support data.part_weights; unset it"),
        (["kernels=liger"], "train.objective=grpo does not support kernels=liger"),
    ],
)
def test_bad_grpo_settings_fail_at_compose_time_saying_what_is_valid(overrides, problem):
    with pytest.raises(ConfigError) as raised:
        compose(["recipe=grpo_tiny", *overrides])
    assert problem in str(raised.value)


def test_the_shipped_recipe_and_an_episodic_setting_compose():
    assert compose(["recipe=grpo_tiny"]).grpo.rewards == ["toolrl"]
    cfg = compose(
        ["recipe=grpo_tiny", "grpo.episode=bfcl_multi_turn", "grpo.rewards=[bfcl_multi_turn]"]
        + ["+grpo.episode_options={max_steps:2}"]
    )
    assert cfg.grpo.episode_options == {"max_steps": 2}


def test_one_turn_rows_are_each_gold_turn_after_its_history_or_the_last():
    conv = conversation()
    rows = grpo_run.one_turn_rows(conv, "every")
    assert [row.key for row in rows] == ["c1#1", "c1#3"]
    # the reference ends with its gold turn (what every reward reads as the gold)
    assert [len(row.reference.messages) for row in rows] == [2, 4]
    episode = rows[0].episode()
    assert episode.prompt() == (rows[0].reference, 1)
    assert rows[0].episode() is not episode  # a fresh episode per rollout
    assert [row.key for row in grpo_run.one_turn_rows(conv, "last")] == ["c1#3"]
    assert [row.key for row in grpo_run.one_turn_rows(conv, "calls")] == ["c1#1"]  # the turn that calls a tool


def test_a_reward_that_cannot_judge_a_reference_drops_its_row_with_the_reason():
    conv = grpo_run.cut_after(conversation(), 1)
    assert grpo_run.reward_problem(["toolrl"], conv, episodic=False) is None
    problem = grpo_run.reward_problem(["toolrl", "bfcl_ast"], conv, episodic=False)
    assert problem.startswith("reward bfcl_ast: ")
    assert grpo_run.reward_problem(["bfcl_ast"], conv, episodic=True) is None  # an episode's record: judged later


def scripted(answer_ids):
    """A backend that writes ``answer_ids`` and pads after them, as a batched generate returns."""

    def backend(prompts, max_new_tokens, stop_ids):
        return [list(answer_ids) + [0, 0] for _ in prompts]

    return backend


def test_the_rollout_function_returns_what_trl_reads_and_the_reward_functions_score_and_log_it():
    fmt, tokenizer = get_format("chatml"), load_tokenizer("tiny_chatml")
    rows = grpo_run.one_turn_rows(conversation(), "every")
    data = grpo_run.RolloutData(tokenizer, None, {row.key: row for row in rows}, {})
    stop = tokenizer.convert_tokens_to_ids("<|im_end|>")
    answer = tokenizer.encode("It is sunny.", add_special_tokens=False) + [stop]
    rollout = grpo_run.RolloutFunction(data, fmt, max_new_tokens=16, max_len=4096, batch_size=8)
    rollout.backend = lambda trainer: contextlib.nullcontext(scripted(answer))
    out = rollout(["c1#3", "c1#3", "c1#1"], trainer=None)

    assert out["completion_ids"] == [answer] * 3  # cut at the stop id, which is kept; the padding is not
    assert out["env_mask"] == [[1] * len(answer)] * 3 and out["logprobs"] is None
    assert out["prompt_ids"][0] == out["prompt_ids"][1] != out["prompt_ids"][2]
    assert (out["turns_played"], out["turns_trained"], out["closed"]) == ([1] * 3, [1] * 3, [0.0] * 3)
    assert [record.content for record in out["records"]] == ["It is sunny."] * 3

    logged = []
    toolrl, fmt_reward = grpo_run.reward_functions(data, ["toolrl", "toolrl_format"])
    assert (toolrl.__name__, fmt_reward.__name__) == ("toolrl", "toolrl_format")  # TRL logs rewards/<name>/mean
    fields = {key: out[key] for key in ("turns_played", "turns_trained", "closed")}
    scores = toolrl(
        ["c1#3", "c1#3", "c1#1"], None, out["records"], log_metric=lambda k, v: logged.append((k, v)), **fields
    )
    # a text answer where the gold is text: format 1 + correctness 0; where the gold is a call: format 0, the
    # calls' correctness at its minimum (-3)
    assert scores == [1.0, 1.0, -3.0]
    assert logged == [("rollout/turns_played", 1.0), ("rollout/turns_trained", 1.0), ("rollout/closed", 0.0)]
    logged.clear()
    fmt_reward(["c1#1"], None, out["records"][2:], log_metric=lambda k, v: logged.append((k, v)), **fields)
    assert logged == []  # the statistics are logged once per batch, by the first reward


def test_summary_fields_come_from_the_logged_steps():
    cfg = compose(["recipe=grpo_tiny", "grpo.reward_weights=[2]"])
    data = grpo_run.RolloutData(None, [], {}, {"read": 3, "rows": 5})
    history = [
        {"step": 1, "reward": 0.5, "completions/mean_length": 10.0, "rollout/turns_played": 2.0, "rollout/closed": 0.5},
        {"step": 2, "reward": 1.5, "completions/mean_length": 12.5, "rollout/turns_played": 1.0, "rollout/closed": 0.0},
        {"train_runtime": 3.0},
    ]
    fields = data.summary_fields(cfg, history)
    assert fields["trained_tokens"] == 8 * 10 + 8 * 12.5  # TRL's mean length x the step's 8 rollouts
    assert fields["rollouts"] == {"turns_played": 1.5, "turns_trained": None, "closed": 0.25}
    assert (fields["grpo"]["reward_first"], fields["grpo"]["reward_last"]) == (0.5, 1.5)
    assert fields["grpo"]["rewards"] == {"toolrl": 2.0} and fields["prompts"] == {"read": 3, "rows": 5}


def test_the_report_draws_the_reward_and_the_rollout_length():
    from train.engine.report import report_panels

    rows = [
        {"step": s, "loss": 0.0, "reward": r, "reward_std": 0.1, "completions/mean_length": 20.0 + s}
        for s, r in ((1, 0.5), (2, 0.75))
    ]
    panels = {panel.title: panel for panel in report_panels(rows)}
    reward = panels["rl: mean reward and its spread in a group"]
    assert [(series.label, series.values) for series in reward.series] == [
        ("reward", [0.5, 0.75]),
        ("reward_std", [0.1, 0.1]),
    ]
    assert panels["rl: rollout length (sampled tokens)"].series[0].values == [21.0, 22.0]
    assert "rl: KL to the reference" not in panels  # no KL logged (grpo.beta=0)


def test_generation_records_are_what_the_rewards_read():
    call = ToolCall(name="weather", arguments={})
    record = Generation(text="x", content=None, tool_calls=[call])
    gold = grpo_run.cut_after(conversation(), 1)
    assert grpo_run.reward_functions(SimpleNamespace(table={"k": SimpleNamespace(reference=gold)}), ["toolrl"])[0](
        ["k"], None, [record], log_metric=lambda *a: None, turns_played=[1], turns_trained=[1], closed=[0.0]
    ) == [4.0]  # the right call, parsed: ToolRL's maximum
    assert Message(role="assistant").role == "assistant"


def test_the_memory_plan_leaves_a_colocated_vllm_its_share_of_each_gpu():
    from train.engine.memory_plan import plan

    colocated = plan(compose(["recipe=grpo_qwen3_8b"]))
    assert colocated.setup.gpu_memory_gb == pytest.approx(80 * 0.7)  # grpo.vllm_gpu_memory_utilization=0.3
    assert colocated.fits
    alone = plan(compose(["recipe=grpo_qwen3_8b", "grpo.vllm=off"]))
    assert alone.setup.gpu_memory_gb == 80 and alone.total == colocated.total
    assert plan(compose(["recipe=grpo_qwen3_8b", "train.objective=sft"])).setup.gpu_memory_gb == 80
