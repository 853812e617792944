"""The dataset cache key covers the whole tokenizer: two tokenizers with the same vocabulary but another
normalizer or other special tokens tokenize differently, so they must not share cached rows."""

from __future__ import annotations

from tokenizers import normalizers

import train.tokenizers
from train.data.inputs import cache_key
from train.tokenizers import load_tokenizer

DATA = {
    "name": "t",
    "sources": [{"name": "glaive", "inputs": ["pkg://train/assets/demo/glaive_sample.json"]}],
    "max_seq_len": 1024,
    "overlong": "truncate",
}


def key(tokenizer) -> str:
    return cache_key(DATA, "chatml", tokenizer)


def test_the_same_tokenizer_loaded_again_gives_the_same_key():
    assert key(load_tokenizer("tiny_chatml")) == key(load_tokenizer("tiny_chatml"))
    assert key(load_tokenizer("tiny_chatml", cache=False)) == key(load_tokenizer("tiny_chatml"))  # built == loaded


def test_another_normalizer_with_the_same_vocabulary_gives_a_new_key():
    base, changed = load_tokenizer("tiny_chatml"), load_tokenizer("tiny_chatml")
    changed.backend_tokenizer.normalizer = normalizers.Lowercase()
    assert changed.get_vocab() == base.get_vocab()
    assert key(changed) != key(base)


def test_another_special_token_gives_a_new_key():
    base = key(load_tokenizer("tiny_chatml"))
    eos = load_tokenizer("tiny_chatml")
    eos.eos_token = "<|endoftext|>"  # an existing token, so the vocabulary stays the same
    added = load_tokenizer("tiny_chatml")
    added.add_special_tokens({"additional_special_tokens": ["<tool_call>"]})
    assert len({base, key(eos), key(added)}) == 3


def test_a_new_tokenizer_build_version_gives_a_new_key(monkeypatch):
    tokenizer = load_tokenizer("tiny_chatml")
    base = key(tokenizer)
    monkeypatch.setattr(train.tokenizers, "BUILD_VERSION", "999")
    assert key(tokenizer) != base


def test_another_chat_template_gives_a_new_key_where_the_format_renders_with_it():
    from train.formats import FALLBACK

    tokenizer = load_tokenizer("tiny_chatml")
    before = cache_key(DATA, FALLBACK, tokenizer)
    plain = cache_key(DATA, "chatml", tokenizer)
    tokenizer.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}"
    assert cache_key(DATA, FALLBACK, tokenizer) != before  # the template is what the fallback renders with
    assert cache_key(DATA, "chatml", tokenizer) == plain  # an exact format writes its own layout: no new build
