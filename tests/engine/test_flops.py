"""MFU's FLOPs, computed by hand: real tokens only, attention by each packed sample's own length, N the
parameters that take part in a matmul per token."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from train.data.packing import PackedCollator, pack_samples
from train.engine.flops import flops_counter, matmul_parameters, sample_lengths, training_flops


def test_training_flops_by_hand():
    # N = 100, 2 layers, width 4; samples of 3 and 5 tokens.
    # full: 6 * 100 * (3 + 5) = 4800 for the weights; attention 3 * 2 * 2 * 4 * (3^2 + 5^2) = 48 * 34 = 1632
    assert training_flops([3, 5], 100, 2, 4, lora=False) == 4800 + 1632
    # LoRA: no weight gradients for the frozen weights, 4 * 100 * 8 = 3200; attention the same
    assert training_flops([3, 5], 100, 2, 4, lora=True) == 3200 + 1632
    # the same 8 tokens as one sample attend 64 pairs' worth, not 34: a packed row is not one sequence
    assert training_flops([8], 100, 2, 4, lora=False) == 4800 + 48 * 64
    assert training_flops([], 100, 2, 4, lora=False) == 0


def test_sample_lengths_of_packed_padded_and_plain_rows():
    samples = [{"input_ids": [1] * n, "labels": [1] * n} for n in (3, 5, 2)]
    row = pack_samples(samples, [1, 0, 2])
    assert sample_lengths(row) == [5, 3, 2]
    assert sample_lengths({"input_ids": [7, 8, 9, 10]}) == [4]  # unpacked: one sample
    padded = PackedCollator(pad_token_id=0, pad_to=16)([row])  # tail padding is collated later, never counted
    assert padded["input_ids"].shape == (1, 16) and sum(sample_lengths(row)) == 10


def _model(tied: bool):
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        tie_word_embeddings=tied,
    )
    return LlamaForCausalLM(config)


@pytest.mark.parametrize("tied", [False, True])
def test_n_counts_every_matmul_weight_and_the_lm_head_but_not_the_embedding_lookup(tied):
    # per layer: q, k, v, o 4 x 8 x 8 = 256; gate, up, down 3 x 8 x 16 = 384; 2 norms x 8 = 16 -> 656
    # + final norm 8 + LM head 64 x 8 = 512 -> 1176, tied or not (embedding 64 x 8 = 512 left out)
    model = _model(tied)
    assert sum(p.numel() for p in model.parameters()) == (1176 if tied else 1688)
    assert matmul_parameters(model) == 1176


def test_the_counter_reads_the_model_shape_through_peft():
    from omegaconf import OmegaConf

    from train.engine.model import apply_lora

    peft_cfg = OmegaConf.create({"kind": "lora", "r": 2, "alpha": 4, "dropout": 0.0, "target_modules": None})
    model = apply_lora(_model(False), peft_cfg, ["q_proj", "v_proj"])
    adapters = 2 * (8 * 2 + 2 * 8)  # q and v: A (2 x 8) and B (8 x 2)
    assert flops_counter(model, lora=True)([3, 5]) == training_flops([3, 5], 1176 + adapters, 1, 8, lora=True)


def test_mfu_counts_the_samples_the_model_ran_over_the_interval(monkeypatch):
    from types import SimpleNamespace

    import train.engine.callbacks
    from train.engine.callbacks import Throughput, TokenMeter
    from train.engine.run import MeteredCollator

    meter, model = TokenMeter(), torch.nn.Linear(1, 1)
    meter.attach(model)
    collate = MeteredCollator(PackedCollator(pad_token_id=0, pad_to=16), meter, 16)
    samples = [{"input_ids": [1] * n, "labels": [1] * n} for n in (3, 5, 2)]
    clock = iter([100.0, 102.0])  # train begin, first log: 2 s
    monkeypatch.setattr(train.engine.callbacks.time, "perf_counter", lambda: next(clock))
    throughput = Throughput(meter, lambda lengths: training_flops(lengths, 100, 2, 4, lora=False), 1000.0, 1)
    throughput.on_train_begin(None, None, None)
    collate([pack_samples(samples, [0, 1]), pack_samples(samples, [2])])
    model(torch.zeros(1))  # the training forward that ran this batch
    logs = {"loss": 1.0}
    throughput.on_log(None, SimpleNamespace(), None, logs=logs)
    flops = 6 * 100 * 10 + 48 * (9 + 25 + 4)  # 6000 + 1824 over 2 s, peak 1000 FLOP/s
    assert logs == {
        "loss": 1.0,
        "tokens_per_s_per_device": 5.0,
        "padding_efficiency": round(10 / 32, 4),
        "mfu": round(flops / 2 / 1000, 4),
    }
