"""Tool retrieval shared by the papers: sentence embedders and their cache (``embed``), and a tool library
indexed once per embedder (``index``). Meta-Tool's retriever, baselines and special functions are its wing's
(``train.papers.metatool``); PTR's stages use the same embedders.
"""
