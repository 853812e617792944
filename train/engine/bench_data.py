"""The data path's build and read at corpus scale, measured in fresh interpreters (``tooltrain bench data``, stages
2 and 3; stage 1, the render rates, is ``train.data.bench_render``).

* **the build**: ``train.data.dataset.build_dataset`` (read, validate, render, tokenize, mask, write the cache) with
  ``data.num_workers = N``; its wall time, rows, tokens and peak RSS (``getrusage``'s high-water mark), and the RSS
  it started from (imports and tokenizer loaded). trl's path gets the same kind of child: every row of
  ``apply_chat_template`` kept in memory, its peak RSS.
* **the read**: a second child opens the built set (``build_dataset`` finds the cache), packs it as training does
  (``train.engine.run.make_rows``) and collates one epoch of packed batches (``PackedCollator``); its RSS before
  opening and its peak.

Each child is a fresh interpreter (``spawn``), so one stage's memory never counts in another's. The build goes to a
temporary cache folder that is removed afterwards. A storage or parallel build behind ``build_dataset`` and
``make_rows`` is measured without changes here. This module sits in the engine, not in ``train/data/``, because the
read goes through the engine's own row maker (``make_rows``), as a training run's does.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from train.data.bench_render import all_conversations, reference_for, trl_path


@dataclass
class Stages:
    """What the children report (each a dict of counts, seconds and bytes; ``trl_rows`` None without a reference)."""

    build: dict[str, Any]
    read: dict[str, Any]
    trl_rows: dict[str, Any] | None


def default_workers() -> int:
    """Every core this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def data_config(files: list[Path], limit: int | None, max_seq_len: int, workers: int) -> dict[str, Any]:
    """The ``data`` node the build and the read use: the files as one canonical source, packed, nothing held out."""
    source: dict[str, Any] = {"name": "canonical", "inputs": [str(f.resolve()) for f in files]}
    if limit is not None:
        source["limit"] = limit
    return {
        "name": "bench",
        "sources": [source],
        "max_seq_len": max_seq_len,
        "overlong": "truncate",
        "eval_fraction": 0.0,
        "packing": True,
        "num_workers": workers,  # the parallel build's worker count (data.num_workers)
    }


def rss_now() -> int:
    """This process's resident set, in bytes (psutil when installed, else /proc)."""
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except ImportError:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def rss_peak() -> int:
    """This process's high-water resident set, in bytes (Linux reports KiB)."""
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def build_in_child(data_cfg: dict, format_name: str, tokenizer: str, cache_root: str) -> dict:
    """Stage 2, in its child: build ``data_cfg`` into ``cache_root``. ``tokenizer``: what ``load_tokenizer`` loads."""
    from train.data.dataset import build_dataset
    from train.tokenizers import load_tokenizer

    loaded = load_tokenizer(tokenizer)
    before = rss_now()
    start = time.perf_counter()
    built = build_dataset(data_cfg, format_name, loaded, Path(cache_root))
    seconds = time.perf_counter() - start
    tokens = int(built.train.lengths.sum())  # the memory-mapped rows' lengths: no row is materialised
    report = built.report
    return {
        "seconds": seconds,
        "read": report.read,
        "rows": report.accepted,
        "tokens": tokens,
        "rss_before": before,
        "rss_peak": rss_peak(),
    }


def trl_rows_in_child(files: list[Path], limit: int | None, format_name: str, tokenizer: str) -> dict:
    """trl's side of stage 2, in its child: every row of ``apply_chat_template`` kept in memory."""
    from train.formats.hf import to_hf_messages
    from train.tokenizers import load_tokenizer

    loaded = load_tokenizer(tokenizer)
    reference = reference_for(format_name, loaded)
    conversations = all_conversations(files, limit)[0]
    before = rss_now()
    encode = trl_path(reference, loaded)
    rows = []
    for conv in conversations:
        try:
            rows.append(encode(to_hf_messages(conv)))
        except Exception:  # noqa: BLE001, S112 - left out, as in stage 1
            continue
    return {"rows": len(rows), "rss_before": before, "rss_peak": rss_peak()}


def read_in_child(data_cfg: dict, format_name: str, tokenizer: str, cache_root: str, batch: int) -> dict:
    """Stage 3, in its child: open the built set, pack it as training does, collate one epoch of ``batch`` rows."""
    from types import SimpleNamespace

    from train.data.dataset import build_dataset
    from train.data.packing import PackedCollator
    from train.engine.run import make_rows
    from train.tokenizers import load_tokenizer

    loaded = load_tokenizer(tokenizer)
    before = rss_now()
    start = time.perf_counter()
    built = build_dataset(data_cfg, format_name, loaded, Path(cache_root))
    rows, _ = make_rows(built, SimpleNamespace(packing=True, max_seq_len=data_cfg["max_seq_len"]))
    collate = PackedCollator(loaded.pad_token_id, pad_to=data_cfg["max_seq_len"])
    batches = tokens = 0
    for first in range(0, len(rows), batch):
        tensors = collate([rows[i] for i in range(first, min(first + batch, len(rows)))])  # rows cut from the maps
        batches += 1
        tokens += int((tensors["labels"] != -100).sum())  # touch every batch, as a training step would
    return {
        "seconds": time.perf_counter() - start,
        "rows": len(rows),
        "batches": batches,
        "from_cache": built.from_cache,
        "rss_before": before,
        "rss_peak": rss_peak(),
    }


def _child_main(queue: Any, target: Callable[..., dict], args: tuple) -> None:
    try:
        queue.put(("ok", target(*args)))
    except BaseException as err:  # noqa: BLE001 - reported by the parent as one error line
        queue.put(("error", f"{type(err).__name__}: {err}"))


def in_child(target: Callable[..., dict], *args: Any) -> dict:
    """``target(*args)`` in a fresh interpreter; its result, or RuntimeError with the child's error."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child_main, args=(queue, target, args))
    process.start()
    try:
        status, value = queue.get()
    finally:
        process.join()
    if status != "ok":
        raise RuntimeError(value)
    return value


def measure_stages(
    files: list[Path], limit: int | None, format_name: str, tokenizer: str, data_cfg: dict, batch: int, trl: bool
) -> Stages:
    """The build, the read and (``trl``) trl's rows, each in its own child, over a temporary cache folder.
    ``tokenizer``: what ``load_tokenizer`` loads. RuntimeError when a child fails."""
    with tempfile.TemporaryDirectory(prefix="tooltrain-bench-data-") as cache_root:
        build = in_child(build_in_child, data_cfg, format_name, tokenizer, cache_root)
        read = in_child(read_in_child, data_cfg, format_name, tokenizer, cache_root, batch)
        trl_rows = in_child(trl_rows_in_child, files, limit, format_name, tokenizer) if trl else None
    return Stages(build, read, trl_rows)
