"""Hydra entry point for ``tooltrain train`` and ``python -m train train``: thin, calls ``run(cfg)``."""

from __future__ import annotations

import sys
import time

import hydra
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from train.callbacks import REQUEUE_EXIT_CODE, EarlySignals
from train.config import CONF_DIR, ConfigError, check, register

_exit_code = 0
_imported = time.time()


def seconds_since_start() -> float:
    """Wall time since this process started (interpreter and imports included), for the summary."""
    try:
        import psutil  # installed with accelerate

        return time.time() - psutil.Process().create_time()
    except Exception:  # noqa: BLE001 - no psutil or no /proc: from when this module was imported
        return time.time() - _imported


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="train")
def _main(cfg: DictConfig) -> None:
    global _exit_code
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from train.distributed import StrategyError, World, requeue_submitit_job
    from train.run import run
    from train.summary import format_summary

    try:
        check(cfg)
    except ConfigError as err:
        _fail(err)
        return
    if HydraConfig.get().mode == RunMode.MULTIRUN:
        # each job of a sweep gets its own run directory (and so its own checkpoints)
        cfg.output_dir = HydraConfig.get().runtime.output_dir
    try:
        result = run(cfg)
    except StrategyError as err:  # a bad distributed choice for this hardware: a message, not a traceback
        _fail(err)
        return
    if World.from_env().is_main:
        print(format_summary(result.summary, result.losses, result.output_dir, seconds_since_start()), flush=True)
    # saved and stopped by a signal: a sweep job hands it back to submitit, which requeues it and ends this
    # process; otherwise the exit code asks the scheduler script (launch/slurm/train.sbatch) to requeue.
    if result.status == "preempted" and not requeue_submitit_job(result.stop_signal):
        _exit_code = REQUEUE_EXIT_CODE


class CheckBeforeLaunch(Callback):
    """``-m`` sweeps: check the config once before the launcher starts or queues any job (conf/train.yaml
    names it in hydra.callbacks), so a bad combination fails at once, not in every job of the sweep."""

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        try:
            check(config)
        except ConfigError as err:
            _fail(err)
            sys.exit(_exit_code)


def _fail(err: Exception) -> None:
    global _exit_code
    print(f"error: {err}", file=sys.stderr)
    _exit_code = 2


def hydra_main(overrides: list[str]) -> int:
    EarlySignals.install()
    register()
    sys.argv = ["tooltrain train", *overrides]
    _main()
    return _exit_code
