"""Best-fit packing of tokenized samples into fixed-length rows, and the collators that batch them.

A packed row concatenates whole samples; ``position_ids`` restart at 0 for every sample. With no
``attention_mask`` in the batch, transformers derives a block-diagonal causal mask from the
restarting positions (``masking_utils.find_packed_sequence_indices``), so no token attends across
samples. Flash-attention derives ``cu_seqlens`` the same way only for a batch of one row: for it the
batches carry the boundaries too (``SampleBoundaries``). The model must run with
``use_cache=False`` (a cache disables that detection; FINDINGS). Tail padding of a row is one more
pseudo-sample with its own restarting positions and ``-100`` labels: it attends only to itself and
never contributes to the loss.

Samples built with part weights (``data.part_weights``) also carry ``loss_weights``, one float per
token aligned with ``labels`` (0.0 where masked); packing and collation carry them along as the
batch's ``loss_weights`` tensor (``train.engine.loss``). Samples without them give batches without them.

A built dataset is memory-mapped columns (``train.data.token_store``): packing works from its lengths alone, and
``PackedRows``/``SampleRows`` cut each row out of the maps when the data loader asks for it, so no process holds
the corpus as Python lists. The collators take rows as numpy arrays or lists alike.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from train.formats.tokenize import IGNORE_INDEX


def best_fit_pack(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Group sample indices into bins of total length <= capacity (best-fit decreasing).

    Longest samples first, each into the open bin whose free space is the smallest that still fits
    it. Deterministic: ties keep the original order. Every index appears in exactly one bin.
    """
    if capacity <= 0:
        raise ValueError(f"capacity must be positive, got {capacity}")
    too_long = [i for i, n in enumerate(lengths) if n > capacity]
    if too_long:
        raise ValueError(
            f"{len(too_long)} sample(s) longer than {capacity} tokens (first: index {too_long[0]}); "
            "truncate or drop them first"
        )
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    # free[k] is the free space of bin ids[k]; kept sorted for bisect. (free, bin id) pairs.
    free: list[tuple[int, int]] = []
    for index in order:
        need = lengths[index]
        slot = bisect.bisect_left(free, (need, -1))
        if slot == len(free):
            bins.append([index])
            bisect.insort(free, (capacity - need, len(bins) - 1))
        else:
            space, bin_id = free.pop(slot)
            bins[bin_id].append(index)
            bisect.insort(free, (space - need, bin_id))
    return bins


@dataclass(frozen=True)
class PackingStats:
    samples: int
    rows: int
    real_tokens: int
    slots: int  # rows * row length: what the model computes over

    @property
    def efficiency(self) -> float:
        """Real tokens per slot; 1.0 means no padding at all."""
        return self.real_tokens / self.slots if self.slots else 0.0


def packing_stats(lengths: Sequence[int], bins: Sequence[Sequence[int]], row_length: int) -> PackingStats:
    return PackingStats(samples=len(lengths), rows=len(bins), real_tokens=sum(lengths), slots=len(bins) * row_length)


def pack_samples(samples: Sequence[dict], bin_indices: Sequence[int]) -> dict[str, list]:
    """Concatenate the samples of one bin into a row with restarting position ids.

    Each sample's first label is masked: unpacked, nothing predicts a sample's first token (the
    loss shifts labels by one); packed, the previous sample's last token would. Its loss weight,
    when samples carry them, goes to 0.0 with it.
    """
    weighted = any("loss_weights" in samples[i] for i in bin_indices)
    row: dict[str, list] = {"input_ids": [], "labels": [], "position_ids": []}
    if weighted:
        row["loss_weights"] = []
    for index in bin_indices:
        sample = samples[index]
        row["input_ids"].extend(sample["input_ids"])
        row["labels"].append(IGNORE_INDEX)
        row["labels"].extend(sample["labels"][1:])
        row["position_ids"].extend(range(len(sample["input_ids"])))
        if weighted:
            row["loss_weights"].append(0.0)
            own = sample.get("loss_weights")
            row["loss_weights"].extend(
                list(own[1:])
                if own is not None
                else [0.0 if label == IGNORE_INDEX else 1.0 for label in sample["labels"][1:]]
            )
    return row


def sample_weights(sample: dict) -> np.ndarray:
    """A sample's per-token loss weights (float32): its own, or 1.0 on every trained token when it has none."""
    if "loss_weights" in sample:
        return np.asarray(sample["loss_weights"], dtype=np.float32)
    return (np.asarray(sample["labels"]) != IGNORE_INDEX).astype(np.float32)


def weights_tensor(rows: Sequence[dict], width: int) -> torch.Tensor:
    """The batch's ``loss_weights``: each row's weights, right-padded with 0.0 to ``width``."""
    padded = np.zeros((len(rows), width), dtype=np.float32)
    for index, weights in enumerate(map(sample_weights, rows)):
        padded[index, : len(weights)] = weights
    return torch.from_numpy(padded)


def _padded(values: Any, width: int, fill: int) -> np.ndarray:
    values = np.asarray(values, dtype=np.int64)
    return np.concatenate([values, np.full(width - len(values), fill, dtype=np.int64)])


class PackedRows:
    """The packed rows of a memory-mapped split (``train.data.token_store.TokenizedRows``), each made on request from
    its bin's slices exactly as ``pack_samples`` makes it from lists. Holds only the bins, as two int64 arrays."""

    def __init__(self, samples: Any, bins: Sequence[Sequence[int]]):
        self.samples = samples
        self.has_loss_weights = bool(samples.has_loss_weights)
        self.order = np.fromiter((index for members in bins for index in members), dtype=np.int64)
        self.starts = np.zeros(len(bins) + 1, dtype=np.int64)
        np.cumsum([len(members) for members in bins], out=self.starts[1:])

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        if not 0 <= index < len(self):
            raise IndexError(f"row {index} of {len(self)}")
        ids, labels, positions, weights = [], [], [], []
        for sample in self.order[self.starts[index] : self.starts[index + 1]]:
            sample_ids, trained, sample_weights_ = self.samples.arrays(int(sample))
            sample_labels = np.where(trained, sample_ids, IGNORE_INDEX)
            sample_labels[0] = IGNORE_INDEX  # nothing in the row may predict a sample's first token
            ids.append(sample_ids)
            labels.append(sample_labels)
            positions.append(np.arange(len(sample_ids), dtype=np.int64))
            if self.has_loss_weights:
                sample_weights_ = np.array(sample_weights_, dtype=np.float32)
                sample_weights_[0] = 0.0
                weights.append(sample_weights_)
        row = {
            "input_ids": np.concatenate(ids),
            "labels": np.concatenate(labels),
            "position_ids": np.concatenate(positions),
        }
        return row if not self.has_loss_weights else {**row, "loss_weights": np.concatenate(weights)}


class SampleRows:
    """The unpacked rows of a memory-mapped split: one sample per row, cut from the maps on request."""

    def __init__(self, samples: Any):
        self.samples = samples
        self.has_loss_weights = bool(samples.has_loss_weights)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        ids, trained, weights = self.samples.arrays(index)
        row = {"input_ids": ids, "labels": np.where(trained, ids, IGNORE_INDEX)}
        return row if weights is None else {**row, "loss_weights": np.asarray(weights, dtype=np.float32)}


class PackedCollator:
    """Batches packed rows: tail padding gets its own restarting positions; no attention mask."""

    def __init__(self, pad_token_id: int, pad_to: int | None = None):
        self.pad_token_id = pad_token_id
        self.pad_to = pad_to  # fixed row length (static shapes); None pads to the longest row

    def __call__(self, rows: Sequence[dict]) -> dict[str, torch.Tensor]:
        width = self.pad_to or max(len(r["input_ids"]) for r in rows)
        batch = {"input_ids": [], "labels": [], "position_ids": []}
        for row in rows:
            pad = width - len(row["input_ids"])
            if pad < 0:
                raise ValueError(f"row of {len(row['input_ids'])} tokens exceeds pad_to={width}")
            batch["input_ids"].append(_padded(row["input_ids"], width, self.pad_token_id))
            batch["labels"].append(_padded(row["labels"], width, IGNORE_INDEX))
            positions = np.asarray(row["position_ids"], dtype=np.int64)
            batch["position_ids"].append(np.concatenate([positions, np.arange(pad, dtype=np.int64)]))
        tensors = {key: torch.from_numpy(np.stack(value)) for key, value in batch.items()}
        if any("loss_weights" in row for row in rows):
            tensors["loss_weights"] = weights_tensor(rows, width)
        return tensors


class SampleBoundaries:
    """A packed collator's batches plus their samples' boundaries, for attention kernels that take boundaries, not
    a mask (flash-family kernels; the engine wraps its collator for them, ``train.engine.attention``).

    transformers derives the boundaries from the restarting positions only for a batch of one row, so the batch
    carries them, as trl's padding-free collator does: ``cu_seq_lens_q/k``, the int32 start of every sample (tail
    padding included) in the flattened batch and its end, and ``max_length_q/k``, the longest. The rows stay
    ``[batch, width]``: transformers' varlen path flattens them itself, and the loss and its weights keep their shape.
    """

    def __init__(self, collator: Any):
        self.collator = collator

    def __call__(self, rows: Sequence[dict]) -> dict[str, Any]:
        batch = self.collator(rows)
        return {**batch, **sample_boundaries(batch["position_ids"])}


def sample_boundaries(position_ids: torch.Tensor) -> dict[str, Any]:
    """The varlen kernels' ``cu_seq_lens_q/k`` and ``max_length_q/k`` for a batch of restarting ``position_ids``:
    a sequence starts wherever a position is 0 (every row starts one), as transformers reads them
    (``prepare_fa_kwargs_from_position_ids``), computed here on the CPU instead of in every layer."""
    flat = position_ids.reshape(-1)
    starts = torch.cat([torch.nonzero(flat == 0).reshape(-1), torch.tensor([flat.numel()])])
    cu_seq_lens = starts.to(torch.int32)
    longest = int(cu_seq_lens.diff().max())
    return {
        "cu_seq_lens_q": cu_seq_lens,
        "cu_seq_lens_k": cu_seq_lens,
        "max_length_q": longest,
        "max_length_k": longest,
    }


class PaddedCollator:
    """The unpacked baseline: one sample per row, right-padded, with an attention mask."""

    def __init__(self, pad_token_id: int):
        self.pad_token_id = pad_token_id

    def __call__(self, samples: Sequence[dict]) -> dict[str, torch.Tensor]:
        width = max(len(s["input_ids"]) for s in samples)
        ids = [_padded(sample["input_ids"], width, self.pad_token_id) for sample in samples]
        labels = [_padded(sample["labels"], width, IGNORE_INDEX) for sample in samples]
        mask = [_padded(np.ones(len(sample["input_ids"]), np.int64), width, 0) for sample in samples]
        batch = {
            "input_ids": torch.from_numpy(np.stack(ids)),
            "labels": torch.from_numpy(np.stack(labels)),
            "attention_mask": torch.from_numpy(np.stack(mask)),
        }
        if any("loss_weights" in sample for sample in samples):
            batch["loss_weights"] = weights_tensor(samples, width)
        return batch
