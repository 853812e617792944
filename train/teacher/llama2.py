"""Llama-2-Chat's prompt, exactly as Meta's reference code builds it (``llama/generation.py``, ``chat_completion``)
and Hugging Face's Llama-2 chat template renders it: the HF teacher's ``chat_format: llama2``.

A system message is folded into the first user turn; each exchange is its own BOS-opened segment; a user turn is
``[INST] {text} [/INST]`` (the text stripped) and an answer after it `` {answer} `` closed by EOS; the last user turn
is left open for the model::

    <s>[INST] <<SYS>>\\n{system}\\n<</SYS>>\\n\\n{user} [/INST] {answer} </s><s>[INST] {user} [/INST]

Not a tooltrain chat format (``train.formats``, which trains on tools and calls): the teacher only prompts with it,
so it is the prompt text and its token ids, nothing more. The segments are tokenized one by one with the
tokenizer's BOS (and EOS) ids in front (and after), never by encoding the text ``<s>``, as Meta's code does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

B_INST, E_INST = "[INST]", "[/INST]"
B_SYS, E_SYS = "<<SYS>>\n", "\n<</SYS>>\n\n"


def llama2_segments(messages: Sequence[Mapping[str, str]]) -> list[tuple[str, bool]]:
    """``[{"role", "content"}, ...]`` (an optional system message, then user / assistant turns alternating, ending
    with a user turn) -> ``(text, closed)`` per segment: each tokenized with BOS in front, EOS after when closed.
    ValueError for any other order of roles."""
    dialog = [dict(m) for m in messages]
    if dialog and dialog[0]["role"] == "system":
        if len(dialog) < 2:
            raise ValueError("llama2: a system message needs a user turn after it")
        system = dialog.pop(0)["content"]
        dialog[0] = {"role": dialog[0]["role"], "content": B_SYS + system + E_SYS + dialog[0]["content"]}
    roles = [m["role"] for m in dialog]
    if len(roles) % 2 == 0 or roles != [("user", "assistant")[i % 2] for i in range(len(roles))]:
        raise ValueError(f"llama2: turns must be user/assistant alternating and end with a user turn, got {roles}")
    segments = [
        (f"{B_INST} {prompt['content'].strip()} {E_INST} {answer['content'].strip()} ", True)
        for prompt, answer in zip(dialog[::2], dialog[1::2])
    ]
    return [*segments, (f"{B_INST} {dialog[-1]['content'].strip()} {E_INST}", False)]


def llama2_text(messages: Sequence[Mapping[str, str]], bos: str = "<s>", eos: str = "</s>") -> str:
    """The prompt as text, BOS and EOS written out (what HF's template renders)."""
    return "".join(bos + text + (eos if closed else "") for text, closed in llama2_segments(messages))


def llama2_ids(messages: Sequence[Mapping[str, str]], tokenizer: Any) -> list[int]:
    """The prompt's token ids: each segment encoded without special tokens, the tokenizer's BOS id in front and its
    EOS id after a closed one (Meta's ``tokenizer.encode(text, bos=True, eos=...)``)."""
    ids: list[int] = []
    for text, closed in llama2_segments(messages):
        head = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
        tail = [tokenizer.eos_token_id] if closed and tokenizer.eos_token_id is not None else []
        ids += head + tokenizer.encode(text, add_special_tokens=False) + tail
    return ids


__all__ = ["B_INST", "B_SYS", "E_INST", "E_SYS", "llama2_ids", "llama2_segments", "llama2_text"]
