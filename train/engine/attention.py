"""What an attention kernel asks of the rest of the run: the dtypes it computes in, and how it learns where packed
samples begin. Names only, no torch (but for a name outside the list: transformers' registry): the config check
reads it at compose time.

Flash-family kernels (``flash_attention_2/3/4``, the hub's ``kernels-community/flash-attn2``,
``kernels-community/vllm-flash-attn3`` ...) build no mask. transformers hands them the sample boundaries of packed
rows as ``cu_seq_lens_q/k`` when the batch carries them, or derives them from restarting ``position_ids`` only for a
batch of ONE row (``modeling_flash_attention_utils._is_packed_sequence``); a wider batch without them attends over
each whole row, sample into sample. So for these kernels the engine's packed batches carry the
boundaries (``train.data.packing.SampleBoundaries``). sdpa, eager and flex build the block-diagonal mask from
the positions themselves and get the plain batch.

Which to pick for packed rows: sdpa applies that mask densely (an L x L kernel for every row, however many samples it
holds), flex_attention skips the masked blocks (block-sparse, compiled on first use), and the flash family attends
over each sample alone (varlen). ``auto`` keeps to what runs everywhere (flash where installed, else sdpa).
"""

from __future__ import annotations

# What flash kernels compute in; they refuse float32 tensors.
HALF_DTYPES = ("bf16", "bfloat16", "fp16", "float16")

# model.attn_implementation's choices: auto (resolved on the machine that trains: train.engine.model) and the kernels
# transformers itself dispatches to. A hub kernel ("kernels-community/flash-attn2", "org/repo:function") is a name
# with a "/"; a kernel registered with transformers' AttentionInterface is taken by its name too.
ATTENTION_IMPLEMENTATIONS = (
    "auto",
    "sdpa",
    "eager",
    "flex_attention",
    "flash_attention_2",
    "flash_attention_3",
    "flash_attention_4",
    "paged|eager",
)


def is_flash_family(attn_implementation: str) -> bool:
    """Whether transformers routes ``attn_implementation`` to its flash path: its own test
    (``transformers.utils.generic.is_flash_attention_requested``), "flash" anywhere in the name."""
    return "flash" in attn_implementation


def flash_dtype_problem(attn_implementation: str, dtype: str) -> str | None:
    """Why ``attn_implementation`` cannot run weights of ``dtype`` (a name: bf16, float32 ...), or None."""
    if not is_flash_family(attn_implementation) or dtype in HALF_DTYPES:
        return None
    return (
        f"model.attn_implementation={attn_implementation} computes in fp16/bf16 only, but the weights are {dtype}: "
        "set model.dtype=bf16, or model.attn_implementation=sdpa"
    )


def attention_problem(attn_implementation: str) -> str | None:
    """Why ``attn_implementation`` names no attention kernel (a typo such as ``spda``), with the valid choices; None
    for a choice, a hub kernel, or a name registered with transformers' attention interface."""
    if attn_implementation in ATTENTION_IMPLEMENTATIONS or "/" in attn_implementation:
        return None
    if _registered_with_transformers(attn_implementation):
        return None
    return (
        f"model.attn_implementation={attn_implementation} is not an attention implementation; valid: "
        f"{', '.join(ATTENTION_IMPLEMENTATIONS)}, or a hub kernel such as kernels-community/flash-attn2"
    )


def _registered_with_transformers(name: str) -> bool:
    """A kernel a plug-in registered (``AttentionInterface.register``): imported only for a name not in the list."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    return name in ALL_ATTENTION_FUNCTIONS
