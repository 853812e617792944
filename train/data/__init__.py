"""The data layer: canonical conversations -> the tokenized, masked, packed rows a run trains on.

It holds the dataset build (``dataset``: reading sources, the conversation transform, rendering through a
format, tokenizing, masking, the cache key), the built dataset on disk (``token_store``: memory-mapped columns),
best-fit packing and the collators (``packing``), the ordered process pool the build runs on
(``ordered_pool``), counts of canonical files (``stats``) and the cache measured at corpus scale
(``cache_bench``).

It may import the layers below it: the base, the readers, tokenizers and model files, retrieval, formats and the
teacher (today it uses neither retrieval nor the teacher). It never imports a paper's wing nor the builders
registry: the engine binds a recipe's builder and hands it in as the conversation transform. Data code does not
know its rank either (ranks are the engine's). Evaluation, the engine, the papers and the verbs import it; it
imports none of them (``tests/test_layers.py`` checks the arrows).
"""
