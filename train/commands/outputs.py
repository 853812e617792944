"""Output files of the CLI verbs: the one way a verb writes a file, so that no verb destroys one.

* **Nothing is overwritten in place.** ``Outputs`` writes each file to a hidden temporary file beside
  it (``.NAME.tmp-XXXX``) and renames every one into place (``os.replace`` after flush and fsync)
  only when the verb's ``with`` block ends without an exception. On an exception, an interrupt or
  ``discard()`` the temporary files are removed and every previous output stays as it was.
* **An output is never an input.** An output (or a side file such as OUT.rejects.jsonl) that is the
  same file as an input - the same path written another way, a hard link, a symlink - or as
  another output, or that lies inside an input folder (``--data DIR``, a run directory), is refused
  before anything is opened.
* **Devices and stdout are written directly** (they cannot be renamed onto): ``-o /dev/null``,
  ``-o /dev/full``, a FIFO, and ``-o -`` for standard output. ``side_file`` places no side files
  next to them (nothing is created in /dev); a verb asks for an explicit path instead.

Every failure is an ``OutputError`` whose message names the path and the OS's reason
(``cannot write /dev/full: No space left on device``); ``train.cli`` prints it as ``error: ...``
and exits 2, the same as for an unreadable input. Verbs create their ``Outputs`` before they read
their inputs, so a bad path costs nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import secrets
import stat
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

STDOUT = "-"


class OutputError(Exception):
    """An output path that cannot be written; the message names it and says why."""


def output_path(text: str) -> Path:
    """argparse ``type=`` of an output path: ``''`` is refused (it would mean the current folder)."""
    if not text:
        raise argparse.ArgumentTypeError("an output path cannot be empty")
    return Path(text)


def output_file(text: str) -> Path:
    """argparse ``type=`` of an output that must be a file: also refuses ``-`` (stdout holds the report)."""
    if text == STDOUT:
        raise argparse.ArgumentTypeError(
            "'-' (stdout) is not supported here: stdout holds the report; give a file path"
        )
    return output_path(text)


def is_stdout(path: Path | str) -> bool:
    return str(path) == STDOUT


def written_in_place(path: Path) -> bool:
    """stdout, or an existing path that is neither a regular file nor a folder (a device, a FIFO)."""
    if is_stdout(path):
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def side_file(output: Path, suffix: str, given: Path | None = None) -> Path | None:
    """OUT.jsonl -> OUT.<suffix>.jsonl, or ``given`` when the user named one.

    None beside stdout or a device: there is no folder of the user's to put it in (``-o /dev/null``
    must not create ``/dev/null.rejects.jsonl``), so such a side file needs an explicit path.
    """
    if given is not None:
        return given
    if written_in_place(output):
        return None
    return sibling(output, suffix)


def sibling(path: Path, suffix: str) -> Path:
    """OUT.jsonl -> OUT.<suffix>.jsonl"""
    return path.with_name(f"{path.name.removesuffix('.jsonl')}.{suffix}.jsonl")


def make_folder(folder: Path, for_path: Path | None = None) -> None:
    """``folder`` and its parents, or an ``OutputError``."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        target = f" for {for_path}" if for_path is not None else ""
        raise OutputError(f"cannot create the folder {folder}{target}: {_reason(err, folder)}") from None


def _reason(err: OSError, shown: Path) -> str:
    """The OS's reason, and the path it failed on when that is not the one the message names."""
    if err.strerror and err.filename is not None and str(err.filename) != str(shown):
        return f"{err.strerror} ({err.filename})"
    return err.strerror or str(err)


# ---------------------------------------------------------------- outputs against inputs


def _regular_file_id(path: Path) -> tuple[int, int] | None:
    """(device, inode) of an existing regular file (links followed); None for anything else."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def _input_folders(inputs: Iterable[Path]) -> list[tuple[str, Path]]:
    """(resolved path, as given) of every input that is a folder (a data folder, a run directory)."""
    folders = []
    for path in inputs:
        with contextlib.suppress(OSError, ValueError):
            if path.is_dir():
                folders.append((os.path.realpath(path), path))
    return folders


def inside_folder(path: Path | str, folder: str) -> bool:
    """``path`` (resolved, links followed) is ``folder`` or lies somewhere below it."""
    resolved = os.path.realpath(path)
    return resolved == folder or resolved.startswith(folder.rstrip(os.sep) + os.sep)


def check_outputs(outputs: Iterable[Path | None], inputs: Iterable[Path | None] = ()) -> None:
    """An ``OutputError`` when an output is the same file as an input, lies inside an input folder, or two
    outputs are one file.

    Files are compared by (device, inode), so ``./x`` and ``../dir/x``, hard links and symlinks are
    caught; outputs that do not exist yet by their resolved path. An input folder (``--data DIR``, a
    run directory) holds inputs a verb may read by name, so nothing is written anywhere inside it.
    Devices and stdout are never "the same file" as anything (two outputs may both be /dev/null).
    """
    inputs = [path for path in inputs if path is not None]
    input_ids = {}
    for path in inputs:
        file_id = _regular_file_id(path)
        if file_id is not None:
            input_ids.setdefault(file_id, path)
    folders = _input_folders(inputs)
    seen: dict[Any, Path] = {}
    for path in outputs:
        if path is None or written_in_place(path):
            continue
        file_id = _regular_file_id(path)
        if file_id in input_ids:
            raise OutputError(f"refusing to write {path}: it is the input {input_ids[file_id]} (the same file)")
        for resolved, given in folders:
            if inside_folder(path, resolved):
                raise OutputError(
                    f"refusing to write {path}: it is inside the input folder {given}; write it outside that folder"
                )
        placement = _placement_problem(path)
        if placement:
            raise OutputError(placement)
        key = file_id or os.path.realpath(path)
        if key in seen:
            twice = "" if str(seen[key]) == str(path) else f" (also given as {seen[key]})"
            raise OutputError(f"refusing to write {path} twice{twice}")
        seen[key] = path


def _placement_problem(path: Path) -> str | None:
    """Why ``path`` could never be written, seen without creating anything: it is a folder, or the nearest
    existing folder above it is a file. Found before the work (a model's generation, a build), not after it."""
    if path.is_dir():
        return f"cannot write {path}: {os.strerror(errno.EISDIR)}"
    from train.engine.run_dir import nearest_existing

    ancestor = nearest_existing(path.parent)
    if ancestor.exists() and not ancestor.is_dir():
        what = "it is a file" if ancestor == path.parent else f"{ancestor} is a file"
        return f"cannot create the folder {path.parent} for {path}: {what}, not a folder"
    return None


# ---------------------------------------------------------------- staged writing


class OutputFile:
    """One output being written: ``write`` takes str (encoded here) or bytes; errors name the path."""

    def __init__(
        self, shown: Path, handle: IO[bytes], encoding: str | None, temporary: Path | None, owned: bool = True
    ):
        self.shown = shown  # the path the user gave: every message names it
        self.handle = handle
        self.encoding = encoding
        self.temporary = temporary  # None: written in place (stdout, a device)
        self.owned = owned  # False for stdout: flushed, never closed

    def write(self, data: str | bytes) -> None:
        if self.encoding is not None:
            data = data.encode(self.encoding)  # UnicodeEncodeError is the caller's: it is about the data
        try:
            self.handle.write(data)
        except OSError as err:
            raise self.error(err) from None

    def error(self, err: OSError) -> Exception:
        if isinstance(err, BrokenPipeError) and not self.owned:
            return err  # `-o - | head`: the reader left; train.cli ends quietly
        return OutputError(f"cannot write {self.shown}: {err.strerror or err}")

    def finish(self) -> None:
        """Everything on disk (fsync), the handle closed; stdout is flushed and left open."""
        try:
            self.handle.flush()
            if self.temporary is not None:
                os.fsync(self.handle.fileno())
        except OSError as err:
            raise self.error(err) from None
        finally:
            self.close()

    def close(self) -> None:
        if not self.owned:
            return
        with contextlib.suppress(OSError):  # a flush that failed fails again here; it was reported
            self.handle.close()


class Outputs:
    """The outputs of one verb run, committed together or not at all.

    ``with Outputs([out, rejects], inputs=[inp]) as outputs: fh = outputs.open(out, "w")`` - the
    constructor checks every declared output against the inputs and creates their folders; ``open``
    starts a temporary file (or opens a device or stdout directly). Leaving the block normally
    renames every temporary file onto its path; an exception (``OutputError``, a ``SourceError``,
    Ctrl-C) or ``discard()`` removes them instead and the exception goes on.
    """

    def __init__(self, outputs: Iterable[Path | None], inputs: Iterable[Path | None] = ()):
        self.inputs = [p for p in inputs if p is not None]
        self.declared = [p for p in outputs if p is not None]
        check_outputs(self.declared, self.inputs)
        for path in self.declared:
            if not written_in_place(path):
                self._check_writable_place(path)
        self.files: list[tuple[Path, OutputFile]] = []  # (final path, file)
        self.done = False

    @staticmethod
    def _check_writable_place(path: Path) -> None:
        make_folder(path.parent, path)
        if path.is_dir():
            raise OutputError(f"cannot write {path}: {os.strerror(errno.EISDIR)}")

    def open(self, path: Path, mode: str = "w", encoding: str = "utf-8") -> OutputFile:
        """``path`` for writing: ``mode`` "w" (text, ``encoding``) or "wb" (bytes)."""
        if path not in self.declared:  # a side file decided late: the same checks
            check_outputs([*self.declared, path], self.inputs)
            self.declared.append(path)
            if not written_in_place(path):
                self._check_writable_place(path)
        text_encoding = None if "b" in mode else encoding
        if is_stdout(path):
            sys.stdout.flush()  # whatever was printed before comes first
            file = OutputFile(path, sys.stdout.buffer, text_encoding, None, owned=False)
            self.files.append((path, file))
            return file
        if written_in_place(path):
            try:
                handle = open(path, "wb")  # noqa: SIM115 - closed by finish() or discard()
            except OSError as err:
                raise OutputError(f"cannot write {path}: {_reason(err, path)}") from None
            file = OutputFile(path, handle, text_encoding, None)
            self.files.append((path, file))
            return file
        final = Path(os.path.realpath(path))  # through a symlink: the link stays, its target is replaced
        temporary = final.with_name(f".{final.name}.tmp-{secrets.token_hex(4)}")
        try:
            # 0o666 less the umask, as a plain open() would create it
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except OSError as err:
            raise OutputError(f"cannot write {path}: {_reason(err, temporary)}") from None
        with contextlib.suppress(OSError):  # a file replaced keeps its permissions
            os.chmod(fd, stat.S_IMODE(os.stat(final).st_mode))
        file = OutputFile(path, os.fdopen(fd, "wb"), text_encoding, temporary)
        self.files.append((final, file))
        return file

    def commit(self) -> None:
        """Every file flushed and synced, then each renamed onto its path."""
        if self.done:
            return
        try:
            for _, file in self.files:
                file.finish()
            for final, file in self.files:
                if file.temporary is not None:
                    try:
                        os.replace(file.temporary, final)
                    except OSError as err:
                        raise OutputError(f"cannot write {file.shown}: {_reason(err, final)}") from None
                    file.temporary = None
        except BaseException:
            self.discard()
            raise
        for folder in {final.parent for final, _ in self.files}:
            _sync_folder(folder)  # the renames themselves survive a crash
        self.done = True

    def discard(self) -> None:
        """Every temporary file removed; outputs that existed before are untouched."""
        for _, file in self.files:
            file.close()
            if file.temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(file.temporary)
        self.done = True

    def __enter__(self) -> Outputs:  # noqa: PYI034 - not subclassed
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()


def _sync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def open_output(
    path: Path, mode: str = "w", inputs: Iterable[Path] = (), encoding: str = "utf-8"
) -> Iterator[OutputFile]:
    """One output on its own: ``with open_output(path) as fh: fh.write(...)``, staged like ``Outputs``."""
    with Outputs([path], inputs) as outputs:
        yield outputs.open(path, mode, encoding)


def write_results(
    rows_path: Path | None,
    rows: Any,
    report_path: Path | None,
    report: dict[str, Any],
    inputs: Iterable[Path | None] = (),
) -> int:
    """The eval verbs' optional outputs: ``rows`` as JSON Lines, ``report`` as indented JSON.

    Returns the verb's exit code: 0, or 2 after one ``error: ...`` line (the scores were already
    printed, so a bad output path loses no work the user has not seen). Both files are written, or
    neither. Verbs call ``check_outputs`` with the same paths before their work, so an output that
    is an input is refused before any scoring.
    """
    import json

    try:
        with Outputs([rows_path, report_path], inputs) as outputs:
            if rows_path:
                fh = outputs.open(rows_path)
                for row in rows:
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            if report_path:
                outputs.open(report_path).write(json.dumps(report, ensure_ascii=False, indent=2) + "\n")
    except OutputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


class RenamedOption(argparse.Action):
    """An old spelling of an option, kept only to name the new one: ``-o`` always names a file and ``--out-dir``
    a folder, in every verb. Using it is an argparse error (one ``error:`` line, exit 2)."""

    def __init__(self, option_strings: list[str], dest: str, new: str = "", **kwargs: Any):
        super().__init__(
            option_strings, dest=argparse.SUPPRESS, nargs="?", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        self.new = new

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        parser.error(f"{option_string} is now {self.new} (-o always names a file, --out-dir a folder)")


def add_out_dir(parser: argparse.ArgumentParser, *old: str, **kwargs: Any) -> None:
    """``--out-dir`` (a folder), and the ``old`` spellings a user may still type, each refused with the new one."""
    parser.add_argument("--out-dir", type=output_path, metavar="DIR", **kwargs)
    if old:
        parser.add_argument(*old, action=RenamedOption, new="--out-dir")
