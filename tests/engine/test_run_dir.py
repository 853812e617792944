"""RUN_DIR around a run (train/engine/run_dir.py): the lock and who holds it, the checks before a run, what a
failed save and a second Ctrl-C say. Unit tests; tests/engine/test_train_errors.py runs the command."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from train.engine import run_dir
from train.engine.checkpoints import COMPLETE_MARKER
from train.engine.config import compose
from train.engine.run_dir import (
    HOLDER_NAME,
    RunSetupError,
    check_inputs,
    check_output_dir,
    claim_run_dir,
    evaluation_hint,
    hold_run_dir,
    release_run_dir,
    write_failure_message,
    write_failure_reason,
)
from train.engine.signals import EarlySignals

REPO = Path(__file__).resolve().parents[2]
MAIN = SimpleNamespace(is_main=True, world_size=1)
# Another process takes RUN_DIR's lock as `tooltrain train` does, says so, and sleeps.
HOLD = """
import sys, time
from types import SimpleNamespace
from pathlib import Path
from train.engine.run_dir import claim_run_dir
claim_run_dir(Path(sys.argv[1]), SimpleNamespace(is_main=True, world_size=1))
print("held", flush=True)
time.sleep(600)
"""


@pytest.fixture
def holder(tmp_path):
    """A live process holding tmp_path/run; killed (SIGKILL) at the end if still alive."""
    out = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert process.stdout.readline() == "held\n"
    yield out, process
    if process.poll() is None:
        process.kill()
        process.wait()


def test_a_held_run_dir_is_refused_naming_the_holder_and_freed_when_the_holder_is_killed(holder):
    out, process = holder
    record = json.loads((out / HOLDER_NAME).read_text())
    assert (record["pid"], record["host"]) == (process.pid, socket.gethostname())
    with pytest.raises(RunSetupError) as refused:
        claim_run_dir(out, MAIN)
    assert str(refused.value) == (
        f"output_dir={out} is in use by another run: pid {process.pid} on host {socket.gethostname()}, started "
        f"{record['started']}, command: {record['command']}; wait for it to finish or stop it, or choose another "
        "output_dir"
    )
    assert "-c" in record["command"] and str(out) in record["command"]

    process.send_signal(signal.SIGKILL)  # a killed run leaves its record, not its (OS) lock
    process.wait()
    with hold_run_dir(out, MAIN):
        assert json.loads((out / HOLDER_NAME).read_text())["pid"] == os.getpid()
    assert not (out / HOLDER_NAME).exists()  # released: no record of a free lock is left


def test_claims_in_one_process_nest_and_only_the_outer_one_releases(tmp_path):
    out = tmp_path / "run"
    claim_run_dir(out, MAIN)  # the entry point, before Hydra writes into RUN_DIR
    with hold_run_dir(out, MAIN):  # run() again
        pass
    assert json.loads((out / HOLDER_NAME).read_text())["pid"] == os.getpid()  # still held
    release_run_dir(out)
    assert not (out / HOLDER_NAME).exists()


def test_other_ranks_wait_for_their_own_rank_zero_and_stop_when_signalled(tmp_path, monkeypatch):
    out = tmp_path / "run"
    out.mkdir()
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29511")
    other_rank = SimpleNamespace(is_main=False, world_size=2)
    (out / HOLDER_NAME).write_text(json.dumps({"pid": 1, "launch": "MASTER_ADDR=127.0.0.1;MASTER_PORT=29511"}))
    claim_run_dir(out, other_rank)  # its rank 0 holds RUN_DIR: go on at once
    release_run_dir(out)
    assert (out / HOLDER_NAME).exists()  # only rank 0 removes the record

    # another launch holds it: wait, until the launcher stops the job (rank 0 exited, refused)
    (out / HOLDER_NAME).write_text(json.dumps({"pid": 1, "launch": "MASTER_ADDR=127.0.0.1;MASTER_PORT=29600"}))
    monkeypatch.setattr(EarlySignals, "received", signal.SIGTERM)
    with pytest.raises(RunSetupError, match=r"stopped before training: global rank 0 did not take output_dir="):
        claim_run_dir(out, other_rank)
    monkeypatch.setattr(EarlySignals, "received", None)
    monkeypatch.setattr(run_dir, "WAIT_FOR_MAIN_RANK_S", 0.3)
    with pytest.raises(RunSetupError, match=r"global rank 0 did not lock output_dir=.* within 0 s"):
        claim_run_dir(out, other_rank)


def test_output_dir_checks_create_nothing(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("keep me")
    with pytest.raises(
        RunSetupError, match=r"^output_dir=.*a_file is a file, not a folder; choose another output_dir$"
    ):
        check_output_dir(a_file)
    with pytest.raises(RunSetupError, match=r"cannot be created: .*a_file is a file"):
        check_output_dir(a_file / "run")
    check_output_dir(tmp_path / "new" / "run")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"] and a_file.read_text() == "keep me"


def test_inputs_are_checked_together_naming_each_key(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    cfg = compose(["recipe=tiny", f"data.sources.0.inputs=[{tmp_path}/missing.json,{tmp_path}/loop,{tmp_path}]"])
    with pytest.raises(RunSetupError) as refused:
        check_inputs(cfg)
    assert str(refused.value) == (
        f"data.sources.0.inputs.0: {tmp_path}/missing.json: no such file or directory; "
        f"data.sources.0.inputs.1: {tmp_path}/loop: too many levels of symbolic links (a symbolic link loop)"
    )
    check_inputs(compose(["recipe=tiny"]))  # pkg:// inputs resolve inside the package


@pytest.mark.parametrize(
    "err, reason",
    [
        (OSError(errno.ENOSPC, "No space left on device"), "no space left on device"),
        (
            OSError(errno.EDQUOT, "Disk quota exceeded", "/runs/x/metrics.jsonl"),
            "disk quota exceeded (/runs/x/metrics.jsonl)",
        ),
        (
            RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598"),
            (
                "the write was cut short (torch: unexpected pos 704 vs 598): the disk is full or a file size limit "
                "was reached"
            ),
        ),
        (
            Exception("Error while serializing: I/O error: No space left on device (os error 28)"),
            "no space left on device",
        ),
        (Exception("Error while serializing: I/O error: File too large (os error 27)"), "file too large"),
    ],
)
def test_failed_writes_are_recognised_by_their_reason(err, reason):
    assert write_failure_reason(err)[0] == reason
    try:  # also when raised from within another error
        raise ValueError("wrapped") from err
    except ValueError as wrapped:
        assert write_failure_reason(wrapped)[0] == reason


@pytest.mark.parametrize(
    "err",
    [
        OSError(errno.ENOENT, "No such file or directory"),
        RuntimeError("size mismatch"),
        ValueError("unexpected position"),
    ],
)
def test_other_errors_are_not_taken_for_failed_writes(err):
    assert write_failure_reason(err) is None


def test_a_failed_save_names_the_checkpoint_removes_it_and_names_the_one_kept(tmp_path):
    for step in (2, 4):
        (tmp_path / f"checkpoint-{step}").mkdir()
    (tmp_path / "checkpoint-2" / COMPLETE_MARKER).write_text("{}")
    line = write_failure_message(tmp_path, "no space left on device", "free some space", remove_partial=True)
    assert line == (
        f"could not save {tmp_path}/checkpoint-4: no space left on device; the incomplete checkpoint-4 was "
        "removed; the last complete checkpoint, checkpoint-2, is kept: free some space, then run the same "
        "command to resume from it"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-2"]

    # a checkpoint a killed run left unfinished is not this failure's: a write elsewhere failed
    (tmp_path / "checkpoint-3").mkdir()
    os.utime(tmp_path / "checkpoint-3", (1.0, 1.0))
    line = write_failure_message(tmp_path, "no space left on device", "free some space", True, since=1000.0)
    assert line.startswith("a write failed: no space left on device; the last complete checkpoint, checkpoint-2, is")
    assert (tmp_path / "checkpoint-3").is_dir()


def test_a_second_ctrl_c_stops_at_once_but_not_the_same_keypress_twice(monkeypatch):
    import train.engine.callbacks
    from train.engine.callbacks import Preemption

    clock = iter([100.0, 100.5, 103.0])
    monkeypatch.setattr(train.engine.callbacks, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    preemption = Preemption(lambda flag: flag)
    try:
        preemption._handle(signal.SIGINT, None)  # Ctrl-C: save after this step
        assert preemption.received == signal.SIGINT
        preemption._handle(signal.SIGINT, None)  # the same press, forwarded by torchrun 0.5 s later
        with pytest.raises(KeyboardInterrupt):
            preemption._handle(signal.SIGINT, None)  # pressed again
    finally:
        preemption.on_train_end(None, None, None)


def test_a_finished_run_rerun_with_eval_says_how_to_evaluate_it(tmp_path):
    (tmp_path / "config.yaml").write_text("data:\n  eval_fraction: 0.2\n")
    cfg = compose(["recipe=tiny", "eval=heldout", "data.eval_fraction=0.2"])
    assert evaluation_hint(tmp_path, cfg) == (
        f"\ntooltrain: the evaluation (heldout) did not run; to evaluate the final model:"
        f"\n  tooltrain eval run heldout {tmp_path} --limit 32"
    )
    (tmp_path / "config.yaml").write_text("data:\n  eval_fraction: 0.0\n")  # it held nothing out
    assert evaluation_hint(tmp_path, cfg).endswith(
        f"\n  tooltrain eval run heldout {tmp_path} --data FILE --limit 32  (the run held out no conversations: "
        "its data.eval_fraction was 0)"
    )
    assert evaluation_hint(tmp_path, compose(["recipe=tiny"])) == ""


def test_an_input_in_a_package_that_is_not_installed_is_named_not_a_traceback():
    from train.engine.config import compose

    bench = '[{name: bfcl, data: ["pkg://nosuchpkg/data/x.json"], source: bfcl}]'
    with pytest.raises(RunSetupError) as refused:
        check_inputs(compose(["recipe=tiny", f"eval.benchmarks={bench}"]))
    assert str(refused.value).startswith(
        "eval.benchmarks.0.data: pkg://nosuchpkg/data/x.json: no installed package 'nosuchpkg' ships it"
    )
