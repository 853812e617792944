"""Checkpoint folders in RUN_DIR: which are complete, marking one complete, rotation, a finished run.

Plain file-system code without torch or transformers, so the command line can look at a run folder
(resume, lock, what a failed save left) before its slow imports. ``CheckpointComplete`` in
train/callbacks.py calls it from the Trainer.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

COMPLETE_MARKER = "tooltrain_complete.json"


def sync_tree(folder: Path) -> None:
    """fsync every file under ``folder``, then the folders themselves."""
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as fh:
                os.fsync(fh.fileno())
    for path in [*sorted(p for p in folder.rglob("*") if p.is_dir()), folder]:
        _sync_dir(path)


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def mark_complete(folder: Path, step: int, world_size: int | None = None) -> None:
    """Write the completion marker durably: fsync'd file, atomic rename, fsync'd folder. ``world_size``
    (the ranks that wrote it) is kept because a resume with another number of ranks cannot use it."""
    tmp = folder / (COMPLETE_MARKER + ".tmp")
    marker = {"step": step, "time": time.time()}
    if world_size is not None:
        marker["world_size"] = world_size
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(marker))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, folder / COMPLETE_MARKER)
    _sync_dir(folder)


def checkpoint_world_size(folder: Path) -> int | None:
    """The number of ranks that wrote a complete checkpoint; None when its marker does not say (older runs)."""
    try:
        value = json.loads((folder / COMPLETE_MARKER).read_text(encoding="utf-8")).get("world_size")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None


def rotate_checkpoints(output_dir: Path, keep: int | None) -> list[Path]:
    """Delete the oldest complete checkpoints beyond ``keep``; the newest complete one always stays.

    Unfinished folders are left alone (one may be a save in progress; resume removes stale ones). A
    deleted checkpoint loses its marker first, so a kill mid-delete leaves an unfinished folder,
    never a "complete" one with files missing. Returns the folders deleted.
    """
    if keep is None or keep <= 0:
        return []
    doomed = complete_checkpoints(output_dir)[:-keep]
    for folder in doomed:
        (folder / COMPLETE_MARKER).unlink()
        _sync_dir(folder)
        shutil.rmtree(folder, ignore_errors=True)
    return doomed


def complete_checkpoints(output_dir: Path) -> list[Path]:
    """The checkpoint folders carrying the completion marker, oldest step first."""
    found = []
    for folder in output_dir.glob("checkpoint-*"):
        try:
            step = int(folder.name.split("-")[-1])
        except ValueError:
            continue
        if (folder / COMPLETE_MARKER).exists():
            found.append((step, folder))
    return [folder for _, folder in sorted(found)]


def latest_complete_checkpoint(output_dir: Path) -> Path | None:
    """The newest checkpoint folder carrying the completion marker."""
    complete = complete_checkpoints(output_dir)
    return complete[-1] if complete else None


def incomplete_checkpoints(output_dir: Path) -> list[Path]:
    return [f for f in output_dir.glob("checkpoint-*") if f.is_dir() and not (f / COMPLETE_MARKER).exists()]


def completed_run(output_dir: Path) -> dict | None:
    """The summary of a run that already finished in ``output_dir`` (final model saved), else None."""
    summary = output_dir / "summary.json"
    if not summary.is_file() or not (output_dir / "final").is_dir():
        return None
    try:
        data = json.loads(summary.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("status") == "completed" else None
