"""BFCL multi-turn (base, miss_func, miss_param, long_context): episodes executed against BFCL's own environments.

``execute`` builds the environments (bfcl-eval's classes, initialised from an entry's ``initial_config``) and runs
one call by name on a permitted method, never by ``eval``; ``episode`` drives one entry with a model (turns, steps,
tool results as tool messages, the held-out function added where BFCL adds it); ``check`` scores the recorded calls
with BFCL's multi-turn semantics (every environment's state and the executed-result subset check, per turn);
``task`` is the generation task ``bfcl_multi_turn`` and its ``ScorerSpec``. Needs the ``bfcl-eval`` package
(``pip install --no-deps bfcl-eval==2026.3.23``). Nothing is imported here.
"""
