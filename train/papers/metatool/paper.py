"""Meta-Tool's spec (``PAPERS["metatool"]``). The paper adds nothing to a run's config: its recipes (MT-LLaMA) use
the ``metatool`` builder (``train.builders``) and the ``metabench`` benchmark (``train.evaluation``), which are
registered where every builder and benchmark is."""

from __future__ import annotations

from train.papers.spec import PaperSpec

PAPER = PaperSpec(title="Meta-Tool / MT-LLaMA: tool retrieval by a meta_tool call")
