"""Meta-Tool's spec (``PAPERS["metatool"]``). The paper adds nothing to a run's config: its recipes (MT-LLaMA) use
the ``metatool`` builder (``train.builders``) and the ``metabench`` benchmark (``train.evaluation``), which are
registered where every builder and benchmark is. Its verb: ``tooltrain eval retrieval`` (``verbs/retrieval.py``).
A run whose data comes from the ``metatool`` builder ends with Table 2 beside its Meta-Bench rows
(``paper_tables.table``)."""

from __future__ import annotations

from typing import Any

from train.papers.spec import PaperSpec


def table(cfg: Any, summary: dict[str, Any]) -> Any:
    from train.papers.metatool.paper_tables import table as table_2

    return table_2(cfg, summary)


PAPER = PaperSpec(
    title="Meta-Tool / MT-LLaMA: tool retrieval by a meta_tool call",
    builders=("metatool",),
    table=table,
    verbs={
        "eval retrieval": (
            "train.papers.metatool.verbs.retrieval",
            "HR@k of tool retrieval (by a retrieval call, history, keyword) on queries",
        ),
    },
)
