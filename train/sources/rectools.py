"""RecTools (PTR paper) and PTR's views of MetaTool -> ``ToolQuery`` records plus one ``ToolLibrary``.

INPUTS: the query file (``RecTools_QT.json`` or ``MetaTool_QT.json``: ``[{"query", "tool": [names]}]``,
the gold tool *set*), then the tool file (``*_tool.json``: ``{name: description}``).

This is MetaTool's multi-tool layout, so the parsing is ``train.sources.metatool``'s; only
``meta["source"]`` differs. Queries are kept exactly as published: the stray ``"**\\n\\n"`` that
starts some RecTools queries and the odd ``"local"`` label (which *is* a tool of
``RecTools_tool.json``) stay. A gold name missing from the tool file is a warning kept in
``meta["unknown_gold"]``, not a reject (see metatool's docstring). ids: ``f"{path.stem}-{index}"``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from train.base.records import Rejected, check_arity
from train.schema import Record
from train.sources.metatool import read_query_dataset

SOURCE = "rectools"


def read(inputs: list[Path]) -> Iterator[Record | Rejected]:
    check_arity(inputs, ("query file (*_QT.json)", "tool file (*_tool.json)"))
    yield from read_query_dataset(inputs[0], inputs[1], source=SOURCE)
