"""Whole weights for evaluation: a sharded model gathered once per evaluation, not once per generated token.

Under ZeRO-3 each module's forward all-gathers its parameters and frees them again (DeepSpeed's module hooks), and
FSDP2 reshards each wrapped block after its forward, so ``generate`` gathers the whole model once per new token
(Meta-Bench on 8 ranks: ~30 minutes instead of ~5). ``whole_weights`` gathers it once for the evaluation:

* ZeRO-3: every parameter at once (``deepspeed.zero.GatheredParameters``), DeepSpeed's module hooks off while
  generation runs, as trl's ``unwrap_model_for_generation`` does. It composes trl's own ``remove_hooks`` /
  ``add_hooks`` (trl follows DeepSpeed's internals) rather than trl's entry point, which wants the DeepSpeed engine
  and the Accelerator: a Trainer callback sees neither, only the model and the optimizer, whose ``.optimizer`` is
  the ZeRO-3 optimizer those two helpers read (accelerate's wrapper and the engine both hold it there).
* FSDP2: each wrapped block unsharded once and kept so through generation (``set_reshard_after_forward(False)``,
  the switch torch documents for evals), resharded after. FSDP2 has no ``summon_full_params`` (FSDP1's).

With whole weights on every rank a forward runs no collective, so ranks need not generate in lock-step.

Whole weights cost every rank the model's full size (Llama-2-70B in bf16: 140 GB, more than one 80 GB GPU).
``eval.gather_weights`` decides: ``auto`` (the default) gathers when the full size fits the free memory of every
rank, ``always`` gathers anyway, ``never`` keeps the per-token path; ``auto`` saying no prints one line with why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from train.base.errors import ConfigError, choice
from train.engine import distributed

GATHER_MODES = ("auto", "always", "never")
# The share of a rank's free memory whole weights may take: generation needs the rest (KV cache, activations).
USABLE_SHARE = 0.8
GIB = 1024**3


def gather_mode(value: Any) -> str:
    """``eval.gather_weights`` as one of GATHER_MODES (None: auto); anything else is refused with the choices."""
    mode = "auto" if value is None else choice(value)
    if mode not in GATHER_MODES:
        raise ConfigError(f"eval.gather_weights={mode!r}: valid: {', '.join(GATHER_MODES)}")
    return mode


def fsdp2_blocks(model: Any) -> list[Any]:
    """The model's FSDP2 modules, the root (the model itself under accelerate) first; none without FSDP2."""
    from torch.distributed.fsdp import FSDPModule

    return [module for module in model.modules() if isinstance(module, FSDPModule)]


def zero3_partitioned(model: Any) -> bool:
    """Whether ZeRO-3 partitions the model's parameters (they carry DeepSpeed's ``ds_id``)."""
    return any(hasattr(param, "ds_id") for param in model.parameters())


def full_bytes(model: Any) -> int:
    """Bytes of every parameter at full size (``ds_numel``: a partitioned parameter's ``numel`` is its shard; an FSDP2
    DTensor's ``numel`` is already the full one). At the stored dtype: an over-estimate where FSDP2 gathers in a
    narrower ``param_dtype``."""
    return sum(int(getattr(param, "ds_numel", param.numel())) * param.element_size() for param in model.parameters())


def free_bytes(device: Any) -> int:
    """Memory this rank can still allocate where the parameters live: the GPU's free memory plus what torch's
    caching allocator holds unused, or the host's available memory on CPU (ZeRO-3 on CPU, offloaded runs)."""
    import torch

    if getattr(device, "type", "cpu") == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
    import psutil

    return int(psutil.virtual_memory().available)


def per_token(sharding: str, why: str) -> str:
    """The console line for an evaluation that keeps the per-token gathers."""
    return f"eval: generating with {sharding}'s per-token gathers (slower): {why}"


def gather_decision(mode: str, need: int, free: int, sharding: str = "ZeRO-3") -> tuple[bool, str | None]:
    """(whether to gather, the console line saying why not when ``auto`` declines) for whole weights of ``need``
    bytes where ``free`` bytes are free."""
    if mode != "auto":
        return mode == "always", None
    if need <= USABLE_SHARE * free:
        return True, None
    why = (
        f"the whole model ({need / GIB:.1f} GiB) does not fit {USABLE_SHARE:.0%} of a rank's free memory "
        f"({free / GIB:.1f} GiB); eval.gather_weights=always forces it"
    )
    return False, per_token(sharding, why)


def zero3_holder(optimizer: Any) -> Any | None:
    """What trl's ``remove_hooks``/``add_hooks`` take: an object whose ``.optimizer`` is the ZeRO-3 optimizer (the one
    holding ``parameter_offload``, DeepSpeed's module hooks). The Trainer's optimizer is accelerate's wrapper around
    it; None when no ZeRO-3 optimizer is found."""
    holder = optimizer
    for _ in range(4):  # wrappers around wrappers, never a cycle
        inner = getattr(holder, "optimizer", None)
        if inner is None:
            return None
        if hasattr(inner, "parameter_offload"):
            return holder
        holder = inner
    return None


def decide(model: Any, mode: str, sharding: str) -> tuple[bool, str | None]:
    """``gather_decision`` for this model on every rank at once: whole weights only where they fit every rank (a
    gather is a collective: all ranks gather or none does)."""
    if mode != "auto":
        return gather_decision(mode, 0, 0)
    device = next(model.parameters()).device
    gather, note = gather_decision(mode, full_bytes(model), free_bytes(device), sharding)
    if distributed.any_rank(not gather) and gather:
        gather, note = False, per_token(sharding, "the whole model does not fit another rank")
    return gather, note


@contextmanager
def whole_weights(
    model: Any, optimizer: Any, mode: str = "auto", announce: Callable[[str], None] | None = None
) -> Iterator[bool]:
    """Inside, generation under ZeRO-3 or FSDP2 runs on the whole model gathered once; yields whether it does (then
    no forward runs a collective). Unsharded models, ``mode`` never, or memory too tight for ``auto`` (``announce``
    is told why) yield False and change nothing. Every rank must enter together."""
    gather, note, blocks, holder = False, None, [], None
    if zero3_partitioned(model):
        holder = zero3_holder(optimizer)
        if holder is not None:
            gather, note = decide(model, mode, "ZeRO-3")
        elif mode != "never":  # the same on every rank: the Trainer's optimizer is built alike everywhere
            note = per_token("ZeRO-3", "no ZeRO-3 optimizer holds its hooks")
    elif blocks := fsdp2_blocks(model):
        gather, note = decide(model, mode, "FSDP2")
    if note is not None and announce is not None:
        announce(note)
    if not gather:
        yield False
    elif holder is not None:
        with zero3_gathered(model, holder):
            yield True
    else:
        with fsdp2_unsharded(blocks):
            yield True


@contextmanager
def zero3_gathered(model: Any, holder: Any) -> Iterator[None]:
    """Every ZeRO-3 parameter gathered (one collective per parameter, every rank alike), DeepSpeed's module hooks
    off inside (``holder``: ``zero3_holder``'s), back on and the parameters partitioned again after."""
    import deepspeed
    from trl.models.utils import add_hooks, remove_hooks

    with deepspeed.zero.GatheredParameters(list(model.parameters())):
        # The hooks would free each module's parameters after its forward (and gather them again for the next).
        remove_hooks(holder)
        try:
            yield
        finally:
            add_hooks(holder)


@contextmanager
def fsdp2_unsharded(blocks: list[Any]) -> Iterator[None]:
    """Every FSDP2 module unsharded (one all-gather each, in module order on every rank) and kept so by its forward.
    The root is left alone: FSDP2 never reshards the root after forward. The others go back to resharding after
    forward, the ``reshard_after_forward`` training gives them (``distributed.training_arguments_for``)."""
    wrapped = blocks[1:]
    for block in wrapped:
        block.set_reshard_after_forward(False, recurse=False)
    try:
        for block in blocks:
            block.unshard()
        yield
    finally:
        for block in wrapped:
            block.set_reshard_after_forward(True, recurse=False)
        for block in blocks:
            block.reshard()


__all__ = [
    "GATHER_MODES",
    "decide",
    "free_bytes",
    "fsdp2_blocks",
    "fsdp2_unsharded",
    "full_bytes",
    "gather_decision",
    "gather_mode",
    "whole_weights",
    "zero3_gathered",
    "zero3_holder",
    "zero3_partitioned",
]
