"""Packed samples never attend across sample boundaries, whatever the kernel and the micro batch (#26 item 1).

Flash-family kernels build no mask: transformers derives boundaries from restarting positions only for a batch of
one row, so the packed collator hands them ``cu_seq_lens_q/k`` and ``max_length_q/k``
(``SampleBoundaries``, around the packed collator where the engine runs a flash kernel). On a CPU the kernel is
``varlen_emulation``: transformers' own flash path with pure-torch kernels. At micro batch 2, through the HF
Trainer's training step and peft, packed LoRA rows give the loss and gradients of the unpacked samples under sdpa;
the plain packed batch through the same kernel does not (the control: what flash trained on before).
"""

from __future__ import annotations

import pytest
import torch
import varlen_emulation
from omegaconf import OmegaConf

from train.data.packing import PackedCollator, PaddedCollator, SampleBoundaries, best_fit_pack, pack_samples
from train.engine.attention import is_flash_family
from train.engine.run import packed_collator

LENGTHS = [9, 5, 12, 7, 4, 6]  # packed at 24 into 2 rows (micro batch 2): [12, 9] and [7, 6, 5, 4]
WIDTH = 24
VOCAB = 97


def _samples() -> list[dict]:
    generator = torch.Generator().manual_seed(1)
    samples = []
    for length in LENGTHS:
        ids = torch.randint(3, VOCAB, (length,), generator=generator).tolist()
        labels = [-100 if i < 2 else token for i, token in enumerate(ids)]  # a masked prompt, as chat samples have
        samples.append({"input_ids": ids, "labels": labels})
    return samples


def _packed_rows() -> list[dict]:
    samples = _samples()
    bins = best_fit_pack([len(s["input_ids"]) for s in samples], WIDTH)
    assert len(bins) == 2 and all(len(members) > 1 for members in bins), bins
    return [pack_samples(samples, members) for members in bins]


def _lora_model(attn: str):
    """A tiny random Llama with LoRA (B random too, so A's gradients are not zero), the same weights every call."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    from train.engine.model import apply_lora

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        use_cache=False,
    )
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation=attn)
    peft_cfg = OmegaConf.create({"kind": "lora", "r": 4, "alpha": 8, "dropout": 0.0, "target_modules": None})
    model = apply_lora(model, peft_cfg, ["q_proj", "k_proj", "v_proj", "o_proj"])
    for name, param in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.1)
    return model


def _step(model, rows: list[dict], collator, tmp_path) -> tuple[float, dict[str, torch.Tensor], dict]:
    """One training step over all ``rows`` as one micro batch, through the HF Trainer's data loader and training
    step as the engine runs them: the loss, the LoRA gradients and the batch the model was given."""
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(
        output_dir=str(tmp_path),
        report_to=[],
        use_cpu=True,
        remove_unused_columns=False,
        per_device_train_batch_size=len(rows),
    )
    trainer = Trainer(model=model, args=args, train_dataset=rows, data_collator=collator)
    trainer.current_gradient_accumulation_steps = 1  # what the training loop sets before its first step
    (batch,) = list(trainer.get_train_dataloader())
    model.zero_grad()
    loss = trainer.training_step(model, batch)
    grads = {name: param.grad.clone() for name, param in model.named_parameters() if param.requires_grad}
    return loss.item(), grads, batch


@pytest.fixture
def flash(monkeypatch) -> str:
    return varlen_emulation.install(monkeypatch)


@pytest.fixture
def unpacked(tmp_path) -> tuple[float, dict[str, torch.Tensor]]:
    """Every sample in its own row, padded, under sdpa: the reference."""
    loss, grads, _ = _step(_lora_model("sdpa"), _samples(), PaddedCollator(pad_token_id=0), tmp_path / "sdpa")
    return loss, grads


def test_the_engine_takes_flash_kernels_for_varlen_kernels(flash):
    for name in ("flash_attention_2", "flash_attention_3", "kernels-community/flash-attn2", flash):
        assert is_flash_family(name), name
    for name in ("sdpa", "eager", "flex_attention"):
        assert not is_flash_family(name), name


def test_packed_rows_through_flash_give_the_unpacked_loss_and_lora_gradients(flash, unpacked, tmp_path):
    collator = packed_collator(0, WIDTH, flash)  # as the engine collates for a flash kernel
    loss, grads, batch = _step(_lora_model(flash), _packed_rows(), collator, tmp_path / "flash")
    assert batch["input_ids"].shape == (2, WIDTH)  # micro batch 2: transformers would not derive the boundaries
    assert batch["cu_seq_lens_q"].numel() == len(LENGTHS) + 2 + 1  # every sample, each row's tail, and the end
    reference_loss, reference_grads = unpacked
    assert loss == pytest.approx(reference_loss, rel=1e-5)
    assert grads.keys() == reference_grads.keys() and any("lora_A" in name for name in grads)
    for name, grad in grads.items():
        assert grad.abs().sum() > 0, name
        torch.testing.assert_close(grad, reference_grads[name], rtol=1e-4, atol=1e-6, msg=name)


def test_the_plain_packed_batch_through_flash_attends_across_samples(flash, unpacked, tmp_path):
    """The control, and what flash trained on before: without boundaries a batch of 2 rows attends over each row."""
    loss, grads, _ = _step(_lora_model(flash), _packed_rows(), PackedCollator(0, pad_to=WIDTH), tmp_path / "flash")
    reference_loss, reference_grads = unpacked
    assert abs(loss - reference_loss) > 1e-3
    assert any(not torch.allclose(grads[name], reference_grads[name], rtol=1e-4, atol=1e-6) for name in grads)


def test_a_packed_row_alone_needs_no_boundaries_under_flash(flash, tmp_path):
    """A batch of one row: transformers derives the boundaries from the positions (so the emulation reads them)."""
    row = _packed_rows()[:1]
    plain = _step(_lora_model(flash), row, PackedCollator(pad_token_id=0, pad_to=WIDTH), tmp_path / "plain")
    varlen = _step(_lora_model(flash), row, packed_collator(0, WIDTH, flash), tmp_path / "varlen")
    assert plain[0] == pytest.approx(varlen[0], rel=1e-6)


def test_packed_rows_under_sdpa_keep_the_plain_batch_and_the_unpacked_loss(unpacked, tmp_path):
    loss, grads, batch = _step(_lora_model("sdpa"), _packed_rows(), packed_collator(0, WIDTH, "sdpa"), tmp_path / "p")
    assert set(batch) == {"input_ids", "labels", "position_ids"}
    assert loss == pytest.approx(unpacked[0], rel=1e-5)
    for name, grad in grads.items():
        torch.testing.assert_close(grad, unpacked[1][name], rtol=1e-4, atol=1e-6, msg=name)


def test_the_boundaries_cover_every_sample_and_each_row_tail():
    rows = [
        {"input_ids": [1, 2, 3, 4, 5], "labels": [-100, 2, 3, -100, 5], "position_ids": [0, 1, 2, 0, 1]},
        {"input_ids": [6, 7, 8, 9], "labels": [-100, 7, 8, 9], "position_ids": [0, 1, 2, 3]},
    ]
    batch = SampleBoundaries(PackedCollator(pad_token_id=0, pad_to=6))(rows)
    # row 1: samples of 3 and 2, tail of 1; row 2: a sample of 4, tail of 2 -- over the flattened 2 x 6 batch
    assert batch["cu_seq_lens_q"].tolist() == [0, 3, 5, 6, 10, 12]
    assert batch["cu_seq_lens_q"].dtype == torch.int32 and batch["cu_seq_lens_k"] is batch["cu_seq_lens_q"]
    assert batch["max_length_q"] == batch["max_length_k"] == 4 and isinstance(batch["max_length_q"], int)
    plain = PackedCollator(pad_token_id=0, pad_to=6)(rows)
    assert set(plain) == {"input_ids", "labels", "position_ids"}
    for key, value in plain.items():
        assert torch.equal(batch[key], value), key
    full = SampleBoundaries(PackedCollator(pad_token_id=0, pad_to=5))(rows)  # a row with no tail: no empty sequence
    assert full["cu_seq_lens_q"].tolist() == [0, 3, 5, 9, 10]
