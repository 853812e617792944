"""Hydra entry point for ``tooltrain train`` and ``python -m train train``: thin, calls ``run(cfg)``.

Exit codes, each failure one ``error:`` line on stderr (never a traceback for what the user can fix):
  0    trained, or nothing to do (the run in output_dir is complete)
  1    a save could not be written (disk full, quota, file size limit, read-only file system); the last
       complete checkpoint stays, and the same command resumes from it once there is room
  2    what the command was given cannot run: the config, an input, an output_dir that is a file or in use
       by another run, a resume with changed settings its checkpoint cannot take, a strategy the hardware
       cannot run
  75   stopped by a preemption signal after saving a checkpoint: requeue (REQUEUE_EXIT_CODE)
  130  Ctrl-C: after saving a checkpoint when training had started (INTERRUPT_EXIT_CODE)

Only light modules are imported here: the config, the run folder and the inputs are checked (in
``CheckBeforeLaunch.on_run_start``, before Hydra writes into output_dir) before torch and transformers load.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import hydra
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from train.engine.checkpoints import completed_run
from train.engine.config import CONF_DIR, ConfigError, check, register
from train.engine.model_folder import apply_model_folder
from train.engine.overrides import override_problem
from train.engine.run_dir import (
    RunSetupError,
    check_inputs,
    check_output_dir,
    claim_run_dir,
    kept_checkpoint_hint,
    release_all,
    write_failure_message,
    write_failure_reason,
)
from train.engine.signals import INTERRUPT_EXIT_CODE, INTERRUPT_SIGNALS, REQUEUE_EXIT_CODE, EarlySignals

USER_ERROR_EXIT_CODE = 2
WRITE_FAILED_EXIT_CODE = 1

_exit_code = 0
_output_dir: Path | None = None  # the run's folder once known: what a Ctrl-C reports as kept
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
    global _exit_code, _output_dir
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    try:
        apply_model_folder(cfg, list(HydraConfig.get().overrides.task))
        check(cfg)
    except ConfigError as err:
        _fail(err)
        return
    if HydraConfig.get().mode == RunMode.MULTIRUN:
        # each job of a sweep gets its own run directory (and so its own checkpoints)
        cfg.output_dir = HydraConfig.get().runtime.output_dir
    _output_dir = Path(cfg.output_dir)

    from train.engine.distributed import StrategyError, World, requeue_submitit_job
    from train.engine.run import run
    from train.engine.summary import format_summary
    from train.sources import SourceError
    from train.teacher import TeacherUnavailable

    world = World.from_env()
    job = evaluation_job(cfg)
    try:
        result = (job or run)(cfg)
    except (ConfigError, StrategyError, RunSetupError, SourceError, TeacherUnavailable) as err:  # a message
        _fail(err)
        return
    except Exception as err:
        failure = write_failure_reason(err)
        if failure is None:
            raise
        started = time.time() - seconds_since_start()
        _fail(
            write_failure_message(_output_dir, *failure, remove_partial=world.is_main, since=started),
            WRITE_FAILED_EXIT_CODE,
            mid_line=True,
        )
        return
    if world.is_main and job is None:  # an evaluation-only job printed its own table
        print(format_summary(result.summary, result.losses, result.output_dir, seconds_since_start()), flush=True)
    if result.status != "preempted":
        return
    if result.stop_signal in INTERRUPT_SIGNALS:
        _fail(
            f"interrupted (Ctrl-C) after step {result.global_step}: {kept_checkpoint_hint(_output_dir)}",
            INTERRUPT_EXIT_CODE,
        )
    # saved and stopped by a signal: a sweep job hands it back to submitit, which requeues it and ends this
    # process; otherwise the exit code asks the scheduler script (launch/slurm/train.sbatch) to requeue.
    elif not requeue_submitit_job(result.stop_signal):
        _exit_code = REQUEUE_EXIT_CODE


def evaluation_job(cfg: DictConfig) -> Any:
    """The evaluation-only job of a paper whose node ``cfg`` sets (``PaperSpec.job``: it trains nothing and
    replaces training), or None: then ``tooltrain train`` trains."""
    from train.papers import active

    jobs = [spec.job for _, spec in active(cfg) if spec.job is not None]
    return jobs[0] if jobs else None


def start(cfg: DictConfig) -> Any:
    """What ``tooltrain train`` does with a composed config: a paper's evaluation-only job when the config sets
    one (``evaluation_job``), else one training run. Returns the ``RunResult``."""
    from train.engine.run import run

    return (evaluation_job(cfg) or run)(cfg)


class CheckBeforeLaunch(Callback):
    """Checks before anything runs (conf/train.yaml names it in hydra.callbacks).

    ``-m`` sweeps: the config, once, before the launcher starts or queues any job, so a bad combination
    fails at once, not in every job of the sweep. A single run: the config, output_dir and the inputs,
    then the lock on output_dir and the resume check, before Hydra creates output_dir and writes its
    ``.hydra`` record there: a refused run leaves the folder (maybe another run's) as it was.
    """

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        try:
            apply_model_folder(config, _overrides(config, sweeps=False))  # each job applies its own sweep point
            check(config)
        except ConfigError as err:
            _fail(err)
            sys.exit(_exit_code)

    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        global _output_dir
        try:
            apply_model_folder(config, _overrides(config))
            check(config)
            _output_dir = out = Path(config.output_dir)
            check_output_dir(out)
            from train.engine.distributed import World
            from train.engine.resume_config import check_rerun, check_resume

            world = World.from_env()
            if completed_run(out) is not None:
                check_rerun(out, config, world)  # another run's settings: refused before Hydra writes into it
                return  # nothing will run: run() says so
            check_inputs(config)
            claim_run_dir(out, world)
            check_resume(out, config, world)
        except (ConfigError, RunSetupError) as err:
            _fail(err)
            sys.exit(_exit_code)


def _overrides(config: DictConfig, sweeps: bool = True) -> list[str]:
    """The command line's overrides, as the config Hydra's callbacks see holds them; ``sweeps=False``: without the
    swept ones (``model.path=a,b``), which a sweep's own config does not hold yet."""
    overrides = list(config.hydra.overrides.task)
    if sweeps:
        return overrides
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return [o.input_line for o in OverridesParser.create().parse_overrides(overrides) if not o.is_sweep_override()]


def _fail(err: Exception | str, code: int = USER_ERROR_EXIT_CODE, mid_line: bool = False) -> None:
    """``mid_line``: training was under way, and its progress bar may have left the line open."""
    global _exit_code
    print(("\n" if mid_line else "") + f"error: {err}", file=sys.stderr, flush=True)
    _exit_code = code


def hydra_main(overrides: list[str]) -> int:
    EarlySignals.install()
    register()
    problem = override_problem("train", overrides)  # Hydra's own report is several lines and no error:
    if problem:
        _fail(problem)
        return _exit_code
    sys.argv = ["tooltrain train", *overrides]
    try:
        _main()
    except KeyboardInterrupt:  # Ctrl-C before training started, or twice: Preemption saves on the first
        kept = f": {kept_checkpoint_hint(_output_dir)}" if _output_dir is not None else ""
        _fail(f"interrupted (Ctrl-C){kept}", INTERRUPT_EXIT_CODE, mid_line=True)
        return _exit_code
    finally:
        release_all()
    return _exit_code
