"""PTR, precision-driven tool recommendation (seed 001): tool bundle acquisition (stage 1), functional coverage
mapping (stage 2, ``train.recommend.coverage``), multi-view re-ranking (stage 3, ``train.recommend.rerank``) and the
per-query pipeline with its switches and trace (``train.recommend.pipeline``). docs/ptr.md describes them.
"""
