"""gpt-oss's o200k_harmony tokenizer, built offline from the o200k vocabulary ``quicktok-v1`` ships.

openai-harmony and tiktoken download ``o200k_base.tiktoken`` (one ``base64(token) rank`` line per BPE rank)
at run time. ``o200k_tiktoken_file()`` rebuilds that exact file from quicktok's bundled o200k vocabulary,
checks its SHA-256 against the one tiktoken and openai-harmony pin (``O200K_BASE_SHA256``) and keeps it in
tooltrain's cache; ``offline_encodings_dir()`` also points ``TIKTOKEN_ENCODINGS_BASE`` at that folder, so
openai-harmony (a test reference here) loads it from disk and never reaches the network.

``build_o200k_harmony()`` is the Hugging Face tokenizer the training stack uses: the 199,998 BPE ranks with
o200k's split pattern and the harmony special tokens at their real ids (199998 ``<|startoftext|>``, 199999
``<|endoftext|>``, 200002 ``<|return|>``, 200003 ``<|constrain|>``, 200005 ``<|channel|>``, 200006
``<|start|>``, 200007 ``<|end|>``, 200008 ``<|message|>``, 200012 ``<|call|>``, 200018 ``<|endofprompt|>``,
the rest ``<|reserved_N|>`` up to 201087: 201,088 ids in all, gpt-oss's vocabulary size). As in gpt-oss's
own tokenizer config: bos ``<|startoftext|>``, eos ``<|return|>``, pad ``<|endoftext|>``.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from typing import Any

O200K_BASE_FILE = "o200k_base.tiktoken"
# tiktoken_ext.openai_public.o200k_base and openai-harmony's public_encodings pin this hash.
O200K_BASE_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
O200K_RANKS = 199998  # BPE ranks 0..199997; 199998 and up are special tokens
VOCAB_SIZE = 201088
MODEL_MAX_LENGTH = 131072  # gpt-oss-20b / 120b config
# tiktoken's o200k_harmony: named specials; every other id from 199998 to 201087 is <|reserved_N|>.
NAMED_SPECIALS = {
    199998: "<|startoftext|>",
    199999: "<|endoftext|>",
    200002: "<|return|>",
    200003: "<|constrain|>",
    200005: "<|channel|>",
    200006: "<|start|>",
    200007: "<|end|>",
    200008: "<|message|>",
    200012: "<|call|>",
    200018: "<|endofprompt|>",  # also tiktoken's <|reserved_200018|>: gpt-oss's tokenizer.json names it so
}
BOS, EOS, PAD = "<|startoftext|>", "<|return|>", "<|endoftext|>"
# o200k's split pattern (tiktoken_ext.openai_public.o200k_base, quicktok and openai-harmony use the same)
O200K_PATTERN = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
    r"""|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
    r"""|\p{N}{1,3}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n/]*"""
    r"""|\s*[\r\n]+"""
    r"""|\s+(?!\S)"""
    r"""|\s+"""
)


def special_tokens() -> list[str]:
    """The 1,090 special tokens in id order (199998..201087)."""
    return [NAMED_SPECIALS.get(i, f"<|reserved_{i}|>") for i in range(O200K_RANKS, VOCAB_SIZE)]


def o200k_base_bytes() -> bytes:
    """``o200k_base.tiktoken`` as OpenAI publishes it, rebuilt from quicktok's bundled vocabulary."""
    try:
        import quicktok
    except ImportError as err:
        raise ImportError("the o200k_harmony tokenizer needs quicktok-v1 (it ships the o200k vocabulary)") from err
    encoding = quicktok.get_encoding("o200k_base")
    lines = (base64.b64encode(encoding.decode_single_token_bytes(r)) + b" %d\n" % r for r in range(O200K_RANKS))
    return b"".join(lines)


def o200k_tiktoken_file(folder: Path | None = None) -> Path:
    """The checked ``o200k_base.tiktoken`` in ``folder`` (tooltrain's cache by default), written if missing.

    ValueError when the rebuilt file's SHA-256 is not the one OpenAI publishes (a changed quicktok)."""
    if folder is None:
        from train.base.cache import cache_root

        folder = cache_root() / "tiktoken"
    path = folder / O200K_BASE_FILE
    if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == O200K_BASE_SHA256:
        return path
    data = o200k_base_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != O200K_BASE_SHA256:
        raise ValueError(f"o200k_base rebuilt from quicktok has SHA-256 {digest}, expected {O200K_BASE_SHA256}")
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(data)
    tmp.replace(path)  # atomic: a concurrent reader never sees half a file
    return path


def offline_encodings_dir(folder: Path | None = None) -> Path:
    """The folder holding ``o200k_base.tiktoken``, also set as ``TIKTOKEN_ENCODINGS_BASE`` (openai-harmony
    then loads it from disk instead of downloading it)."""
    directory = o200k_tiktoken_file(folder).parent
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(directory)
    return directory


def build_o200k_harmony() -> Any:
    """gpt-oss's tokenizer: 199,998 o200k BPE ranks + 1,090 special tokens at their real ids."""
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    backend = TikTokenConverter(vocab_file=str(o200k_tiktoken_file()), pattern=O200K_PATTERN).converted()
    names = special_tokens()
    backend.add_special_tokens([AddedToken(name, special=True, normalized=False) for name in names])
    for token_id, name in enumerate(names, start=O200K_RANKS):
        if backend.token_to_id(name) != token_id:
            raise ValueError(f"{name!r} got id {backend.token_to_id(name)}, expected {token_id}")
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        model_max_length=MODEL_MAX_LENGTH,
        clean_up_tokenization_spaces=False,
    )


__all__ = [
    "O200K_BASE_SHA256",
    "build_o200k_harmony",
    "o200k_base_bytes",
    "o200k_tiktoken_file",
    "offline_encodings_dir",
    "special_tokens",
]
