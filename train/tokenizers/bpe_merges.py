"""Byte-level BPE vocab and merges from tiktoken-style ranks, exactly as transformers derives them, faster.

transformers' ``TikTokenConverter.extract_vocab_merges_from_model`` and ``MistralConverter._extract_merges``
turn a ``{token bytes: rank}`` table into the ``tokenizers`` BPE's vocab and ordered merges. Their Python
loop maps every byte of every piece through a dict, one character at a time, and sorts ~0.7M merges with
tuple keys: 7 s of a 9.7 s Llama 3 build, 15 s for Llama 4's 200k ranks, paid by every fresh build (the
first run of a user's job, every fresh CI clone). ``byte_level_vocab_and_merges`` returns the same vocab and
the same merges in the same order: each piece's text is made once with ``str.translate`` and reused, the
splits of a token are tried with one dict lookup per half, and the merges come out in rank order already.

The converters below are transformers' own with only that step replaced, so the pre-tokenizer, decoder and
post-processor stay the library's. tests/test_bpe_merges.py checks the output against transformers' own
functions on rank tables it was not written against.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any


def byte_level_vocab_and_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """The vocab ``{byte-level text: rank}`` and the merges ``[(left text, right text)]`` of ``ranks``.

    A token of two or more bytes contributes one merge per way of cutting it into two pieces that are both
    tokens, ordered by the pieces' ranks (left first); tokens contribute in rank order, ties in table order.
    """
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    # bytes -> latin-1 text is one character per byte; translate then maps each to its printable stand-in
    table = {byte: char for byte, char in bytes_to_unicode().items()}
    text = {token: token.decode("latin-1").translate(table) for token in ranks}
    vocab = {text[token]: rank for token, rank in ranks.items()}

    get = ranks.get
    merges: list[tuple[str, str]] = []
    for token, _ in sorted(ranks.items(), key=itemgetter(1)):  # stable: equal ranks keep the table's order
        cuts = []
        for cut in range(1, len(token)):
            left = get(token[:cut])
            if left is None:
                continue
            right = get(token[cut:])
            if right is not None:
                cuts.append((left, right, cut))
        if len(cuts) > 1:
            cuts.sort(key=lambda found: (found[0], found[1]))  # stable, like transformers' sorted()
        merges.extend((text[token[:cut]], text[token[cut:]]) for _, _, cut in cuts)
    return vocab, merges


def tiktoken_converter(vocab_file: str, pattern: str) -> Any:
    """transformers' ``TikTokenConverter`` for ``vocab_file`` whose vocab and merges come from
    ``byte_level_vocab_and_merges``."""
    from transformers.convert_slow_tokenizer import TikTokenConverter

    class _Converter(TikTokenConverter):
        def extract_vocab_merges_from_model(self, tiktoken_url: str):
            return byte_level_vocab_and_merges(self.load_tiktoken_bpe(tiktoken_url))

    return _Converter(vocab_file=vocab_file, pattern=pattern)


def mistral_converter(vocab_file: str) -> Any:
    """transformers' ``MistralConverter`` for a ``tekken.json`` whose vocab and merges come from
    ``byte_level_vocab_and_merges``."""
    from transformers.integrations.mistral import MistralConverter

    class _Converter(MistralConverter):
        _extract_merges = staticmethod(byte_level_vocab_and_merges)

    return _Converter(vocab_file=vocab_file, add_prefix_space=False)
