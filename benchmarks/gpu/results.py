"""The GPU check's last stage: merges the per-stage JSON files into OUT/results.json, prints the throughput table and
writes it as OUT/table.md (the README's "GPU check" table).

  python benchmarks/gpu/results.py PARTS_DIR OUT_DIR RUNS_DIR

Each bench is compared with trl's ``SFTTrainer`` running the same kernels (``vs_trl``: tooltrain's tokens/s over
trl's; trl_sdpa for kernels=none, trl_sdpa_liger for liger) and against the issue's targets for LoRA Llama-3.1-8B at
4K packed on one H100 (>= 13,500 real tokens/s, >= 1.3x trl).
"""

from __future__ import annotations

import functools
import glob
import json
import os
import sys

TARGET_TOKENS_PER_S = 13_500
TARGET_VS_TRL = 1.3


def text(path: str) -> str | None:
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return fh.read().strip()


def load(path: str) -> dict | None:
    if not os.path.exists(path):
        return None
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError) as err:
        return {"unreadable": path, "why": str(err)}


def tiny_run(parts: str, runs: str) -> dict:
    summary = load(f"{runs}/tiny_gpu/summary.json") or {}
    tiny = {k: summary.get(k) for k in ("status", "steps", "loss_first", "loss_last", "dtype", "eval")}
    metrics = f"{runs}/tiny_gpu/metrics.jsonl"
    if os.path.exists(metrics):
        with open(metrics) as fh:
            tiny["mfu_logged"] = [row.get("mfu") for row in map(json.loads, fh) if "loss" in row]
    tiny["rc"] = text(f"{parts}/tiny_rc.txt")
    return tiny


def compare(bench: dict[str, dict]) -> None:
    """vs_trl (same kernels) and the targets, in place."""
    trl = {k: bench.get(f"trl_sdpa{'_liger' if k == 'liger' else ''}", {}) for k in ("none", "liger")}
    for b in bench.values():
        if not b.get("ok") or b.get("path") == "trl":
            continue
        base = trl.get(b.get("kernels"), {})
        if base.get("ok") and base.get("tokens_per_s"):
            b["vs_trl"] = round(b["tokens_per_s"] / base["tokens_per_s"], 3)
        b["meets_tokens_target"] = b["tokens_per_s"] >= TARGET_TOKENS_PER_S
        if "vs_trl" in b:
            b["meets_vs_trl_target"] = b["vs_trl"] >= TARGET_VS_TRL


def cell(bench: dict, key: str, fmt: str) -> str:
    value = bench.get(key)
    return format(value, fmt) if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def table(bench: dict[str, dict], device: str) -> list[str]:
    lines = [
        f"| bench ({device}) | real tokens/s | MFU | MFU (linear only) | peak GiB | vs trl (same kernels) | note |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for name, b in bench.items():
        num = functools.partial(cell, b)
        note = b.get("error") or b.get("skipped") or ""
        lines.append(
            f"| {name} | {num('tokens_per_s', ',.0f')} | {num('mfu', '.3f')} | {num('mfu_linear_only', '.3f')} | "
            f"{num('peak_alloc_gib', '.1f')} | {num('vs_trl', '.2f')} | {str(note)[:80]} |"
        )
    return lines


def main(parts: str, out: str, runs: str) -> None:
    res = {
        "probe": load(f"{parts}/probe.json"),
        "nvidia_smi": text(f"{parts}/nvsmi.txt"),
        "packing": load(f"{parts}/pack.json"),
        "tiny": tiny_run(parts, runs),
        "bench": {os.path.basename(p)[2:-5]: load(p) for p in sorted(glob.glob(f"{parts}/b_*.json"))},
        "distributed": {os.path.basename(p)[5:-5]: load(p) for p in sorted(glob.glob(f"{parts}/dist_*.json"))},
        "targets": {"tokens_per_s": TARGET_TOKENS_PER_S, "vs_trl": TARGET_VS_TRL},
    }
    compare(res["bench"])
    device = (res["probe"] or {}).get("gpu") or next((b.get("device") for b in res["bench"].values()), None) or "?"
    res["device"] = device
    with open(f"{out}/results.json", "w") as fh:
        json.dump(res, fh, indent=1)
    rows = table(res["bench"], device)
    with open(f"{out}/table.md", "w") as fh:
        fh.write("\n".join(rows) + "\n")
    print("\n".join(rows))
    packing = res["packing"] or {}
    for v in packing.get("variants", []):
        print(f"packing {v.get('attn')}:{v.get('dtype')} isolated={v.get('isolated')} "
              f"control_detects={v.get('control_detects')} diff={v.get('diff')} {v.get('error') or ''}")  # fmt: skip


if __name__ == "__main__":
    main(*sys.argv[1:4])
