"""Where tooltrain keeps what it builds or fetches once: tokenizers, model files, dataset caches, embeddings.

At the bottom because every layer has something to cache: the tokenizers and the models they read, retrieval's
embeddings, the engine's and the verbs' dataset caches. One environment variable moves all of it.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$TOOLTRAIN_CACHE``, else ``~/.cache/tooltrain``; nothing is created here."""
    return Path(os.environ.get("TOOLTRAIN_CACHE", Path.home() / ".cache" / "tooltrain"))
