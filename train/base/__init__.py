"""The base layer: small pieces every other layer may import, and which import nothing above them.

It holds what has no better home higher up because everything needs it: the user-error exception
(``errors.ConfigError``), progress bars (``progress``), the cache root every layer writes under (``cache``),
record reading shared by the readers and the data layer (``records``: where a record came from, why it was
rejected, JSON I/O), bounded JSON Schema checking (``json_schema``), Python call syntax read with ``ast``
(``pysyntax``) and the tool-call markers ``train.validate`` and the readers agree on (``call_markers``).

Its layer also holds the modules at the top of ``train/`` that everything uses: the record contract
(``train.schema``, ``train.validate``) and the registries (``train.registry``, ``train.builders``, ``PAPERS``), which
name higher modules only as ``"module:attr"`` strings. A module here imports the standard library, third-party
packages and other base modules, never a package above it (``tests/test_layers.py`` checks the arrows).
"""
