"""The signals that stop a training run cleanly, and the exit codes that say how it stopped.

A module of its own, without torch or transformers, so the entry point can install ``EarlySignals``
before its slow imports: a signal during them is then recorded, not fatal.
"""

from __future__ import annotations

import signal

# EX_TEMPFAIL: "try again later". launch/slurm/train.sbatch requeues the job on this code.
REQUEUE_EXIT_CODE = 75
# 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C: never requeued.
INTERRUPT_EXIT_CODE = 128 + signal.SIGINT

# SIGTERM: Slurm's preemption and scancel, torchrun's shutdown. SIGUSR1: launch/slurm/train.sbatch's time-limit
# warning (--signal=B:USR1@N, forwarded to the ranks). SIGUSR2: what submitit asks Slurm to send before the time
# limit (--signal=USR2@signal_delay_s) in `-m launcher=slurm` sweeps, and what its job._interrupt() sends.
PREEMPTION_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)
# Ctrl-C: saves like a preemption once training runs, but ends with INTERRUPT_EXIT_CODE, not a requeue. Before
# training (imports, data, model) it stops at once: there is nothing to save yet.
INTERRUPT_SIGNALS = (signal.SIGINT,)


class EarlySignals:
    """Records the preemption signals and Ctrl-C from the moment the entry point starts, before ``Preemption``
    exists; ``stop_if_interrupted`` acts on a Ctrl-C between setup stages.

    SIGUSR1's and SIGUSR2's default action ends the process: a scheduler's warning during imports or
    setup would otherwise kill the run instead of letting it checkpoint at its first step.
    """

    received: int | None = None  # the signal number

    @classmethod
    def install(cls, signals: tuple[int, ...] = PREEMPTION_SIGNALS + INTERRUPT_SIGNALS) -> None:
        cls.received = None  # a fresh entry (one process may run several, in tests) starts with nothing recorded
        for sig in signals:
            signal.signal(sig, cls._record)

    @classmethod
    def _record(cls, signum, frame) -> None:
        if signum in INTERRUPT_SIGNALS and cls.received in INTERRUPT_SIGNALS:
            raise KeyboardInterrupt  # Ctrl-C twice: stop now, wherever setup is
        cls.received = signum

    @classmethod
    def stop_if_interrupted(cls) -> None:
        """Ctrl-C during setup ends the run here, between stages, as one ``KeyboardInterrupt`` the entry point
        reports. Raised from the handler instead, it could land inside a library that catches it (an import, a
        lock, a loader) and be lost: the run then trained on, ignoring the Ctrl-C."""
        if cls.received in INTERRUPT_SIGNALS:
            raise KeyboardInterrupt
