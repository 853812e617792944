"""Results built once per pytest run and shared by all its xdist workers (on pytest's pythonpath:
``from session_cache import build_once``): a 2-rank training run, a reference run, a cache folder."""

from __future__ import annotations

import os
import shutil
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def session_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder this pytest run owns and all of its xdist workers share: the parent of the workers' own
    basetemps (popen-gw0, popen-gw1, ...); without xdist, the basetemp itself. Never shared with another
    pytest run, so nothing built here outlives the code that built it."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def build_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """SESSION_FOLDER/NAME, filled by ``build(folder)`` in exactly one process of this pytest run.

    The first worker to take the lock builds; the others wait on it and then read the folder. A build
    that fails is not retried by every other worker (a failing 2-rank run would cost minutes each): they
    fail at once with the first worker's error."""
    from filelock import FileLock

    root = session_folder(tmp_path_factory)
    folder, done, failed = root / name, root / f"{name}.done", root / f"{name}.failed"
    with FileLock(str(root / f"{name}.lock")):
        if failed.exists():
            pytest.fail(f"building {name} failed in another worker:\n{failed.read_text()}", pytrace=False)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            try:
                build(folder)
            except BaseException:
                failed.write_text(traceback.format_exc())
                raise
            done.touch()
    return folder


_TOKENIZERS: dict[str, Any] = {}


def shared_tokenizer(name: str) -> Any:
    """This process's one object of the tokenizer the package builds for NAME (from the session's cache: the
    ``built_tokenizer`` fixture), for tests that only read it: encode, decode, look up ids, tokenize a format.

    Each load of a 128k-200k vocabulary costs 2-3 s, and the byte path's first use of a new object (its definition
    serialised and hashed, train/formats/byte_bpe.py) 2 s more: paid once per worker, not once per module. A test
    that changes a tokenizer (adds tokens, sets a chat template) or needs a fresh object calls load_tokenizer."""
    if name not in _TOKENIZERS:
        from train.tokenizers import load_tokenizer

        _TOKENIZERS[name] = load_tokenizer(name)
    return _TOKENIZERS[name]
