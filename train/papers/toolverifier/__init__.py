"""ToolVerifier (seed 003): tool selection with self-verification by contrastive questions.

* ``paper``: the spec ``train.papers.PAPERS`` registers: the ``eval.toolbench_verify`` node, its check, its input
  and its after-training step.
* ``builder``: the ``toolselect`` data builder (the selector's training rows).
* ``teacher``, ``verify``, ``demos``: the paper's questions, the verification pipeline at inference, and the
  few-shot demonstrations for parameter generation.
* ``bench``: Tables 1 and 2 on SambaNova ToolBench from one pass (``eval run toolbench --verify``).
* ``after_training``: the same verification with a just-trained model as the selector.
"""
