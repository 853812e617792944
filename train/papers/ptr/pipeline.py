"""PTR on one query: the bundle from stage 1 (an argument: ``train.papers.ptr.bundles`` retrieves it), stage 2's
coverage mapping, stage 3's re-ranking, each switchable, and a JSON-ready trace of what each stage did.

The switches (``stages``, a subset of {1, 2, 3}) change exactly their stage:

* stage 1 off: the bundle is empty, whatever was passed (Table 2, "w/o tool bundle acquisition": "queries being
  exclusively mapped to unresolved problems without any existing recommended tools"): stage 2 extracts the
  requirements, asks no D.2 question, and every requirement is an unsolved problem for stage 3.
* stage 2 off: no teacher question; the whole bundle is kept, and stage 3 (when on) gets the query itself as its
  one unsolved problem (Algorithm 1 on the query, as the released code's re-ranker is written).
* stage 3 off: nothing is added; the unsolved problems stay in the trace.
* only stage 1: the bundle alone (Table 1's "N/A" rows).

The ranking (what the metrics read, NDCG being order-sensitive): the kept bundle tools in the bundle's order (the
order stage 1 gives), then the re-ranked additions in the order of their problems (D.1's order). The paper's
recommendation is a set and the released code returns ``list(set(...))``, an arbitrary order; this order is ours,
chosen so that an ablation never reorders what an earlier stage put first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from train.papers.ptr.batching import PrefetchingBackend, prefetch_coverage
from train.papers.ptr.coverage import map_coverage
from train.papers.ptr.rerank import Embedder, K, MultiView
from train.teacher.backends import StageParams

ALL_STAGES = (1, 2, 3)


def parse_stages(stages: Iterable[int] | str) -> tuple[int, ...]:
    """``"1,2,3"`` / ``[1, 3]`` -> sorted stage numbers; ValueError naming the valid ones."""
    items = [s for s in stages.split(",") if s.strip()] if isinstance(stages, str) else list(stages)
    try:
        picked = sorted({int(s) for s in items})
    except (TypeError, ValueError):
        raise ValueError(f"stages must be numbers from {ALL_STAGES}, got {stages!r}") from None
    if not set(picked) <= set(ALL_STAGES):
        raise ValueError(f"unknown stage(s) {sorted(set(picked) - set(ALL_STAGES))}; valid: 1, 2, 3")
    return tuple(picked)


@dataclass
class Trace:
    """What PTR did for one query, stage by stage (``to_json`` for a JSONL line)."""

    query: str
    stages: list[int]
    bundle: list[str]  # stage 1's bundle as used (empty when stage 1 is off)
    requirements: list[str] = field(default_factory=list)  # stage 2: D.1's answer
    matches: list[dict[str, Any]] = field(default_factory=list)  # stage 2: D.2's answer per requirement
    kept: list[str] = field(default_factory=list)  # bundle tools kept, bundle order
    scenario: str | None = None  # stage 2's assessment: exact | over | partial
    unsolved: list[str] = field(default_factory=list)  # the problems stage 3 works on
    views: list[dict[str, Any]] = field(default_factory=list)  # stage 3: Algorithm 1 per problem
    added: list[str] = field(default_factory=list)  # stage 3's additions, problem order
    ranking: list[str] = field(default_factory=list)  # kept + added
    issues: dict[str, int] = field(default_factory=dict)  # counted reader / teacher problems (coverage.ISSUES)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Recommender:
    """PTR stages 2-3 over one library and history: the tools and past queries are embedded once, here."""

    def __init__(
        self,
        library: Mapping[str, str],
        history: Sequence[Any],  # rerank.past_query's rows
        teacher: Any = None,
        embedder: Embedder | None = None,
        stages: Iterable[int] | str = ALL_STAGES,
        k: int = K,
        params: StageParams | None = None,  # how stage 2's questions are sampled (None: the paper's)
    ):
        self.stages = parse_stages(stages)
        self.params = params
        if 2 in self.stages and teacher is None:
            raise ValueError("stage 2 (coverage mapping) needs a teacher")
        if 3 in self.stages and embedder is None:
            raise ValueError("stage 3 (re-ranking) needs an embedder")
        self.library, self.teacher = dict(library), teacher
        self.views = MultiView(self.library, history, embedder, k) if 3 in self.stages else None
        self.issues: Counter = Counter()  # summed over every query asked

    def prefetch(self, items: Sequence[tuple[str, Sequence[str]]]) -> bool:
        """Ask stage 2's questions for many (query, bundle) pairs ahead, in batches, when the teacher's backend
        can (``batching.PrefetchingBackend``); ``recommend`` then reads the answers. False when nothing was done."""
        backend = getattr(self.teacher, "backend", None)
        if 2 not in self.stages or not isinstance(backend, PrefetchingBackend):
            return False
        planned = [(query, bundle if 1 in self.stages else ()) for query, bundle in items]  # as recommend sees them
        prefetch_coverage(self.teacher, planned, self.library, self.params)
        return True

    def forget_prefetched(self) -> None:
        backend = getattr(self.teacher, "backend", None)
        if isinstance(backend, PrefetchingBackend):
            backend.forget()

    def recommend(self, query: str, bundle_tools: Sequence[str]) -> tuple[list[str], Trace]:
        bundle = list(dict.fromkeys(bundle_tools)) if 1 in self.stages else []
        trace = Trace(query=query, stages=list(self.stages), bundle=bundle, kept=list(bundle))
        if 2 in self.stages:
            coverage = map_coverage(query, bundle, self.library, self.teacher, self.params)
            trace.requirements, trace.matches = coverage.requirements, coverage.matches
            trace.kept, trace.unsolved, trace.scenario = coverage.kept, coverage.unsolved, coverage.scenario
            trace.issues = dict(coverage.issues)
            self.issues.update(coverage.issues)
        elif 3 in self.stages:
            trace.unsolved = [query]
        if self.views is not None:
            trace.added, views = self.views.resolve(trace.unsolved, trace.kept)
            trace.views = [v.to_json() for v in views]
        trace.ranking = [*trace.kept, *trace.added]
        return list(trace.ranking), trace


def recommend(
    query: str,
    bundle_tools: Sequence[str],
    library: Mapping[str, str],
    history: Sequence[Any],  # rerank.past_query's rows
    teacher: Any,
    embedder: Embedder | None,
    stages: Iterable[int] | str = ALL_STAGES,
    k: int = K,
) -> tuple[list[str], Trace]:
    """One query through PTR. Embeds the library and history on every call: for many queries build one
    ``Recommender`` and call its ``recommend``."""
    return Recommender(library, history, teacher, embedder, stages, k).recommend(query, bundle_tools)


__all__ = ["ALL_STAGES", "Recommender", "Trace", "parse_stages", "recommend"]
