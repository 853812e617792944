"""The SmolLM2 tokenizer, as the demo model's GGUF carries it (no model hub).

The GGUF carries the whole byte-level BPE (49,152 tokens, 48,900 merges), the control tokens
(``<|endoftext|>``=0, ``<|im_start|>``=1, ``<|im_end|>``=2) and SmolLM2's ChatML chat template;
transformers' GGUF reader turns them into a fast tokenizer. ``<tool_call>``, ``<tools>`` and
``<tool_response>`` are *not* tokens of this vocabulary: they are ordinary text.

``build_smollm2`` reads that tokenizer from the package (``train/assets/smollm2``: what the GGUF reader gave, saved),
so rendering and tokenizing in the SmolLM2 format fetch neither the 98 MB model file nor parse it;
``build_smollm2_from_gguf`` is the reference it was saved from (``tests/test_smollm2.py`` checks they are equal).
"""

from __future__ import annotations

from typing import Any

VOCAB_SIZE = 49_152
SPECIAL_IDS = {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2}
CONTEXT_LENGTH = 8192  # llama.context_length in the GGUF


def build_smollm2() -> Any:
    """The shipped tokenizer files (gzip'd tokenizer.json, the chat template) as a fast tokenizer."""
    import gzip
    from importlib import resources

    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    assets = resources.files("train") / "assets" / "smollm2"
    backend = Tokenizer.from_str(gzip.decompress((assets / "tokenizer.json.gz").read_bytes()).decode("utf-8"))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        unk_token="<|endoftext|>",
        model_max_length=CONTEXT_LENGTH,
    )
    tokenizer.chat_template = (assets / "chat_template.jinja").read_text(encoding="utf-8")
    check_smollm2(tokenizer)
    return tokenizer


def build_smollm2_from_gguf() -> Any:
    """The tokenizer transformers' GGUF reader makes of the model file (fetched the first time): the reference."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    from train.models.smollm2 import smollm2_gguf

    path = smollm2_gguf()
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    if not isinstance(tokenizer, PreTrainedTokenizerFast):
        raise TypeError(f"expected a fast tokenizer from {path.name}, got {type(tokenizer).__name__}")
    # The GGUF reader leaves the length limit unset (a huge sentinel); the model's context is 8k.
    tokenizer.model_max_length = CONTEXT_LENGTH
    check_smollm2(tokenizer)
    return tokenizer


def check_smollm2(tokenizer: Any) -> None:
    """Fail loudly if a transformers change alters what the GGUF reader produces."""
    if len(tokenizer) != VOCAB_SIZE:
        raise ValueError(f"SmolLM2 tokenizer has {len(tokenizer)} tokens, expected {VOCAB_SIZE}")
    for token, expected in SPECIAL_IDS.items():
        found = tokenizer.convert_tokens_to_ids(token)
        if found != expected:
            raise ValueError(f"SmolLM2 tokenizer maps {token} to {found}, expected {expected}")
    if not tokenizer.chat_template or "<|im_start|>" not in tokenizer.chat_template:
        raise ValueError("SmolLM2 tokenizer lost its ChatML chat template")
