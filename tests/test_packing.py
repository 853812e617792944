import random

import pytest
import torch

from train.data.packing import (
    IGNORE_INDEX,
    PackedCollator,
    PaddedCollator,
    best_fit_pack,
    pack_samples,
    packing_stats,
)


def test_best_fit_pack_exact_bins():
    # decreasing order: 7 opens bin0 (free 3), 5 opens bin1 (free 5), 4 -> bin1 (free 1),
    # 3 -> bin0 (free 0), 1 -> bin1 (free 0)
    assert best_fit_pack([3, 7, 1, 5, 4], capacity=10) == [[1, 0], [3, 4, 2]]


def test_best_fit_pack_every_index_once_and_capacity_respected():
    rng = random.Random(0)
    lengths = [rng.randint(1, 100) for _ in range(500)]
    bins = best_fit_pack(lengths, capacity=128)
    flat = sorted(i for b in bins for i in b)
    assert flat == list(range(500))
    assert all(sum(lengths[i] for i in b) <= 128 for b in bins)
    stats = packing_stats(lengths, bins, 128)
    assert stats.real_tokens == sum(lengths) and stats.slots == len(bins) * 128
    assert stats.efficiency > 0.95  # best-fit on uniform lengths wastes little


def test_best_fit_pack_rejects_overlong():
    with pytest.raises(ValueError, match="1 sample"):
        best_fit_pack([5, 11], capacity=10)


def test_pack_samples_restarts_positions_and_masks_first_label():
    samples = [{"input_ids": [1, 2, 3], "labels": [1, 2, 3]}, {"input_ids": [4, 5], "labels": [-100, 5]}]
    row = pack_samples(samples, [0, 1])
    assert row == {"input_ids": [1, 2, 3, 4, 5], "labels": [-100, 2, 3, -100, 5], "position_ids": [0, 1, 2, 0, 1]}


def test_packed_collator_padding_is_its_own_sequence():
    batch = PackedCollator(pad_token_id=0, pad_to=6)(
        [{"input_ids": [7, 8, 9], "labels": [-100, 8, 9], "position_ids": [0, 1, 2]}]
    )
    assert batch["input_ids"].tolist() == [[7, 8, 9, 0, 0, 0]]
    assert batch["labels"].tolist() == [[-100, 8, 9, -100, -100, -100]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 0, 1, 2]]
    assert "attention_mask" not in batch


def _tiny_model(attn: str):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        attn_implementation=attn,
        use_cache=False,
    )
    return LlamaForCausalLM(config).eval()


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_packed_loss_equals_token_weighted_unpacked_loss(attn):
    model = _tiny_model(attn)
    rng = random.Random(1)
    samples = []
    for n in (9, 5, 13, 7, 4):
        ids = [rng.randrange(1, 97) for _ in range(n)]
        labels = [IGNORE_INDEX if rng.random() < 0.3 else t for t in ids]
        samples.append({"input_ids": ids, "labels": labels})

    # unpacked reference: sum of per-sample token losses / number of trained (shifted) tokens
    total, count = 0.0, 0
    for s in samples:
        out = model(input_ids=torch.tensor([s["input_ids"]]), labels=torch.tensor([s["labels"]]))
        n = sum(1 for t in s["labels"][1:] if t != IGNORE_INDEX)
        total += out.loss.item() * n
        count += n
    reference = total / count

    bins = best_fit_pack([len(s["input_ids"]) for s in samples], capacity=20)
    rows = [pack_samples(samples, b) for b in bins]
    batch = PackedCollator(pad_token_id=0, pad_to=20)(rows)
    packed = model(**batch).loss.item()
    assert packed == pytest.approx(reference, abs=1e-6)


def test_padded_collator_masks_padding():
    batch = PaddedCollator(pad_token_id=0)(
        [{"input_ids": [5, 6], "labels": [5, 6]}, {"input_ids": [7], "labels": [-100]}]
    )
    assert batch["input_ids"].tolist() == [[5, 6], [7, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1], [1, 0]]
    assert batch["labels"].tolist() == [[5, 6], [-100, -100]]
