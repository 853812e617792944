"""An ordered, bounded parallel map over worker processes: results come back in input order, and at most
``window`` items are in flight, so a stream of any length is mapped in bounded memory.

Workers are forked: the function each one runs is made by ``make()`` inside the worker (a tokenizer, a chat
format), inherited rather than pickled; only the items and the results cross the process boundary. With one
worker, or fewer than two items, everything runs in this process with the same function, so the results cannot
depend on the number of workers unless the function itself does.

A worker that dies (the out-of-memory killer's SIGKILL, a crash in native code) ends the map with ``WorkerDied``
naming it (its number, pid and exit signal) within ``POLL_S`` seconds or so: the result being waited for is polled, and
between polls the workers' liveness is checked. Workers ignore the signals the training process handles itself
(Ctrl-C, preemption): they inherited its handlers, which only set a flag, so the executor's own ``terminate()``
(SIGTERM) did not end them and its shutdown waited for them forever. The map stops its workers with SIGKILL instead.
"""

from __future__ import annotations

import itertools
import multiprocessing
import multiprocessing.connection
import signal
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import Any

POLL_S = 0.5  # how often a wait for a result also checks that every worker is alive
STOP_S = 10.0  # how long stopping the workers may take (they are SIGKILLed: this is a bound, not a wait)
# signals the training process handles (train.engine.signals): its workers leave them to it
PARENT_HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)


class WorkerDied(RuntimeError):
    """A worker process of the map ended while the map ran; the message names it and how it ended."""


# The function of this worker process: set once by the pool's initializer, read by each task. Only ever set in a
# forked worker, never in the process that calls ordered_map.
_WORKER: Callable[[Any], Any] | None = None


def _start(make: Callable[[], Callable[[Any], Any]]) -> None:
    global _WORKER
    for signum in PARENT_HANDLED:
        signal.signal(signum, signal.SIG_IGN)
    _WORKER = make()


def _call(payload: Any) -> Any:
    assert _WORKER is not None, "ordered_pool: a task ran before its worker's initializer"
    return _WORKER(payload)


def ordered_map(
    make: Callable[[], Callable[[Any], Any]],
    items: Iterable[Any],
    workers: int,
    payload: Callable[[Any], Any] = lambda item: item,
    window: int | None = None,
) -> Iterator[tuple[Any, Any]]:
    """``(item, make()(payload(item)))`` for each item, in order, computed by ``workers`` processes."""
    iterator = iter(items)
    head = list(itertools.islice(iterator, 2))
    if workers <= 1 or len(head) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        work = make()
        for item in itertools.chain(head, iterator):
            yield item, work(payload(item))
        return
    window = window or 2 * workers
    pool = ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("fork"), initializer=_start, initargs=(make,)
    )
    pending: deque[tuple[Any, Future]] = deque()
    started: dict[int, Any] = {}  # pid -> Process: every worker the pool has started, in the order it did
    finished = False
    try:
        for item in itertools.chain(head, iterator):
            pending.append((item, pool.submit(_call, payload(item))))
            started.update(getattr(pool, "_processes", None) or {})  # CPython's pid -> Process map of its workers
            if len(pending) >= window:
                done, future = pending.popleft()
                yield done, _result(future, started)
        while pending:
            done, future = pending.popleft()
            yield done, _result(future, started)
        finished = True
    except BrokenProcessPool:  # submit() on a pool whose worker died
        raise WorkerDied(_dead(started, wait_s=2.0) or "a worker process ended abruptly") from None
    finally:
        _stop(pool, started, finished)


def _result(future: Future, workers: dict[int, Any]) -> Any:
    """The future's result, or ``WorkerDied`` as soon as a worker is found dead (a lost task never completes)."""
    while True:
        try:
            return future.result(timeout=POLL_S)
        except FutureTimeout:
            pass
        except BrokenProcessPool:
            raise WorkerDied(_dead(workers, wait_s=2.0) or "a worker process ended abruptly") from None
        dead = _dead(workers)
        if dead:
            raise WorkerDied(dead)


def _dead(workers: dict[int, Any], wait_s: float = 0.0) -> str | None:
    """'worker 2 of 4 (pid 123) was killed by SIGKILL' for the first worker that has ended, else None."""
    processes = list(workers.values())
    ended = multiprocessing.connection.wait([p.sentinel for p in processes], timeout=wait_s)
    for number, process in enumerate(processes, 1):
        if process.sentinel not in ended:
            continue
        code = None
        for _ in range(20):  # the exit status may still be on its way (the executor reaps workers too)
            code = process.exitcode
            if code is not None:
                break
            time.sleep(0.05)
        return f"worker {number} of {len(processes)} (pid {process.pid}) {_how(code)}"
    return None


def _how(code: int | None) -> str:
    if code is None:
        return "ended"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}" + (" (the out-of-memory killer sends it)" if -code == signal.SIGKILL else "")
    return f"exited with status {code}"


def _stop(pool: ProcessPoolExecutor, workers: dict[int, Any], finished: bool) -> None:
    """A finished map lets its idle workers exit; otherwise they are killed, so nothing waits on a lost task."""
    if finished:
        pool.shutdown(wait=True)
        return
    pool.shutdown(wait=False, cancel_futures=True)
    for process in workers.values():
        if process.exitcode is None:
            process.kill()
    deadline = time.monotonic() + STOP_S
    for process in workers.values():
        process.join(timeout=max(0.0, deadline - time.monotonic()))
