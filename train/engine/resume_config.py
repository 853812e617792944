"""What a resumed run may change: the command's config against the one the run's checkpoints were trained with.

Rerunning a command resumes from RUN_DIR's newest complete checkpoint. Weights, adapter, optimizer state,
learning-rate schedule and data position come back from it, so what they were built from cannot change
(a changed model is a size-mismatch traceback; a changed learning rate would be ignored silently). What
only steers the rest of the run can. ``RESUME_RULES`` says which is which, one row per config key (the
longest matching prefix decides); a change of a fixed key is refused with the list of differences.

``config.yaml`` keeps the settings the run started with: it is never rewritten on resume (``tooltrain
export`` and ``tooltrain eval run`` rebuild the model from it, and every later resume is checked against
it). A resume that changes allowed keys writes ``config.resume-N.yaml`` (N = 1, 2, ...): the whole config
from that resume on, its changes listed at its top. A whole file rather than a section appended to
config.yaml, so config.yaml stays one plain config every reader loads, and each record loads alone.

What a resume reads must also be what the run wrote: the checkpoint is the newest complete one that is intact
and holds every file a resume reads (train/engine/checkpoints.py: damaged newer ones are named and passed over, none
intact is refused), and the training inputs are those the run started on (train/engine/resume_data.py). A command
whose output_dir holds a completed run is that run's command or refused (``check_rerun``).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from train.engine.checkpoints import checkpoint_world_size, resumable_checkpoint
from train.engine.resume_data import RECORD_NAME, data_changes, data_inputs, read_record, record_data_inputs
from train.engine.run_dir import RunSetupError

FIXED, FREE, IGNORED = "fixed", "free", "ignored"  # IGNORED: not compared, not recorded
WORLD_SIZE = "world size"  # not a config key: the number of ranks, kept in the checkpoint's completion marker
_LENGTH = "how long to train: the learning-rate schedule then ends at the new last step"
_BATCH = "batch geometry: the checkpoint's data position counts batches of this size"

# config key (or prefix) -> (FIXED or FREE, why). The longest prefix of a key decides; every top-level field
# of train.engine.config.schema() has a row (a paper's node: its PaperSpec.resume); tests/engine/test_resume_config.py
# checks that every key is covered.
RESUME_RULES: dict[str, tuple[str, str]] = {
    "model": (FIXED, "the checkpoint's weights have this model's shapes and dtype"),
    "model.attn_implementation": (FREE, "the same attention, computed by another kernel"),
    "peft": (FIXED, "the checkpoint's adapter has this shape"),
    "data": (FIXED, "the checkpoint's data position counts rows of this dataset, rendered in this chat format"),
    "data.cache_dir": (FREE, "only where built rows are cached"),
    "data.check_masks": (FREE, "a check of the built rows, not what they are"),
    "data.turns": (
        FIXED,
        "which samples the rows are: one per conversation (whole) or one per trained turn (per_turn)",
    ),
    "data.num_workers": (FREE, "how many processes build the cache, not what it holds (same bytes with 1 or N)"),
    "seed": (FIXED, "data order and initialisation follow it"),
    "optim": (FIXED, "the optimizer state and learning-rate schedule come back from the checkpoint"),
    "distributed": (FIXED, "the checkpoint's optimizer and model states are laid out for this strategy"),
    "distributed.gradient_checkpointing": (FREE, "memory traded for time: the same gradients"),
    "train.micro_batch_size": (FIXED, _BATCH),
    "train.global_batch_size": (FIXED, _BATCH),
    WORLD_SIZE: (FIXED, "batch geometry: each rank's share of the data and its saved state follow it"),
    "train.max_steps": (FREE, _LENGTH),
    "train.epochs": (FREE, _LENGTH),
    "train.save_steps": (FREE, "when checkpoints are written"),
    "train.save_total_limit": (FREE, "how many checkpoints are kept"),
    "train.logging_steps": (FREE, "how often metrics are logged"),
    "train.dataloader_workers": (FREE, "how rows are loaded, not which"),
    "train.torch_compile": (FREE, "the same computation, compiled"),
    "train.objective": (FIXED, "the checkpoint's rows and optimizer state are of this objective (sft, dpo, grpo)"),
    "dpo": (FIXED, "the pairs and the DPO loss the checkpoint trained with (train.objective=dpo)"),
    "grpo": (FIXED, "the prompts, rollouts, rewards and loss the checkpoint trained with (train.objective=grpo)"),
    "train.eval_strategy": (FREE, "when the eval loss is computed, not what is trained"),
    "train.eval_steps": (FREE, "when the eval loss is computed, not what is trained"),
    "train.early_stopping": (FREE, "when training stops early, not what each step computes"),
    "train.neftune_noise_alpha": (FIXED, "the noise each step's embeddings get: part of what is trained"),
    "train.extra_args": (FIXED, "any TrainingArguments field may change what is trained"),
    "kernels": (FREE, "the same computation by other kernels"),
    "eval": (FREE, "what is evaluated, not what is trained"),
    "tracking": (FREE, "where metrics are reported"),
    "run_name": (FREE, "a name"),
    # each paper's node has its row in its spec (PaperSpec.resume): resume_rules() adds them
    # where the run is and how it was launched: a folder moved or named another way, a job on other nodes
    "output_dir": (IGNORED, "the folder the run is in, however it is named"),
    "launcher": (IGNORED, "how the run is launched (its log_dir follows output_dir); training never reads it"),
}
UNLISTED = (FIXED, "not listed in train.engine.resume_config.RESUME_RULES, so kept as it was")
RERUN_LISTED = 12  # differences listed when a command is not a rerun of the completed run in its output_dir
ABSENT = object()


@dataclass(frozen=True)
class Change:
    key: str
    saved: Any
    new: Any

    @property
    def rule(self) -> tuple[str, str]:
        return rule_for(self.key)

    def __str__(self) -> str:
        return f"{self.key}: {_show(self.saved)} -> {_show(self.new)}"


def resume_rules() -> dict[str, tuple[str, str]]:
    """RESUME_RULES and the row of each paper's node (``PaperSpec.resume``: its ``fixed``/``free`` and why)."""
    from train.papers import specs

    return {**RESUME_RULES, **{spec.node: spec.resume for _, spec in specs() if spec.resume is not None}}


def rule_for(key: str) -> tuple[str, str]:
    parts = key.split(".")
    rules = resume_rules()
    for end in range(len(parts), 0, -1):
        rule = rules.get(".".join(parts[:end]))
        if rule is not None:
            return rule
    return UNLISTED


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted key -> value for every leaf; a list of plain values (betas, input files) is one leaf."""
    if isinstance(node, dict):
        items = node.items()
    elif isinstance(node, list) and any(isinstance(item, (dict, list)) for item in node):
        items = enumerate(node)
    else:
        return {prefix: node}
    flat: dict[str, Any] = {}
    for key, value in items:
        flat.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def config_changes(saved: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """Keys whose value differs, but for IGNORED ones. A key the saved config lacks is not compared: it was
    added to tooltrain after that run started, and the run trained with whatever its code did then."""
    before, after = flatten(saved), flatten(new)
    return [
        Change(key, value, after.get(key, ABSENT))
        for key, value in before.items()
        if after.get(key, ABSENT) != value and rule_for(key)[0] != IGNORED
    ]


def as_plain(cfg: Any) -> dict[str, Any]:
    """The composed config as plain values (enums by name), without Hydra's own node."""
    from omegaconf import DictConfig, OmegaConf

    if not isinstance(cfg, DictConfig):
        return {key: value for key, value in dict(cfg).items() if key != "hydra"}
    if "hydra" in cfg:  # the config Hydra's callbacks see; its own node resolves only inside a job
        cfg = OmegaConf.masked_copy(cfg, [key for key in cfg if key != "hydra"])
    return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)


def load_saved(path: Path) -> dict[str, Any]:
    try:
        saved = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise RunSetupError(f"{path}: cannot read the run's saved config ({err}); it is needed to resume") from None
    if not isinstance(saved, dict):
        raise RunSetupError(f"{path}: the run's saved config is not a mapping; it is needed to resume")
    return saved


def check_resume(out: Path, cfg: Any, world: Any) -> Path | None:
    """The checkpoint this run resumes from (None: it starts afresh): the newest complete one that is intact and
    holds what a resume reads (train/engine/checkpoints.py::resumable_checkpoint). Refuses when every complete
    checkpoint
    is damaged (naming the file and why), a config that changes a fixed key of the one in RUN_DIR/config.yaml
    (listing each difference, key: saved -> new), and training data that changed since the run started
    (train/engine/resume_data.py)."""
    resume, damaged = resumable_checkpoint(out)
    if resume is None and damaged:
        raise RunSetupError(no_intact_checkpoint_message(out, damaged))
    if resume is None or not (out / "config.yaml").is_file():
        return None
    changes = [c for c in config_changes(load_saved(out / "config.yaml"), as_plain(cfg)) if c.rule[0] == FIXED]
    saved_world = checkpoint_world_size(resume)
    if saved_world is not None and saved_world != world.world_size:
        changes.append(Change(WORLD_SIZE, saved_world, world.world_size))
    if changes:
        if not world.is_main:  # every rank finds the same; global rank 0 lists it
            raise RunSetupError("this command's config differs from the run's (global rank 0 lists how)")
        listed = "".join(f"\n  {change} ({change.rule[1]})" for change in changes)
        raise RunSetupError(
            f"output_dir={out} holds a run that resumes from {resume.name}, and that checkpoint cannot take "
            f"these changes of its settings (config.yaml):{listed}\n"
            "Run the command without them to resume, or choose another output_dir to start a new run."
        )
    if world.is_main:  # the inputs are read once, by rank 0: its refusal ends the launch (torchrun stops the others)
        check_data_unchanged(out, cfg, resume)
    return resume


def no_intact_checkpoint_message(out: Path, damaged: list[tuple[Path, str]]) -> str:
    """One line: every complete checkpoint is damaged; the newest one's file and why, then the others'."""
    (newest, problem), older = damaged[0], damaged[1:]
    line = f"output_dir={out}: no checkpoint can be resumed from: {newest.name}/{problem}"
    if older:
        line += "; older ones too: " + "; ".join(f"{folder.name}/{why}" for folder, why in older)
    return line + (
        "; restore the file, or move the checkpoint-N folders out of output_dir to train again from step 0, "
        "or choose another output_dir"
    )


def check_data_unchanged(out: Path, cfg: Any, resume: Path) -> None:
    """Refuse a resume whose training inputs differ from the record the run started with (RUN_DIR/data_inputs.json).
    Without a record (an older run, or deleted by the user to resume on changed data) there is nothing to compare:
    ``record_config`` then records the inputs as they are."""
    recorded = read_record(out)
    if recorded is None:
        return
    if "unreadable" in recorded:
        raise RunSetupError(
            f"{out / RECORD_NAME}: cannot read the record of the run's training data ({recorded['unreadable']}); "
            "delete it to resume on the data as it is now"
        )
    changes = data_changes(recorded, data_inputs(cfg))
    if changes:
        more = f" (and {len(changes) - 1} more)" if len(changes) > 1 else ""
        raise RunSetupError(
            f"output_dir={out} resumes from {resume.name}, but its training data changed: {changes[0]}{more}; the "
            "checkpoint's data position counts rows of the data it trained on. Restore the input to resume, or "
            f"choose another output_dir to start a new run; to resume on the changed data anyway, delete "
            f"{out / RECORD_NAME}"
        )


def check_rerun(out: Path, cfg: Any, world: Any) -> None:
    """A command whose output_dir holds a completed run must be that run's command (nothing to do then): refuse
    one whose config changes a fixed key of the run's config.yaml, listing the differences, so that another
    recipe or setting is never answered with that run's summary. Free keys (evaluation, tracking, length) may
    differ: such a rerun still finds nothing to do. A run without config.yaml is not compared."""
    if not (out / "config.yaml").is_file():
        return
    changes = [c for c in config_changes(load_saved(out / "config.yaml"), as_plain(cfg)) if c.rule[0] == FIXED]
    if not changes:
        return
    if not world.is_main:
        raise RunSetupError(f"output_dir={out} holds a completed run of other settings (global rank 0 lists them)")
    shown = "".join(f"\n  {change}" for change in changes[:RERUN_LISTED])
    if len(changes) > RERUN_LISTED:
        shown += f"\n  ... and {len(changes) - RERUN_LISTED} more"
    raise RunSetupError(
        f"output_dir={out} holds a completed run of other settings, so this command is not a rerun of it "
        f"(its config.yaml differs in {len(changes)} fixed setting(s)):{shown}\n"
        "Choose another output_dir to train these settings; the run's own command finds nothing to do."
    )


def record_config(out: Path, cfg: Any, world: Any) -> Path | None:
    """``check_resume``, then the record: a fresh run writes config.yaml and the record of its training data
    (data_inputs.json); a resume leaves them as they are and, when it changes allowed keys since the latest
    record, writes config.resume-N.yaml and says so. Returns the checkpoint to resume from."""
    resume = check_resume(out, cfg, world)
    if not world.is_main:
        return resume
    new = as_plain(cfg)
    if resume is None:
        # A new run, or one whose earlier attempt left no complete checkpoint: it starts at step 0 with this config.
        for stale in resume_records(out):
            stale.unlink()
        (out / "config.yaml").write_text(_to_yaml(cfg), encoding="utf-8")
        record_data_inputs(out, cfg)
        return None
    if read_record(out) is None:
        record_data_inputs(out, cfg)
        print(
            f"tooltrain: resuming from {resume.name} without a record of the data the run started on "
            f"({RECORD_NAME}): not compared; the inputs as they are now are recorded for later resumes",
            flush=True,
        )
    records = resume_records(out)
    changes = config_changes(load_saved(records[-1] if records else out / "config.yaml"), new)
    if changes:
        record = out / f"config.resume-{len(records) + 1}.yaml"
        header = (
            f"# tooltrain: resumed from {resume.name} on {time.strftime('%Y-%m-%d %H:%M:%S %Z')} with changed "
            "settings:\n"
            + "".join(f"#   {change}\n" for change in changes)
            + "# config.yaml keeps the settings the run started with; this is the whole config from here on.\n"
        )
        record.write_text(header + _to_yaml(cfg), encoding="utf-8")
        print(
            f"tooltrain: resuming with changed settings: {'; '.join(str(c) for c in changes)} "
            f"(recorded in {record.name}; config.yaml keeps the original)",
            flush=True,
        )
    return resume


def resume_records(out: Path) -> list[Path]:
    """config.resume-N.yaml files, oldest first."""
    found = [
        (int(m.group(1)), path)
        for path in out.glob("config.resume-*.yaml")
        if (m := re.fullmatch(r"config\.resume-(\d+)\.yaml", path.name))
    ]
    return [path for _, path in sorted(found)]


def _to_yaml(cfg: Any) -> str:
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(cfg, resolve=True)


def _show(value: Any) -> str:
    if value is ABSENT:
        return "(unset)"
    return (
        json.dumps(value, ensure_ascii=False) if isinstance(value, (str, list, dict)) or value is None else str(value)
    )
