"""``tooltrain bench VERB``: speed and memory of tooltrain's paths next to trl's, measured on the user's data and
machine. ``render``: render + tokenize + mask rates; ``data``: those rates, then the build and the read at corpus
scale in fresh processes; ``train``: training tokens/s, padding efficiency and peak memory of a recipe, packed,
padded and through trl's ``SFTTrainer``.

The measurements live in the layer they measure: ``train.data.bench_render`` (rates), ``train.engine.bench_data``
(build and read: the read goes through the engine's row maker) and ``train.engine.bench_train`` (training). A
verb checks its inputs, calls them and prints the table. ``common`` is the group's shared helper (input refusal,
the rates table), not a verb. The scripts in ``benchmarks/`` are outside the installed package, so the CLI cannot
call them: the code these verbs run stays in ``train/``.
"""
