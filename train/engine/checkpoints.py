"""Checkpoint folders in RUN_DIR: which are complete, marking one complete, rotation, a finished run,
and whether a checkpoint is intact and holds everything a resume reads.

Plain file-system code without torch or transformers, so the command line can look at a run folder
(resume, lock, what a failed save left) before its slow imports. ``CheckpointComplete`` in
train/engine/callbacks.py calls it from the Trainer.

Integrity: the completion marker lists every file of the checkpoint with its size and CRC-32 (``files``),
taken when the save is complete; ``verify_checkpoint`` checks them. Checksums, rather than loading each
file the way a resume would: they catch any change of any byte (a same-size overwrite included) in every
file the Trainer, DeepSpeed or FSDP writes, without knowing their formats and without torch (the check runs
before the slow imports, and on every rank, before a process group exists). CRC-32 (zlib, the standard
library) detects accidental damage, which is the threat here, at ~3 GB/s, several files at once; the files
are still in the page cache when the marker is written. A format check (JSON parses, a safetensors header
fits the file, a torch zip archive has its directory) runs too: it is what is left for folders without a
marker (``final/``, checkpoints of older runs) and names the damage in words.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import time
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any

COMPLETE_MARKER = "tooltrain_complete.json"
DAMAGED_PREFIX = "damaged-"  # a damaged checkpoint set aside on resume: damaged-checkpoint-N (never resumed from)
_CHUNK = 8 << 20
_HASH_THREADS = min(8, os.cpu_count() or 1)


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
    marker: dict = {"step": step, "time": time.time()}
    if world_size is not None:
        marker["world_size"] = world_size
    marker["files"] = file_manifest(folder)
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


# ---------------------------------------------------------------- is a checkpoint intact, can it be resumed


def checkpoint_files(folder: Path) -> list[str]:
    """Every file under ``folder`` (relative, '/'-separated, sorted), but for the completion marker."""
    skip = {COMPLETE_MARKER, COMPLETE_MARKER + ".tmp"}
    return sorted(
        path.relative_to(folder).as_posix()
        for path in folder.rglob("*")
        if path.is_file() and path.relative_to(folder).as_posix() not in skip
    )


def file_crc32(path: Path) -> str:
    crc = 0
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)  # zlib releases the GIL: files hash in parallel threads
    return f"{crc:08x}"


def file_manifest(folder: Path) -> dict[str, list]:
    """name -> [size in bytes, CRC-32] of every file of a checkpoint (``checkpoint_files``)."""
    names = checkpoint_files(folder)
    with ThreadPoolExecutor(_HASH_THREADS) as pool:
        crcs = list(pool.map(lambda name: file_crc32(folder / name), names))
    return {name: [(folder / name).stat().st_size, crc] for name, crc in zip(names, crcs)}


def read_marker(folder: Path) -> dict | None:
    """The completion marker's content; None when it is missing or unreadable."""
    try:
        marker = json.loads((folder / COMPLETE_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def verify_checkpoint(folder: Path) -> str | None:
    """What is wrong with the files of a checkpoint (or of any saved model folder such as ``final/``): one
    phrase naming the file and why; None when nothing is. With a completion marker that lists the files
    (``mark_complete``), each must be there with the size and CRC-32 it was saved with; every JSON, safetensors
    and torch file must also look whole (``format_problem``). Repeated calls on unchanged files are free."""
    folder = Path(folder)
    if not folder.is_dir():
        return f"{folder.name}: not a folder"
    try:
        stats = tuple((name, *_stat(folder / name)) for name in checkpoint_files(folder))
        marker_stat = _stat(folder / COMPLETE_MARKER) if (folder / COMPLETE_MARKER).exists() else None
    except OSError as err:
        return f"{err.filename or folder.name}: cannot be read ({_reason(err)})"
    return _verify(str(folder.resolve()), stats, marker_stat)


def _stat(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


@lru_cache(maxsize=64)
def _verify(folder_name: str, stats: tuple, marker_stat: tuple | None) -> str | None:
    """``verify_checkpoint``'s work, keyed by what could change it: each file's size and mtime, the marker's."""
    folder = Path(folder_name)
    sizes = {name: size for name, size, _ in stats}
    marker = read_marker(folder) if marker_stat is not None else {}
    if marker is None:
        return f"{COMPLETE_MARKER}: unreadable (not a JSON object)"
    recorded = marker.get("files")
    if recorded is not None and not _is_file_list(recorded):
        return f"{COMPLETE_MARKER}: its file list is unreadable"
    try:
        if isinstance(recorded, dict):
            problem = size_problem(recorded, sizes, sorted(recorded))
            if problem:
                return problem
        for name in sizes:
            problem = format_problem(folder / name)
            if problem:
                return f"{name}: {problem}"
        if isinstance(recorded, dict):
            return crc_problem(folder, recorded, sorted(recorded))
    except OSError as err:
        return f"{Path(err.filename or folder).name}: cannot be read ({_reason(err)})"
    return None


def recorded_files(folder: Path) -> dict[str, list] | None:
    """name -> [size, CRC-32] as the completion marker recorded them (``mark_complete``); None when the marker
    lists none (``final/``, a checkpoint of an older run) or its list is unreadable."""
    recorded = (read_marker(folder) or {}).get("files")
    return recorded if _is_file_list(recorded) else None


def _is_file_list(recorded: Any) -> bool:
    """The marker's ``files`` as ``mark_complete`` writes it: name -> [size, CRC-32]."""
    return isinstance(recorded, dict) and all(isinstance(v, list) and len(v) == 2 for v in recorded.values())


def size_problem(recorded: dict[str, list], sizes: dict[str, int], names: list[str]) -> str | None:
    """The first of ``names`` missing from ``sizes`` (name -> bytes now) or of another size than it was saved
    with; cheap, so checked before anything is read."""
    for name in names:
        size = recorded[name][0]
        if name not in sizes:
            return f"{name}: missing (the checkpoint was saved with it)"
        if sizes[name] != size:
            how = "cut short" if sizes[name] < size else "grown"
            return f"{name}: {sizes[name]:,} bytes, {size:,} when it was saved ({how})"
    return None


def crc_problem(folder: Path, recorded: dict[str, list], names: list[str]) -> str | None:
    """The first of ``names`` whose bytes no longer have the CRC-32 they were saved with (a same-size corruption
    every header check passes); the files are hashed in parallel threads."""
    with ThreadPoolExecutor(_HASH_THREADS) as pool:
        crcs = list(pool.map(lambda name: file_crc32(folder / name), names))
    for name, crc in zip(names, crcs):
        if crc != recorded[name][1]:
            return f"{name}: its bytes changed since it was saved (CRC-32 {crc}, saved {recorded[name][1]})"
    return None


def format_problem(path: Path) -> str | None:
    """Whether a file looks whole for its format, read cheaply (headers and directories, not the tensors):
    JSON parses; a safetensors header is readable and its tensors end where the file ends; a torch file
    (.pt .pth .bin: a zip archive since torch 1.6) has its zip directory. None for other files."""
    suffix = path.suffix
    if suffix == ".json":
        try:
            json.loads(path.read_bytes())
        except ValueError as err:
            return f"not valid JSON ({err})"
    elif suffix == ".safetensors":
        return _safetensors_problem(path)
    elif suffix in (".pt", ".pth", ".bin"):
        with path.open("rb") as fh:
            head = fh.read(4)
        if head[:1] == b"\x80":  # a pickle: torch's format before its zip archives; nothing cheap to check
            return None
        if head != b"PK\x03\x04":
            return "not a PyTorch file (no zip archive header)"
        try:
            with zipfile.ZipFile(path) as archive:
                archive.infolist()
        except (zipfile.BadZipFile, ValueError) as err:
            return f"a damaged PyTorch archive ({err})"
    return None


def _safetensors_problem(path: Path) -> str | None:
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            return f"{size} bytes: too short for a safetensors header"
        (length,) = struct.unpack("<Q", head)
        if length > size - 8:
            return f"a safetensors header of {length:,} bytes in a file of {size:,} (cut short)"
        try:
            header = json.loads(fh.read(length))
            end = max((int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"), default=0)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
            return f"an unreadable safetensors header ({err})"
    if 8 + length + end != size:
        return f"{size:,} bytes where its header says {8 + length + end:,} (cut short or damaged)"
    return None


def resume_problem(folder: Path) -> str | None:
    """Why a resume cannot use this complete checkpoint: a file it needs is missing (``missing_for_resume``)
    or a file is damaged (``verify_checkpoint``); None when it can."""
    try:
        missing = missing_for_resume(folder)
    except (OSError, UnicodeDecodeError) as err:
        return f"{Path(getattr(err, 'filename', None) or folder).name}: cannot be read ({err})"
    return missing or verify_checkpoint(folder)


def missing_for_resume(folder: Path) -> str | None:
    """The first file the Trainer reads on resume that ``folder`` lacks, and what it holds; None when none is.

    Without them the Trainer resumes anyway, silently inexact: no optimizer state means fresh AdamW moments
    and a restarted learning-rate schedule, no RNG state another dropout and data order. What each strategy
    writes (transformers' Trainer._save_checkpoint): trainer_state.json and scheduler.pt always (tooltrain's
    DeepSpeed configs leave the schedule to the Trainer); rng_state.pth on one rank, rng_state_<rank>.pth per
    rank on several; the optimizer in optimizer.pt (single, ddp), in an optimizer* file or folder (FSDP), or,
    under DeepSpeed, in global_stepN/ (one *zero_pp_rank_<rank>_*optim_states.pt per rank, with the model
    states, named by the ``latest`` file). A folder the Trainer did not write (no trainer_state.json, no file
    list in its marker: a marker of an older run) is not judged."""
    marker = read_marker(folder) or {}
    top = {path.name for path in folder.iterdir()} if folder.is_dir() else set()
    if "trainer_state.json" not in top and not isinstance(marker.get("files"), dict):
        return None
    world_size = marker.get("world_size") if isinstance(marker.get("world_size"), int) else None
    needed = [
        ("trainer_state.json", "the step, the logs and the data position", "trainer_state.json" in top),
        ("scheduler.pt", "the learning-rate schedule", "scheduler.pt" in top),
        *_optimizer_needs(folder, top, world_size),
        *_rng_needs(top, world_size),
    ]
    for name, holds, present in needed:
        if not present:
            return f"{name}: missing, and a resume needs it ({holds})"
    return None


def _rng_needs(top: set[str], world_size: int | None) -> list[tuple[str, str, bool]]:
    holds = "random state, so that dropout and data order go on as if never stopped"
    if world_size is None:  # an older marker: either layout
        return [("rng_state.pth", "the " + holds, "rng_state.pth" in top or "rng_state_0.pth" in top)]
    if world_size == 1:
        return [("rng_state.pth", "the " + holds, "rng_state.pth" in top)]
    return [
        (f"rng_state_{rank}.pth", f"rank {rank}'s {holds}", f"rng_state_{rank}.pth" in top)
        for rank in range(world_size)
    ]


def _optimizer_needs(folder: Path, top: set[str], world_size: int | None) -> list[tuple[str, str, bool]]:
    holds = "the optimizer's moments"
    if not any(name.startswith("global_step") for name in top):  # not DeepSpeed
        present = any(name.startswith("optimizer") for name in top)  # optimizer.pt/.bin, FSDP's optimizer_0/
        weights = any(name.startswith(_WEIGHT_FILES) for name in top)
        return [
            ("optimizer.pt", holds, present),
            ("adapter_model.safetensors or model.safetensors", "the weights", weights),
        ]
    latest = folder / "latest"
    tag = latest.read_text(encoding="utf-8").strip() if latest.is_file() else ""
    if not tag or "/" in tag or not (folder / tag).is_dir():
        return [("latest", "the name of DeepSpeed's global_stepN folder", False)]
    names = {path.name for path in (folder / tag).iterdir()}
    model_states = [n for n in names if n.endswith("model_states.pt")]
    needs = [(f"{tag}/*model_states.pt", "the weights", bool(model_states))]
    for rank in range(world_size or 1):
        if any(n.startswith("zero_pp_rank_") for n in model_states):  # ZeRO-3: each rank's own model states
            present = any(n.startswith(f"zero_pp_rank_{rank}_") for n in model_states)
            needs.append(
                (f"{tag}/zero_pp_rank_{rank}_*model_states.pt", f"rank {rank}'s share of the weights", present)
            )
        present = any(f"zero_pp_rank_{rank}_" in n and n.endswith("optim_states.pt") for n in names)
        needs.append((f"{tag}/zero_pp_rank_{rank}_*optim_states.pt", f"rank {rank}'s share of {holds}", present))
    return needs


# the Trainer's weight files (transformers' _load_from_checkpoint), FSDP's pytorch_model_fsdp_0(.bin) among them
_WEIGHT_FILES = ("adapter_model.", "model.safetensors", "pytorch_model")


def resumable_checkpoint(output_dir: Path) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The newest complete checkpoint a resume can use, and each newer complete one it cannot, with why
    (``resume_problem``), newest first."""
    skipped: list[tuple[Path, str]] = []
    for folder in reversed(complete_checkpoints(output_dir)):
        problem = resume_problem(folder)
        if problem is None:
            return folder, skipped
        skipped.append((folder, problem))
    return None, skipped


def set_aside(folder: Path) -> Path:
    """Rename a damaged checkpoint out of the way of resume and rotation (kept: it may be what the user needs to
    recover): RUN_DIR/damaged-checkpoint-N, or damaged-checkpoint-N.2, .3 ... when that name is taken."""
    target = folder.with_name(DAMAGED_PREFIX + folder.name)
    suffix = 2
    while target.exists():
        target, suffix = folder.with_name(f"{DAMAGED_PREFIX}{folder.name}.{suffix}"), suffix + 1
    folder.rename(target)
    return target


def _reason(err: OSError) -> str:
    return err.strerror.lower() if err.strerror else str(err)
