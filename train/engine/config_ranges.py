"""The valid range of every number in the training config, checked when the config is composed.

The typed schema (``train.engine.config``) makes ``optim.lr=abc`` fail, but a number of the right type can still be
absurd: ``optim.lr=-1``, ``train.micro_batch_size=0`` (a ZeroDivisionError deep in the Trainer), ``peft.r=0``,
``train.epochs=nan``, ``seed=-5``, ``optim.betas=[2,3]``. ``RANGES`` is the one table of what each numeric field
may hold; ``range_problems(cfg)`` turns it into one message per value outside its range, with the range in the
message, and refuses NaN and infinity everywhere, in free-form sections (``model.arch``, builder and task
options) too. ``train.engine.config.check`` calls it with its other compose-time checks.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

INF = math.inf


@dataclass(frozen=True)
class Range:
    """low..high, each end closed unless ``*_open``; ``nullable``: null is allowed too (``note`` says what it means)."""

    low: float = -INF
    high: float = INF
    low_open: bool = False
    high_open: bool = False
    nullable: bool = False
    note: str = ""  # what the value means, said after the range (units, a default, a special value)

    def holds(self, value: float) -> bool:
        if not math.isfinite(value):  # NaN compares false with everything; an infinity is no setting either
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def text(self) -> str:
        if self.high == INF:
            return f"{'>' if self.low_open else '>='} {_number(self.low)}"
        if self.low == -INF:
            return f"{'<' if self.high_open else '<='} {_number(self.high)}"
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"in {left}{_number(self.low)}, {_number(self.high)}{right}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def at_least(low: float, nullable: bool = False, note: str = "") -> Range:
    return Range(low=low, nullable=nullable, note=note)


def above(low: float, note: str = "") -> Range:
    return Range(low=low, low_open=True, note=note)


PORT = Range(1, 65535)
FRACTION = Range(0, 1, high_open=True)  # [0, 1)
COUNT = at_least(1)
MAYBE_COUNT = at_least(1, nullable=True)

# Key -> range. ``*`` stands for any list index or dict key (fnmatch). A paper's section has its ranges in its spec
# (``PaperSpec.ranges``, ``all_ranges``); a section that is null (outside the paper's recipes) is skipped. Free-form
# dicts (model.arch, builder_args, options) have no ranges of their own here: their consumers check them, and NaN/inf
# are refused in them like everywhere.
RANGES: dict[str, Range] = {
    "seed": Range(0, 2**32 - 1, note="numpy's seed range"),
    "model.max_position_embeddings": MAYBE_COUNT,
    "data.max_seq_len": COUNT,
    "data.sources.*.limit": MAYBE_COUNT,
    "data.sources.*.weight": above(0, note="copies of each conversation: 3 repeats, 0.5 keeps a seeded half"),
    "data.sources.*.fraction": Range(0, 1, low_open=True, nullable=True, note="this source's share of the mix"),
    "data.eval_fraction": FRACTION,
    "data.max_record_bytes": above(0, note="bytes; default 8 MiB = 8388608"),
    "data.num_workers": at_least(1, nullable=True, note="or null: every available core"),
    "peft.r": Range(1, 4096),
    "peft.alpha": above(0),
    "peft.dropout": FRACTION,
    "distributed.zero_stage": Range(1, 3, nullable=True, note="or null: the strategy's stage"),
    "optim.lr": Range(0, 1, low_open=True),
    "optim.weight_decay": Range(0, 1),
    "optim.betas.*": FRACTION,
    "optim.eps": Range(0, 1, low_open=True, high_open=True),
    "optim.warmup_ratio": Range(0, 1),
    "optim.max_grad_norm": at_least(0, note="0: no clipping"),
    "train.epochs": at_least(0),
    "train.max_steps": at_least(-1, note="-1 or 0: train.epochs decides"),
    "train.micro_batch_size": COUNT,
    "train.global_batch_size": COUNT,
    "train.save_steps": COUNT,
    "train.save_total_limit": at_least(1, nullable=True, note="or null: keep every checkpoint"),
    "train.logging_steps": COUNT,
    "train.dataloader_workers": at_least(0),
    "train.eval_steps": COUNT,
    "train.early_stopping.patience": COUNT,
    "train.early_stopping.min_delta": at_least(0),
    "train.neftune_noise_alpha": Range(0, low_open=True, nullable=True, note="or null: no NEFTune"),
    "dpo.beta": Range(0, 100, low_open=True, note="TRL's DPO beta; 0.1 is usual"),
    "grpo.num_generations": at_least(2, note="rollouts per prompt"),
    "grpo.max_new_tokens": COUNT,
    "grpo.temperature": Range(0, 10, low_open=True, note="GRPO samples; 1.0 is usual"),
    "grpo.beta": Range(0, 100, note="KL to the reference; 0: none kept"),
    "grpo.generation_batch_size": COUNT,
    "grpo.vllm_gpu_memory_utilization": Range(0, 1, low_open=True),
    "eval.every_steps": at_least(0, note="0: only at the end"),
    "eval.batch_size": COUNT,
    "eval.benchmarks.*.limit": MAYBE_COUNT,
    "eval.benchmarks.*.max_new_tokens": COUNT,
    "launcher.nodes": COUNT,
    "launcher.gpus_per_node": COUNT,
    "launcher.tasks_per_node": COUNT,
    "launcher.cpus_per_task": MAYBE_COUNT,
    "launcher.mem_gb": MAYBE_COUNT,
    "launcher.gpu_memory_gb": above(0, note="GiB of each GPU the memory plan sizes the run for"),
    "launcher.time_min": COUNT,
    "launcher.signal_lead_s": at_least(0),
    "launcher.timeout_requeues": at_least(0),
    "launcher.master_port": PORT,
}
# How many numbers a list field holds.
LENGTHS: dict[str, int] = {"optim.betas": 2}
# Numbers a check of their own already covers (train.engine.config._data_problems): not reported twice.
CHECKED_ELSEWHERE = ("data.part_weights.*",)


def all_ranges() -> dict[str, Range]:
    """RANGES and each paper's section ranges (``PaperSpec.ranges``, keys below its node)."""
    from train.papers import specs

    ranges = dict(RANGES)
    for _, spec in specs():
        ranges.update({f"{spec.node}.{key}": valid for key, valid in spec.ranges.items()})
    return ranges


def range_problems(cfg: DictConfig) -> list[str]:
    """One message per number outside its range (``all_ranges``) or not finite (anywhere in the config)."""
    problems, seen = [], set()
    for pattern, valid in all_ranges().items():
        for key, value in _matches(cfg, pattern):
            seen.add(key)
            problem = _range_problem(key, value, valid)
            if problem:
                problems.append(problem)
    for key, length in LENGTHS.items():
        value = _select(cfg, key)
        if isinstance(value, (list, tuple)) and len(value) != length:
            problems.append(f"{key} must hold {length} numbers, got {value}")
    for key, value in _leaves(cfg):
        skip = key in seen or any(fnmatchcase(key, pattern) for pattern in CHECKED_ELSEWHERE)
        if not skip and isinstance(value, float) and not math.isfinite(value):
            problems.append(f"{key} must be a finite number, got {value}")
    return problems


def _range_problem(key: str, value: Any, valid: Range) -> str | None:
    if value is None:
        return None if valid.nullable else f"{key} must be a number {valid.text()}, got null"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None  # the typed schema refuses a wrong type; an Any-typed field is its consumer's to check
    if valid.holds(value):
        return None
    note = f" ({valid.note})" if valid.note else ""
    return f"{key} must be {valid.text()}{note}, got {value}"


def _select(cfg: DictConfig, key: str) -> Any:
    try:
        node = OmegaConf.select(cfg, key, throw_on_missing=False)
    except OmegaConfBaseException:  # an interpolation that cannot resolve here: whoever reads it says so
        return None
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, (DictConfig, ListConfig)) else node


def _matches(node: Any, pattern: str, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(key, resolved value) of every existing field ``pattern`` names; ``*`` expands over list items/dict keys."""
    head, _, rest = pattern.partition(".")
    if not isinstance(node, (DictConfig, ListConfig)):
        return
    if head == "*":
        keys = list(range(len(node))) if isinstance(node, ListConfig) else list(node.keys())
    elif isinstance(node, DictConfig) and head in node:
        keys = [head]
    else:
        return
    for key in keys:
        name = f"{prefix}.{key}" if prefix else str(key)
        try:
            if OmegaConf.is_missing(node, key):
                continue
            child = node[key]
        except OmegaConfBaseException:
            continue
        if rest:
            yield from _matches(child, rest, name)
        elif not isinstance(child, (DictConfig, ListConfig)):
            yield name, child


def _leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(key, value) of every concrete scalar; interpolations are skipped (their targets are leaves themselves)."""
    if isinstance(node, ListConfig):
        items = list(enumerate(node._iter_ex(resolve=False))) if not node._is_none() else []
    elif isinstance(node, DictConfig):
        if node._is_none() or node._is_missing():
            return
        items = node.items_ex(resolve=False)
    else:
        return
    for key, value in items:
        if not prefix and key == "hydra":  # Hydra's own node, present in the config its callbacks see
            continue
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, (DictConfig, ListConfig)):
            yield from _leaves(value, name)
        else:
            yield name, value
