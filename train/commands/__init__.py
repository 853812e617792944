"""CLI verbs. Each verb module exposes ``add_arguments(parser)`` and ``run(args) -> int`` (the exit code).

A verb never imports another verb, nor ``train.cli``: what two verbs share lives in a helper module here
(``outputs``, ``rejects``, ``score_report``, ``chat_setup``, ``eval_retrieval_core``; the other forms of one verb,
``eval_score_bfcl`` and ``eval_retrieval_sweep``). Spelling, the same in every verb: ``-o`` names a file
(``--output``), ``--out-dir`` a folder, a recipe is ``recipe=NAME``, and BENCH is the first positional of
``eval run`` and ``eval score``. ``tests/test_layers.py`` and ``tests/test_cli_spelling.py`` check both.
"""
