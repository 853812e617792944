"""Output files of the CLI verbs: opened with their folders created, or one clear error naming the path.

A verb that cannot write where it was told (``-o /proc/nope/x.jsonl``, a read-only folder, a path
that is a directory) raises ``OutputError``; ``train.cli`` prints it as ``error: ...`` and exits 2,
the same as for an unreadable input. Verbs open (or create the folder of) their outputs before
they read their inputs, so a bad path costs nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any


class OutputError(Exception):
    """An output path that cannot be written; the message names it and says why."""


def make_folder(folder: Path, for_path: Path | None = None) -> None:
    """``folder`` and its parents, or an ``OutputError``."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        target = f" for {for_path}" if for_path is not None else ""
        raise OutputError(f"cannot create the folder {folder}{target}: {_reason(err, folder)}") from None


def open_output(path: Path, mode: str = "w", **kwargs: Any) -> IO:
    """``path`` opened for writing (its folder created first), or an ``OutputError`` naming it."""
    make_folder(path.parent, path)
    try:
        return path.open(mode, **kwargs)
    except OSError as err:
        raise OutputError(f"cannot write {path}: {_reason(err, path)}") from None


def _reason(err: OSError, shown: Path) -> str:
    """The OS's reason, and the path it failed on when that is not the one the message names."""
    if err.strerror and err.filename is not None and str(err.filename) != str(shown):
        return f"{err.strerror} ({err.filename})"
    return err.strerror or str(err)


def write_results(rows_path: Path | None, rows: Any, report_path: Path | None, report: dict[str, Any]) -> int:
    """The eval verbs' optional outputs: ``rows`` as JSON Lines, ``report`` as indented JSON.

    Returns the verb's exit code: 0, or 2 after one ``error: cannot write ...`` line (the scores were
    already printed, so a bad output path loses no work the user has not seen).
    """
    import json
    import sys

    try:
        if rows_path:
            rows_path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
        if report_path:
            report_path.write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    except OSError as err:
        print(f"error: cannot write {err.filename}: {err.strerror or err}", file=sys.stderr)
        return 2
    return 0
