"""``train.objective=dpo``: preference training on tool calls through TRL's ``DPOTrainer`` (issue #30 item 3).

The stages of ``train.engine.run`` with the trainer swapped: the run's sources (and its data builder) give canonical
conversations, ``train.data.preference`` pairs each gold assistant turn with wrong ones, and
``train.data.preference_tokens`` tokenizes every pair in the run's exact chat format (the prompt as inference shows
it, each turn as the format trains it). TRL's ``DPOTrainer`` trains on those ids as they are: ``IdsDPOTrainer``
only skips TRL's own tokenization (which would render the prompt again with the tokenizer's chat template). The
model, LoRA, run folder, checkpoints, resume, signals, callbacks and the generation-based evaluation are the SFT
run's own pieces.

The reference model: with LoRA, the policy with its adapter disabled (the base model: no second copy); with full
fine-tuning, the base model built a second time, as the run built the first (the same weights, the same seed).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig
from transformers import TrainerCallback

from train.base.errors import choice
from train.data.preference_tokens import preference_rows
from train.engine import distributed
from train.engine.callbacks import TokenMeter
from train.engine.model import build_model
from train.engine.objective_data import nothing_left, run_conversations
from train.engine.tracking import use_trackers
from train.formats import get_format

# TRL's per-step DPO numbers: what the console line and summary.json show (metrics.jsonl keeps every logged key)
SHOWN = {
    "rewards/margins": "margin",
    "rewards/accuracies": "acc",
    "logps/chosen": "logp chosen",
    "logps/rejected": "logp rejected",
}


@dataclass
class PreferenceData:
    tokenizer: Any
    rows: Any  # a datasets.Dataset of {id, kind, prompt_ids, chosen_ids, rejected_ids}
    counts: dict[str, int]  # read = paired + skipped, pairs per kind, rows, dropped: <why>
    eval_conversations: list = field(default_factory=list)  # held out (data.eval_fraction): the heldout benchmark
    meter: TokenMeter = field(default_factory=TokenMeter)  # prepare_model attaches one; DPO does not fill it

    def summary_fields(self, cfg: DictConfig, history: list[dict[str, Any]]) -> dict[str, Any]:
        """What summary.json says of the data and the objective: the pair counts, the tokens that carry loss (as an
        SFT build counts them: the turns' tokens do, both copies of the prompt do not) and the last DPO numbers."""
        last = next((logged for logged in reversed(history) if "rewards/margins" in logged), {})
        return {
            "objective": "dpo",
            "trained_tokens": sum(len(row["chosen_ids"]) + len(row["rejected_ids"]) for row in self.rows),
            "masked_tokens": 2 * sum(len(row["prompt_ids"]) for row in self.rows),
            "dpo": {
                "beta": float(cfg.dpo.beta),
                "loss_type": choice(cfg.dpo.loss_type),
                **{key: last[key] for key in SHOWN if key in last},
            },
            "pairs": self.counts,
        }

    def start_line(self, cfg: DictConfig) -> str:
        counts = self.counts
        return (
            f"dpo, beta {cfg.dpo.beta}, {choice(cfg.dpo.loss_type)}; {len(self.rows)} pairs from "
            f"{counts.get('paired', 0)} of {counts.get('read', 0)} conversations"
        )


def prepare_pairs(cfg: DictConfig, transform: Any) -> PreferenceData:
    """The tokenizer and the tokenized pairs of the run's sources (after ``transform``: the run's data builder, when
    it has one), the held-out conversations apart. Built in memory on every rank (the same on each: pairs are seeded
    by id); no cache: tokenizing pairs is cheap next to the two forward passes DPO makes on each."""
    from datasets import Dataset

    run = run_conversations(cfg, transform)
    counts: Counter = Counter()
    fmt = get_format(cfg.model.chat_format, run.data_cfg.get("format_options"))
    rows = preference_rows(
        run.training,
        fmt,
        run.tokenizer,
        int(cfg.data.max_seq_len),
        kinds=list(cfg.dpo.pair_kinds),
        seed=int(cfg.seed),
        counts=counts,
    )
    run.left_out(counts)
    if not rows:
        raise nothing_left("preference pairs", counts, "none paired")
    return PreferenceData(run.tokenizer, Dataset.from_list(rows), dict(counts), run.held_out)


def dpo_config(cfg: DictConfig, arguments: dict[str, Any]) -> Any:
    """TRL's ``DPOConfig`` (a ``TrainingArguments``) from the run's ``arguments`` (``run.trainer_arguments``) and
    the ``dpo`` section. ``max_length`` is off: every pair fits ``data.max_seq_len`` already (``preference_tokens``
    drops one that does not, never cuts it)."""
    from trl import DPOConfig

    return DPOConfig(
        **arguments,
        beta=float(cfg.dpo.beta),
        loss_type=[choice(cfg.dpo.loss_type)],
        max_length=None,
    )


def _ids_dpo_trainer() -> type:
    from trl import DPOTrainer

    class IdsDPOTrainer(DPOTrainer):
        """TRL's DPOTrainer fed tooltrain's ids: ``_prepare_dataset`` (which renders prompts again with the
        tokenizer's chat template) returns the dataset as it is. A hook on one data method, not a trainer of our own:
        the collator, loss, reference model and logging are TRL's."""

        def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
            return dataset

    return IdsDPOTrainer


def reference_model(cfg: DictConfig, env: Any, tokenizer: Any, args: Any) -> Any:
    """None with LoRA (TRL disables the adapter); with full fine-tuning the base model built again, as the run
    built the policy (same config, same seed), in eval mode."""
    if choice(cfg.peft.kind) == "lora":
        return None
    placement = distributed.model_placement(cfg.distributed, env.gpu, choice(cfg.model.source) == "config", False)
    with distributed.build_context(placement, args):
        reference = build_model(cfg.model, len(tokenizer), env.dtype, env.attn, seed=cfg.seed)
    return reference.eval()


class PreferenceLines(TrainerCallback):
    """TRL's reward margin, reward accuracy and chosen/rejected log-probabilities under each step line (rank 0)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs and "loss" in logs:
            shown = [f"{name} {logs[key]:.4f}" for key, name in SHOWN.items() if key in logs]
            if shown:
                print("  dpo  " + "  ".join(shown), flush=True)


def dpo_trainer(cfg: DictConfig, env: Any, data: PreferenceData, model: Any, args: Any, callbacks: list) -> Any:
    """TRL's DPOTrainer on the pairs' ids (``IdsDPOTrainer``) with the run's model (``env``, ``model``: the run's
    ``Environment`` and ``Model``), arguments and callbacks, printing the run's step lines with the DPO numbers, and
    the run's generation-based evaluation (``eval``; heldout reads ``PreferenceData.eval_conversations``)."""
    from train.engine.eval_callback import build_eval_callback
    from train.engine.step_lines import use_step_lines

    trainer = _ids_dpo_trainer()(
        model=model.model,
        ref_model=reference_model(cfg, env, data.tokenizer, args),
        args=args,
        train_dataset=data.rows,
        processing_class=data.tokenizer,
        callbacks=callbacks,
    )
    drop_reference_adapter(trainer.model)
    use_step_lines(trainer)
    trainer.add_callback(PreferenceLines())
    use_trackers(trainer, cfg)
    evaluation = build_eval_callback(cfg, data, data.tokenizer, env.world, log=trainer.log)  # the heldout split: ours
    if evaluation is not None:
        trainer.add_callback(evaluation)
    return trainer


def drop_reference_adapter(model: Any) -> None:
    """TRL copies a PEFT model's adapter into a frozen "ref" adapter, for an adapter that was trained before; the
    run's adapter is new (LoRA's B is zero: the adapter changes nothing yet), so the reference is the model with
    adapters disabled, which TRL uses when there is no "ref" adapter. Dropping the copy keeps it out of memory and
    out of every checkpoint and the final adapter."""
    if "ref" in (getattr(model, "peft_config", None) or {}):
        model.delete_adapter("ref")
        model.set_adapter("default")


__all__ = ["PreferenceData", "dpo_config", "dpo_trainer", "prepare_pairs"]
