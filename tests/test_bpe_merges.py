"""train.tokenizers.bpe_merges gives exactly transformers' vocab and merges, in the same order."""

import base64
import functools
import random

import pytest
from transformers.convert_slow_tokenizer import TikTokenConverter
from transformers.integrations.mistral import MistralConverter

from train.tokenizers.bpe_merges import byte_level_vocab_and_merges, mistral_converter, tiktoken_converter
from train.tokenizers.tiktoken_based import qwen_tiktoken_file


def _write_tiktoken(path, ranks):
    path.write_text("".join(f"{base64.b64encode(token).decode()} {rank}\n" for token, rank in ranks.items()))
    return path


@functools.cache
def _qwen_ranks() -> dict[bytes, int]:
    from tiktoken.load import load_tiktoken_bpe

    return load_tiktoken_bpe(str(qwen_tiktoken_file()))


def _shuffled_slice_of_qwen(count: int, seed: int) -> dict[bytes, int]:
    """Real ranks the function was not written against: a slice of Qwen's file, in a shuffled table order."""
    picked = [(token, rank) for token, rank in _qwen_ranks().items() if rank < count]
    random.Random(seed).shuffle(picked)
    return dict(picked)


def test_a_hand_table_gives_the_merges_worked_out_by_hand():
    # "abc" cuts into a+bc (ranks 0, 4) and ab+c (3, 2): ordered by the left piece's rank, so a+bc first;
    # tokens contribute in rank order, not table order ("bc" has rank 4, below "abc"'s 5)
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"abc": 5, b"ab": 3, b"bc": 4, b" \n": 6, b" ": 7, b"\n": 8}
    vocab, merges = byte_level_vocab_and_merges(ranks)
    assert merges == [("a", "b"), ("b", "c"), ("a", "bc"), ("ab", "c"), ("Ġ", "Ċ")]
    assert list(vocab.items()) == [
        ("a", 0), ("b", 1), ("c", 2), ("abc", 5), ("ab", 3), ("bc", 4), ("ĠĊ", 6), ("Ġ", 7), ("Ċ", 8)
    ]


@pytest.mark.parametrize("seed", [0, 1])
def test_real_ranks_in_any_table_order_equal_transformers_mistral_converter(seed):
    ranks = _shuffled_slice_of_qwen(20_000, seed)
    ours = byte_level_vocab_and_merges(ranks)
    reference = MistralConverter._extract_merges(ranks)
    assert ours == reference
    assert list(ours[0]) == list(reference[0])  # the vocab's order too


def test_equal_ranks_keep_transformers_order():
    ranks = {b"x": 0, b"y": 1, b"xy": 2, b"yx": 2, b"xx": 2}
    assert byte_level_vocab_and_merges(ranks) == MistralConverter._extract_merges(ranks)


def test_the_tiktoken_converter_builds_the_tokenizer_transformers_builds(tmp_path):
    rank_file = _write_tiktoken(tmp_path / "ranks.tiktoken", _shuffled_slice_of_qwen(5_000, 2))
    pattern = r"""'s|'t| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+"""
    ours = tiktoken_converter(str(rank_file), pattern).converted()
    reference = TikTokenConverter(vocab_file=str(rank_file), pattern=pattern).converted()
    assert ours.to_str() == reference.to_str()


def test_the_mistral_converter_builds_the_tokenizer_transformers_builds(tmp_path):
    import json

    ranks = _shuffled_slice_of_qwen(3_000, 3)
    ordered = sorted(ranks.items(), key=lambda item: item[1])
    tekken = {
        "config": {"pattern": r"""[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+""", "default_vocab_size": 3_010,
                   "default_num_special_tokens": 10, "version": "v3"},
        "vocab": [{"rank": rank, "token_bytes": base64.b64encode(token).decode(), "token_str": None}
                  for token, rank in ordered],
        "special_tokens": [{"rank": i, "token_str": f"<SPECIAL_{i}>", "is_control": True} for i in range(10)],
    }
    path = tmp_path / "tekken.json"
    path.write_text(json.dumps(tekken))
    ours = mistral_converter(str(path)).converted()
    reference = MistralConverter(vocab_file=str(path), add_prefix_space=False).converted()
    assert ours.to_str() == reference.to_str()
