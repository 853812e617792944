"""Flash-attention on a CPU: transformers' own flash path (``integrations.flash_attention.flash_attention_forward``
and ``modeling_flash_attention_utils._flash_attention_forward``) with pure-torch stand-ins for the two kernels it
calls, so what decides where samples begin is transformers' code, exactly as on a GPU:

- ``cu_seq_lens_q/k`` and ``max_length_q/k`` in the forward's kwargs: the varlen kernel over those sequences;
- else restarting ``position_ids`` in a batch of ONE row (``_is_packed_sequence``): boundaries derived from them;
- else the dense kernel, causal over each whole row (sample into sample, for packed rows).

``install(monkeypatch)`` registers ``NAME`` with transformers' attention and mask interfaces and plants the
stand-ins where ``lazy_import_flash_attention`` keeps the loaded kernels (no flash_attn import, no hub). ``NAME``
holds "flash", so transformers and ``train.engine.attention.is_flash_family`` both take it for a flash kernel.
"""

from __future__ import annotations

import itertools

import torch

NAME = "torch_flash_emulation"


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None, causal: bool) -> torch.Tensor:
    """Softmax attention over [batch, length, heads, dim]; grouped key/value heads repeated to the query's."""
    groups = q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(groups, dim=2), v.repeat_interleave(groups, dim=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * (scale if scale is not None else q.shape[-1] ** -0.5)
    if causal:  # bottom-right aligned, as flash-attention 2 is
        q_len, k_len = q.shape[1], k.shape[1]
        future = torch.ones(q_len, k_len, dtype=torch.bool, device=q.device).triu(k_len - q_len + 1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v)


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False):
    """flash_attn.flash_attn_func: every row one sequence."""
    assert dropout_p == 0.0, "the emulation computes without dropout"
    return _attend(q, k, v, softmax_scale, causal)


def flash_attn_varlen_func(
    q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None, dropout_p=0.0, softmax_scale=None,
    causal=False,
):  # fmt: skip
    """flash_attn.flash_attn_varlen_func: [total tokens, heads, dim], one sequence per ``cu_seqlens`` span."""
    assert dropout_p == 0.0, "the emulation computes without dropout"
    assert cu_seqlens_q.dtype == cu_seqlens_k.dtype == torch.int32, "flash-attention takes int32 boundaries"
    assert int(cu_seqlens_q[-1]) == q.shape[0] and int(cu_seqlens_k[-1]) == k.shape[0], "boundaries must cover all"
    spans_q, spans_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    assert max_seqlen_q is None or int(max_seqlen_q) == max(b - a for a, b in itertools.pairwise(spans_q))
    pieces = [
        _attend(q[None, qa:qb], k[None, ka:kb], v[None, ka:kb], softmax_scale, causal)[0]
        for qa, qb, ka, kb in zip(spans_q, spans_q[1:], spans_k, spans_k[1:])
    ]
    return torch.cat(pieces)


def install(monkeypatch) -> str:
    """Make ``NAME`` an attention implementation for the test's duration; returns it."""
    import transformers.modeling_flash_attention_utils as fa
    from transformers import AttentionInterface
    from transformers.integrations.flash_attention import flash_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

    registered = {AttentionInterface: flash_attention_forward, AttentionMaskInterface: flash_attention_mask}
    for interface, function in registered.items():
        monkeypatch.setitem(interface._global_mapping, NAME, None)  # so the teardown removes the name again
        interface.register(NAME, function)
    loaded = {
        "_loaded_implementation": NAME,
        "_flash_fn": flash_attn_func,
        "_flash_varlen_fn": flash_attn_varlen_func,
        "_flash_with_kvcache_fn": None,
        "_pad_fn": fa._pad_input,
        "_unpad_fn": fa._unpad_input,
        "_process_flash_kwargs_fn": fa._lazy_define_process_function(flash_attn_varlen_func),
        "_process_with_kvcache_kwargs_fn": dict,
    }
    for attribute, value in loaded.items():
        monkeypatch.setattr(fa, attribute, value)  # raising=True: a transformers that moved them fails here, loudly
    return NAME
