"""What a resume may change (train/engine/resume_config.py): the table, the diff, the records it writes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from train.engine.checkpoints import COMPLETE_MARKER
from train.engine.config import CONF_DIR, compose, schema
from train.engine.resume_config import (
    FIXED,
    FREE,
    IGNORED,
    RESUME_RULES,
    UNLISTED,
    WORLD_SIZE,
    as_plain,
    check_resume,
    config_changes,
    flatten,
    record_config,
    resume_records,
    rule_for,
)
from train.engine.run_dir import RunSetupError

SINGLE = SimpleNamespace(is_main=True, world_size=1)


@pytest.mark.parametrize(
    "key, rule",
    [
        ("model.name", FIXED),
        ("model.arch.hidden_size", FIXED),
        ("model.chat_format", FIXED),
        ("model.dtype", FIXED),
        ("model.attn_implementation", FREE),
        ("peft.r", FIXED),
        ("peft.target_modules", FIXED),
        ("data.sources.0.inputs", FIXED),
        ("data.max_seq_len", FIXED),
        ("data.packing", FIXED),
        ("data.format_options.tools_in_user_message", FIXED),
        ("data.eval_fraction", FIXED),
        ("data.cache_dir", FREE),
        ("seed", FIXED),
        ("optim.lr", FIXED),
        ("optim.scheduler", FIXED),
        ("optim.warmup_ratio", FIXED),
        ("train.micro_batch_size", FIXED),
        ("train.global_batch_size", FIXED),
        (WORLD_SIZE, FIXED),
        ("distributed.strategy", FIXED),
        ("distributed.gradient_checkpointing", FREE),
        ("train.max_steps", FREE),
        ("train.epochs", FREE),
        ("train.save_steps", FREE),
        ("train.save_total_limit", FREE),
        ("train.logging_steps", FREE),
        ("train.dataloader_workers", FREE),
        ("eval.benchmarks.0.name", FREE),
        ("eval.every_steps", FREE),
        ("tracking.wandb", FREE),
        ("launcher.nodes", IGNORED),
        ("launcher.log_dir", IGNORED),
        ("output_dir", IGNORED),
        ("run_name", FREE),
        ("kernels", FREE),
    ],
)
def test_each_key_is_fixed_or_free_by_the_table(key, rule):
    assert rule_for(key)[0] == rule


def test_a_key_the_table_does_not_know_is_fixed():
    assert rule_for("something_new.value") == UNLISTED and UNLISTED[0] == FIXED


def _schema_leaves(schema, prefix: str = "") -> list[str]:
    keys = []
    for field in dataclasses.fields(schema):
        default = field.default_factory() if field.default_factory is not dataclasses.MISSING else None
        name = f"{prefix}{field.name}"
        keys += _schema_leaves(type(default), name + ".") if dataclasses.is_dataclass(default) else [name]
    return keys


@pytest.mark.parametrize("recipe", sorted(path.stem for path in (CONF_DIR / "recipe").glob("*.yaml")))
def test_every_key_of_every_recipe_and_of_the_schema_has_a_row_of_its_own(recipe):
    keys = set(flatten(as_plain(compose([f"recipe={recipe}"])))) | set(_schema_leaves(schema()))
    assert sorted(key for key in keys if rule_for(key) == UNLISTED) == []
    assert all(rule in (FIXED, FREE, IGNORED) and why for rule, why in RESUME_RULES.values())


def test_changes_list_saved_and_new_values_and_skip_keys_the_saved_config_lacks():
    saved = {
        "model": {"arch": {"hidden_size": 64}},
        "optim": {"lr": 0.001, "betas": [0.9, 0.999]},
        "data": {"sources": [{"inputs": ["a.json"]}]},
    }
    new = {
        "model": {"arch": {"hidden_size": 128}},
        "optim": {"lr": 0.001, "betas": [0.9, 0.95]},
        "data": {"sources": [{"inputs": ["b.json"]}]},
        "added_later": 1,
    }
    assert [str(change) for change in config_changes(saved, new)] == [
        "model.arch.hidden_size: 64 -> 128",
        "optim.betas: [0.9, 0.999] -> [0.9, 0.95]",
        'data.sources.0.inputs: ["a.json"] -> ["b.json"]',
    ]
    assert [str(c) for c in config_changes({"seed": 1, "gone": "x"}, {"seed": 1})] == ['gone: "x" -> (unset)']
    # a moved folder is the same run
    assert (
        config_changes(
            {"output_dir": "runs/a", "launcher": {"log_dir": "runs/a/logs"}},
            {"output_dir": "/x/b", "launcher": {"log_dir": "/x/b/logs"}},
        )
        == []
    )


def _saved_run(out: Path, world_size: int | None = 1) -> Path:
    """A run folder as one killed after checkpoint-4 leaves it: config.yaml and a complete checkpoint."""
    out.mkdir(parents=True)
    record_config(out, compose(["recipe=tiny", f"output_dir={out}"]), SINGLE)
    (out / "checkpoint-4").mkdir()
    marker = {"step": 4, "time": 0.0, **({"world_size": world_size} if world_size else {})}
    (out / "checkpoint-4" / COMPLETE_MARKER).write_text(json.dumps(marker))
    return out


def test_a_resume_refuses_a_changed_model_or_learning_rate_and_lists_each_difference(tmp_path):
    out = _saved_run(tmp_path / "run")
    saved = (out / "config.yaml").read_bytes()
    cfg = compose(["recipe=tiny", f"output_dir={out}", "model.arch.hidden_size=128", "optim.lr=0.5"])
    with pytest.raises(RunSetupError) as refused:
        record_config(out, cfg, SINGLE)
    lines = str(refused.value).splitlines()
    assert lines[0].startswith(f"output_dir={out} holds a run that resumes from checkpoint-4")
    assert lines[1:3] == [
        "  model.arch.hidden_size: 64 -> 128 (the checkpoint's weights have this model's shapes and dtype)",
        "  optim.lr: 0.001 -> 0.5 (the optimizer state and learning-rate schedule come back from the checkpoint)",
    ]
    assert (out / "config.yaml").read_bytes() == saved and resume_records(out) == []


def test_a_resume_with_another_number_of_ranks_is_refused(tmp_path):
    out = _saved_run(tmp_path / "run", world_size=2)
    with pytest.raises(RunSetupError, match=r"\n  world size: 2 -> 1 \(batch geometry"):
        check_resume(out, compose(["recipe=tiny", f"output_dir={out}"]), SINGLE)
    # a marker from before tooltrain wrote the world size: nothing to compare
    out = _saved_run(tmp_path / "old", world_size=None)
    assert check_resume(out, compose(["recipe=tiny", f"output_dir={out}"]), SINGLE) == out / "checkpoint-4"


def test_other_ranks_refuse_too_but_leave_the_list_to_rank_zero(tmp_path):
    out = _saved_run(tmp_path / "run")
    with pytest.raises(
        RunSetupError, match=r"^this command's config differs from the run's \(global rank 0 lists how\)$"
    ):
        check_resume(
            out, compose(["recipe=tiny", f"output_dir={out}", "seed=7"]), SimpleNamespace(is_main=False, world_size=1)
        )


def test_allowed_changes_are_said_once_and_recorded_beside_the_untouched_config(tmp_path, capsys):
    out = _saved_run(tmp_path / "run")
    saved = (out / "config.yaml").read_bytes()
    changed = compose(["recipe=tiny", f"output_dir={out}", "train.max_steps=20", "train.save_steps=5"])
    assert record_config(out, changed, SINGLE) == out / "checkpoint-4"
    assert capsys.readouterr().out == (
        "tooltrain: resuming with changed settings: train.max_steps: 8 -> 20; "
        "train.save_steps: 4 -> 5 (recorded in config.resume-1.yaml; config.yaml "
        "keeps the original)\n"
    )
    assert (out / "config.yaml").read_bytes() == saved
    record = (out / "config.resume-1.yaml").read_text()
    assert record.splitlines()[1:3] == ["#   train.max_steps: 8 -> 20", "#   train.save_steps: 4 -> 5"]
    assert yaml.safe_load(record)["train"]["max_steps"] == 20
    # the same command again (a requeue): nothing new to say or record
    record_config(out, changed, SINGLE)
    assert capsys.readouterr().out == "" and resume_records(out) == [out / "config.resume-1.yaml"]
    # a further change is compared with the latest record, and a fixed key still with config.yaml
    record_config(
        out, compose(["recipe=tiny", f"output_dir={out}", "train.max_steps=30", "train.save_steps=5"]), SINGLE
    )
    assert "train.max_steps: 20 -> 30 (recorded in config.resume-2.yaml" in capsys.readouterr().out
    with pytest.raises(RunSetupError, match=r"\n  optim.lr: 0.001 -> 0.002 "):
        record_config(out, compose(["recipe=tiny", f"output_dir={out}", "optim.lr=0.002"]), SINGLE)


def test_without_a_complete_checkpoint_the_run_starts_afresh_and_config_yaml_is_its_config(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text("seed: 1\n")  # an attempt killed before its first checkpoint
    (out / "config.resume-1.yaml").write_text("seed: 1\n")
    assert record_config(out, compose(["recipe=tiny", f"output_dir={out}", "optim.lr=0.5"]), SINGLE) is None
    assert yaml.safe_load((out / "config.yaml").read_text())["optim"]["lr"] == 0.5
    assert resume_records(out) == []
