"""PTR, precision-driven tool recommendation (seed 001): a tool library, a history of (query, gold tool set), and
the three stages that turn a query into a recommended tool *set*.

* ``data``: the library and history of RecTools, MetaTool (PTR's 47-tool view) and ToolLens at tool level, and
  the two test splits (seeded random 20%, the paper's text; the released code's first 100 rows).
* ``bundles``: stage 1, tool bundle acquisition (BM25Okapi as the released code, or a dense embedder).
* ``evaluate``: stage 1 (and, once they land, stages 2-3) over a split, scored with both metric conventions of
  ``train.papers.ptr.scorer``, averaged over seeds, printed in Table 1's layout beside the paper's rows.

Stages 2 (functional coverage mapping) and 3 (multi-view re-ranking) live in ``coverage``, ``rerank`` and
``pipeline`` (built separately); ``evaluate.recommend_with_stages`` is the one place they plug in.

* ``paper``: the spec ``train.papers.PAPERS`` registers: the ``ptr:`` config node, its ranges and resume rule, and
  ``job``, the evaluation-only job ``tooltrain train recipe=ptr*`` runs instead of training.
* ``backbone``, ``batching``, ``teacher``: stages 2-3's LLM (a teacher backend or a run folder) and its prompts.
"""
