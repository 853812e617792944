"""Which side of the eval split a conversation is on, by id. The split goes by the id a conversation's source gave it
(``split_id``): ``train.data.dataset.read_conversations`` keeps a conversation whose id an earlier source used under
``s<i>/<id>``, and that renaming never moves it across the split (``is_eval``).
"""

from __future__ import annotations

import re
import zlib

SOURCE_PREFIX = re.compile(r"s[0-9]+/")  # what read_conversations puts before an id an earlier source used
COPY_SUFFIX = re.compile(r"#[0-9]+$")  # what a source's weight puts after a repeated copy's id (<id>#2)


def split_id(conv_id: str) -> str:
    """The id the eval split goes by: the one the conversation's source gave it (``s1/7`` -> ``7``), so the two
    copies of a file listed twice are on the same side (never one trained, the other held out), and renaming never
    moves a conversation across the split."""
    prefix = SOURCE_PREFIX.match(conv_id)
    conv_id = conv_id[prefix.end() :] if prefix else conv_id
    copy = COPY_SUFFIX.search(conv_id)  # a weighted copy is on its original's side: never one trained, one held out
    return conv_id[: copy.start()] if copy else conv_id


def is_copy(conv_id: str) -> bool:
    """A weighted copy (``<id>#k``, ``train.data.dataset.weighted``): held out, it is left out, so the eval split holds
    each conversation once whatever its source's weight."""
    return COPY_SUFFIX.search(conv_id) is not None


def is_eval(conv_id: str, fraction: float) -> bool:
    """A stable split: the same id is always on the same side, whatever else is in the data. It goes by
    ``split_id``: a conversation renamed for its source (``s1/<id>``) is on the side of ``<id>``."""
    return fraction > 0 and zlib.crc32(split_id(conv_id).encode("utf-8")) % 10_000 < fraction * 10_000
