"""Meta-Tool / MT-LLaMA (seed 000): open-world tool calling, where a model asks a ``meta_tool`` call for the tools it
needs and a retriever answers with their definitions.

* ``paper``: the spec ``train.papers.PAPERS`` registers (the paper adds no config node of its own).
* ``builder``, ``builder_spec``, ``teacher``, ``special``: the ``metatool`` data builder (MT-LLaMA training rows with
  meta_tool insertions and rewrites), its arguments, its teacher and the paper's special functions.
* ``metabench_build``, ``metabench``, ``pool``: Meta-Bench built from held-out dialogues, and its scorer.
* ``retrieve``, ``retriever``, ``baselines``, ``hypothesis``, ``retrieval_eval``: Algorithm 1, its baselines and the
  HR@k evaluation behind ``tooltrain eval retrieval``.
"""
