"""The per-token weighted loss (``data.part_weights``), composed with the HF Trainer.

Definition. With every trained token ``t`` of a global batch (all gradient-accumulation micro-batches
on all ranks) carrying its part's weight ``w_t`` and ``N`` the number of trained tokens in that
global batch, the loss is

    loss = sum_t w_t * nll_t / N

``N`` is the Trainer's own ``num_items_in_batch``: exactly the denominator of the unweighted loss,
counted over gradient accumulation and gathered across ranks, and the Trainer scales the returned
value for gradient accumulation and ranks as it does the model's own loss. So every weight 1.0 is
exactly the unweighted loss, and a weight says how much a token counts next to an unweighted one:
``{call_args: 2.0}`` makes each argument token count twice. (Normalising by the weights' sum instead
would need the Trainer to sum weights across micro-batches and ranks, which it cannot be told to do.)

Memory. The model never builds the full logits for a weighted batch: inside its output head's call,
``WeightedLoss`` scores the positions whose next token weighs, ``LOSS_CHUNK`` at a time, each chunk's
logits recomputed in backward (``next_token_nll``), so no pass holds more than one chunk's logits (full
fp32 logits are 4-5 GB per 8K row at a 128-152K vocabulary). Running inside the head's call is what
makes this hold under ZeRO-3 and FSDP2 too: the head's weight is read only where the engine has gathered
it (``WeightedLoss`` says how). Models that transform the logits after the head (softcapping, scaling)
keep the full logits, the only way their loss is exact; so does a LoRA-wrapped head under ZeRO-3
(``gathers_per_sub_module``).

The unweighted path does not come here at all: rows carry ``loss_weights`` only when a part weighs
other than 0.0 or 1.0, and the Trainer then runs with the model's own loss, untouched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from train.formats.tokenize import IGNORE_INDEX

# Scored positions per chunk of the head's logits. It bounds the loss's logits at LOSS_CHUNK x vocabulary in each
# pass: at a 152K vocabulary ~0.3 GB in bf16 plus ~0.6 GB for each fp32 copy (upcast, log-softmax, its gradient),
# against 8x that for one 8K row at once; large enough that the head's matmul stays efficient.
LOSS_CHUNK = 1024

# Config keys of models whose logits are not the head's output alone (Gemma's softcapping, Cohere's and
# Granite's scaling, vocabulary slicing): their loss needs the model's own logits, so they keep the full path.
LOGIT_TRANSFORMS = (
    "final_logit_softcapping",
    "logit_scale",
    "logits_scaling",
    "output_multiplier",
    "unpadded_vocab_size",
)


def weighted_causal_lm_loss(
    logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor, num_items_in_batch: Any = None
) -> torch.Tensor:
    """``sum(w * nll) / N`` for next-token prediction: position i predicts ``labels[i + 1]``.

    ``labels`` and ``weights`` are unshifted, as rows and collators carry them. ``N`` is
    ``num_items_in_batch`` (the trained tokens of the whole global batch), or this batch's own
    count when None. Logits are upcast to float32, as the models' own loss does.
    """
    vocab = logits.shape[-1]
    shift_labels = labels[..., 1:].reshape(-1)
    nll = F.cross_entropy(
        logits[..., :-1, :].float().reshape(-1, vocab),
        shift_labels.to(logits.device),
        ignore_index=IGNORE_INDEX,
        reduction="none",
    )
    shift_weights = weights[..., 1:].reshape(-1).to(nll)
    return _per_item((nll * shift_weights).sum(), labels, num_items_in_batch)


def next_token_nll(
    forward: Callable[[torch.Tensor], torch.Tensor],
    hidden: torch.Tensor,
    input_ids: torch.Tensor,
    weights: torch.Tensor,
    chunk: int = LOSS_CHUNK,
) -> torch.Tensor:
    """Each position's nll of the next input token where that token weighs (``weights`` nonzero), 0 elsewhere:
    float32 [batch, seq], holding at most ``chunk`` positions' logits.

    ``hidden`` is what the model gives its output head and ``forward`` the head's own forward (logits of the
    positions it is given). Only scored positions reach it, ``chunk`` at a time, each chunk under activation
    checkpointing: its logits are freed once its nll is taken and recomputed in backward.
    """
    scored = torch.zeros(input_ids.shape, dtype=torch.bool, device=hidden.device)
    scored[..., :-1] = weights[..., 1:].ne(0)  # position i predicts token i + 1; the last predicts nothing
    inputs = hidden[scored]  # row-major, as masked_scatter below fills
    targets = input_ids.to(hidden.device).roll(-1, dims=-1)[scored]
    # one (empty) chunk when nothing is scored, so the loss is still a zero on the model's graph
    nll = torch.cat(
        [
            checkpoint(_chunk_nll, forward, inputs[i : i + chunk], targets[i : i + chunk], use_reentrant=False)
            for i in range(0, max(len(targets), 1), chunk)
        ]
    )
    return torch.zeros(scored.shape, dtype=nll.dtype, device=nll.device).masked_scatter(scored, nll)


def _chunk_nll(forward: Callable, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """One chunk: the head's logits upcast to float32 (as the models' own loss does), each position's nll."""
    return F.cross_entropy(forward(hidden).float(), targets, reduction="none")


def weighted_next_token_loss(
    nll: torch.Tensor,
    input_ids: torch.Tensor,
    labels: torch.Tensor,
    weights: torch.Tensor,
    num_items_in_batch: Any = None,
) -> torch.Tensor:
    """``weighted_causal_lm_loss`` from ``next_token_nll``'s [batch, seq] nll of the next input tokens.

    The nll was taken against the next input token, not the label (the model never sees the labels): equal
    wherever a row trains, as rows build their labels (the input ids, -100 where untrained). A weighted label
    that is not its input token would be scored wrong, so it is refused.
    """
    shift_labels = labels[..., 1:].to(nll.device)
    trained = shift_labels.ne(IGNORE_INDEX)
    shift_weights = weights[..., 1:].to(nll) * trained
    if (shift_weights.ne(0) & shift_labels.ne(input_ids[..., 1:].to(nll.device))).any():
        raise RuntimeError(
            "a weighted label differs from its input token: the chunked weighted loss needs labels that are "
            "the input ids with -100 where untrained"
        )
    return _per_item((nll[..., :-1] * shift_weights).sum(), labels, num_items_in_batch)


def _per_item(total: torch.Tensor, labels: torch.Tensor, num_items_in_batch: Any) -> torch.Tensor:
    """The summed weighted nll over ``N``: the Trainer's ``num_items_in_batch``, else this batch's trained tokens."""
    if num_items_in_batch is None:
        num_items_in_batch = labels[..., 1:].ne(IGNORE_INDEX).sum()
    if torch.is_tensor(num_items_in_batch):
        num_items_in_batch = num_items_in_batch.to(total.device)
    return total / num_items_in_batch


def chunkable_head(model: torch.nn.Module) -> torch.nn.Module | None:
    """The model's output head when its logits are exactly ``head(hidden)`` with a Linear head (tied or not,
    LoRA-wrapped or not), or None: the loss of such a model can be chunked."""
    config = getattr(model, "config", None)
    configs = [config, config.get_text_config()] if hasattr(config, "get_text_config") else [config]
    if any(getattr(c, key, None) is not None for c in configs for key in LOGIT_TRANSFORMS):
        return None
    get_head = getattr(model, "get_output_embeddings", None)
    head = get_head() if callable(get_head) else None
    linear = head if isinstance(head, torch.nn.Linear) else getattr(head, "base_layer", None)  # peft wraps a Linear
    return head if isinstance(linear, torch.nn.Linear) else None


def gathers_per_sub_module(head: torch.nn.Module) -> bool:
    """Whether ZeRO-3 partitions parameters of the head's sub-modules (``ds_id``): a LoRA-wrapped head, whose
    Linear is a sub-module. ZeRO-3 gathers a module's own parameters around that module's call, so each chunk
    would gather the head's Linear again: a collective per chunk, a number that differs between ranks with their
    trained tokens. Such heads keep the full logits. (A head's own parameters are gathered once, around the
    head's call, which is where the chunks run.)"""
    return any(hasattr(param, "ds_id") for child in head.children() for param in child.parameters())


class _RestoreForward:
    """The handle of a wrapped ``forward``: ``remove()`` gives the module back its own."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module

    def remove(self) -> None:
        self.module.__dict__.pop("forward", None)


class WeightedLoss:
    """The Trainer's ``compute_loss_func`` for batches that carry ``loss_weights``.

    The Trainer hands a loss function the model's outputs and the labels, not the batch, and calls
    the model with every other key of the batch. So a forward pre-hook on the model takes
    ``loss_weights`` out of the model's keyword arguments (the model never sees them) and keeps
    them for the call that computes this forward's loss, which the Trainer makes right after.

    For a chunkable head (``chunkable_head``), the loss's logits are computed inside the head's own call: its
    forward is wrapped so that, in a weighted forward, it returns ``next_token_nll`` of what it is given
    ([batch, seq] float32, the model's ``logits`` for that forward) instead of the logits, and the loss is
    ``weighted_next_token_loss`` of that. Inside the head's call is where a sharding engine has gathered the
    head's weight (ZeRO-3's and FSDP2's hooks around the module), and the nll is the head's output, so the
    engine's backward hooks gather the weight again before backward reaches the chunks' recomputation, as for
    any module: the weight is never touched outside a window the engine opened, and the head is gathered as
    often as in an unweighted pass, whatever a rank's number of chunks. Only a forward that carried
    ``loss_weights`` is touched (generation and other forwards keep their logits), and only its first head
    call. Whether ZeRO-3 gathers the head per sub-module (``gathers_per_sub_module``) is known only once the
    Trainer has wrapped the model: the first weighted forward decides it for the run.
    """

    def __init__(self, chunk: int = LOSS_CHUNK) -> None:
        self.chunk = chunk
        self._weights: torch.Tensor | None = None
        self._head: torch.nn.Module | None = None  # None: the loss is taken on the model's own logits
        self._chunked: bool | None = None  # not gathers_per_sub_module, decided by the first weighted forward
        self._pending: tuple[torch.Tensor, torch.Tensor] | None = None  # a weighted forward's (input_ids, weights)
        self._scored: torch.Tensor | None = None  # the input ids whose next tokens the head scored

    def attach(self, model: torch.nn.Module) -> list[Any]:
        """Hook ``model`` (the one given to the Trainer; wrappers call it); returns the hook handles."""
        handles = [
            model.register_forward_pre_hook(self._take_weights, with_kwargs=True),
            model.register_forward_hook(self._end_forward, always_call=True),
        ]
        self._head = chunkable_head(model)
        if self._head is not None:
            self._head.forward = functools.partial(self._head_forward, self._head.forward)
            handles.append(_RestoreForward(self._head))
        return handles

    def _take_weights(self, module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        if "loss_weights" in kwargs:
            kwargs = dict(kwargs)
            self._weights = kwargs.pop("loss_weights")
            if self._head is not None and self._chunked is None:
                self._chunked = not gathers_per_sub_module(self._head)
            input_ids = kwargs.get("input_ids")  # None (inputs_embeds): nothing to score, the full logits
            self._pending = (input_ids, self._weights) if self._chunked and input_ids is not None else None
        return args, kwargs

    def _head_forward(self, forward: Callable, hidden: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        pending, self._pending = self._pending, None
        if pending is None:
            return forward(hidden, *args, **kwargs)
        input_ids, weights = pending
        if hidden.shape[:-1] != input_ids.shape:
            raise RuntimeError(
                f"the output head got hidden states {tuple(hidden.shape)} for input ids {tuple(input_ids.shape)}"
            )
        self._scored = input_ids
        return next_token_nll(lambda chunk: forward(chunk, *args, **kwargs), hidden, input_ids, weights, self.chunk)

    def _end_forward(self, module: Any, args: tuple, output: Any) -> None:
        self._pending = None  # a forward that never called its head leaves the next one alone

    def __call__(self, outputs: Any, labels: torch.Tensor, num_items_in_batch: Any = None) -> torch.Tensor:
        weights, self._weights = self._weights, None
        scored, self._scored = self._scored, None
        if weights is None:
            raise RuntimeError("a weighted loss was asked for a batch without loss_weights")
        logits = outputs["logits"] if isinstance(outputs, dict) else outputs[0]
        if scored is None:
            return weighted_causal_lm_loss(logits, labels, weights, num_items_in_batch)
        return weighted_next_token_loss(logits, scored, labels, weights, num_items_in_batch)
