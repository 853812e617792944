"""An ordered, bounded parallel map over worker processes: results come back in input order, and at most
``window`` items are in flight, so a stream of any length is mapped in bounded memory.

Workers are forked: the function each one runs is made by ``make()`` inside the worker (a tokenizer, a chat
format), inherited rather than pickled; only the items and the results cross the process boundary. With one
worker, or fewer than two items, everything runs in this process with the same function, so the results cannot
depend on the number of workers unless the function itself does.
"""

from __future__ import annotations

import itertools
import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

# The function of this worker process: set once by the pool's initializer, read by each task. Only ever set in a
# forked worker, never in the process that calls ordered_map.
_WORKER: Callable[[Any], Any] | None = None


def _start(make: Callable[[], Callable[[Any], Any]]) -> None:
    global _WORKER
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
    try:
        for item in itertools.chain(head, iterator):
            pending.append((item, pool.submit(_call, payload(item))))
            if len(pending) >= window:
                done, future = pending.popleft()
                yield done, future.result()
        while pending:
            done, future = pending.popleft()
            yield done, future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
