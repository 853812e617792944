"""The per-token weighted loss (train.engine.loss): exact values on a hand-built batch, the unweighted loss
when every weight is 1.0, and the Trainer path (compute_loss_func + the hook that takes the weights)."""

from __future__ import annotations

import math

import pytest
import torch

from train.data.packing import IGNORE_INDEX, PackedCollator, PaddedCollator, pack_samples
from train.engine.loss import WeightedLoss, weighted_causal_lm_loss

# One row of 4 positions over a vocabulary of 3. Position i predicts labels[i + 1].
LOGITS = torch.tensor([[[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [5.0, 5.0, 5.0]]])
LABELS = torch.tensor([[IGNORE_INDEX, 1, IGNORE_INDEX, 0]])
WEIGHTS = torch.tensor([[0.0, 2.0, 0.0, 0.5]])


def test_weighted_loss_on_a_hand_built_batch():
    # predicted at 0 -> label 1 (uniform logits): nll = ln 3; predicted at 2 -> label 0: nll = ln(2 + e) - 0
    nll_first, nll_second = math.log(3), math.log(2 + math.e)
    expected = (2.0 * nll_first + 0.5 * nll_second) / 2  # two trained tokens
    assert weighted_causal_lm_loss(LOGITS, LABELS, WEIGHTS).item() == pytest.approx(expected, rel=1e-6)
    # N comes from the Trainer when given: the trained tokens of the whole global batch
    assert weighted_causal_lm_loss(LOGITS, LABELS, WEIGHTS, torch.tensor(5)).item() == pytest.approx(
        (2.0 * nll_first + 0.5 * nll_second) / 5, rel=1e-6
    )


def test_weights_of_one_give_the_models_own_loss():
    """Equal up to float summation order (the model sums inside cross_entropy). Exactly equal in
    training: weights that are all 0/1 never reach rows or batches (test_dataset_weights), so the
    Trainer runs the model's own loss."""
    from transformers.loss.loss_utils import ForCausalLMLoss

    torch.manual_seed(0)
    logits = torch.randn(2, 7, 11)
    labels = torch.randint(0, 11, (2, 7))
    labels[0, :3] = IGNORE_INDEX
    labels[1, 5:] = IGNORE_INDEX
    ones = (labels != IGNORE_INDEX).float()
    for n in (torch.tensor(17), torch.tensor(6), 9, None):
        ours = weighted_causal_lm_loss(logits, labels, ones, n).item()
        reference = ForCausalLMLoss(logits, labels, vocab_size=11, num_items_in_batch=n).item()
        assert ours == pytest.approx(reference, rel=1e-6)


def _tiny_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        use_cache=False,
    )
    return LlamaForCausalLM(config)


def test_the_trainer_computes_the_weighted_loss_and_the_model_never_sees_the_weights(tmp_path):
    from transformers import Trainer, TrainingArguments

    model = _tiny_model()
    samples = [
        {"input_ids": [5, 6, 7, 8, 9], "labels": [-100, -100, 7, 8, 9], "loss_weights": [0, 0, 2.0, 1.0, 0.5]},
        {"input_ids": [10, 11, 12], "labels": [-100, 11, 12], "loss_weights": [0, 1.0, 3.0]},
    ]
    batch = PackedCollator(pad_token_id=0, pad_to=10)([pack_samples(samples, [0, 1])])
    loss_func = WeightedLoss()
    loss_func.attach(model)
    seen: list[set] = []  # hooks run in order: this one sees what the model's forward gets
    model.register_forward_pre_hook(lambda module, args, kwargs: seen.append(set(kwargs)), with_kwargs=True)
    args = TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True, remove_unused_columns=False)
    trainer = Trainer(model=model, args=args, compute_loss_func=loss_func)

    n = torch.tensor(5)  # the Trainer's num_items_in_batch: trained (shifted) labels of the global batch
    loss = trainer.compute_loss(model, dict(batch), num_items_in_batch=n)
    assert seen and "loss_weights" not in seen[-1] and "labels" not in seen[-1]

    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"]).logits
    log_probs = torch.log_softmax(logits[0].float(), dim=-1)
    # packed row [5 6 7 8 9 | 10 11 12 | pad pad]: (predicting position, target, weight) of each trained token
    targets = [(1, 7, 2.0), (2, 8, 1.0), (3, 9, 0.5), (5, 11, 1.0), (6, 12, 3.0)]
    assert batch["loss_weights"].tolist() == [[0, 0, 2.0, 1.0, 0.5, 0, 1.0, 3.0, 0, 0]]
    expected = -sum(w * log_probs[pos, tok] for pos, tok, w in targets) / 5
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)


def test_the_weighted_loss_refuses_a_batch_without_weights():
    with pytest.raises(RuntimeError, match="without loss_weights"):
        WeightedLoss()({"logits": LOGITS}, LABELS)


def test_pack_samples_carries_weights_and_zeroes_each_first():
    samples = [
        {"input_ids": [1, 2, 3], "labels": [1, 2, 3], "loss_weights": [1.0, 2.0, 0.5]},
        {"input_ids": [4, 5], "labels": [-100, 5]},
    ]  # no weights: 1.0 where trained
    row = pack_samples(samples, [0, 1])
    assert row["labels"] == [-100, 2, 3, -100, 5]
    assert row["loss_weights"] == [0.0, 2.0, 0.5, 0.0, 1.0]
    assert "loss_weights" not in pack_samples([samples[1]], [0])


def test_collators_pad_weights_with_zero_and_add_none_to_unweighted_batches():
    row = {"input_ids": [7, 8, 9], "labels": [-100, 8, 9], "position_ids": [0, 1, 2], "loss_weights": [0.0, 1.5, 2.0]}
    packed = PackedCollator(pad_token_id=0, pad_to=5)([row])
    assert packed["loss_weights"].dtype == torch.float32
    assert packed["loss_weights"].tolist() == [[0.0, 1.5, 2.0, 0.0, 0.0]]
    plain = {k: v for k, v in row.items() if k != "loss_weights"}
    assert set(PackedCollator(pad_token_id=0, pad_to=5)([plain])) == {"input_ids", "labels", "position_ids"}
    padded = PaddedCollator(pad_token_id=0)(
        [{"input_ids": [5, 6], "labels": [5, 6], "loss_weights": [0.5, 2.0]}, {"input_ids": [7], "labels": [-100]}]
    )
    assert padded["loss_weights"].tolist() == [[0.5, 2.0], [0.0, 0.0]]
    assert "loss_weights" not in PaddedCollator(pad_token_id=0)([{"input_ids": [5], "labels": [5]}])
