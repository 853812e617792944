"""Shared test fixtures: the real data beside the checkout, an isolated cache, offline mode, and results
built once per test session (shared by every xdist worker through a file lock)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from session_cache import build_once, session_folder

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("TOOLTRAIN_SHARED_DATA", REPO.parent / "shared" / "data"))
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def shared_data() -> Path:
    """The real benchmark files in ../shared/data; tests needing them skip on a fresh machine."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} not present")
    return SHARED_DATA


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def built_tokenizer(tmp_path_factory):
    """``built_tokenizer(name)``: the tokenizer the package builds for NAME (``load_tokenizer(name, cache=False)``),
    built once in this pytest run for all its workers, saved, and loaded from there by each test module. Parity
    tests thus pin this session's builder, never a tokenizer cached in the home folder by older code, without
    rebuilding a 150k-200k vocabulary per module (10-16 s each on 2 cores)."""
    from transformers import PreTrainedTokenizerFast

    from train.tokenizers import load_tokenizer

    def load(name: str):
        def build(folder: Path) -> None:
            load_tokenizer(name, cache=False).save_pretrained(str(folder))

        return PreTrainedTokenizerFast.from_pretrained(str(build_once(tmp_path_factory, f"tokenizer-{name}", build)))

    return load


@pytest.fixture(scope="session")
def tooltrain_cache(tmp_path_factory) -> Path:
    """One TOOLTRAIN_CACHE (built tokenizers, dataset builds) for the whole session and all its workers:
    the training runs of engine/, launch/, evaluation/ and the recipe smoke runs build each tokenizer once.
    Tests about the cache itself keep their own folder."""
    cache = session_folder(tmp_path_factory) / "tooltrain-cache"
    cache.mkdir(exist_ok=True)
    return cache
