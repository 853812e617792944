"""Training FLOPs for MFU: pure functions of sample lengths and the model's shape.

FLOPs of one training pass (forward + backward) over a sample of L real tokens:

    L * k * N  +  3 * A(L),    k = 6 (full fine-tuning) or 4 (LoRA),    A(L) = 2 * layers * width * L^2

- ``N``: parameters that take part in a matrix multiply for every token (``matmul_parameters``); of a
  mixture of experts only the experts a token is routed to (top-k of the routed experts) and the shared ones. A
  matmul costs 2 FLOPs per weight per token forward and 4 backward (the gradient of the activations
  and of the weights); LoRA's frozen weights get no weight gradient, so 2 + 2. The adapters' own
  weight gradients are left out (a fraction of a percent).
- ``A(L)``: causal attention forward. Each of the ~L^2/2 (query, key) pairs costs 2 * width FLOPs
  in QK^T and 2 * width in the weighted sum of V, per layer; ``width`` = heads x head_dim (the query
  width; grouped KV heads do not reduce it). x3 with backward, full or LoRA alike.
- Only real tokens count, and a packed row's samples do not attend to each other: ``L`` is each
  sample's own length, not the row's (``sample_lengths``). Padding and checkpointing's recomputed
  forward are not useful work and are not counted.

MFU divides by the GPU's dense bf16 peak: ``peak_flops`` is the one rule (``PEAK_ENV`` when set, else
``PEAK_BF16_TFLOPS`` by device name) for training runs, ``tooltrain bench train`` and ``benchmarks/gpu/``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


def training_flops(lengths: Sequence[int], matmul_params: int, layers: int, width: int, lora: bool) -> float:
    """FLOPs of forward + backward over samples of these lengths (see the module docstring)."""
    per_token = (4 if lora else 6) * matmul_params
    return float(sum(per_token * n + 3 * 2 * layers * width * n * n for n in lengths))


def sample_lengths(row: Mapping[str, Any]) -> list[int]:
    """Lengths of the samples in one row: trl's packed rows list them (``seq_lengths``); tooltrain's restart their
    position ids at 0 with each packed sample; a row with neither is one sample."""
    if row.get("seq_lengths") is not None:
        return [int(n) for n in row["seq_lengths"]]
    positions = row.get("position_ids")
    if positions is None:
        return [len(row["input_ids"])]
    starts = [0] + [i for i in range(1, len(positions)) if int(positions[i]) == 0]
    return [end - start for start, end in zip(starts, [*starts[1:], len(positions)])]


# The config fields that name a mixture of experts' routed experts and how many a token goes to, per model family
# (mixtral/llama4/gpt_oss, qwen*_moe, deepseek_v3); shared experts (deepseek_v3, llama4) are modules of their own.
_EXPERT_FIELDS = ("num_local_experts", "num_experts", "n_routed_experts")
_ACTIVE_FIELDS = ("num_experts_per_tok", "experts_per_token")


def moe_routing(config: Any) -> tuple[int, int] | None:
    """(routed experts, experts each token is routed to) of a mixture-of-experts config; None for a dense model."""
    config = getattr(config, "text_config", None) or config  # a multimodal config keeps its LM's in text_config
    experts = next((getattr(config, key) for key in _EXPERT_FIELDS if getattr(config, key, None)), None)
    active = next((getattr(config, key) for key in _ACTIVE_FIELDS if getattr(config, key, None)), None)
    if not experts or not active or experts <= active:
        return None
    return int(experts), int(active)


def is_routed_expert(name: str) -> bool:
    """A parameter of the routed experts: its module path has a part named ``experts`` (transformers' fused
    ``mlp.experts.gate_up_proj`` or a list's ``mlp.experts.3.w1.weight``); ``shared_expert(s)`` is not one."""
    return "experts" in name.split(".")[:-1]


def matmul_parameters(model: Any) -> int:
    """N: every parameter but the input token embedding, which is a lookup with no FLOPs; the LM head
    counts even when tied to that embedding (it is a hidden x vocab matmul on every token). Of a mixture of
    experts' routed experts, a token runs only top-k of E (``moe_routing``): they count k/E of their size. Under
    ZeRO-3, partitioned parameters count at their full size (``ds_numel``)."""

    def size(param: Any) -> int:
        return int(getattr(param, "ds_numel", param.numel()))

    routing = moe_routing(model.config)
    total = experts = 0
    for name, param in model.named_parameters():  # a tied weight is listed once
        if routing and is_routed_expert(name):
            experts += size(param)
        else:
            total += size(param)
    if routing:
        total += experts * routing[1] // routing[0]
    embedding = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    tied = head is not None and head.weight is embedding
    return total - (0 if tied else size(embedding))


# Dense (no sparsity) bf16 peak TFLOP/s from the vendors' data sheets, by a part of torch.cuda.get_device_name():
# the first match wins, so a variant comes before its family (an "NVIDIA H100 PCIe" is not an SXM "H100 80GB HBM3").
PEAK_BF16_TFLOPS = (
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),  # SXM
    ("H200 NVL", 835.0),
    ("H200", 989.0),
    ("H800", 989.0),
    ("A100", 312.0),
    ("A800", 312.0),
    ("L40S", 362.0),
    ("A10G", 70.0),
)
PEAK_ENV = "TOOLTRAIN_PEAK_TFLOPS"  # the peak of a GPU the table lacks (dense bf16 TFLOP/s)


def peak_flops(device_name: str, override: str | None = None) -> float | None:
    """The device's dense bf16 peak in FLOP/s: ``override`` (TFLOP/s, from PEAK_ENV) when set, else the table's;
    None for a device the table lacks (MFU is then not reported, tokens/s still are)."""
    if override:
        return float(override) * 1e12
    return next((tflops * 1e12 for key, tflops in PEAK_BF16_TFLOPS if key in device_name), None)


def flops_counter(model: Any, lora: bool) -> Callable[[Sequence[int]], float]:
    """``lengths -> training FLOPs`` for this model (a transformers causal LM, peft-wrapped or not)."""
    config = model.config
    heads = config.num_attention_heads
    width = heads * (getattr(config, "head_dim", None) or config.hidden_size // heads)
    params, layers = matmul_parameters(model), config.num_hidden_layers

    def count(lengths: Sequence[int]) -> float:
        return training_flops(lengths, params, layers, width, lora)

    return count
