"""Meta-Tool's verbs: ``tooltrain eval retrieval`` (``retrieval``; its Hydra form ``retrieval_sweep``, the shared part
``retrieval_core``), registered in its ``PaperSpec.verbs``. The commands layer (tests/test_layers.py): they use the
verbs' helpers (``train.commands.outputs``); nothing but the CLI imports them."""
