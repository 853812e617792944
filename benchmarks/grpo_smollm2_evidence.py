"""Collects a grpo_smollm2 run's evidence into benchmarks/results/grpo_smollm2_cpu.json: the command, the commit, the
per-step reward (mean, std, completion length, groups without spread), the before/after evaluation and the wall time.

    python benchmarks/grpo_smollm2_evidence.py RUN_DIR "COMMAND" WALL_SECONDS "MACHINE NOTE" [ATTEMPTS.json]
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "results" / "grpo_smollm2_cpu.json"
STEP_KEYS = {
    "reward": "reward",
    "reward_std": "reward_std",
    "completions/mean_length": "length",
    "frac_reward_zero_std": "frac_groups_without_spread",
    "grad_norm": "grad_norm",
    "step_time": "seconds",
}


def main(run_dir: str, command: str, wall: str, machine: str, attempts: str | None = None) -> None:
    run = Path(run_dir)
    logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps = [
        {"step": row["step"], **{name: row[key] for key, name in STEP_KEYS.items() if key in row}}
        for row in logged
        if "reward" in row
    ]
    evals = [
        {"step": row["step"], **{k: v for k, v in row.items() if k.startswith("eval/")}}
        for row in logged
        if any(k.startswith("eval/") for k in row)
    ]
    summary_path = run / "summary.json"
    commit = subprocess.run(["git", "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    evidence = {
        "command": command,
        "git_commit": commit,
        "machine": machine,
        "wall_seconds": float(wall),
        "status": json.loads(summary_path.read_text()).get("status") if summary_path.exists() else "stopped",
        "steps": steps,
        "eval": evals,
        "attempts": json.loads(Path(attempts).read_text()) if attempts else [],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    partial = OUT.with_suffix(".json.partial")  # written whole, then renamed: a failed write leaves the old file
    partial.write_text(json.dumps(evidence, indent=1) + "\n")
    partial.replace(OUT)
    print(f"{len(steps)} steps, {len(evals)} evaluations -> {OUT}")


if __name__ == "__main__":
    main(*sys.argv[1:])
