"""What ``tooltrain train`` prints: formatted per-step lines on rank 0 instead of the Trainer's dicts of strings,
and none of the libraries' known warnings and log lines unless ``--verbose`` / ``TOOLTRAIN_VERBOSE=1``."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import warnings

import pytest

from train.engine.config import REPO_ROOT
from train.engine.console import VERBOSE_ENV, eval_line, quiet_libraries, step_line, take_verbose_flag

NOISE_ENV = (
    "TRANSFORMERS_VERBOSITY",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS",
    "HF_HUB_DISABLE_PROGRESS_BARS",
    "TQDM_DISABLE",
)


def test_a_step_line_is_formatted_numbers():
    logs = {
        "loss": 1.203125,
        "grad_norm": 0.26,
        "learning_rate": 0.002,
        "epoch": 0.01,
        "tokens_per_s_per_device": 101.4,
        "padding_efficiency": 0.95,
    }
    assert step_line(4, 16, logs) == "step 4/16  loss 1.2031  lr 2.0e-03  tok/s 101"
    assert step_line(4, 16, logs, world_size=2, eta_seconds=190.2) == (
        "step 4/16  loss 1.2031  lr 2.0e-03  tok/s 203  eta 3 min 10 s"
    )
    assert step_line(1, 2, {"loss": 6.9, "learning_rate": 0.0}) == "step 1/2  loss 6.9000  lr 0.0e+00"


def test_an_eval_line_shows_each_benchmarks_top_level_numbers():
    logs = {
        "eval/heldout/exact_match": 0.08333,
        "eval/heldout/name_accuracy": 0.25,
        "eval/heldout/valid_call_rate": 0.5,
        "eval/heldout/correct": 1,
        "eval/heldout/total": 12,
        "eval/heldout/parse_errors": 0,
        "eval/heldout/by_kind/call/exact_match": 0.0,
        "epoch": 0.0,
    }
    assert eval_line(0, 16, logs) == (
        "eval step 0/16  heldout (12 items)  exact_match 0.083  name_accuracy 0.250  valid_call_rate 0.500  "
        "parse_errors 0"
    )


def test_the_verbose_flag_is_taken_out_and_sets_the_environment(monkeypatch):
    monkeypatch.delenv(VERBOSE_ENV, raising=False)
    assert take_verbose_flag(["train", "recipe=tiny"]) == ["train", "recipe=tiny"]
    assert VERBOSE_ENV not in os.environ
    assert take_verbose_flag(["--verbose", "train", "recipe=tiny", "--", "--verbose"]) == [
        "train",
        "recipe=tiny",
        "--",
        "--verbose",
    ]
    assert os.environ[VERBOSE_ENV] == "1"  # torchrun's ranks inherit it


@pytest.fixture
def isolated_noise_settings(monkeypatch):
    """quiet_libraries changes process-wide state: warning filters, environment, logger filters. Undo it all."""
    for name in (*NOISE_ENV, VERBOSE_ENV):
        monkeypatch.delenv(name, raising=False)
    loggers = {name: list(logging.getLogger(name).filters) for name in ("DeepSpeed", "accelerate")}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught
    for name, filters in loggers.items():
        logging.getLogger(name).filters[:] = filters


def deprecated_training_argument(tmp_path) -> None:
    from transformers import TrainingArguments

    TrainingArguments(output_dir=str(tmp_path), gradient_checkpointing=False, report_to=[])


def future_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]


def test_a_known_library_warning_is_hidden_by_default(isolated_noise_settings, tmp_path):
    quiet_libraries()
    deprecated_training_argument(tmp_path)
    assert future_warnings(isolated_noise_settings) == []
    assert os.environ["TQDM_DISABLE"] == "1" and os.environ["TRANSFORMERS_VERBOSITY"] == "error"
    deepspeed = logging.getLogger("DeepSpeed")
    assert not deepspeed.filter(
        deepspeed.makeRecord("DeepSpeed", logging.WARNING, "x", 1, "Setting accelerator to CPU", (), None)
    )
    assert deepspeed.filter(deepspeed.makeRecord("DeepSpeed", logging.ERROR, "x", 1, "a real error", (), None))


def test_tooltrain_verbose_shows_it(isolated_noise_settings, tmp_path, monkeypatch):
    monkeypatch.setenv(VERBOSE_ENV, "1")
    quiet_libraries()
    deprecated_training_argument(tmp_path)
    assert future_warnings(isolated_noise_settings) == [
        "`gradient_checkpointing` is deprecated and will be removed in v6. Use `activation_checkpointing` instead."
    ]
    assert "TQDM_DISABLE" not in os.environ


STEP = re.compile(r"^step (\d+)/2  loss \d+\.\d{4}  lr \d\.\de[-+]\d\d  tok/s \d+(  eta \d+ s)?$")


def test_a_training_run_prints_step_lines_and_no_library_noise(engine, tmp_path):
    out = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "train",
        "train",
        "recipe=tiny",
        "data.sources.0.limit=16",
        "data.max_seq_len=384",
        "train.max_steps=2",
        "train.save_steps=2",
        f"output_dir={out}",
    ]
    # (WANDB_MODE, set by conftest, makes transformers print a line when it is imported)
    env = {key: value for key, value in engine.env.items() if key not in (*NOISE_ENV, VERBOSE_ENV, "WANDB_MODE")}
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    lines = result.stdout.splitlines()
    assert [int(STEP.match(line).group(1)) for line in lines if STEP.match(line)] == [1, 2]
    assert not any(line.lstrip().startswith("{") for line in lines)  # no dicts of strings
    assert lines[0].startswith("tooltrain: tiny on 1 rank(s)")  # nothing printed before tooltrain's own first line
    assert result.stderr == ""  # no warnings, no progress bars
