"""What ``tooltrain data convert`` keeps of a reader's items (the verb opens the files, writes and prints).

* ``canonical_line``: a record's canonical JSON line (UTF-8 bytes), or the ``Rejected`` that replaces it: a
  conversation whose text still carries tool-call markup after its reader (``train.sources.call_markup``: its calls
  would train as text, with no tools listed), with ``validate`` one that fails tool-aware validation with an *error*
  (warnings pass), and any record whose text is not Unicode (a lone surrogate cannot be encoded as UTF-8).
* ``trains_nothing``: a conversation with no assistant turn, which converts but gives a trainer nothing.
* ``source_inputs``: what a source reads, in order, from its module's ``INPUTS:`` paragraph.
"""

from __future__ import annotations

import re

from train.base.records import Rejected
from train.schema import Conversation, Record, dumps
from train.sources import reader_doc
from train.sources.call_markup import markup_reject
from train.validate import check_conversation


def canonical_line(item: Record | Rejected, validate: bool = False) -> bytes | Rejected:
    """``item``'s line (no newline), or its reject (a ``Rejected`` item is returned as it is)."""
    if isinstance(item, Conversation) and (markup := markup_reject(item)):
        item = Rejected(item.id, markup, item.to_dict())
    if isinstance(item, Conversation) and validate:
        errors = [p for p in check_conversation(item) if p.severity == "error"]
        if errors:
            item = Rejected(item.id, "; ".join(map(str, errors)), item.to_dict())
    if isinstance(item, Rejected):
        return item
    try:
        return dumps(item).encode("utf-8")
    except UnicodeEncodeError as err:  # lone surrogates: text that is not Unicode
        return Rejected(item.id, f"text-encoding: not encodable as UTF-8 ({err.reason})")


def trains_nothing(record: Record) -> bool:
    """A conversation that ends before any assistant turn."""
    return isinstance(record, Conversation) and not any(m.role == "assistant" for m in record.messages)


def source_inputs(source: str) -> str:
    """What a source reads, in order: the first sentence of its module's ``INPUTS:`` paragraph."""
    doc = reader_doc(source)
    match = re.search(r"^INPUTS?: (.+?)\.(?:\s|$)", doc, re.MULTILINE | re.DOTALL)
    if match is None:
        return "see the convert table in the README"
    return " ".join(match.group(1).replace("``", "").split())
