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

Memory. The model never builds the full logits for a weighted batch: ``WeightedLoss`` takes the
hidden states its output head is given and computes the loss over ``LOSS_CHUNK`` trained positions
at a time, each chunk's logits recomputed in backward (``chunked_weighted_causal_lm_loss``), so no
pass holds more than one chunk's logits (full fp32 logits are 4-5 GB per 8K row at a 128-152K
vocabulary). Models that transform the logits after the head (softcapping, scaling) keep the full
logits, the only way their loss is exact; so do sharded heads (ZeRO-3, FSDP2: ``head_is_sharded``).

The unweighted path does not come here at all: rows carry ``loss_weights`` only when a part weighs
other than 0.0 or 1.0, and the Trainer then runs with the model's own loss, untouched.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from train.formats.tokenize import IGNORE_INDEX

# Trained positions per output-head call. It bounds the loss's logits at LOSS_CHUNK x vocabulary in each pass:
# at a 152K vocabulary ~0.3 GB in bf16 plus ~0.6 GB for each fp32 copy (upcast, log-softmax, its gradient),
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


def chunked_weighted_causal_lm_loss(
    hidden: torch.Tensor,
    head: torch.nn.Module,
    labels: torch.Tensor,
    weights: torch.Tensor,
    num_items_in_batch: Any = None,
    chunk: int = LOSS_CHUNK,
) -> torch.Tensor:
    """``weighted_causal_lm_loss(head(hidden), labels, weights, N)`` holding at most ``chunk`` positions' logits.

    ``hidden`` is what the model gives its output ``head`` ([batch, seq, hidden]). Only trained positions
    (those predicting a label) reach the head, ``chunk`` at a time, each chunk under activation
    checkpointing: its logits are freed once its weighted sum is taken and recomputed in backward.
    """
    trained = labels[..., 1:].ne(IGNORE_INDEX).to(hidden.device)
    inputs = hidden[..., :-1, :][trained]  # position i predicts labels[i + 1]; row-major, as the masks below
    targets = labels[..., 1:].to(hidden.device)[trained]
    target_weights = weights[..., 1:].to(hidden.device)[trained]
    # one (empty) chunk when nothing is trained, so the loss is still a zero on the model's graph
    total = sum(
        checkpoint(
            _weighted_nll_sum,
            head,
            inputs[i : i + chunk],
            targets[i : i + chunk],
            target_weights[i : i + chunk],
            use_reentrant=False,
        )
        for i in range(0, max(len(targets), 1), chunk)
    )
    return _per_item(total, labels, num_items_in_batch)


def _weighted_nll_sum(head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor):
    """One chunk: the head's logits upcast to float32 (as the models' own loss does), summed weighted nll."""
    nll = F.cross_entropy(head(hidden).float(), targets, reduction="none")
    return (nll * weights.to(nll)).sum()


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


def head_is_sharded(model: torch.nn.Module, head: torch.nn.Module) -> bool:
    """Whether ZeRO-3 partitions the head's parameters (``ds_id``) or FSDP2 shards the model. Then each chunk's
    head call would gather the head: as many collectives as chunks, a number that differs between ranks with
    their trained tokens, and the backward's recomputation sees ZeRO-3's empty partition (CheckpointError).
    Such heads keep the full logits; chunking them needs the head gathered once per pass."""
    if any(hasattr(param, "ds_id") for param in head.parameters()):
        return True
    from torch.distributed.fsdp import FSDPModule

    return any(isinstance(module, FSDPModule) for module in model.modules())


class WeightedLoss:
    """The Trainer's ``compute_loss_func`` for batches that carry ``loss_weights``.

    The Trainer hands a loss function the model's outputs and the labels, not the batch, and calls
    the model with every other key of the batch. So a forward pre-hook on the model takes
    ``loss_weights`` out of the model's keyword arguments (the model never sees them) and keeps
    them for the call that computes this forward's loss, which the Trainer makes right after.

    For a chunkable head (``chunkable_head``), a pre-hook on the head then takes the hidden states of
    that same forward and gives the head none of its positions (its logits are [batch, 0, vocab]), and
    the loss is ``chunked_weighted_causal_lm_loss``. Only a forward that carried ``loss_weights`` is
    touched (generation and other forwards keep their logits), and only its first head call. Whether
    the head is sharded is known only once the Trainer has wrapped the model: the first weighted
    forward decides it for the run.
    """

    def __init__(self, chunk: int = LOSS_CHUNK) -> None:
        self.chunk = chunk
        self._weights: torch.Tensor | None = None
        self._model: torch.nn.Module | None = None
        self._head: torch.nn.Module | None = None  # None: the loss is taken on the model's own logits
        self._sharded: bool | None = None  # head_is_sharded, decided by the first weighted forward
        self._take_next_hidden = False  # set by a weighted forward, cleared by its first head call or its end
        self._hidden: torch.Tensor | None = None

    def attach(self, model: torch.nn.Module) -> list[Any]:
        """Hook ``model`` (the one given to the Trainer; wrappers call it); returns the hook handles."""
        handles = [
            model.register_forward_pre_hook(self._take_weights, with_kwargs=True),
            model.register_forward_hook(self._end_forward, always_call=True),
        ]
        self._model, self._head = model, chunkable_head(model)
        if self._head is not None:
            handles.append(self._head.register_forward_pre_hook(self._take_hidden))
        return handles

    def _take_weights(self, module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        if "loss_weights" in kwargs:
            kwargs = dict(kwargs)
            self._weights = kwargs.pop("loss_weights")
            if self._head is not None and self._sharded is None:
                self._sharded = head_is_sharded(self._model, self._head)
            self._take_next_hidden = self._head is not None and not self._sharded
        return args, kwargs

    def _take_hidden(self, head: Any, args: tuple) -> tuple | None:
        if not self._take_next_hidden:
            return None
        self._take_next_hidden = False
        self._hidden = args[0]
        return (args[0][..., :0, :], *args[1:])

    def _end_forward(self, module: Any, args: tuple, output: Any) -> None:
        self._take_next_hidden = False  # a forward that never called its head leaves the next one alone

    def __call__(self, outputs: Any, labels: torch.Tensor, num_items_in_batch: Any = None) -> torch.Tensor:
        weights, self._weights = self._weights, None
        hidden, self._hidden = self._hidden, None
        if weights is None:
            raise RuntimeError("a weighted loss was asked for a batch without loss_weights")
        if hidden is None:
            logits = outputs["logits"] if isinstance(outputs, dict) else outputs[0]
            return weighted_causal_lm_loss(logits, labels, weights, num_items_in_batch)
        if hidden.shape[:-1] != labels.shape:
            raise RuntimeError(
                f"the output head got hidden states {tuple(hidden.shape)} for labels {tuple(labels.shape)}"
            )
        return chunked_weighted_causal_lm_loss(hidden, self._head, labels, weights, num_items_in_batch, self.chunk)
