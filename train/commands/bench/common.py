"""What ``bench render`` and ``bench data`` share (a verb never imports another): the refusal of a file that is not
one to read, the error when nothing is left to time, and the table that prints rates. The rates themselves are
measured in ``train.data.bench_render``."""

from __future__ import annotations

from pathlib import Path

from train.data.bench_render import Rate


def file_problem(path: Path) -> str | None:
    """Why ``path`` is no conversations file to read, or None: the readers' own check (``input_problem``), so a
    FIFO or a device is refused before it is opened (reading one could wait, or run, for ever)."""
    from train.base.records import input_problem

    problem = input_problem(path)
    if problem is None:
        return None
    hint = "" if problem == "no such file" else "; expected a JSON Lines file of canonical conversations"
    return f"{path}: {problem}{hint}"


def nothing_to_time(files: str, read: int, unreadable: int, left_out: int) -> str:
    """The error when no conversation is left to benchmark: a rate over nothing means nothing."""
    return (
        f"no conversation to benchmark in {files}: {read} read, {unreadable} unreadable lines, "
        f"{left_out} that a path cannot render; expected canonical conversations (JSON Lines)"
    )


def table(rates: list[Rate]) -> str:
    rows = [("path", "conversations", "tokens", "conv/s", "tokens/s")]
    for r in rates:
        tokens_per_second = f"{r.tokens / r.seconds:.0f}" if r.seconds else "inf"
        rows.append((r.path, str(r.conversations), str(r.tokens), f"{r.per_second:.1f}", tokens_per_second))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    # the path column is text (left-aligned), the numbers right-aligned
    return "\n".join(
        row[0].ljust(widths[0]) + "".join(f"  {cell.rjust(w)}" for cell, w in zip(row[1:], widths[1:])) for row in rows
    )
