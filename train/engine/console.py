"""What ``tooltrain`` prints while it trains: its own lines, not the libraries' noise.

Two jobs, decided here once:

* ``quiet_libraries()``: the deprecation warnings, log lines and progress bars that transformers, torch,
  deepspeed, accelerate and peft print on every run (``KNOWN_WARNINGS``; DeepSpeed's "Setting accelerator
  to CPU"; transformers' info/warning logs; the GGUF de-quantization and weight-loading bars) are
  nothing a user can act on, so they are hidden by default. ``--verbose`` (``tooltrain --verbose train
  ...``) or ``TOOLTRAIN_VERBOSE=1`` shows them all again. Errors are never hidden.
* ``step_line`` and ``eval_line``: one line of formatted numbers per logged step (``step 4/16  loss 1.2031
  lr 2.0e-03  tok/s 101  eta 3 min 10 s``) and one per evaluation; ``train.engine.step_lines`` prints them on
  global rank 0 in place of the HF Trainer's progress bar and its dicts of strings.

Imports nothing heavy: ``tooltrain`` calls ``quiet_libraries`` before transformers is imported.
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any

VERBOSE_ENV = "TOOLTRAIN_VERBOSE"
VERBOSE_FLAGS = ("--verbose",)

# (category, message regex): warnings seen on every demo/tiny run that say nothing about the user's run.
# FutureWarning and DeprecationWarning from the libraries below are hidden whatever their text (they are
# about the libraries' own API); a UserWarning only when it is listed here (one may matter).
KNOWN_WARNINGS: tuple[tuple[type[Warning], str], ...] = (
    # transformers 5 renamed gradient_checkpointing; peft and the Trainer still use the old names
    (FutureWarning, r"`(is_)?gradient_checkpointing(_kwargs)?` is deprecated"),
    # peft, saving an adapter of a model built from a GGUF file (no config.json beside it)
    (UserWarning, r"Could not find a config file in .* - will assume that the vocabulary was not modified"),
    # torch.utils.checkpoint's reentrant default, and the CPU autocast notice
    (UserWarning, r"torch\.utils\.checkpoint: the use_reentrant parameter should be passed explicitly"),
    (UserWarning, r".*CUDA is not available.*Disabling"),
)
NOISY_MODULES = r"(transformers|torch|deepspeed|accelerate|peft|huggingface_hub)(\.|$)"
# logging.Logger names whose records below ERROR are noise on a normal run
NOISY_LOGGERS = ("DeepSpeed", "accelerate", "torch.distributed", "torch.distributed.elastic", "peft")


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def take_verbose_flag(argv: list[str]) -> list[str]:
    """``argv`` without ``--verbose`` (anywhere before ``--``); when it was there, TOOLTRAIN_VERBOSE=1 is set,
    so that processes this one starts (torchrun's ranks, a sweep's jobs) are verbose too."""
    end = argv.index("--") if "--" in argv else len(argv)
    kept = [arg for arg in argv[:end] if arg not in VERBOSE_FLAGS] + argv[end:]
    if len(kept) != len(argv):
        os.environ[VERBOSE_ENV] = "1"
    return kept


class _BelowError(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


def quiet_libraries() -> None:
    """Hide the libraries' known noise for the rest of this process (and the processes it starts); a no-op
    when verbose. Call it before importing transformers or deepspeed: some of them read the environment once."""
    if verbose():
        return
    for category in (FutureWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category, module=NOISY_MODULES)
    for category, message in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)
    # transformers' own logger and progress bars; tqdm bars that libraries draw without asking anyone
    # (GGUF de-quantization). tooltrain's own bars (train.base.progress) pass `disable` explicitly and stay.
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    # DeepSpeed's logger resets its level when it is created, but keeps a filter added beforehand
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _BelowError) for f in logger.filters):
            logger.addFilter(_BelowError())


# ---------------------------------------------------------------- per-step lines


def format_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def step_line(
    step: int, max_steps: int, logs: dict[str, Any], world_size: int = 1, eta_seconds: float | None = None
) -> str:
    """``step 4/16  loss 1.2031  lr 2.0e-03  tok/s 101  eta 3 min 10 s`` from one logged step's numbers.
    Several ranks: ``tok/s`` is rank 0's count times the world size (the ranks run the same batch shapes)."""
    parts = [f"step {step}/{max_steps}"]
    if isinstance(logs.get("loss"), (int, float)):
        parts.append(f"loss {logs['loss']:.4f}")
    if isinstance(logs.get("learning_rate"), (int, float)):
        parts.append(f"lr {logs['learning_rate']:.1e}")
    if isinstance(logs.get("tokens_per_s_per_device"), (int, float)):
        parts.append(f"tok/s {logs['tokens_per_s_per_device'] * world_size:.0f}")
    if isinstance(logs.get("mfu"), (int, float)):
        parts.append(f"mfu {logs['mfu']:.1%}")
    if eta_seconds is not None:
        parts.append(f"eta {format_duration(eta_seconds)}")
    return "  ".join(parts)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def eval_line(step: int, max_steps: int, logs: dict[str, Any]) -> str:
    """``eval step 0/16  heldout (12 items)  exact_match 0.083  name_accuracy 0.250  ...``: each benchmark's
    top-level numbers, rates to 3 decimals and counts as integers (sections such as ``by_kind`` stay in
    metrics.jsonl and the report)."""
    benches: dict[str, dict[str, Any]] = {}
    for key, value in logs.items():
        path = key.split("/")
        if len(path) == 3 and path[0] == "eval" and _number(value):
            benches.setdefault(path[1], {})[path[2]] = value
    sections = []
    for bench, metrics in benches.items():
        total = metrics.pop("total", None)
        metrics.pop("correct", None)  # a count the rate beside it already says
        head = bench if total is None else f"{bench} ({total:,} items)"
        shown = [
            f"{name} {value:.3f}" if isinstance(value, float) else f"{name} {value:,}"
            for name, value in metrics.items()
        ]
        sections.append("  ".join([head, *shown]))
    return f"eval step {step}/{max_steps}  " + "  |  ".join(sections)
