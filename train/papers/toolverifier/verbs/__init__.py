"""ToolVerifier's form of ``tooltrain eval run`` (``run_verify``: ``--verify``), registered as its
``PaperSpec.eval_run_form``. The commands layer (tests/test_layers.py): it uses the verbs' helpers
(``train.commands.outputs``); ``eval run`` loads it through the registry, nothing imports it by name."""
