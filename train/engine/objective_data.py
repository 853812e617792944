"""What the TRL objectives (``train.objective=dpo|grpo``) read before they make their rows: the run's tokenizer and
its conversations, read from the sources, through the run's data builder, split into training and held-out ones by
the SFT build's rule (``data.eval_fraction``: the same conversations are held out), and the counts their rows'
reports start from. One stage, so DPO's pairs and GRPO's prompts see the same conversations an SFT run would."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from train.data.dataset import BuildReport, read_conversations
from train.data.ids import is_eval
from train.engine.run_dir import RunSetupError


@dataclass
class RunConversations:
    tokenizer: Any
    data_cfg: dict[str, Any]  # the resolved data section
    training: list
    held_out: list  # data.eval_fraction: the heldout benchmark's conversations, never paired nor prompted
    report: BuildReport  # what the readers and the builder left out

    def left_out(self, counts: Counter) -> None:
        """Add what was left out before the objective saw the conversations: by the readers, by the builder, and
        the held-out ones (not among ``read``)."""
        for key in ("rejected_by_reader", "dropped_by_builder"):
            if getattr(self.report, key):
                counts[key] = getattr(self.report, key)
        if self.held_out:
            counts["held_out"] = len(self.held_out)


def run_conversations(cfg: DictConfig, transform: Any) -> RunConversations:
    """The run's tokenizer (checked against the model) and its conversations, after ``transform`` (the run's data
    builder, when it has one), split as the SFT build splits them."""
    from train.engine.model import check_model_tokenizer
    from train.engine.run_folder import run_tokenizer

    tokenizer = run_tokenizer(cfg)
    check_model_tokenizer(cfg, tokenizer)
    data_cfg = OmegaConf.to_container(cfg.data, resolve=True, enum_to_str=True)
    report = BuildReport()
    conversations = read_conversations(data_cfg["sources"], report)
    if transform is not None:
        conversations = transform(conversations, on_drop=lambda reason: report.reject("dropped_by_builder", reason))
    fraction = float(data_cfg.get("eval_fraction") or 0.0)
    training, held_out = [], []
    for conv in conversations:
        (held_out if is_eval(conv.id, fraction) else training).append(conv)
    return RunConversations(tokenizer, data_cfg, training, held_out, report)


def nothing_left(what: str, counts: Counter, fallback: str) -> RunSetupError:
    """The setup error of an objective left with no rows: how many conversations were read and why each was not
    used (the ``skipped``/``dropped`` counts), ``fallback`` when none says."""
    why = "; ".join(f"{n} x {key}" for key, n in counts.most_common() if key.startswith(("skipped", "dropped")))
    return RunSetupError(f"no {what}: {counts['read']} conversations read ({why or fallback})")


__all__ = ["RunConversations", "nothing_left", "run_conversations"]
