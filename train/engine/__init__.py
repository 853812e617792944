"""The engine: one training run, from a composed config to a finished run folder.

It holds the config (schema, composition, ranges, overrides, resume rules), the ``tooltrain train`` entry and
``run(cfg)``, the model and LoRA, distributed setup, the loss and FLOPs, the Trainer's arguments and callbacks
(metrics, throughput, checkpoints, signals, the eval callback), the run folder (inputs, checkpoints, export),
tracking, the console lines, the summary and report, and launch plans (torchrun, deepspeed, Slurm).

It may import every layer below it: the base, the readers, tokenizers and model files, retrieval, formats, the
teacher, the data layer and evaluation. It never imports a paper's wing (``train.papers.<paper>``): a paper is
reached through a registry (``PAPERS``, ``BUILDERS``, ``TASKS``) whose entries are ``"module:attr"`` strings, so
the dependency from the papers to the engine runs one way. The verbs and the CLI sit above it and import it;
it imports neither (``tests/test_layers.py`` checks the arrows).
"""
