"""RUN_DIR before and around a run: usable inputs and output folder, one run at a time, what a failure left.

* ``check_output_dir`` and ``check_inputs``: the ``output_dir`` can be a folder and every input path
  can be opened, checked before any model (or torch) is loaded.
* ``claim_run_dir`` / ``hold_run_dir``: an exclusive lock on RUN_DIR for the run's life. Global rank 0
  takes it (one process per run, however many ranks); a second run is refused with who holds it. The
  lock is an OS file lock (``filelock``, ``flock``): it goes with the process that held it, so a killed
  run never blocks the next. The holder writes who it is beside the lock (``HOLDER_NAME``).
* ``write_failure_reason`` / ``write_failure_message``: a save that failed because the disk is full (or a
  quota, a file size limit, a read-only file system) as one line naming where and why, and the last
  complete checkpoint that stays.

Every refusal here is a ``RunSetupError``: the entry point prints it as one ``error:`` line and exits 2.
Nothing here imports torch: the command line runs these checks before its slow imports.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shlex
import shutil
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from train.engine.checkpoints import (
    incomplete_checkpoints,
    latest_complete_checkpoint,
    resumable_checkpoint,
    set_aside,
)
from train.engine.signals import EarlySignals

LOCK_NAME = ".tooltrain-run.lock"
HOLDER_NAME = ".tooltrain-run.json"  # who holds the lock: pid, host, start time, command
WAIT_FOR_MAIN_RANK_S = 600.0  # how long other ranks wait for global rank 0 to take the lock
# The launcher's variables every rank of one launch shares and two live launches cannot: the ranks other
# than 0 recognise their own rank 0's claim by them (a torchrun restart or a Slurm requeue is a new launch).
LAUNCH_VARIABLES = (
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "MASTER_ADDR",
    "MASTER_PORT",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "SLURM_RESTART_COUNT",
)


class RunSetupError(Exception):
    """What the command was given cannot run: a missing input, an output_dir that is a file or in use, a
    resume with a config its checkpoint cannot take. One ``error:`` line, exit 2."""


# ---------------------------------------------------------------- inputs and output folder


def check_output_dir(out: Path) -> None:
    """Refuse an ``output_dir`` that is a file, lies under a file, or cannot be written; creates nothing."""
    problem = output_dir_placement(out)
    if problem:
        raise RunSetupError(problem)
    existing = nearest_existing(out)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RunSetupError(f"output_dir={out}: {existing} is not writable; choose another output_dir")


def output_dir_placement(out: Path) -> str | None:
    """Why ``output_dir`` can never be a folder (it is a file, or lies under one), or None. ``tooltrain launch``
    asks only this: whether the job can write there is for the nodes, which may mount what this machine does not."""
    if out.exists() and not out.is_dir():
        return f"output_dir={out} is a file, not a folder; choose another output_dir"
    existing = nearest_existing(out)
    if existing != out and not existing.is_dir():
        return f"output_dir={out} cannot be created: {existing} is a file; choose another output_dir"
    return None


def nearest_existing(path: Path) -> Path:
    """``path`` itself, or the nearest folder above it that exists (the one a ``mkdir -p`` would start from)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def make_output_dir(out: Path) -> None:
    check_output_dir(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunSetupError(f"output_dir={out}: cannot create the folder ({_reason(err)})") from None


def check_inputs(cfg: Any) -> None:
    """Every input the data sources, eval benchmarks and the run's papers (``PaperSpec.inputs``) name exists and can
    be opened (files or folders: which a reader takes is the reader's business). All problems in one error."""
    from train.data.inputs import resolve_input
    from train.papers import active
    from train.sources import SourceError

    named: list[tuple[str, str]] = []
    for index, spec in enumerate(cfg.data.sources):
        named += [(f"data.sources.{index}.inputs.{i}", str(path)) for i, path in enumerate(spec.inputs)]
    for index, bench in enumerate(cfg.eval.benchmarks):
        files = [] if bench.data is None else [bench.data] if isinstance(bench.data, str) else list(bench.data)
        named += [(f"eval.benchmarks.{index}.data", str(path)) for path in files]
    for _, spec in active(cfg):  # what a paper reads (after training, too) is checked before training
        named += spec.inputs(cfg) if spec.inputs is not None else []
    problems = []
    for key, name in named:
        try:
            path = resolve_input(name)
        except SourceError as err:  # pkg:// of a package that is not installed
            problems.append(f"{key}: {err}")
            continue
        problem = _path_problem(path)
        if problem:
            problems.append(f"{key}: {path}: {problem}")
    if problems:
        raise RunSetupError("; ".join(problems))


def _path_problem(path: Path) -> str | None:
    try:
        os.stat(path)  # follows links: a dangling link or a loop fails here
    except OSError as err:
        return _reason(err) + (" (a symbolic link loop)" if err.errno == errno.ELOOP else "")
    if not os.access(path, os.R_OK):
        return "permission denied"
    return None


def _reason(err: OSError) -> str:
    return err.strerror.lower() if err.strerror else str(err)


# ---------------------------------------------------------------- one run at a time


_held: dict[str, Any] = {}  # resolved RUN_DIR -> the FileLock this process holds there (None: a rank that is not 0)


def launch_id() -> str:
    return ";".join(f"{name}={os.environ[name]}" for name in LAUNCH_VARIABLES if name in os.environ)


def read_holder(out: Path) -> dict[str, Any] | None:
    try:
        holder = json.loads((out / HOLDER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


def describe_holder(holder: dict[str, Any] | None) -> str:
    if not holder:
        return "another process (it left no record of itself)"
    return (
        f"pid {holder.get('pid')} on host {holder.get('host')}, started {holder.get('started')}, "
        f"command: {holder.get('command')}"
    )


def claim_run_dir(out: Path, world: Any) -> None:
    """Take RUN_DIR for this run, until ``release_run_dir`` or the end of the process; a no-op when this
    process holds it already (the entry point claims before Hydra writes into RUN_DIR, then ``run`` again).

    Global rank 0 takes the lock without waiting: a run already there means a refusal. The other ranks
    never touch the lock; they wait until rank 0's record names their launch, so none of them starts work
    for a run that is refused (torchrun stops them when rank 0 exits 2: that signal ends the wait).
    """
    key = str(out.resolve())
    if key in _held:
        return
    if world.is_main:
        from filelock import FileLock, Timeout

        make_output_dir(out)
        lock = FileLock(str(out / LOCK_NAME), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            raise RunSetupError(
                f"output_dir={out} is in use by another run: {describe_holder(read_holder(out))}; "
                "wait for it to finish or stop it, or choose another output_dir"
            ) from None
        _write_holder(out, world)
        _held[key] = lock
    elif world.world_size > 1:
        _wait_for_main_rank(out)
        _held[key] = None


def release_run_dir(out: Path) -> None:
    lock = _held.pop(str(out.resolve()), None)
    if lock is None:
        return
    holder = read_holder(out)
    if holder and holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname():
        (out / HOLDER_NAME).unlink(missing_ok=True)  # before the release: nobody reads a record of a free lock
    lock.release()


def release_all() -> None:
    """Release every run folder this process holds (the entry point, when the command ends)."""
    for key in list(_held):
        release_run_dir(Path(key))


@contextmanager
def hold_run_dir(out: Path, world: Any) -> Iterator[None]:
    """RUN_DIR claimed for the ``with`` block; released at its end unless it was claimed before. A run
    refused before it wrote anything (a strategy this hardware cannot run) leaves no folder it created."""
    claimed_before, created = str(out.resolve()) in _held, not out.exists()
    claim_run_dir(out, world)
    try:
        yield
    except BaseException:
        if (
            created
            and not claimed_before
            and world.is_main
            and {p.name for p in out.iterdir()} <= {LOCK_NAME, HOLDER_NAME}
        ):
            (out / LOCK_NAME).unlink(missing_ok=True)  # still held: a run starting now finds it in use, not free
        raise
    finally:
        if not claimed_before:
            release_run_dir(out)
            if created and world.is_main and out.is_dir() and not any(out.iterdir()):
                out.rmdir()  # emptied above: the run was refused before it wrote anything


def _write_holder(out: Path, world: Any) -> None:
    try:
        import psutil  # installed with accelerate: the real command line, python -m or torchrun included

        command = shlex.join(psutil.Process().cmdline())
    except Exception:  # noqa: BLE001 - no psutil or no /proc
        command = shlex.join(sys.argv)
    holder = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "command": command,
        "world_size": world.world_size,
        "launch": launch_id(),
    }
    tmp = out / (HOLDER_NAME + ".tmp")
    tmp.write_text(json.dumps(holder), encoding="utf-8")
    tmp.replace(out / HOLDER_NAME)


def _wait_for_main_rank(out: Path) -> None:
    launch = launch_id()
    deadline = time.monotonic() + WAIT_FOR_MAIN_RANK_S
    while True:
        holder = read_holder(out)
        if holder is not None and holder.get("launch") == launch:
            return
        EarlySignals.stop_if_interrupted()
        if EarlySignals.received is not None:  # the launcher stops the job: rank 0 was refused, or it ended
            raise RunSetupError(
                f"stopped before training: global rank 0 did not take output_dir={out} (its error says why)"
            )
        if time.monotonic() > deadline:
            raise RunSetupError(
                f"global rank 0 did not lock output_dir={out} within {WAIT_FOR_MAIN_RANK_S:.0f} s "
                "(see its log; RUN_DIR must be on a file system every node sees)"
            )
        time.sleep(0.2)


# ---------------------------------------------------------------- a save that could not be written


# errno -> what to do about it
WRITE_ERRNOS = {
    errno.ENOSPC: "free some space",
    errno.EDQUOT: "free some space (a disk quota is exhausted)",
    errno.EFBIG: "raise the file size limit (ulimit -f)",
    errno.EROFS: "make the file system writable",
}
# How torch.save and safetensors report a failed write: torch drops the errno ("unexpected pos 704 vs 598",
# "PytorchStreamWriter failed writing file"), safetensors keeps it in its message ("(os error 28)").
TORCH_WRITE_FAILED = re.compile(
    r"unexpected pos \d+ vs \d+|PytorchStreamWriter failed writing file[^\n]*|file write failed"
)
OS_ERROR_IN_TEXT = re.compile(r"([A-Z][a-z ]+) \(os error (\d+)\)")


def write_failure_reason(err: BaseException) -> tuple[str, str] | None:
    """(reason, what to do) when ``err`` (or what it was raised from) is a write that failed for lack of
    space, quota, file size or a writable file system; None for anything else."""
    seen = 0
    while err is not None and seen < 8:
        if isinstance(err, OSError) and err.errno in WRITE_ERRNOS:
            where = f" ({err.filename})" if err.filename else ""
            return (err.strerror or os.strerror(err.errno)).lower() + where, WRITE_ERRNOS[err.errno]
        text = str(err)
        found = OS_ERROR_IN_TEXT.search(text)
        if found and int(found.group(2)) in WRITE_ERRNOS:
            return found.group(1).lower(), WRITE_ERRNOS[int(found.group(2))]
        found = TORCH_WRITE_FAILED.search(text)
        if found:
            reason = (
                f"the write was cut short (torch: {found.group(0)}): the disk is full or a file size limit was reached"
            )
            return reason, "free some space or raise the limit"
        err, seen = err.__cause__ or err.__context__, seen + 1
    return None


def write_failure_message(out: Path, reason: str, remedy: str, remove_partial: bool, since: float = 0.0) -> str:
    """One line: which save failed and why, the checkpoint that stays, how to go on. The save is the newest
    checkpoint without a marker written to since ``since`` (this process's start: not one a killed run left).
    ``remove_partial`` (global rank 0) deletes it: that frees space, and it could never be resumed from (no
    completion marker; resume would remove it anyway)."""
    partials = [folder for folder in incomplete_checkpoints(out) if folder.stat().st_mtime >= since]
    partial = max(partials, key=_step_of, default=None)
    # without a partial checkpoint it may have been anything: metrics.jsonl, the summary, the data cache
    line = f"could not save {partial}: {reason}" if partial is not None else f"a write failed: {reason}"
    if partial is not None and remove_partial:
        shutil.rmtree(partial, ignore_errors=True)
        line += f"; the incomplete {partial.name} was removed"
    return line + f"; {kept_checkpoint_hint(out, remedy)}"


def _step_of(folder: Path) -> int:
    try:
        return int(folder.name.split("-")[-1])
    except ValueError:
        return -1


def kept_checkpoint_hint(out: Path, remedy: str = "") -> str:
    kept = latest_complete_checkpoint(out)
    then = f"{remedy}, then run" if remedy else "run"
    if kept is None:
        return f"no checkpoint was complete yet: {then} the same command to start again"
    return f"the last complete checkpoint, {kept.name}, is kept: {then} the same command to resume from it"


# ---------------------------------------------------------------- a rerun of a finished run


def evaluation_hint(out: Path, cfg: Any) -> str:
    """For a rerun of a completed run whose command asks for evaluation (``eval=heldout``, ...): it did not
    run (nothing runs on a finished run), and the ``tooltrain eval run`` commands that evaluate its final
    model; "" when the command asks for none."""
    if not cfg.eval.benchmarks:
        return ""
    commands = []
    for bench in cfg.eval.benchmarks:
        command = ["tooltrain", "eval", "run", str(bench.name), str(out)]
        note = ""
        if bench.data is not None:
            command += ["--data", *([bench.data] if isinstance(bench.data, str) else list(bench.data))]
        elif _saved_eval_fraction(out) == 0:  # heldout: the run's own eval split, which this run never made
            command += ["--data", "FILE"]
            note = "  (the run held out no conversations: its data.eval_fraction was 0)"
        if bench.source:
            command += ["--source", str(bench.source)]
        if bench.limit is not None:
            command += ["--limit", str(bench.limit)]
        command += [arg for key, value in bench.options.items() for arg in ("--option", f"{key}={value}")]
        commands.append(f"\n  {shlex.join(command)}{note}")
    names = ", ".join(str(bench.name) for bench in cfg.eval.benchmarks)
    return f"\ntooltrain: the evaluation ({names}) did not run; to evaluate the final model:" + "".join(commands)


def _saved_eval_fraction(out: Path) -> float | None:
    import yaml

    try:
        saved = yaml.safe_load((out / "config.yaml").read_text(encoding="utf-8"))
        return float(saved["data"]["eval_fraction"])
    except (OSError, ValueError, TypeError, KeyError, yaml.YAMLError):
        return None


def resume_point(out: Path, world: Any) -> Path | None:
    """The newest intact checkpoint with everything a resume reads (set_up refused a run where none is), None for
    step 0. Every rank finds it before rank 0 removes partial saves and sets damaged ones aside (skipped either way)."""
    from train.engine.distributed import barrier

    resume, damaged = resumable_checkpoint(out)
    if world.is_main:
        for partial in incomplete_checkpoints(out):
            shutil.rmtree(partial, ignore_errors=True)  # a save interrupted by a kill
        for folder, problem in damaged:
            kept = set_aside(folder)  # out of the way of resume and rotation, not deleted: it may be recoverable
            print(
                f"tooltrain: {folder.name} is damaged ({problem}); resuming from "
                f"{resume.name if resume else 'step 0'} instead; the damaged one is kept as {kept.name}",
                flush=True,
            )
    barrier()
    return resume
