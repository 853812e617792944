"""``train.base.cache.cache_root``: one environment variable moves every cache tooltrain keeps."""

from __future__ import annotations

from pathlib import Path

from train.base.cache import cache_root
from train.models.smollm2 import model_dir
from train.retrieval.embed import FunctionEmbedder, cache_dir


def test_tooltrain_cache_moves_the_root_and_everything_under_it(monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path))
    assert cache_root() == tmp_path
    assert model_dir().parent.parent == tmp_path  # the fetched model, in the models layer
    assert cache_dir(FunctionEmbedder("e", lambda texts: [])).parent.parent == tmp_path  # retrieval's embeddings


def test_without_it_the_root_is_the_users_cache_folder(monkeypatch):
    monkeypatch.delenv("TOOLTRAIN_CACHE", raising=False)
    assert cache_root() == Path.home() / ".cache" / "tooltrain"
