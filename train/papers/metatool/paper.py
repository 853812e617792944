"""Meta-Tool's spec (``PAPERS["metatool"]``). The paper adds nothing to a run's config: its recipes (MT-LLaMA) use
the ``metatool`` builder (``train.builders``) and the ``metabench`` benchmark (``train.evaluation``), which are
registered where every builder and benchmark is. Its verb: ``tooltrain eval retrieval`` (``verbs/retrieval.py``)."""

from __future__ import annotations

from train.papers.spec import PaperSpec

PAPER = PaperSpec(
    title="Meta-Tool / MT-LLaMA: tool retrieval by a meta_tool call",
    verbs={
        "eval retrieval": (
            "train.papers.metatool.verbs.retrieval",
            "HR@k of tool retrieval (by a retrieval call, history, keyword) on queries",
        ),
    },
)
