"""ToolGT (seed 004): template-guided reasoning before BFCL-style calls.

* ``paper``: the spec ``train.papers.PAPERS`` registers: the ``toolgt:`` config node (arm, template, eval data), its
  checks and resume rule, ``--summary toolgt``.
* ``builder``, ``builder_spec``, ``checks``: the ``toolgt`` data builder, its arguments, its stage-3 rules and the
  decontamination index against the eval rows.
* ``teacher``: the paper's templates and questions, and the offline teacher's answers.
* ``paper_tables``: Tables 2 and 6 as data, and the ``--summary toolgt`` lines for BFCL and Nexus.
* ``run_table``: Table 2 at the end of a run, the paper's rows beside the run's (``PaperSpec.table``).

BFCL and Nexus themselves (readers, scorers, the BFCL summaries) are shared rooms (``train.sources``,
``train.evaluation``).
"""
