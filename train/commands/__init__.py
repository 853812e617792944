"""The CLI's verbs, one module per verb, in a package per group: ``tooltrain GROUP VERB`` is
``train/commands/GROUP/VERB.py`` (``data/``, ``eval/``, ``bench/``); the verbs without a group (``export``,
``launch``, ``demo``) sit here. A paper's own verbs (``eval retrieval``, ``eval recommend``) sit in its wing,
``train/papers/<paper>/verbs/``, named in its ``PaperSpec.verbs``: the same contract, the same layer, the same
helpers. ``train.cli`` imports only the verb it runs.

A verb module exposes ``add_arguments(parser)`` and ``run(args) -> int`` (the exit code). It parses its arguments,
calls the rooms that own the work (``train.sources``, ``train.validate``, ``train.formats``, ``train.data``,
``train.evaluation``, ``train.engine``, ``train.papers``) and prints; it holds no domain logic of its own.

A verb never imports another verb, nor ``train.cli``. What verbs share lives in a helper module, never in a verb:
helpers of one group in that group's package (``data/rejects.py``, ``bench/common.py``, ``eval/score_report.py``
...), helpers of several groups here:

* ``outputs``: the one way a verb writes a file (staged, never over an input) and the ``-o``/``--out-dir`` types;
* ``arg_types``: the verbs' number types (counts, temperatures), refused when the command line is parsed;
* ``chat_setup``: the chat format and tokenizer a verb renders with, by name (``data render``, ``bench *``).

Spelling, the same in every verb: ``-o`` names a file (``--output``), ``--out-dir`` a folder, a recipe is
``recipe=NAME``, and BENCH is the first positional of ``eval run`` and ``eval score``. ``tests/test_layers.py``
and ``tests/test_cli_spelling.py`` check both.
"""
