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

The unweighted path does not come here at all: rows carry ``loss_weights`` only when a part weighs
other than 0.0 or 1.0, and the Trainer then runs with the model's own loss, untouched.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from train.formats.tokenize import IGNORE_INDEX


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
    total = (nll * shift_weights).sum()
    if num_items_in_batch is None:
        num_items_in_batch = shift_labels.ne(IGNORE_INDEX).sum()
    if torch.is_tensor(num_items_in_batch):
        num_items_in_batch = num_items_in_batch.to(total.device)
    return total / num_items_in_batch


class WeightedLoss:
    """The Trainer's ``compute_loss_func`` for batches that carry ``loss_weights``.

    The Trainer hands a loss function the model's outputs and the labels, not the batch, and calls
    the model with every other key of the batch. So a forward pre-hook on the model takes
    ``loss_weights`` out of the model's keyword arguments (the model never sees them) and keeps
    them for the call that computes this forward's loss, which the Trainer makes right after.
    """

    def __init__(self) -> None:
        self._weights: torch.Tensor | None = None

    def attach(self, model: torch.nn.Module) -> Any:
        """Hook ``model`` (the one given to the Trainer; wrappers call it); returns the hook handle."""
        return model.register_forward_pre_hook(self._take_weights, with_kwargs=True)

    def _take_weights(self, module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        if "loss_weights" in kwargs:
            kwargs = dict(kwargs)
            self._weights = kwargs.pop("loss_weights")
        return args, kwargs

    def __call__(self, outputs: Any, labels: torch.Tensor, num_items_in_batch: Any = None) -> torch.Tensor:
        weights, self._weights = self._weights, None
        if weights is None:
            raise RuntimeError("a weighted loss was asked for a batch without loss_weights")
        logits = outputs["logits"] if isinstance(outputs, dict) else outputs[0]
        return weighted_causal_lm_loss(logits, labels, weights, num_items_in_batch)
