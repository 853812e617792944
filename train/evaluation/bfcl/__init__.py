"""BFCL (Berkeley Function Calling Leaderboard): the AST checker and its leaderboard summaries, one room.

``scorer`` restates the official checker (``score_bfcl``, per category); ``values`` checks one argument against
its possible answers and ``literals`` reads Java/JavaScript argument literals, as that checker does; ``decode``
reads a Java/JavaScript text answer into calls as BFCL's prompting handlers do (``java_calls``, ``js_calls``);
``summary`` aggregates per-category accuracies the leaderboard's way (v4, v3, v2, ToolGT's table); ``leaderboard``
prints them as the leaderboard does, beside published reference models; ``v4`` finds the BFCL v4 data in the
installed ``bfcl-eval`` package and says which task runs each category (or why it is skipped); ``task`` writes the
prediction rows for ``eval run`` and the eval callback and holds the benchmark's ``ScorerSpec`` (``SPEC``,
registered in ``train.evaluation.SCORERS``). Nothing is imported here: each piece is imported where it is used.
"""
