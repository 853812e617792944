"""BFCL v4 as the official package ships it: where its data is, and what runs each of its categories.

The data is read from the installed ``bfcl-eval`` wheel (``bfcl_eval/data/BFCL_v4_*.json``, ``possible_answer/``),
never copied into this repository. Install it without its heavy pins (vendor SDKs, torch, vLLM):
``pip install --no-deps bfcl-eval==2026.3.23`` (CI does the same). ``data_dir`` finds the folder without importing
the package (``find_spec``); ``package_path`` gives the ``pkg://`` form the eval config's ``data:`` entries take
(``train.data.inputs.resolve_input`` reads it).

Each category names the task that scores it, looked up by name in the task registry
(``train.evaluation.tasks.task_class``), so a task registered later simply starts to run:

* ``bfcl``: the 13 single-turn categories (AST, irrelevance, live relevance), BFCL's AST checker.
* ``bfcl_multi_turn``: the four ``multi_turn_*`` categories, episodes against BFCL's environment classes.
* skipped, with the reason (``V4Category.skip``): ``web_search_*`` calls SerpAPI (a paid key) and fetches live pages;
  ``memory_*`` ships its three backends as Python classes (kv: BM25 via rank_bm25; rec_sum: plain Python; vector:
  faiss and a sentence-transformers model), but every question depends on prerequisite conversations the model runs
  first to fill the memory, its checker is the agentic answer check, and the backends import packages outside the
  ``--no-deps`` install (``overrides``, ``faiss``, ``sentence_transformers``).
* ``format_sensitivity`` is not a scored category in BFCL (``NON_SCORING_CATEGORY``): it re-asks 200 live and
  non-live AST items under 26 system-prompt variants of BFCL's *prompting* handlers (return format python/JSON/XML,
  tool-call tags, doc format), and BFCL skips it for function-calling models; tooltrain prompts a model in its own
  chat format with native tool calls, so there is no system-prompt variant to vary: it applies to no model
  tooltrain runs.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "bfcl_eval"
VERSION = "2026.3.23"
INSTALL = f"pip install --no-deps bfcl-eval=={VERSION}"
SINGLE_TURN_TASK = "bfcl"
MULTI_TURN_TASK = "bfcl_multi_turn"

WEB_SEARCH_SKIP = "needs a paid search API (SerpAPI key) and live web pages"
MEMORY_SKIP = (
    "needs BFCL's memory backends: prerequisite conversations fill the memory first, and the backends import "
    "overrides, faiss and sentence-transformers (outside the --no-deps install)"
)
FORMAT_SKIP = (
    "not scored by BFCL: system-prompt variants of its prompting handlers (skipped for function-calling models); "
    "tooltrain prompts in the model's own format with native calls"
)


class BfclNotInstalled(RuntimeError):
    def __init__(self) -> None:
        super().__init__(f"bfcl-eval is not installed (its wheel ships the BFCL v4 data): {INSTALL}")


@dataclass(frozen=True)
class V4Category:
    name: str
    data_file: str  # inside the package's data folder
    answer_file: str | None  # inside data/possible_answer/; None: the category has no possible answers
    task: str | None  # the registered task that generates and scores it; None: skipped
    skip: str | None = None  # why it is not run here

    @property
    def multi_turn(self) -> bool:
        return self.task == MULTI_TURN_TASK


def _single(name: str, answers: bool = True) -> V4Category:
    file = f"BFCL_v4_{name}.json"
    return V4Category(name, file, file if answers else None, SINGLE_TURN_TASK)


def _multi(name: str) -> V4Category:
    file = f"BFCL_v4_{name}.json"
    return V4Category(name, file, file, MULTI_TURN_TASK)


CATEGORIES: tuple[V4Category, ...] = (
    *(_single(name) for name in ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel",
                                 "parallel_multiple")),
    _single("irrelevance", answers=False),
    *(_single(name) for name in ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")),
    _single("live_irrelevance", answers=False),
    _single("live_relevance", answers=False),
    *(_multi(name) for name in ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                                "multi_turn_long_context")),
    *(V4Category(name, "BFCL_v4_web_search.json", "BFCL_v4_web_search.json", None, WEB_SEARCH_SKIP)
      for name in ("web_search_base", "web_search_no_snippet")),
    *(V4Category(name, "BFCL_v4_memory.json", "BFCL_v4_memory.json", None, MEMORY_SKIP)
      for name in ("memory_kv", "memory_vector", "memory_rec_sum")),
    V4Category("format_sensitivity", "BFCL_v4_format_sensitivity.json", None, None, FORMAT_SKIP),
)  # fmt: skip
BY_NAME = {category.name: category for category in CATEGORIES}
OFFLINE = tuple(category for category in CATEGORIES if category.task is not None)


def data_dir() -> Path:
    """The installed package's data folder (BfclNotInstalled, naming the install line, when it is absent)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BfclNotInstalled()
    folder = Path(next(iter(spec.submodule_search_locations))) / "data"
    if not folder.is_dir():
        raise BfclNotInstalled()
    return folder


def category(name: str) -> V4Category:
    if name not in BY_NAME:
        raise ValueError(f"unknown BFCL v4 category {name!r}; categories: {', '.join(BY_NAME)}")
    return BY_NAME[name]


def chosen(names: list[str] | None) -> tuple[V4Category, ...]:
    """The categories named (all of them when None), in the leaderboard's order; ValueError for an unknown one."""
    wanted = {category(name).name for name in names or BY_NAME}
    return tuple(c for c in CATEGORIES if c.name in wanted)


def files(entry: V4Category, folder: Path | None = None) -> list[Path]:
    """The question file, then the possible-answer file when the category has one (the ``bfcl`` reader's order)."""
    folder = folder or data_dir()
    paths = [folder / entry.data_file]
    if entry.answer_file is not None:
        paths.append(folder / "possible_answer" / entry.answer_file)
    return paths


def package_path(file: str) -> str:
    """``pkg://bfcl_eval/data/FILE``: a path into the installed package, for ``data:`` entries of the eval config."""
    return f"pkg://{PACKAGE}/data/{file}"


__all__ = [
    "CATEGORIES", "INSTALL", "MULTI_TURN_TASK", "OFFLINE", "SINGLE_TURN_TASK", "BfclNotInstalled", "V4Category",
    "category", "chosen", "data_dir", "files", "package_path",
]  # fmt: skip
