"""A tool library indexed once: the texts each retrieval method compares, embedded and cached.

Views of a tool (what text stands for it):

* ``description`` — the tool's description (its name when the description is empty): Algorithm 1's des_t.
* ``params`` — one text per *required* parameter, in the order of ``parameters.required``: the
  property's ``description``, or the parameter name when it has none (ToolLens leaves 179 of its
  326 required parameters undescribed; a name still says what the value is). Algorithm 1's des_p.
* ``json`` — the tool's JSON as the paper prints it (``{"name", "description", "parameters"}``),
  for dialogue-history retrieval.
* ``name_description`` — ``"<name> <description>"``, for keyword retrieval.

Each view is embedded as passages on first use, through ``cached_encode``: one file per embedder,
view and library hash, so a second index of the same library loads from disk and a changed
library is embedded anew (``ToolIndex.build`` embeds Algorithm 1's two views at once). The parameter
rows of all tools sit in one matrix, each tool's rows contiguous, so Algorithm 1 runs as a few
matrix products over the whole library (the wings' retrievers).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from train.retrieval.embed import Embedder, cached_encode
from train.schema import SchemaError, Tool, ToolLibrary


def description_text(tool: Tool) -> str:
    return tool.description.strip() or tool.name


def required_param_texts(tool: Tool) -> list[str]:
    """The texts of the tool's required parameters (description, else name); non-string names are skipped."""
    parameters = tool.parameters if isinstance(tool.parameters, dict) else {}
    required = parameters.get("required")
    properties = parameters.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    texts: list[str] = []
    for name in required if isinstance(required, list) else []:
        if not isinstance(name, str):
            continue
        prop = properties.get(name)
        description = prop.get("description") if isinstance(prop, dict) else None
        texts.append(description.strip() if isinstance(description, str) and description.strip() else name)
    return texts


def tool_json(tool: Tool) -> dict:
    """The paper's tool JSON: ``{"name", "description", "parameters"}`` (no OpenAI ``type/function`` wrapper)."""
    return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}


def json_text(tool: Tool) -> str:
    return json.dumps(tool_json(tool), ensure_ascii=False)


def name_description_text(tool: Tool) -> str:
    return f"{tool.name} {tool.description}".strip()


def library_hash(tools: Iterable[Tool]) -> str:
    payload = json.dumps([t.to_dict() for t in tools], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def read_library(path: Path) -> list[Tool]:
    """Every tool of every ``ToolLibrary`` line in ``path`` (what ``tooltrain data convert`` writes as
    ``OUT.library.jsonl``); a JSON list of tool definitions is accepted too. ValueError names the line."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        return [Tool.from_dict(t, f"{path}[{i}]") for i, t in enumerate(json.loads(text))]
    tools: list[Tool] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            tools.extend(ToolLibrary.from_dict(json.loads(line), f"{path}:{lineno}").tools)
        except (json.JSONDecodeError, SchemaError) as err:
            raise ValueError(f"{path}:{lineno}: {err}") from None
    return tools


class ToolIndex:
    """A library with its embedded views, each computed (or loaded from the cache) on first use.

    ``embedder`` may be None for keyword retrieval with BM25, which embeds nothing.
    """

    def __init__(self, tools: Iterable[Tool], embedder: Embedder | None, *, use_cache: bool = True):
        self.tools = list(tools)
        if not self.tools:
            raise ValueError("cannot index an empty tool library")
        seen: set[str] = set()
        for tool in self.tools:
            if tool.name in seen:
                raise ValueError(f"tool names must be unique in a library; {tool.name!r} appears more than once")
            seen.add(tool.name)
        self.embedder = embedder
        self.use_cache = use_cache
        self.key = library_hash(self.tools)
        self._views: dict[str, np.ndarray] = {}
        per_tool = [required_param_texts(t) for t in self.tools]
        self._param_texts = [text for texts in per_tool for text in texts]
        # (M,) the tool each parameter row belongs to: each tool's required parameters in one contiguous block
        self.param_tool = np.repeat(np.arange(len(self.tools)), [len(texts) for texts in per_tool])

    @classmethod
    def build(cls, tools: Iterable[Tool], embedder: Embedder, *, use_cache: bool = True) -> ToolIndex:
        """An index with Algorithm 1's views (descriptions, required parameters) embedded now."""
        index = cls(tools, embedder, use_cache=use_cache)
        index.params  # noqa: B018 -- embeds descriptions and parameters
        return index

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tools]

    @property
    def description(self) -> np.ndarray:
        """(N, d) description rows."""
        return self.view("description")

    @property
    def params(self) -> np.ndarray:
        """(M, d) required-parameter rows, ordered as ``param_tool``."""
        if "params" not in self._views:
            width = self.description.shape[1]
            rows = self._encode("params", self._param_texts)
            self._views["params"] = rows if self._param_texts else np.zeros((0, width), dtype=np.float32)
        return self._views["params"]

    def view(self, name: str) -> np.ndarray:
        """A per-tool view (``description``, ``json``, ``name_description``), embedded as passages on first use."""
        if name not in self._views:
            text_of = {"description": description_text, "json": json_text, "name_description": name_description_text}
            if name not in text_of:
                raise ValueError(f"unknown view {name!r}; views: params, {', '.join(text_of)}")
            self._views[name] = self._encode(name, [text_of[name](t) for t in self.tools])
        return self._views[name]

    def _encode(self, view: str, texts: list[str]) -> np.ndarray:
        if self.embedder is None:
            raise ValueError(f"the {view} view needs an embedder; this index was built without one")
        return cached_encode(self.embedder, texts, "passage", label=f"{self.key}-{view}", use_cache=self.use_cache)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Per row, the indices of the k highest scores, best first; equal scores keep library order.

    ``argpartition`` finds the k-th value in linear time; every index scoring at least that value
    is then sorted by (score descending, index), so a tie at the cut is broken the same way on
    every run and machine.
    """
    scores = np.atleast_2d(scores)
    rows, n = scores.shape
    k = min(k, n)
    if k <= 0 or rows == 0:
        return np.zeros((rows, 0), dtype=np.int64)
    kth = np.take_along_axis(scores, np.argpartition(-scores, k - 1, axis=1)[:, k - 1 : k], axis=1)[:, 0]
    out = np.empty((rows, k), dtype=np.int64)
    for row in range(rows):
        candidates = np.flatnonzero(scores[row] >= kth[row])
        order = np.lexsort((candidates, -scores[row, candidates]))
        out[row] = candidates[order[:k]]
    return out
