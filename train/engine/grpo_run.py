"""``train.objective=grpo``: reinforcement learning on tool use through TRL's ``GRPOTrainer`` (issue #30 item 2).

The stages of ``train.engine.run`` with the trainer swapped, as ``preference_run`` does for DPO. The run's sources (and
its data builder) give canonical conversations; each becomes prompts (``grpo.episode``):

* ``one_turn``: one row per gold assistant turn (``grpo.turns``: ``every`` turn or the ``last``), the policy writing
  that turn after the history before it, and the reference is the conversation cut after it (its gold turn);
* an episodic task's name (``bfcl_multi_turn``): one row per item of that task, played against the task's
  environment (executed tool calls, the next user turn), and the reference is the item's conversation.

TRL's ``rollout_func`` is ``train.evaluation.rollout.play``: token-in/token-out rollouts in the run's exact chat format
(the ids the policy sampled are the ids it is trained on, what the environment wrote in between is masked through TRL's
``env_mask``). The rewards (``grpo.rewards``, weighed by ``grpo.reward_weights``) are ``train.evaluation.rewards``
functions of the format's parse of the rollout (or the episode's record) and the reference, the same functions
evaluation scores with. TRL computes group advantages, the clipped objective, the KL to the reference when ``grpo.beta``
> 0, and logs the reward per function. The model, LoRA, run folder, checkpoints, resume, signals, callbacks and
generation-based evaluation are the SFT run's own pieces.

Generation: ``model.generate`` on the policy (CPU, tests, one GPU); on a GPU node, ``grpo.vllm=colocate`` makes TRL
start vLLM inside the run and the rollouts sample from it, ids in and ids out (``VllmRollouts``).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf
from transformers import TrainerCallback

from train.base.errors import choice
from train.engine.callbacks import TokenMeter
from train.engine.objective_data import nothing_left, run_conversations
from train.engine.run_dir import RunSetupError
from train.engine.tracking import use_trackers
from train.evaluation.generate import HFBackend, prompt_ids
from train.evaluation.rewards import get_reward
from train.evaluation.rewards.base import completion_of
from train.evaluation.rollout import OneTurn, play
from train.formats import get_format
from train.schema import Conversation

ONE_TURN = "one_turn"
# What the step line and summary.json show of TRL's GRPO logs (metrics.jsonl keeps every logged key)
SHOWN = {"reward": "reward", "reward_std": "reward std", "completions/mean_length": "length", "kl": "kl"}
# What each step logs of its rollouts (``rollout/<name>``, TRL's ``log_metric``): turns played and trained per rollout,
# and the share of rollouts whose trace closed before the episode ended (``train.evaluation.rollout.Trace``)
ROLLOUT_STATS = ("turns_played", "turns_trained", "closed")


def mean_of(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [row[key] for row in rows if key in row]
    return sum(values) / len(values) if values else None


@dataclass
class PromptRow:
    """One prompt of the run: the episode it starts and the reference its rewards read."""

    key: str
    reference: Conversation
    episode: Callable[[], Any]  # a new episode (``task_base.Episode``) for each rollout of this prompt


@dataclass
class RolloutData:
    tokenizer: Any
    rows: Any  # a datasets.Dataset of {"prompt": key}: TRL samples keys, the rollout looks the row up
    table: dict[str, PromptRow]
    # read (training conversations), used (those with a prompt), rows (prompts), dropped: <why> and skipped: <why>
    # (per prompt or task item), rejected_by_reader, dropped_by_builder, held_out
    counts: dict[str, int]
    eval_conversations: list = field(default_factory=list)  # held out (data.eval_fraction): the heldout benchmark
    meter: TokenMeter = field(default_factory=TokenMeter)  # prepare_model attaches one; GRPO does not fill it

    def summary_fields(self, cfg: DictConfig, history: list[dict[str, Any]]) -> dict[str, Any]:
        """What summary.json says of the prompts, the rollouts and the objective, from the logged steps (so a resumed
        run says what the uninterrupted one does): the sampled tokens (the trained ones: TRL's mean rollout length
        times the rollouts of each step), the turns trained of those played, and the first and last reward."""
        steps = [logged for logged in history if "reward" in logged]
        rewards = [logged["reward"] for logged in steps]
        rollouts = int(cfg.train.global_batch_size)
        return {
            "objective": "grpo",
            "trained_tokens": round(sum(logged["completions/mean_length"] * rollouts for logged in steps)),
            "rollouts": {key: mean_of(steps, f"rollout/{key}") for key in ROLLOUT_STATS},
            "grpo": {
                "episode": cfg.grpo.episode,
                "num_generations": int(cfg.grpo.num_generations),
                "rewards": dict(zip(cfg.grpo.rewards, reward_weights(cfg))),
                "beta": float(cfg.grpo.beta),
                "reward_first": rewards[0] if rewards else None,
                "reward_last": rewards[-1] if rewards else None,
            },
            "prompts": self.counts,
        }

    def start_line(self, cfg: DictConfig) -> str:
        rewards = ", ".join(f"{name} x{weight:g}" for name, weight in zip(cfg.grpo.rewards, reward_weights(cfg)))
        return (
            f"grpo, {cfg.grpo.num_generations} rollouts per prompt, rewards {rewards}; {len(self.rows)} prompts "
            f"({cfg.grpo.episode}) from {self.counts.get('used', 0)} of {self.counts.get('read', 0)} conversations"
        )


def cut_after(conv: Conversation, index: int) -> Conversation:
    """``conv`` up to and with message ``index``: a one-turn reference whose gold turn is its last message."""
    return dataclasses.replace(conv, messages=list(conv.messages[: index + 1]))


def one_turn_rows(conv: Conversation, turns: str) -> list[PromptRow]:
    """The rows of one conversation for ``grpo.episode=one_turn``: every assistant turn, those that call tools, or
    the last."""
    indices = [i for i, message in enumerate(conv.messages) if message.role == "assistant"]
    if turns == "calls":
        indices = [i for i in indices if conv.messages[i].tool_calls]
    elif turns == "last":
        indices = indices[-1:]
    rows = []
    for index in indices:
        reference = cut_after(conv, index)
        rows.append(PromptRow(f"{conv.id}#{index}", reference, lambda r=reference, i=index: OneTurn(r, i)))
    return rows


def task_rows(task: Any, conversations: list[Conversation], counts: Counter) -> list[PromptRow]:
    """The rows of an episodic task: its items (what it cannot use counted as skipped, with the reason)."""
    prepared = task.prepare(conversations)
    for skipped in prepared.skipped:
        counts[f"skipped: {skipped['reason'][:100]}"] += 1
    return [PromptRow(item.id, item.conversation, lambda i=item: task.episode(i)) for item in prepared.items]


def reward_problem(names: list[str], reference: Conversation, episodic: bool) -> str | None:
    """Why a reward cannot judge this reference (a BFCL reward on a question BFCL cannot score); None when every
    reward can. Asked once per row with an empty answer: rewards are pure, so a reference that fails now fails on
    every rollout, and is dropped before training, counted, rather than fail a step."""
    if episodic:
        return None  # an episode's reward reads its record, which only a played episode has
    for name in names:
        try:
            get_reward(name)(completion_of(), reference)
        except (ValueError, KeyError, TypeError) as err:
            return f"reward {name}: {str(err)[:100]}"
    return None


def prepare_prompts(cfg: DictConfig, transform: Any) -> RolloutData:
    """The tokenizer and the prompt rows of the run's sources (after ``transform``: the run's data builder), the
    held-out conversations apart. A row whose prompt the format cannot render, whose prompt leaves fewer than
    ``grpo.max_new_tokens`` of ``data.max_seq_len``, or whose reference a reward cannot judge is dropped, counted.
    Built in memory on every rank, the same on each (sources are read in order; nothing is drawn)."""
    from datasets import Dataset

    run = run_conversations(cfg, transform)
    training, tokenizer = run.training, run.tokenizer
    counts: Counter = Counter(read=len(training))
    episodic = cfg.grpo.episode != ONE_TURN
    if episodic:
        from train.evaluation.tasks import task_class

        options = OmegaConf.to_container(cfg.grpo.episode_options, resolve=True)
        candidates = task_rows(task_class(cfg.grpo.episode)(**options), training, counts)
    else:
        candidates = [row for conv in training for row in one_turn_rows(conv, cfg.grpo.turns)]
    fmt = get_format(cfg.model.chat_format, run.data_cfg.get("format_options"))
    room = int(cfg.data.max_seq_len) - int(cfg.grpo.max_new_tokens)
    names = list(cfg.grpo.rewards)
    table: dict[str, PromptRow] = {}
    for row in candidates:
        first = row.episode().prompt()
        ids, error = prompt_ids(fmt, tokenizer, *first) if first is not None else (None, "prompt: no turn to write")
        # a format's or a reward's reason with its numbers as N, so one reason is one count
        problem = error or reward_problem(names, row.reference, episodic)
        problem = problem and "".join("N" if ch.isdigit() else ch for ch in problem)[:120]
        if problem is None and len(ids) > room:
            problem = f"prompt over {room} tokens (data.max_seq_len - grpo.max_new_tokens)"
        if problem is None and row.key in table:
            problem = "a second row with this id"
        if problem is None:
            table[row.key] = row
        else:
            counts[f"dropped: {problem}"] += 1
    counts["used"] = len({row.reference.id for row in table.values()})
    counts["rows"] = len(table)
    run.left_out(counts)
    if not table:
        raise nothing_left("GRPO prompts", counts, "none usable")
    per_step = int(cfg.train.global_batch_size) // int(cfg.grpo.num_generations)
    if len(table) < per_step:  # TRL's sampler would yield no step at all, and the run would end at step 0
        raise RunSetupError(
            f"{len(table)} GRPO prompt(s), fewer than the {per_step} a step samples (train.global_batch_size / "
            "grpo.num_generations): use more data or a smaller batch"
        )
    rows = Dataset.from_list([{"prompt": key} for key in table])
    return RolloutData(tokenizer, rows, table, dict(counts), run.held_out)


def reward_weights(cfg: DictConfig) -> list[float]:
    """``grpo.reward_weights``, or 1.0 for each reward when it is empty."""
    return [float(w) for w in cfg.grpo.reward_weights] or [1.0] * len(cfg.grpo.rewards)


def grpo_config(cfg: DictConfig, arguments: dict[str, Any]) -> Any:
    """TRL's ``GRPOConfig`` (a ``TrainingArguments``) from the run's ``arguments`` and the ``grpo`` section.
    ``train.global_batch_size`` counts rollouts (completions) per optimizer step, ``grpo.num_generations`` of each
    prompt (the group TRL's advantages compare within)."""
    from trl import GRPOConfig

    grpo = cfg.grpo
    vllm = choice(grpo.vllm)
    return GRPOConfig(
        **arguments,
        num_generations=int(grpo.num_generations),
        max_completion_length=int(cfg.data.max_seq_len),  # TRL's own generation is unused; the rollout bounds it
        temperature=float(grpo.temperature),
        beta=float(grpo.beta),
        loss_type=choice(grpo.loss_type),
        scale_rewards=choice(grpo.scale_rewards),
        reward_weights=reward_weights(cfg),
        mask_truncated_completions=False,
        log_completions=False,
        use_vllm=vllm != "off",
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=float(grpo.vllm_gpu_memory_utilization),
        vllm_max_model_length=int(cfg.data.max_seq_len),  # not the model's own limit: vLLM sizes its cache by it
    )


def reward_functions(data: RolloutData, names: list[str]) -> list[Callable[..., list[float]]]:
    """One TRL reward function per ``grpo.rewards`` name, in order (TRL weighs them by ``reward_weights`` and logs
    each under its name): the registered reward of each rollout's record (the rollout field ``records``) against
    its row's reference."""

    def make(name: str, logs_rollouts: bool) -> Callable[..., list[float]]:
        reward = get_reward(name)

        def score(prompts: list[str], completions: Any, records: list[Any], **fields: Any) -> list[float]:
            if logs_rollouts:  # once per batch: what the rollouts played and trained (TRL averages it per step)
                for stat in ROLLOUT_STATS:
                    fields["log_metric"](f"rollout/{stat}", sum(fields[stat]) / len(fields[stat]))
            return [float(reward(record, data.table[key].reference)) for key, record in zip(prompts, records)]

        score.__name__ = name
        return score

    return [make(name, index == 0) for index, name in enumerate(names)]


class RolloutFunction:
    """TRL's ``rollout_func``: the keys TRL sampled (each prompt ``num_generations`` times) played as episodes in the
    run's chat format (``train.evaluation.rollout.play``), returned as TRL reads them: ``prompt_ids``,
    ``completion_ids``, ``env_mask``, no sampling log-probabilities (TRL computes them), and ``records`` for the
    rewards."""

    def __init__(self, data: RolloutData, fmt: Any, max_new_tokens: int, max_len: int, batch_size: int) -> None:
        self.data, self.fmt = data, fmt
        self.max_new_tokens, self.max_len, self.batch_size = max_new_tokens, max_len, batch_size

    def __call__(self, prompts: list[str], trainer: Any) -> dict[str, Any]:
        episodes = [self.data.table[key].episode() for key in prompts]
        with self.backend(trainer) as backend:
            rollouts = play(episodes, self.fmt, self.data.tokenizer, backend, self.max_new_tokens, self.max_len)
        traces = [rollout.trace for rollout in rollouts]
        return {
            "prompt_ids": [rollout.trace.prompt_ids for rollout in rollouts],
            "completion_ids": [rollout.trace.completion_ids for rollout in rollouts],
            "env_mask": [rollout.trace.env_mask for rollout in rollouts],
            "logprobs": None,
            "records": [rollout.record for rollout in rollouts],
            "turns_played": [trace.turns_played for trace in traces],
            "turns_trained": [trace.turns_trained for trace in traces],
            "closed": [float(trace.closed is not None) for trace in traces],
        }

    def backend(self, trainer: Any) -> Any:
        if trainer.use_vllm:
            return VllmRollouts(trainer)
        return PolicyRollouts(trainer, self.data.tokenizer.pad_token_id, self.batch_size)


class PolicyRollouts:
    """Sampling from the policy itself with ``model.generate`` (``generate.HFBackend``), unwrapped for generation as
    TRL unwraps it (ZeRO-3 gathers the weights once; gradient checkpointing is off while generating)."""

    def __init__(self, trainer: Any, pad_id: int, batch_size: int) -> None:
        self.trainer, self.pad_id, self.batch_size = trainer, pad_id, batch_size

    def __enter__(self) -> HFBackend:
        from trl.models import unwrap_model_for_generation

        trainer = self.trainer
        self.context = unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
            gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
        )
        model = self.context.__enter__()
        return HFBackend(model, self.pad_id, self.batch_size, temperature=float(trainer.temperature))

    def __exit__(self, *exc: object) -> None:
        self.context.__exit__(*exc)


class VllmRollouts:
    """Sampling from the vLLM engine TRL runs beside the policy (``grpo.vllm=colocate``; TRL syncs its weights before
    each rollout): ids in (``TokensPrompt``), ids out, stopping at the format's end-of-turn tokens."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer

    def __enter__(self) -> Callable[[list[list[int]], int, list[int]], list[list[int]]]:
        return self.generate

    def __exit__(self, *exc: object) -> None:
        return None

    def generate(self, prompts: list[list[int]], max_new_tokens: int, stop_ids: list[int]) -> list[list[int]]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        llm = self.trainer.vllm_generation.llm
        params = SamplingParams(
            temperature=float(self.trainer.temperature),
            max_tokens=max_new_tokens,
            stop_token_ids=list(stop_ids),
            detokenize=False,
        )
        results = llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in prompts], params, use_tqdm=False)
        return [list(result.outputs[0].token_ids) for result in results]


class RewardLines(TrainerCallback):
    """TRL's mean reward, its spread and the completion length under each step line (rank 0)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs and "reward" in logs:
            shown = [f"{name} {logs[key]:.4f}" for key, name in SHOWN.items() if key in logs]
            print("  grpo  " + "  ".join(shown), flush=True)


def grpo_trainer(cfg: DictConfig, env: Any, data: RolloutData, model: Any, args: Any, callbacks: list) -> Any:
    """TRL's GRPOTrainer with the run's model, arguments and callbacks, the rollouts of ``RolloutFunction`` and the
    rewards of ``reward_functions``; the run's step lines and generation-based evaluation, as for SFT."""
    from trl import GRPOTrainer

    from train.engine.eval_callback import build_eval_callback
    from train.engine.step_lines import use_step_lines
    from train.evaluation.generate import stop_token_ids

    fmt = get_format(cfg.model.chat_format, OmegaConf.to_container(cfg.data.format_options, resolve=True))
    rollout = RolloutFunction(
        data, fmt, int(cfg.grpo.max_new_tokens), int(cfg.data.max_seq_len), int(cfg.grpo.generation_batch_size)
    )
    with warnings.catch_warnings():  # TRL calls rollout_func experimental: docs/rl.md says which TRL it is pinned to
        warnings.filterwarnings("ignore", message="You are using 'rollout_func'", category=UserWarning)
        trainer = GRPOTrainer(
            model=model.model,
            reward_funcs=reward_functions(data, list(cfg.grpo.rewards)),
            args=args,
            train_dataset=data.rows,
            processing_class=data.tokenizer,
            callbacks=callbacks,
            rollout_func=rollout,
        )
    # a rollout ends at the format's end-of-turn token, which need not be the tokenizer's eos (TRL's length and
    # truncation metrics read these ids)
    trainer.eos_token_ids = sorted({*trainer.eos_token_ids, *stop_token_ids(fmt, data.tokenizer)})
    use_step_lines(trainer)
    trainer.add_callback(RewardLines())
    use_trackers(trainer, cfg)
    evaluation = build_eval_callback(cfg, data, data.tokenizer, env.world, log=trainer.log)
    if evaluation is not None:
        trainer.add_callback(evaluation)
    return trainer


__all__ = ["RolloutData", "RolloutFunction", "grpo_config", "grpo_trainer", "prepare_prompts", "reward_functions"]
