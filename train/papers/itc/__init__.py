"""International Tool Calling (ITC, seed 002): multilingual tool-calling tasks built from canonical conversations.

* ``paper``: the spec ``train.papers.PAPERS`` registers: the ``itc:`` config node (``itc.languages``, Table 7's
  English-only arm), its check and resume rule, ``--summary itc``.
* ``builder`` and ``builder_spec``: the ``itc`` data builder (tasks, answers, languages) and its arguments.
* ``teacher``: the paper's prompts and answer text, and the offline teacher's Thought writer.
* ``paper_tables``: Tables 3, 5 and 7 as data, and the ``--summary itc`` lines printed beside measured numbers.

The ITC benchmark's reader and scorer are shared rooms (``train.sources``, ``train.evaluation.itc``).
"""
