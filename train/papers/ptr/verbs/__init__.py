"""PTR's verbs: ``tooltrain eval recommend`` (``recommend``), registered in its ``PaperSpec.verbs``. The commands layer
(tests/test_layers.py): they use the verbs' helpers (``train.commands.outputs``); nothing but the CLI imports them."""
