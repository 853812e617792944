"""Readers: one module per source layout, each turning source files into canonical records.

A reader is ``read(inputs: list[pathlib.Path]) -> Iterator[Record | Rejected]``.
It yields one item per source record (a canonical record, or a ``Rejected`` naming where and
why), so ``read = accepted + rejected`` always holds for the caller. It raises ``SourceError``
only when the inputs cannot be read at all (missing file, wrong number of inputs).
The dialogue readers and the canonical one take their rows from ``train.sources.tables.iter_rows``:
JSON and JSON Lines, or Parquet, Arrow, CSV and ``datasets`` folders, streamed a batch at a time.
A reader may also yield one ``ToolLibrary`` (the tools a query dataset ranks); it is not a source
record and is written beside the output rather than counted.

``SOURCES`` is the one list of readers (``train.registry``); wherever a source is named
(``data.sources.N.name``, ``data convert SOURCE``, ``data build SOURCE:PATH``, ``eval run --source``),
``module:attr`` naming a reader function of your own works too (``docs/extending.md``). A reader's
module docstring says what it reads (its ``INPUTS:`` paragraph is ``data convert``'s help).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from train.base.records import Rejected, SourceError
from train.registry import Registry
from train.schema import Record

Reader = Callable[[list[Path]], Iterator["Record | Rejected"]]

# Imported on first use, so one source's optional dependency never slows the others.
SOURCES: Registry[Reader] = Registry("source", "sources", callable, SourceError)
SOURCES.register("canonical", "train.sources.canonical:read")  # already converted: checked and read as is
SOURCES.register("glaive", "train.sources.glaive:read")
SOURCES.register("sharegpt", "train.sources.sharegpt:read")
SOURCES.register("openai", "train.sources.openai:read")
SOURCES.register("toolace", "train.sources.toolace:read")
SOURCES.register("xlam", "train.sources.xlam:read")
SOURCES.register("bfcl", "train.sources.bfcl:read")
SOURCES.register("toolbench", "train.sources.toolbench:read")
SOURCES.register("toolselect", "train.sources.toolselect:read")
SOURCES.register("nexus", "train.sources.nexus:read")
SOURCES.register("itc", "train.sources.itc:read")
SOURCES.register("itc_release", "train.sources.itc_release:read")  # the ITC dataset as released (Figs 4, 16-20)
SOURCES.register("metatool", "train.sources.metatool:read")
SOURCES.register("toollens", "train.sources.toollens:read")
SOURCES.register("rectools", "train.sources.rectools:read")


def get_reader(name: str) -> Reader:
    """The reader ``name`` (registered, or ``module:attr``); SourceError listing the valid names."""
    return SOURCES.get(name)


def reader_doc(name: str) -> str:
    """The docstring of the module that defines reader ``name``."""
    module = sys.modules.get(getattr(get_reader(name), "__module__", ""), None)
    return (module.__doc__ if module is not None else None) or ""


__all__ = ["SOURCES", "Reader", "Rejected", "SourceError", "get_reader", "reader_doc"]
