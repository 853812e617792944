"""Progress bars for long loops: on a terminal they draw on stderr, in logs and CI they stay silent."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")


def progress(
    items: Iterable[T], desc: str, unit: str = "it", total: int | None = None, postfix: Callable[[], str] | None = None
) -> Iterator[T]:
    """``postfix()``, when given, is shown after the rate (e.g. an accept rate), refreshed every 64 items."""
    # disable=None lets tqdm switch itself off when stderr is not a terminal.
    bar = tqdm(items, desc=desc, unit=unit, total=total, disable=None, leave=False, dynamic_ncols=True)
    if postfix is None or bar.disable:
        yield from bar
        return
    for count, item in enumerate(bar):
        if count % 64 == 0:
            bar.set_postfix_str(postfix(), refresh=False)
        yield item
