"""A kill at any moment of a save leaves a complete checkpoint to resume from, even when only one is kept.

The HF Trainer would rotate (delete old checkpoints) inside its save, before ``on_save`` marks the new
one complete; tooltrain turns the Trainer's rotation off and rotates in ``CheckpointComplete`` once
the new checkpoint and its marker are on disk.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys

import pytest

from train.engine.callbacks import COMPLETE_MARKER, latest_complete_checkpoint, rotate_checkpoints

# Runs ``tooltrain train ...`` with a SIGKILL planted at one point of the save of checkpoint-STEP:
#   mid-write:     the weights are written, the optimizer, scheduler, RNG and trainer state not yet;
#   before-marker: the Trainer has written everything (and, with its own rotation, deleted the older
#                  checkpoints), on_save has not marked it complete yet.
KILL_DURING_SAVE = """
import os, signal, sys
from transformers import Trainer

point, step = sys.argv.pop(1), int(sys.argv.pop(1))

def die():
    os.kill(os.getpid(), signal.SIGKILL)

if point == "mid-write":
    original = Trainer._save_optimizer_and_scheduler
    def save(self, output_dir):
        if output_dir.endswith(f"checkpoint-{step}"):
            die()
        return original(self, output_dir)
    Trainer._save_optimizer_and_scheduler = save
else:
    original = Trainer._save_checkpoint
    def save(self, model, trial):
        original(self, model, trial)
        if self.state.global_step == step:
            die()
    Trainer._save_checkpoint = save

from train.cli import main
sys.exit(main())
"""


def _checkpoints(folder, *complete_steps, unfinished=()):
    for step in (*complete_steps, *unfinished):
        (folder / f"checkpoint-{step}").mkdir(parents=True)
        (folder / f"checkpoint-{step}" / "model.safetensors").write_bytes(b"x")
    for step in complete_steps:
        (folder / f"checkpoint-{step}" / COMPLETE_MARKER).write_text("{}")


def test_rotation_keeps_the_newest_complete_checkpoints_and_leaves_unfinished_ones(tmp_path):
    _checkpoints(tmp_path, 2, 4, 10, unfinished=(6, 12))
    assert rotate_checkpoints(tmp_path, 2) == [tmp_path / "checkpoint-2"]
    remaining = sorted(p.name for p in tmp_path.iterdir())
    assert remaining == ["checkpoint-10", "checkpoint-12", "checkpoint-4", "checkpoint-6"]
    assert rotate_checkpoints(tmp_path, 1) == [tmp_path / "checkpoint-4"]
    assert latest_complete_checkpoint(tmp_path) == tmp_path / "checkpoint-10"
    assert rotate_checkpoints(tmp_path, None) == rotate_checkpoints(tmp_path, 0) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-10", "checkpoint-12", "checkpoint-6"]


def test_with_one_checkpoint_kept_every_moment_of_every_save_has_a_complete_checkpoint(
    engine, single_run, tmp_path, monkeypatch
):
    """Watches every deletion and rename while a run saves checkpoints 2, 4 and 6 with save_total_limit=1:
    a kill at any of those moments would find a complete checkpoint, and never an older one than before."""
    run_dir = tmp_path / "run"
    moments: list[tuple[str, str, int, int]] = []  # (operation, path, newest complete step before, after)

    def step_of(folder) -> int:
        return int(folder.name.split("-")[1]) if folder else 0

    def watch(name, original):
        def watched(path, *args, **kwargs):
            before = step_of(latest_complete_checkpoint(run_dir))
            result = original(path, *args, **kwargs)
            moments.append((name, str(path), before, step_of(latest_complete_checkpoint(run_dir))))
            return result

        return watched

    for name in ("unlink", "remove", "rmdir", "rename", "replace"):
        monkeypatch.setattr(os, name, watch(name, getattr(os, name)))
    monkeypatch.setattr(shutil, "rmtree", watch("rmtree", shutil.rmtree))

    result = engine.run(run_dir, "train.save_total_limit=1")
    monkeypatch.undo()
    assert (result.status, result.global_step) == ("completed", engine.steps)
    assert engine.losses(run_dir) == engine.losses(single_run)
    assert sorted(p.name for p in run_dir.glob("checkpoint-*")) == ["checkpoint-6"]  # rotation did run

    first = next(i for i, moment in enumerate(moments) if moment[3])  # checkpoint-2 marked complete
    assert moments[first][:2] == ("replace", str(run_dir / "checkpoint-2" / (COMPLETE_MARKER + ".tmp")))
    later = moments[first + 1 :]
    deleted = {path for name, path, _, _ in later if name == "rmtree" and path.startswith(str(run_dir))}
    assert deleted == {str(run_dir / "checkpoint-2"), str(run_dir / "checkpoint-4")}
    assert [moment for moment in later if not moment[2] or not moment[3]] == []  # always a complete checkpoint
    assert [moment for moment in later if moment[3] < moment[2]] == []  # and never an older one than before


@pytest.mark.slow
@pytest.mark.parametrize("point", ["mid-write", "before-marker"])
def test_a_run_killed_while_saving_resumes_from_the_previous_good_checkpoint(
    engine, single_run, tmp_path, capsys, point
):
    run_dir = tmp_path / "run"
    killer = [sys.executable, "-c", KILL_DURING_SAVE, point, "4"]
    process = engine.start(run_dir, "train.save_total_limit=1", launcher=killer)
    assert process.wait(timeout=300) == -signal.SIGKILL, (run_dir.parent / "run.log").read_text()[-3000:]
    assert latest_complete_checkpoint(run_dir) == run_dir / "checkpoint-2"
    assert (run_dir / "checkpoint-4").is_dir() and not (run_dir / "checkpoint-4" / COMPLETE_MARKER).exists()

    result = engine.run(run_dir, "train.save_total_limit=1")
    assert "resuming from checkpoint-2" in capsys.readouterr().out
    assert (result.status, result.global_step) == ("completed", engine.steps)
    assert engine.losses(run_dir) == engine.losses(single_run)
    engine.assert_same_tensors(engine.adapter(run_dir / "final"), engine.adapter(single_run / "final"))
    assert sorted(p.name for p in run_dir.glob("checkpoint-*")) == ["checkpoint-6"]
