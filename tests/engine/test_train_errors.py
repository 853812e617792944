"""`tooltrain train` ends every user error with one `error:` line and its exit code, never a traceback:
inputs, output_dir, a full disk during a save, Ctrl-C, a second run into a busy output_dir, a resume with
a changed config. Each case runs the command (`python -m train train ...`) as a user would."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
import yaml

from train.engine.callbacks import COMPLETE_MARKER, latest_complete_checkpoint
from train.engine.run_dir import HOLDER_NAME

# `tooltrain train` with the file size limit (ulimit -f) dropped to LIMIT bytes when the Trainer starts to
# save checkpoint-STEP: its optimizer state (~115 KB for the tiny model) cannot be written, as on a full disk.
FILE_SIZE_LIMIT_AT_SAVE = """
import resource, signal, sys
from transformers import Trainer

step, limit = int(sys.argv.pop(1)), int(sys.argv.pop(1))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails (EFBIG) instead of killing
original = Trainer._save_checkpoint

def save(self, model, trial):
    if self.state.global_step == step:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    return original(self, model, trial)

Trainer._save_checkpoint = save
from train.cli import main
sys.exit(main())
"""
LONG = "train.max_steps=100000"  # a run that is still training when the test acts on it


def train(engine, out, *extra, launcher=None, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run(
        engine.command(out, *extra, launcher=launcher),
        check=False,
        cwd=engine.repo,
        env=engine.env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def wait_for_file(path, process, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, f"the run exited with {process.returncode} before {path} appeared"
        assert time.monotonic() < deadline, f"no {path} within {timeout} s"
        time.sleep(0.02)


def the_error(result, code: int) -> str:
    """The one `error:` line of a run that failed with ``code``, without a traceback. Lines split at
    carriage returns too: a progress bar ends its line with one."""
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    everything = result.stdout + result.stderr
    assert (result.returncode, len(errors), "Traceback" in everything) == (code, 1, False), (
        f"exit {result.returncode}\n{everything[-5000:]}"
    )
    return errors[0]


# ---------------------------------------------------------------- item 5: inputs and output_dir


def test_a_missing_input_is_one_error_line_and_nothing_is_created(engine, tmp_path):
    out = tmp_path / "run"
    result = train(engine, out, f"data.sources.0.inputs=[{tmp_path}/missing.json]")
    assert the_error(result, 2) == f"error: data.sources.0.inputs.0: {tmp_path}/missing.json: no such file or directory"
    assert not out.exists()


# slow tier: test_run_dir's check_inputs test has this message, the missing input above this CLI path
@pytest.mark.slow
def test_a_symlink_loop_as_input_is_one_error_line(engine, tmp_path):
    (tmp_path / "loop.json").symlink_to(tmp_path / "loop.json")
    result = train(engine, tmp_path / "run", f"data.sources.0.inputs=[{tmp_path}/loop.json]")
    assert the_error(result, 2) == (
        f"error: data.sources.0.inputs.0: {tmp_path}/loop.json: too many levels of "
        "symbolic links (a symbolic link loop)"
    )


# slow tier: sources/test_glaive has the reader's refusal of a folder, the missing input this CLI path
@pytest.mark.slow
def test_a_folder_given_to_a_reader_of_files_is_one_error_line(engine, tmp_path):
    result = train(engine, tmp_path / "run", f"data.sources.0.inputs=[{tmp_path}]")
    assert the_error(result, 2) == (
        f"error: {tmp_path}: is a folder; expected a data file or a folder saved by datasets (save_to_disk)"
    )


# slow tier: test_run_dir's output_dir test has this message and the kept file, the missing input this CLI path
@pytest.mark.slow
def test_an_output_dir_that_is_a_file_is_one_error_line_and_the_file_is_kept(engine, tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    result = train(engine, a_file)
    assert the_error(result, 2) == f"error: output_dir={a_file} is a file, not a folder; choose another output_dir"
    assert a_file.read_text() == "mine"


# slow tier: builders/test_data_build_nothing_built has the counted reasons of a build that leaves no rows, the
# missing input above this CLI path
@pytest.mark.slow
def test_data_that_leaves_nothing_to_train_on_is_one_error_line_with_the_reasons(engine, tmp_path):
    # every conversation is longer than 8 tokens and overlong ones are dropped, not cut
    result = train(engine, tmp_path / "run", "data.max_seq_len=8", "data.overlong=drop")
    error = the_error(result, 2)
    assert error.startswith("error: no training rows: 16 conversations read, 0 accepted, 0 held out for eval (")
    assert "x dropped_overlong: N > N tokens" in error


# slow tier: test_registries has this message, test_config_ranges the CLI's one line for a config error
@pytest.mark.slow
def test_an_unknown_builder_argument_is_one_error_line(engine, tmp_path):
    result = train(engine, tmp_path / "run", "data.builder=metatool", "+data.builder_args.bogus=1")
    assert the_error(result, 2) == "error: invalid configuration:"  # at compose time, before any data is read
    assert "  - data.builder=metatool: metatool builder: unknown argument(s) ['bogus']" in result.stderr


# slow tier: evaluation/test_eval_run_cli has this refusal of a benchmark file, the missing input this CLI path
@pytest.mark.slow
def test_an_eval_benchmark_without_conversations_is_one_error_line(engine, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = train(engine, tmp_path / "run", "eval=heldout", f"eval.benchmarks.0.data={empty}")
    assert the_error(result, 2).startswith(f"error: eval: {empty}: not canonical conversations")


# ---------------------------------------------------------------- item 5: a full disk, Ctrl-C


# slow tier: test_run_dir's failed-save and failed-write tests (in process) and test_checkpoint_atomicity cover it
@pytest.mark.slow
def test_a_save_cut_short_by_a_full_disk_keeps_the_last_complete_checkpoint_and_resumes_from_it(
    engine, single_run, tmp_path, capsys
):
    run_dir = tmp_path / "run"
    result = train(engine, run_dir, launcher=[sys.executable, "-c", FILE_SIZE_LIMIT_AT_SAVE, "4", "60000"])
    error = the_error(result, 1)
    assert error.startswith(
        f"error: could not save {run_dir}/checkpoint-4: the write was cut short (torch: unexpected pos "
    )
    assert error.endswith(
        "; the incomplete checkpoint-4 was removed; the last complete checkpoint, checkpoint-2, is "
        "kept: free some space or raise the limit, then run the same command to resume from it"
    )
    assert latest_complete_checkpoint(run_dir) == run_dir / "checkpoint-2"
    assert not (run_dir / "checkpoint-4").exists() and not (run_dir / "final").exists()

    result = engine.run(run_dir)  # once there is room again
    assert "resuming from checkpoint-2" in capsys.readouterr().out
    assert (result.status, result.global_step) == ("completed", engine.steps)
    assert engine.losses(run_dir) == engine.losses(single_run)
    engine.assert_same_tensors(engine.adapter(run_dir / "final"), engine.adapter(single_run / "final"))


def test_ctrl_c_while_training_saves_a_checkpoint_and_exits_130(engine, tmp_path):
    run_dir = tmp_path / "run"
    process = engine.start(run_dir, LONG)
    engine.wait_for_step(run_dir, process, 2)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) == 130
    result = subprocess.CompletedProcess([], 130, "", (tmp_path / "run.log").read_text())
    stopped = engine.summary(run_dir)["steps"]
    assert the_error(result, 130) == (
        f"error: interrupted (Ctrl-C) after step {stopped}: the last complete checkpoint, "
        f"checkpoint-{stopped}, is kept: run the same command to resume from it"
    )
    assert (run_dir / f"checkpoint-{stopped}" / COMPLETE_MARKER).is_file()
    assert max(engine.losses(run_dir)) == stopped
    assert not (run_dir / HOLDER_NAME).exists()


# slow tier: the in-process setup Ctrl-C test below has the rule, Ctrl-C while training the CLI's exit 130
@pytest.mark.slow
def test_ctrl_c_before_training_is_one_error_line_and_exits_130(engine, tmp_path):
    run_dir = tmp_path / "run"
    process = engine.start(run_dir, LONG)
    wait_for_file(run_dir / ".hydra" / "overrides.yaml", process)  # Hydra's record: torch and the model still load
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) == 130
    result = subprocess.CompletedProcess([], 130, "", (tmp_path / "run.log").read_text())
    assert the_error(result, 130) in (
        "error: interrupted (Ctrl-C): no checkpoint was complete yet: run the same command to start again",
        # on a slow machine the signal may come once training runs: then it saves first
        *(
            f"error: interrupted (Ctrl-C) after step {step}: the last complete checkpoint, checkpoint-{step}, is kept: "
            "run the same command to resume from it"
            for step in range(1, 100)
        ),
    )


# ---------------------------------------------------------------- item 6: one run at a time


# slow tier: test_run_dir's held-run-dir test (a real holder process) has the message and the killed holder
@pytest.mark.slow
def test_a_second_run_into_a_busy_output_dir_says_who_holds_it_and_a_killed_holder_blocks_nothing(engine, tmp_path):
    run_dir = tmp_path / "run"
    first = engine.start(run_dir, LONG)
    engine.wait_for_step(run_dir, first, 2)
    hydra_record = (run_dir / ".hydra" / "overrides.yaml").read_bytes()

    second = train(engine, run_dir, "train.max_steps=3", "seed=7")
    error = the_error(second, 2)
    holder = json.loads((run_dir / HOLDER_NAME).read_text())
    assert error == (
        f"error: output_dir={run_dir} is in use by another run: pid {first.pid} on host {socket.gethostname()}, "
        f"started {holder['started']}, command: {holder['command']}; wait for it to finish or stop it, or choose "
        "another output_dir"
    )
    assert f"output_dir={run_dir}" in holder["command"] and LONG in holder["command"]
    assert first.poll() is None  # the first run goes on, its folder as it was
    assert (run_dir / ".hydra" / "overrides.yaml").read_bytes() == hydra_record
    engine.wait_for_step(run_dir, first, max(engine.losses(run_dir)) + 1)
    engine.losses(run_dir)  # each step logged once

    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    result = engine.run(run_dir)  # a killed run's lock goes with it: this resumes (and stops at 6 steps)
    assert result.status == "completed"


# A process holding RUN_DIR the way `tooltrain train` does, without training: it says so, then sleeps.
HOLD = """
import sys, time
from pathlib import Path
from types import SimpleNamespace
from train.engine.run_dir import claim_run_dir
claim_run_dir(Path(sys.argv[1]), SimpleNamespace(is_main=True, world_size=1))
print("held", flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_under_torchrun_only_rank_zero_locks_and_a_refused_run_ends_on_every_rank(engine, tmp_path):
    run_dir = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run_dir)], cwd=engine.repo, env=engine.env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "held\n"
        started = time.monotonic()
        result = subprocess.run(
            engine.command(run_dir, "distributed=ddp", ranks=2),
            check=False,
            cwd=engine.repo,
            env=engine.env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        # torchrun reports its failed workers itself (exit 1); rank 0 says why, rank 1 stops without training
        assert result.returncode == 1 and time.monotonic() - started < 120
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert f"error: output_dir={run_dir} is in use by another run: pid {holder.pid} on host" in errors[0]
        stopped = (
            f"error: stopped before training: global rank 0 did not take output_dir={run_dir} (its error says why)"
        )
        assert errors[1:] in ([], [stopped])
        assert not (run_dir / "metrics.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()


# ---------------------------------------------------------------- item 7: resume with a changed config


@pytest.mark.parametrize(
    "override, difference",
    [
        (
            "model.arch.hidden_size=128",
            "  model.arch.hidden_size: 64 -> 128 (the checkpoint's weights have this model's shapes",
        ),
        # slow tier: the same refusal through the CLI as "model"; test_resume_config lists this difference
        pytest.param(
            "optim.lr=0.5",
            "  optim.lr: 0.001 -> 0.5 (the optimizer state and learning-rate schedule come back from the",
            marks=pytest.mark.slow,
        ),
    ],
    ids=["model", "lr"],
)
def test_a_resume_with_a_changed_fixed_setting_is_refused_with_the_difference(
    engine, single_run, tmp_path, override, difference
):
    run_dir = engine.copy_run(single_run, tmp_path / "run", keep_through_step=4)
    before = {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()}
    result = train(engine, run_dir, override)
    error = the_error(result, 2)
    assert error == (
        f"error: output_dir={run_dir} holds a run that resumes from checkpoint-4, and that checkpoint "
        "cannot take these changes of its settings (config.yaml):"
    )
    lines = result.stderr.splitlines()
    listed = lines[lines.index(error) + 1 :]
    assert listed[0].startswith(difference)
    assert listed[1:] == ["Run the command without them to resume, or choose another output_dir to start a new run."]
    assert {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()} == before  # nothing written


def test_a_resume_with_allowed_changes_says_them_and_keeps_config_yaml(engine, single_run, tmp_path, capsys):
    run_dir = engine.copy_run(single_run, tmp_path / "run", keep_through_step=4)
    saved = (run_dir / "config.yaml").read_bytes()
    result = engine.run(run_dir, "train.max_steps=8", "train.logging_steps=2")
    out = capsys.readouterr().out
    assert (
        "tooltrain: resuming with changed settings: train.max_steps: 6 -> 8; train.logging_steps: 1 -> 2 "
        "(recorded in config.resume-1.yaml; config.yaml keeps the original)\n"
    ) in out
    assert "resuming from checkpoint-4" in out
    assert (result.status, result.global_step) == ("completed", 8)
    assert (run_dir / "config.yaml").read_bytes() == saved


# ---------------------------------------------------------------- item 12: a finished run, rerun with eval


def test_rerunning_a_finished_run_with_eval_says_how_to_evaluate_it(engine, single_run, tmp_path, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(single_run, run_dir)
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    saved["data"]["eval_fraction"] = 0.25  # as if it had been trained with a held-out split
    (run_dir / "config.yaml").write_text(yaml.safe_dump(saved))
    result = engine.run(run_dir, "eval=heldout", "data.eval_fraction=0.25")
    assert result.status == "completed"
    assert capsys.readouterr().out.splitlines()[1:] == [
        "tooltrain: the evaluation (heldout) did not run; to evaluate the final model:",
        f"  tooltrain eval run heldout {run_dir} --limit 32",
    ]


def test_a_ctrl_c_during_setup_is_recorded_and_acted_on_between_stages_never_lost(monkeypatch):
    """Before training, Ctrl-C is recorded, not raised where it lands: raised inside a library that catches it (an
    import, a lock, a loader), it was lost and the run trained on (a CI run reached step 5,644 of 100,000)."""
    import os

    from train.engine.signals import EarlySignals

    monkeypatch.setattr(EarlySignals, "received", None)
    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)
    previous = {sig: signal.getsignal(sig) for sig in handled}
    try:
        EarlySignals.install()
        try:
            os.kill(os.getpid(), signal.SIGINT)
        except KeyboardInterrupt:  # pragma: no cover - the old behaviour: raised wherever the signal lands
            pytest.fail("the first Ctrl-C during setup was raised where it landed")
        assert EarlySignals.received == signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            EarlySignals.stop_if_interrupted()  # between setup stages: one clean stop
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C again: at once
        EarlySignals.install()
        assert EarlySignals.received is None  # a fresh entry starts with nothing recorded
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
