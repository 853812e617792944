"""Stage 0 of the GPU check: the device, the image's package versions and one bf16 matmul's TFLOP/s, as one JSON line.

The measured matmul rate is context for MFU, whose denominator is ``train.engine.flops.peak_flops``
(``TOOLTRAIN_PEAK_TFLOPS``, else the data-sheet peak).
"""

from __future__ import annotations

import importlib.metadata as md
import json
import time

import torch

PACKAGES = ("torch", "transformers", "peft", "accelerate", "huggingface-hub", "pyarrow", "triton", "safetensors",
            "tokenizers", "numpy", "fsspec", "typing-extensions", "flash-attn", "kernels")  # fmt: skip


def versions() -> dict[str, str | None]:
    found = {}
    for name in PACKAGES:
        try:
            found[name] = md.version(name)
        except md.PackageNotFoundError:
            found[name] = None
    return found


def matmul_tflops(n: int = 8192, repeat: int = 10) -> float:
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn_like(a)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        a @ b
    torch.cuda.synchronize()
    return repeat * 2 * n**3 / (time.perf_counter() - start) / 1e12


def main() -> None:
    found = {"versions": versions(), "cuda": torch.version.cuda}
    if torch.cuda.is_available():
        found.update(
            gpu=torch.cuda.get_device_name(),
            bf16_matmul_tflops=round(matmul_tflops(), 1),
            mem_gib=round(torch.cuda.mem_get_info()[1] / 2**30, 1),
        )
    print(json.dumps(found))


if __name__ == "__main__":
    main()
