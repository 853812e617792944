"""Tool retrieval shared by the papers: sentence embedders and their on-disk cache (``embed``), and a tool
library indexed once per embedder (``index``). A paper's own retriever lives in its wing and builds on these.
"""
