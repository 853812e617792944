"""A faster encoder for the text runs of byte-level BPE tokenizers built from tiktoken ranks.

Llama 3 and Qwen2.5 are byte-level BPEs defined by a rank file and a split regex
(``train.tokenizers.tiktoken_based``); transformers' ``TikTokenConverter`` turns them into a
``tokenizers`` vocabulary and merge list. tiktoken encodes the same text from the same ranks and
regex several times faster (profiled on glaive: most of ``tokenize_many``'s time was the
``tokenizers`` encode), so ``train.formats.tokenize`` encodes text runs with it when the
tokenizer is one tiktoken can reproduce. ``byte_bpe_for`` says which, from the tokenizer's own
definition, never from its name:

* the model is a BPE with ``ignore_merges`` (a pre-token that is a whole vocabulary entry is that
  token, as tiktoken does), no dropout, no byte fallback, no word prefixes or suffixes;
* the pre-tokenizer is one regex ``Split`` (isolated) followed by ``ByteLevel`` without its own
  regex, and the normalizer is none or NFC (a run NFC would change is left to ``tokenizers``);
* the merges are exactly what the converter writes: every split of every vocabulary entry into two
  entries, ordered by the id of the merged entry, so the id is tiktoken's rank.

Under those conditions the two encoders merge the same pairs in the same order; the one order
they could break differently (two overlapping pairs that make the same token from different
splits) does not occur in the corpora the tests compare (``tests/formats/test_fast_tokenize.py``),
and where it could, tiktoken is the reference both families define their tokenizers by.

Token ids come back with no offsets; ``byte_lengths`` gives each id's length in bytes, from which
the caller lays the tokens over its segments.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import unicodedata
import weakref
from collections import OrderedDict
from typing import Any

import numpy as np

_ENCODERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# Deciding takes ~1.8 s for a 128k vocabulary (the merges check, tiktoken's tables); each load of the same tokenizer
# is a new object, so the answer is also kept by the definition's hash: a process that loads Llama 3 again (a
# rebuild, an evaluation, the next run of a sweep) decides once. A few entries: one per distinct tokenizer.
_BY_DEFINITION: OrderedDict[bytes, ByteBPE | None] = OrderedDict()
_DEFINITIONS_KEPT = 4


class ByteBPE:
    """``encode(text)`` -> token ids (no added token matched), or None when the normalizer would change
    the text (the caller then uses the tokenizer itself)."""

    def __init__(self, core: Any, byte_lengths: np.ndarray, nfc: bool):
        self._encode = core.encode_ordinary
        self.byte_lengths = byte_lengths  # id -> length of its bytes
        self._nfc = nfc

    def encode(self, text: str) -> list[int] | None:
        if self._nfc and not text.isascii() and not unicodedata.is_normalized("NFC", text):
            return None
        return self._encode(text)


def byte_bpe_for(tokenizer: Any) -> ByteBPE | None:
    """The tiktoken encoder equivalent to ``tokenizer``'s text encoding, or None when there is none."""
    try:
        return _ENCODERS[tokenizer]
    except KeyError:
        pass
    except TypeError:  # not weak-referenceable: decided each time
        return _build(tokenizer)
    encoder = _build(tokenizer)
    _ENCODERS[tokenizer] = encoder
    return encoder


def _build(tokenizer: Any) -> ByteBPE | None:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    text = backend.to_str()
    key = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
    if key in _BY_DEFINITION:
        _BY_DEFINITION.move_to_end(key)
        return _BY_DEFINITION[key]
    encoder = _from_definition(text)
    _BY_DEFINITION[key] = encoder
    while len(_BY_DEFINITION) > _DEFINITIONS_KEPT:
        _BY_DEFINITION.popitem(last=False)
    return encoder


def _from_definition(text: str) -> ByteBPE | None:
    """The encoder for a ``tokenizers`` definition (its JSON text), or None."""
    try:
        import tiktoken
    except ImportError:
        return None
    definition = json.loads(text)
    pattern = _split_pattern(definition.get("pre_tokenizer"))
    normalizer = definition.get("normalizer")
    if pattern is None or normalizer not in (None, {"type": "NFC"}):
        return None
    ranks = _ranks(definition.get("model") or {})
    if ranks is None:
        return None
    try:
        core = tiktoken.Encoding(
            name="tooltrain-byte-bpe", pat_str=pattern, mergeable_ranks=ranks, special_tokens={}
        )._core_bpe
    except Exception:  # noqa: BLE001 - a pattern tiktoken's regex engine does not take: use tokenizers
        return None
    lengths = np.zeros(max(ranks.values()) + 1, dtype=np.int64)
    for token, rank in ranks.items():
        lengths[rank] = len(token)
    return ByteBPE(core, lengths, nfc=normalizer is not None)


def _split_pattern(pre_tokenizer: dict | None) -> str | None:
    """The regex of ``Sequence[Split(regex, isolated), ByteLevel(no regex)]``, else None."""
    if not pre_tokenizer or pre_tokenizer.get("type") != "Sequence":
        return None
    steps = pre_tokenizer.get("pretokenizers") or []
    if len(steps) != 2:
        return None
    split, byte_level = steps
    if split.get("type") != "Split" or split.get("behavior") != "Isolated" or split.get("invert"):
        return None
    if byte_level.get("type") != "ByteLevel" or byte_level.get("use_regex") or byte_level.get("add_prefix_space"):
        return None
    return (split.get("pattern") or {}).get("Regex")


def _ranks(model: dict) -> dict[bytes, int] | None:
    """tiktoken's ranks (token bytes -> id) when the BPE is the converter's image of them, else None."""
    if model.get("type") != "BPE" or not model.get("ignore_merges") or model.get("dropout"):
        return None
    if model.get("byte_fallback") or model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        return None
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    # each byte-level character stands for one byte: map it to the latin-1 character of that byte
    as_latin1 = str.maketrans({char: chr(byte) for byte, char in bytes_to_unicode().items()})
    vocab: dict[str, int] = model.get("vocab") or {}
    try:
        ranks = {token.translate(as_latin1).encode("latin-1"): token_id for token, token_id in vocab.items()}
    except UnicodeEncodeError:  # a token that is not byte-level text
        return None
    if (
        len(ranks) != len(vocab)
        or len(set(ranks.values())) != len(ranks)
        or any(bytes([byte]) not in ranks for byte in range(256))  # tiktoken needs every byte
    ):
        return None
    return ranks if _merges_are_all_splits(model.get("merges") or [], vocab) else None


def _merges_are_all_splits(merges: list, vocab: dict[str, int]) -> bool:
    """Every merge joins two entries into an entry, merges are ordered by the merged entry's id, and every
    two-entry split of every entry is a merge: the BPE merges what tiktoken merges, in the same order."""
    pairs = [tuple(merge.split(" ", 1)) if isinstance(merge, str) else tuple(merge) for merge in merges]
    if len(set(pairs)) != len(pairs) or not all(left in vocab and right in vocab for left, right in pairs):
        return False
    merged = [vocab.get(left + right, -1) for left, right in pairs]
    if -1 in merged or any(a > b for a, b in itertools.pairwise(merged)):
        return False
    # byte-level text has one character per byte, so the splits of the strings are those of the bytes
    splits = [1 for token in vocab for cut in range(1, len(token)) if token[:cut] in vocab and token[cut:] in vocab]
    return len(splits) == len(pairs)
