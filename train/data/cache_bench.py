"""The tokenized cache at corpus scale (issue 18): build time with 1 and N workers, the build's peak memory, and the
memory of a training rank that maps the built set and iterates one epoch of packed batches.

Each measurement runs in a fresh Python process, so its peak is its own (``ru_maxrss`` of the build process, of its
worker processes, and ``RssAnon`` sampled while a reader iterates). A rank's resident set also counts the pages of
the mapped cache it has touched (``RssFile``): they are the page cache's, shared by every rank of the node and
dropped under pressure, so the per-rank figure that must not grow with the corpus is ``RssAnon`` (private memory);
``RssFile`` is reported beside it.

For ``tooltrain bench data`` (and anyone else):

* ``synthetic_corpus(path, conversations, inputs=SHIPPED)``: a canonical JSON Lines corpus of that many
  conversations, cycled from shipped data with new ids;
* ``measure_build(data_cfg, format_name, tokenizer_name, cache_root, workers) -> dict``;
* ``measure_reader(cache_dir, max_seq_len, micro_batch=8) -> dict``;
* ``replicated_cache(cache_dir, out, times)``: the train split of a built cache ``times`` over (new ids), to measure
  a reader at a scale whose build takes too long on the machine at hand (the reader sees only the columns);
* ``measure_verify(cache_dir) -> dict``: what opening a cache costs for its integrity check (``verify_layout``: sizes
  only, and sizes with every file's checksum), in a fresh process.

As a script: ``python -m train.data.cache_bench --conversations 2000 20000 --workers 1 2 [--replicate 10] --out-dir
DIR``
(``--replicate N``: also measure a reader, and the verification, on the largest build's train split N times over).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SHIPPED = ("pkg://train/assets/demo/glaive_en_300.json",)


def synthetic_corpus(path: Path, conversations: int, inputs: tuple[str, ...] = SHIPPED) -> Path:
    """``conversations`` canonical records, the shipped ones over and over, each copy with a new id."""
    from train.data.dataset import BuildReport, read_conversations
    from train.schema import dumps

    base = list(read_conversations([{"name": "glaive", "inputs": list(inputs)}], BuildReport()))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for number in range(conversations):
            conv = base[number % len(base)]
            out.write(dumps(dataclasses.replace(conv, id=f"{conv.id}-copy{number // len(base)}")) + "\n")
    return path


def corpus_config(corpus: Path, max_seq_len: int = 2048, workers: int | None = None) -> dict[str, Any]:
    return {
        "name": "bench",
        "sources": [{"name": "canonical", "inputs": [str(corpus)], "limit": None}],
        "builder": None,
        "builder_args": {},
        "max_seq_len": max_seq_len,
        "overlong": "truncate",
        "packing": True,
        "last_turn_only": False,
        "part_weights": {},
        "eval_fraction": 0.0,
        "cache_dir": None,
        "num_workers": workers,
    }


def _child(mode: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Runs one measurement in a fresh interpreter; its result is the last line it prints."""
    done = subprocess.run(
        [sys.executable, "-m", "train.data.cache_bench", f"--{mode}", json.dumps(settings)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"cache_bench {mode} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_build(
    data_cfg: dict[str, Any], format_name: str, tokenizer_name: str, cache_root: Path, workers: int
) -> dict[str, Any]:
    """Builds ``data_cfg`` with ``workers`` processes into ``cache_root`` (which should not hold that build yet) in a
    fresh process. Returns seconds, conversations/s, peak RSS (MiB) of the build process and of its largest worker,
    the cache folder and the build report."""
    settings = {"data": {**data_cfg, "num_workers": workers}, "format": format_name, "tokenizer": tokenizer_name}
    return _child("build", {**settings, "cache_root": str(cache_root)})


def measure_reader(cache_dir: Path, max_seq_len: int, micro_batch: int = 8) -> dict[str, Any]:
    """A fresh process maps the built train split, packs it from its lengths and collates one epoch of packed
    batches. Returns rows, batches, seconds and memory in MiB: ``rss_anon_peak`` (private, sampled), ``rss_file``
    (mapped cache pages at the end) and ``rss_anon_opened`` (after imports and opening, before packing)."""
    return _child("read", {"cache_dir": str(cache_dir), "max_seq_len": max_seq_len, "micro_batch": micro_batch})


def measure_verify(cache_dir: Path) -> dict[str, Any]:
    """Seconds ``verify_layout`` takes on ``cache_dir`` with sizes only and with checksums, and the bytes it hashes.
    The files are read once before timing: a cache opened right after its build (or by a second rank) is in the page
    cache; a cold read adds the disk's time for the same bytes, which training then reads anyway."""
    return _child("verify", {"cache_dir": str(cache_dir)})


def _verify(settings: dict[str, Any]) -> dict[str, Any]:
    from train.data.token_store import verify_layout

    folder = Path(settings["cache_dir"])
    total = sum(path.stat().st_size for path in folder.iterdir() if path.name != "layout.json")
    verify_layout(folder)  # warm the page cache
    started = time.perf_counter()
    sizes = verify_layout(folder, checksums=False)
    sized = time.perf_counter() - started
    started = time.perf_counter()
    problem = verify_layout(folder)
    hashed = time.perf_counter() - started
    return {
        "bytes": total,
        "sizes_only_s": round(sized, 4),
        "with_checksums_s": round(hashed, 3),
        "gb_per_s": round(total / hashed / 1e9, 2),
        "problem": problem or sizes,
    }


def _status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024  # kB
    return float("nan")


def _maxrss_mib(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # kB on Linux


def _build(settings: dict[str, Any]) -> dict[str, Any]:
    from train.data.dataset import build_dataset
    from train.tokenizers import load_tokenizer

    tokenizer = load_tokenizer(settings["tokenizer"])
    started = time.perf_counter()
    built = build_dataset(settings["data"], settings["format"], tokenizer, Path(settings["cache_root"]))
    seconds = time.perf_counter() - started
    report = built.report
    return {
        "workers": settings["data"]["num_workers"],
        "seconds": round(seconds, 2),
        "conversations_per_s": round(report.read / seconds, 1),
        "peak_rss_mib": round(_maxrss_mib(resource.RUSAGE_SELF), 1),
        "peak_worker_rss_mib": round(_maxrss_mib(resource.RUSAGE_CHILDREN), 1),
        "cache_dir": str(built.cache_dir),
        "report": report.to_dict(),
    }


def _read(settings: dict[str, Any]) -> dict[str, Any]:
    import torch  # noqa: F401  (a training rank has it loaded: count it in the baseline)

    from train.data.packing import PackedCollator, PackedRows, best_fit_pack
    from train.data.token_store import TokenizedRows

    started = time.perf_counter()
    samples = TokenizedRows(Path(settings["cache_dir"]), "train")
    opened = _status_mib("RssAnon")
    width, batch_size = settings["max_seq_len"], settings["micro_batch"]
    rows = PackedRows(samples, best_fit_pack(samples.lengths.tolist(), width))
    collate = PackedCollator(0, pad_to=width)
    peak, tokens, batches = opened, 0, 0
    for start in range(0, len(rows), batch_size):
        batch = collate([rows[i] for i in range(start, min(start + batch_size, len(rows)))])
        tokens += int((batch["position_ids"] >= 0).sum())
        batches += 1
        if batches % 64 == 0:
            peak = max(peak, _status_mib("RssAnon"))
    peak = max(peak, _status_mib("RssAnon"))
    return {
        "samples": len(samples),
        "rows": len(rows),
        "batches": batches,
        "seconds": round(time.perf_counter() - started, 2),
        "rss_anon_opened_mib": round(opened, 1),
        "rss_anon_peak_mib": round(peak, 1),
        "rss_file_mib": round(_status_mib("RssFile"), 1),
    }


def replicated_cache(cache_dir: Path, out: Path, times: int) -> Path:
    from train.data.token_store import StoreWriter, TokenizedRows, write_layout

    source = TokenizedRows(cache_dir, "train")
    out.mkdir(parents=True)
    train = StoreWriter(out, "train", source.has_loss_weights)
    for copy in range(times):
        for index in range(len(source)):
            train.append(f"{source.id_of(index)}-x{copy}", *source.arrays(index))
    write_layout(out, {"train": train.close(), "eval": StoreWriter(out, "eval", source.has_loss_weights).close()})
    return out


def run_benchmark(
    sizes: list[int], workers: list[int], out_dir: Path, format_name: str, tokenizer: str, replicate: int = 0
) -> list[dict]:
    results = []
    for size in sizes:
        corpus = synthetic_corpus(out_dir / f"corpus-{size}.jsonl", size)
        for count in workers:
            cache_root = Path(tempfile.mkdtemp(prefix=f"cache-{size}-{count}-", dir=out_dir))
            build = measure_build(corpus_config(corpus), format_name, tokenizer, cache_root, count)
            results.append({"conversations": size, "build": build})
            print(json.dumps({"conversations": size, **{k: v for k, v in build.items() if k != "report"}}), flush=True)
        reader = measure_reader(Path(results[-1]["build"]["cache_dir"]), corpus_config(corpus)["max_seq_len"])
        results[-1]["reader"] = reader
        print(json.dumps({"conversations": size, "reader": reader}), flush=True)
    if replicate > 1:
        largest = results[-1]
        copies = replicated_cache(Path(largest["build"]["cache_dir"]), out_dir / f"replicated-x{replicate}", replicate)
        reader = measure_reader(copies, corpus_config(out_dir)["max_seq_len"])
        verify = measure_verify(copies)
        results.append(
            {
                "conversations": largest["conversations"] * replicate,
                "replicated": replicate,
                "reader": reader,
                "verify": verify,
            }
        )
        print(json.dumps(results[-1]), flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m train.data.cache_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--format", default="chatml")
    parser.add_argument("--tokenizer", default="tiny_chatml")
    parser.add_argument("--replicate", type=int, default=0)
    parser.add_argument("--out-dir", type=Path, default=Path("cache-bench"))
    parser.add_argument("--build", help=argparse.SUPPRESS)  # internal: one measurement in this fresh process
    parser.add_argument("--read", help=argparse.SUPPRESS)
    parser.add_argument("--verify", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    internal = {"build": _build, "read": _read, "verify": _verify}
    for mode, measure in internal.items():
        if getattr(args, mode):
            print(json.dumps(measure(json.loads(getattr(args, mode)))))
            return 0
    args.out_dir.mkdir(parents=True, exist_ok=True)
    results = run_benchmark(args.conversations, args.workers, args.out_dir, args.format, args.tokenizer, args.replicate)
    (args.out_dir / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
