"""Shared test fixtures: the real data beside the checkout, an isolated cache, offline mode, and results
built once per test session (shared by every xdist worker through a file lock)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from session_cache import session_folder, shared_tokenizer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("TOOLTRAIN_SHARED_DATA", REPO.parent / "shared" / "data"))
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def pytest_collection_modifyitems(config, items):
    """A test that reads ../shared/data is in the slow tier (`.ci/run --all`): the everyday tier checks each format,
    reader and scorer on the fixtures and samples in the repository, as a fresh machine without that folder does;
    the sweeps over the real corpora (tens of seconds of tokenizing) run before an issue is resolved."""
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()) or item.get_closest_marker("shared_data"):
            item.add_marker(pytest.mark.slow)


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
def built_tokenizer(tooltrain_cache):
    """``built_tokenizer(name)``: the tokenizer the package builds for NAME, from this session's own cache (a fresh
    folder each run, shared by all workers: one of them builds each name, under load_tokenizer's lock). Parity
    tests thus pin this session's builder, never a tokenizer cached in the home folder by older code, without
    rebuilding a 150k-200k vocabulary per module (5-10 s each on 2 cores). One object per name per worker
    (session_cache.shared_tokenizer): the tests asking for it only read it."""
    return shared_tokenizer


@pytest.fixture(scope="session")
def tooltrain_cache(tmp_path_factory) -> Path:
    """One TOOLTRAIN_CACHE (built tokenizers, dataset builds) for the whole session and all its workers:
    the training runs of engine/, launch/, evaluation/ and the recipe smoke runs build each tokenizer once.
    Tests about the cache itself keep their own folder."""
    cache = session_folder(tmp_path_factory) / "tooltrain-cache"
    cache.mkdir(exist_ok=True)
    return cache


@pytest.fixture(scope="session", autouse=True)
def session_cache_for_every_test(tooltrain_cache):
    """Every test, and every process a test starts, caches in this session's folder, never in the home folder:
    a run's results do not depend on what an earlier run (or older code) left in ~/.cache/tooltrain, and each
    tokenizer is built once per run, as on a fresh CI machine. Tests about the cache itself set their own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TOOLTRAIN_CACHE", str(tooltrain_cache))
        yield
