"""The built dataset on disk: memory-mapped columns of tokenized rows, written as a stream, read as slices.

Why numpy arrays with an offsets index rather than Arrow through ``datasets``:

* the rows are flat token sequences; one ``int32`` array of all tokens plus an ``int64`` offsets array gives every
  row as a zero-copy slice of a memory map, and the lengths packing needs are ``diff(offsets)``, with no per-row
  Python objects at all;
* the files are written as a stream (append bytes, one row at a time, in input order), so the build never holds the
  corpus, and the bytes depend only on the rows: an Arrow IPC file also carries record-batch boundaries and schema
  metadata, which is more to keep identical between a 1-worker and an N-worker build;
* every rank maps the same files read-only: the pages are the OS page cache's, shared by the node's ranks, and a
  rank's own memory does not grow with the corpus (only ``n`` offsets and lengths, 16 bytes a row);
* no dependency beyond numpy, which torch already needs.

Layout, one set of files per split (``train``, ``eval``), all little-endian, next to ``layout.json``:

* ``SPLIT.tokens.i32``: every row's input ids, concatenated;
* ``SPLIT.trained.u8``: 1 where the token is trained, 0 where masked: the labels are the ids where trained and
  ``IGNORE_INDEX`` elsewhere (``train.formats.tokenize``), so one byte a token says them exactly;
* ``SPLIT.weights.f32``: per-token loss weights, only when the rows carry them (``data.part_weights`` other than
  0/1); float32 is what the loss multiplies with (``train.data.packing.weights_tensor``);
* ``SPLIT.offsets.i64``: ``rows + 1`` token offsets (row ``i`` is ``[offsets[i], offsets[i+1])``);
* ``SPLIT.ids.utf8`` and ``SPLIT.id_offsets.i64``: the conversation ids, concatenated UTF-8 with their offsets.

``layout.json`` also records every other file of the folder (the columns, the eval conversations, the report) with
its size and an xxh3-128 checksum; ``verify_layout`` checks them before the folder is mapped, so a truncated,
garbled or missing file is found and named instead of crashing a memory map (``mmap length is greater than file
size``) or, same size, training on garbage. Why xxh3-128 (the ``xxhash`` package, a dependency of ``datasets``):
the checksum guards against accidental damage, not an adversary, so a non-cryptographic hash is enough, and it is
the one that keeps verifying cheap: 4.5 GB/s from memory on one core here against 0.33 GB/s for hashlib's blake2b and
0.2 for sha256. Measured (``train.data.cache_bench.measure_verify``, 2 shared cores): a 978 MB cache (a
2,000-conversation
build replicated 100 times) verifies in 0.45 s from the page cache (2.1 GB/s, hashed from a read-only map), where
blake2b would take about 5 s, on every run and every rank that opens it; checking the sizes alone takes 0.5 ms.
128 bits make an accidental match of a damaged file negligible.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from train.sources import SourceError

IGNORE_INDEX = -100  # train.formats.tokenize.IGNORE_INDEX: the label of a token that is not trained
LAYOUT_VERSION = 2  # 2: layout.json records each file's size and checksum
SPLITS = ("train", "eval")
CHECKSUM = "xxh3_128"  # recorded with each digest: a layout of another algorithm is not trusted
HASH_CHUNK = 8 << 20  # bytes hashed at a time
# bytes per token and per row of each column, to check that the sizes the layout records fit its row counts
COLUMN_BYTES = {"tokens.i32": (4, 0), "trained.u8": (1, 0), "weights.f32": (4, 0), "offsets.i64": (0, 8)}
COLUMN_BYTES["id_offsets.i64"] = (0, 8)
# A process that may not build waits for the one that may: bounded while nobody holds the cache's lock (the builder
# has not started, or died: a lock dies with its process) and bounded in all (a builder that hangs).
IDLE_WAIT_S = 900.0
TOTAL_WAIT_S = 24 * 3600.0


class StoreWriter:
    """Appends rows of one split to its column files, in the order given. ``close()`` returns the split's
    entry for ``layout.json``."""

    def __init__(self, folder: Path, split: str, weighted: bool):
        self.split, self.weighted = split, weighted
        names = ["tokens.i32", "trained.u8", "offsets.i64", "ids.utf8", "id_offsets.i64"]
        if weighted:
            names.append("weights.f32")
        self.files = {name: (folder / f"{split}.{name}").open("wb") for name in names}
        self.rows = self.tokens = self.id_bytes = 0
        self.files["offsets.i64"].write(np.zeros(1, "<i8").tobytes())
        self.files["id_offsets.i64"].write(np.zeros(1, "<i8").tobytes())

    def append(self, conv_id: str, input_ids: np.ndarray, trained: np.ndarray, weights: np.ndarray | None) -> None:
        if (weights is not None) != self.weighted:
            raise ValueError(f"{self.split} row {conv_id!r}: loss weights on some rows only")
        self.files["tokens.i32"].write(np.asarray(input_ids, "<i4").tobytes())
        self.files["trained.u8"].write(np.asarray(trained, "u1").tobytes())
        if weights is not None:
            self.files["weights.f32"].write(np.asarray(weights, "<f4").tobytes())
        encoded = conv_id.encode("utf-8")
        self.files["ids.utf8"].write(encoded)
        self.rows += 1
        self.tokens += len(input_ids)
        self.id_bytes += len(encoded)
        self.files["offsets.i64"].write(np.array([self.tokens], "<i8").tobytes())
        self.files["id_offsets.i64"].write(np.array([self.id_bytes], "<i8").tobytes())

    def close(self) -> dict[str, Any]:
        for handle in self.files.values():
            handle.close()
        return {"rows": self.rows, "tokens": self.tokens, "weighted": self.weighted}


def file_checksum(path: Path) -> str:
    """The file's xxh3-128 digest, a chunk at a time from a read-only map: no copy into this process (twice the speed
    of reading into a buffer here: 1.8-2.2 GB/s against 0.8-1.1 on a warm 775 MB column) and no memory held."""
    digest = xxhash.xxh3_128()
    with path.open("rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:  # an empty file cannot be mapped
            return digest.hexdigest()
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                for start in range(0, len(view), HASH_CHUNK):
                    digest.update(view[start : start + HASH_CHUNK])
            finally:
                view.release()  # before the map closes
    return digest.hexdigest()


def write_layout(folder: Path, splits: dict[str, dict[str, Any]]) -> None:
    """Written last: the splits' counts, and the size and checksum of every other file in ``folder``."""
    files = {
        path.name: {"bytes": path.stat().st_size, CHECKSUM: file_checksum(path)}
        for path in sorted(folder.iterdir())
        if path.is_file() and path.name != "layout.json"
    }
    layout = {"version": LAYOUT_VERSION, "splits": splits, "files": files}
    (folder / "layout.json").write_text(json.dumps(layout, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def verify_layout(folder: Path, checksums: bool = True) -> str | None:
    """What is wrong with the cache in ``folder`` (the file and why), or None when every file the layout records is
    there with its size and (with ``checksums``) its checksum, and the column sizes fit the rows the layout counts."""
    try:
        layout = json.loads((folder / "layout.json").read_text(encoding="utf-8"))
        version, splits, files = layout.get("version"), layout["splits"], layout["files"]
    except FileNotFoundError:
        return "layout.json is missing"
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as err:
        return f"layout.json is unreadable ({type(err).__name__}: {err})"
    if version != LAYOUT_VERSION:
        return f"layout.json is version {version!r}, this tooltrain reads version {LAYOUT_VERSION}"
    problem = _sizes_fit_rows(splits, files)
    if problem:
        return problem
    for name, entry in sorted(files.items()):
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        size = path.stat().st_size
        if size != entry.get("bytes"):
            return f"{name} has {size:,} bytes, the layout records {entry.get('bytes')!r} (truncated or overwritten)"
        if checksums and file_checksum(path) != entry.get(CHECKSUM):
            return f"{name} does not match its {CHECKSUM} checksum (same size, other bytes: changed after the build)"
    return None


def _sizes_fit_rows(splits: Any, files: Any) -> str | None:
    """A layout whose recorded sizes do not fit its own row and token counts (an edited layout.json) is damaged."""
    try:
        for split in SPLITS:
            rows, tokens, weighted = int(splits[split]["rows"]), int(splits[split]["tokens"]), splits[split]["weighted"]
            for column, (per_token, per_row) in COLUMN_BYTES.items():
                if column == "weights.f32" and not weighted:
                    continue
                expected = per_token * tokens + per_row * (rows + 1)
                recorded = files[f"{split}.{column}"]["bytes"]
                if recorded != expected:
                    need = f"{rows} rows of {tokens} tokens take {expected}"
                    return f"layout.json records {split}.{column} as {recorded!r} bytes; {need}"
    except (KeyError, TypeError, ValueError) as err:
        return f"layout.json is incomplete ({type(err).__name__}: {err})"
    return None


def _map(path: Path, dtype: str, count: int) -> np.ndarray:
    if count == 0:  # an empty file cannot be mapped
        return np.zeros(0, dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=(count,))


class TokenizedRows:
    """One split of a built dataset, memory-mapped. Indexing gives a row as the build made it
    (``{"id", "input_ids", "labels"[, "loss_weights"]}`` as lists); ``arrays``/``lengths`` give the columns
    without Python lists, for packing and collation."""

    def __init__(self, folder: Path, split: str):
        entry = json.loads((folder / "layout.json").read_text(encoding="utf-8"))["splits"][split]
        rows, tokens = int(entry["rows"]), int(entry["tokens"])
        self.has_loss_weights = bool(entry["weighted"])
        self.tokens = _map(folder / f"{split}.tokens.i32", "<i4", tokens)
        self.trained = _map(folder / f"{split}.trained.u8", "u1", tokens)
        self.weights = _map(folder / f"{split}.weights.f32", "<f4", tokens) if self.has_loss_weights else None
        self.offsets = _map(folder / f"{split}.offsets.i64", "<i8", rows + 1) if rows else np.zeros(1, "<i8")
        self.id_bytes = np.memmap(folder / f"{split}.ids.utf8", dtype="u1", mode="r") if rows else b""
        self.id_offsets = _map(folder / f"{split}.id_offsets.i64", "<i8", rows + 1) if rows else np.zeros(1, "<i8")

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        """Tokens per row (int64), read from the offsets only."""
        return np.diff(self.offsets)

    def id_of(self, index: int) -> str:
        start, end = int(self.id_offsets[index]), int(self.id_offsets[index + 1])
        return bytes(self.id_bytes[start:end]).decode("utf-8")

    def ids(self) -> list[str]:
        return [self.id_of(i) for i in range(len(self))]

    def arrays(self, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(input ids as int64, trained as bool, weights as float32 or None) of one row: slices of the maps."""
        if not 0 <= index < len(self):
            raise IndexError(f"row {index} of {len(self)}")
        start, end = int(self.offsets[index]), int(self.offsets[index + 1])
        weights = self.weights[start:end] if self.weights is not None else None
        return self.tokens[start:end].astype(np.int64), self.trained[start:end].astype(bool), weights

    def __getitem__(self, index: int) -> dict[str, Any]:
        ids, trained, weights = self.arrays(index)
        row = {"id": self.id_of(index), "input_ids": ids.tolist(), "labels": labels_of(ids, trained).tolist()}
        return row if weights is None else {**row, "loss_weights": weights.tolist()}

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self[i] for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        """The same rows: every column equal (compared as arrays, never as Python lists)."""
        if not isinstance(other, TokenizedRows):
            return NotImplemented
        columns = ("tokens", "trained", "offsets", "id_bytes", "id_offsets")
        same = self.has_loss_weights == other.has_loss_weights and all(
            np.array_equal(np.asarray(getattr(self, name)), np.asarray(getattr(other, name))) for name in columns
        )
        return same and (self.weights is None or np.array_equal(self.weights, other.weights))

    __hash__ = None  # type: ignore[assignment]  # equal by content, and mutable underneath (a file)


def labels_of(ids: np.ndarray, trained: np.ndarray) -> np.ndarray:
    return np.where(trained, ids, IGNORE_INDEX)


def trained_mask(conv_id: str, input_ids: list[int], labels: list[int]) -> np.ndarray:
    """The labels as one byte a token; refuses labels that are neither the id nor IGNORE_INDEX (a format bug)."""
    ids, labs = np.asarray(input_ids, np.int64), np.asarray(labels, np.int64)
    trained = labs != IGNORE_INDEX
    if ids.shape != labs.shape or not np.array_equal(labs[trained], ids[trained]):
        raise ValueError(f"conversation {conv_id!r}: labels are not the input ids where trained; cannot store them")
    return trained.astype(np.uint8)


# ---- the cache folder: usable, locked, removed when damaged, waited for (every wait bounded) ----------------


class CacheError(SourceError):
    """The dataset cache cannot be used or built (its folder is a file or unwritable, a wait ran out, a build worker
    died): one ``error:`` line."""


def usable_cache_root(cache_root: Path) -> None:
    """The cache folder exists (made if need be) and this process may write in it, else one CacheError line."""
    try:
        cache_root.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise CacheError(f"the dataset cache folder {cache_root} is not a folder (data.cache_dir)") from None
    except OSError as err:
        raise CacheError(
            f"cannot make the dataset cache folder {cache_root}: {err.strerror} (data.cache_dir)"
        ) from None
    if not os.access(cache_root, os.W_OK | os.X_OK):
        raise CacheError(f"the dataset cache folder {cache_root} is not writable (data.cache_dir)")


def exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def remove_cache(path: Path) -> None:
    """A damaged cache or a partial build, gone; one that cannot be removed is a CacheError naming it."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif exists(path):
            path.unlink()
    except OSError as err:
        raise CacheError(f"cannot remove the damaged dataset cache {path}: {err.strerror}") from None


@contextlib.contextmanager
def holding(lock: Any, target: Path, timeout: float) -> Iterator[None]:
    """The cache's file lock, acquired within ``timeout`` seconds, else a CacheError naming the lock."""
    from filelock import Timeout

    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        raise CacheError(
            f"waited {timeout:.0f} s for the lock {lock.lock_file}: another process is still building the dataset "
            f"cache {target} (remove the lock file if no process is)"
        ) from None
    except OSError as err:
        raise CacheError(f"cannot lock the dataset cache {target}: {err.strerror}") from None
    try:
        yield
    finally:
        lock.release()


def wait_for_cache(
    target: Path, lock: Any, idle_wait_s: float, total_wait_s: float, problem_of: Callable[[Path], str | None]
) -> None:
    """For a process that may not build: waits until the builder's cache at ``target`` is there and ``problem_of``
    finds nothing wrong with it.
    While a process holds the lock, a builder is alive; nobody holding it for ``idle_wait_s`` (the builder never
    came, or died: the lock goes with its process) or ``total_wait_s`` in all ends the wait with a CacheError."""
    from filelock import Timeout

    started = idle_since = time.monotonic()
    problem = "it has not been built"
    while True:
        now = time.monotonic()
        if now - started > total_wait_s:
            raise CacheError(f"waited {total_wait_s:.0f} s for the dataset cache {target}: {problem}")
        if now - idle_since > idle_wait_s:
            raise CacheError(
                f"waited {idle_wait_s:.0f} s for the dataset cache {target} with no process building it ({problem}): "
                "the process that builds it (each node's local rank 0) failed or never started"
            )
        try:
            lock.acquire(timeout=0)
        except Timeout:  # a builder is at work
            idle_since = time.monotonic()
        else:
            try:
                if exists(target):
                    problem = problem_of(target) or ""
                    if not problem:
                        return
                    problem = f"it is damaged: {problem}"
            finally:
                lock.release()
        time.sleep(0.5)
