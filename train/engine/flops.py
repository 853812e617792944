"""Training FLOPs for MFU: pure functions of sample lengths and the model's shape.

FLOPs of one training pass (forward + backward) over a sample of L real tokens:

    L * k * N  +  3 * A(L),    k = 6 (full fine-tuning) or 4 (LoRA),    A(L) = 2 * layers * width * L^2

- ``N``: parameters that take part in a matrix multiply for every token (``matmul_parameters``). A
  matmul costs 2 FLOPs per weight per token forward and 4 backward (the gradient of the activations
  and of the weights); LoRA's frozen weights get no weight gradient, so 2 + 2. The adapters' own
  weight gradients are left out (a fraction of a percent).
- ``A(L)``: causal attention forward. Each of the ~L^2/2 (query, key) pairs costs 2 * width FLOPs
  in QK^T and 2 * width in the weighted sum of V, per layer; ``width`` = heads x head_dim (the query
  width; grouped KV heads do not reduce it). x3 with backward, full or LoRA alike.
- Only real tokens count, and a packed row's samples do not attend to each other: ``L`` is each
  sample's own length, not the row's (``sample_lengths``). Padding and checkpointing's recomputed
  forward are not useful work and are not counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


def training_flops(lengths: Sequence[int], matmul_params: int, layers: int, width: int, lora: bool) -> float:
    """FLOPs of forward + backward over samples of these lengths (see the module docstring)."""
    per_token = (4 if lora else 6) * matmul_params
    return float(sum(per_token * n + 3 * 2 * layers * width * n * n for n in lengths))


def sample_lengths(row: Mapping[str, Any]) -> list[int]:
    """Lengths of the samples in one row: its position ids restart at 0 with each packed sample."""
    positions = row.get("position_ids")
    if positions is None:
        return [len(row["input_ids"])]
    starts = [0] + [i for i in range(1, len(positions)) if int(positions[i]) == 0]
    return [end - start for start, end in zip(starts, [*starts[1:], len(positions)])]


def matmul_parameters(model: Any) -> int:
    """N: every parameter but the input token embedding, which is a lookup with no FLOPs; the LM head
    counts even when tied to that embedding (it is a hidden x vocab matmul on every token). Under
    ZeRO-3, partitioned parameters count at their full size (``ds_numel``)."""

    def size(param: Any) -> int:
        return int(getattr(param, "ds_numel", param.numel()))

    total = sum(size(param) for param in model.parameters())  # a tied weight is listed once
    embedding = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    tied = head is not None and head.weight is embedding
    return total - (0 if tied else size(embedding))


def flops_counter(model: Any, lora: bool) -> Callable[[Sequence[int]], float]:
    """``lengths -> training FLOPs`` for this model (a transformers causal LM, peft-wrapped or not)."""
    config = model.config
    heads = config.num_attention_heads
    width = heads * (getattr(config, "head_dim", None) or config.hidden_size // heads)
    params, layers = matmul_parameters(model), config.num_hidden_layers

    def count(lengths: Sequence[int]) -> float:
        return training_flops(lengths, params, layers, width, lora)

    return count
