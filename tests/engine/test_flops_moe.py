"""MFU and tokens/s on the GPU path (issue 26, item 9): a mixture of experts counts only the experts a token runs,
each GPU has its own peak (an unknown one is said, not silently dropped), and tokens/s survive data loader
workers."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from train.engine.flops import PEAK_ENV, flops_counter, matmul_parameters, moe_routing, peak_flops, training_flops

COMMON = {"vocab_size": 64, "hidden_size": 8, "num_attention_heads": 2, "num_key_value_heads": 2}


def _model(model_type: str, **arch):
    torch.manual_seed(0)
    config = AutoConfig.for_model(model_type, **COMMON, tie_word_embeddings=False, **arch)
    return AutoModelForCausalLM.from_config(config)


def test_a_tiny_mixtral_counts_top_2_of_4_experts_by_hand():
    model = _model("mixtral", num_hidden_layers=1, intermediate_size=16, num_local_experts=4, num_experts_per_tok=2)
    # q, k, v, o: 4 x 8 x 8 = 256; router 4 x 8 = 32; experts: gate_up 4 x 32 x 8 = 1024 + down 4 x 8 x 16 = 512
    # = 1536, of which a token runs 2 of 4: 768; norms 2 x 8 + final 8 = 24; LM head 64 x 8 = 512
    assert sum(p.numel() for p in model.parameters()) == 256 + 32 + 1536 + 24 + 512 + 512  # + embedding 512
    assert moe_routing(model.config) == (4, 2)
    assert matmul_parameters(model) == 256 + 32 + 768 + 24 + 512  # 1592, not 2360
    # full fine-tuning, one sample of 3 tokens, 1 layer of width 8: 6 x 1592 x 3 + 3 x 2 x 1 x 8 x 9 = 28656 + 432
    assert flops_counter(model, lora=False)([3]) == 28656 + 432 == training_flops([3], 1592, 1, 8, lora=False)


def test_deepseek_v3_counts_its_shared_expert_whole_and_top_k_of_its_routed_ones():
    model = _model(
        "deepseek_v3",
        num_hidden_layers=2,
        first_k_dense_replace=1,  # layer 0 dense, layer 1 a mixture
        intermediate_size=16,
        moe_intermediate_size=6,
        n_routed_experts=4,
        n_shared_experts=1,
        num_experts_per_tok=2,
        n_group=1,
        topk_group=1,
        q_lora_rank=4,
        kv_lora_rank=4,
        qk_nope_head_dim=4,
        qk_rope_head_dim=4,
        v_head_dim=4,
    )
    params = dict(model.named_parameters())
    routed = (
        params["model.layers.1.mlp.experts.gate_up_proj"].numel()
        + params["model.layers.1.mlp.experts.down_proj"].numel()
    )
    assert routed == 4 * 12 * 8 + 4 * 8 * 6  # 4 experts of 3 x 8 x 6
    shared = sum(p.numel() for name, p in params.items() if ".shared_experts." in name)
    assert shared == 3 * 8 * 6  # counted whole
    everything = sum(p.numel() for p in model.parameters()) - 64 * 8  # but the embedding
    assert matmul_parameters(model) == everything - routed + routed * 2 // 4


def test_a_dense_model_is_unchanged():
    model = _model("llama", num_hidden_layers=1, intermediate_size=16)
    assert moe_routing(model.config) is None
    assert matmul_parameters(model) == sum(p.numel() for p in model.parameters()) - 64 * 8


@pytest.mark.parametrize(
    ("name", "tflops"),
    [
        ("NVIDIA H100 80GB HBM3", 989),  # SXM
        ("NVIDIA H100 PCIe", 756),
        ("NVIDIA H100 NVL", 835),
        ("NVIDIA H200", 989),
        ("NVIDIA A100-SXM4-80GB", 312),
        ("NVIDIA A100 80GB PCIe", 312),
    ],
)
def test_each_gpu_has_its_own_dense_bf16_peak(name, tflops):
    assert peak_flops(name) == tflops * 1e12


def test_an_unknown_gpu_has_no_peak_unless_one_is_given():
    assert peak_flops("NVIDIA GeForce RTX 4090") is None
    assert peak_flops("NVIDIA GeForce RTX 4090", "165.2") == pytest.approx(165.2e12)


def test_an_unknown_gpu_is_said_once_and_tokens_per_second_stay(monkeypatch, capsys):
    from train.engine import distributed, run

    monkeypatch.setattr(distributed, "device_name", lambda: "NVIDIA GeForce RTX 4090")
    monkeypatch.delenv(PEAK_ENV, raising=False)
    assert run.run_peak_flops(distributed.World(0, 0, 1, 1, 0)) is None
    assert (
        "tooltrain: MFU: unknown peak for NVIDIA GeForce RTX 4090; set TOOLTRAIN_PEAK_TFLOPS="
        in capsys.readouterr().out
    )
    monkeypatch.setenv(PEAK_ENV, "100")
    assert run.run_peak_flops(distributed.World(0, 0, 1, 1, 0)) == 100e12


def test_tokens_per_second_are_logged_with_data_loader_workers(tmp_path, engine):
    result = engine.run(tmp_path / "run", "train.dataloader_workers=2", "train.max_steps=2", "train.save_steps=10")
    rows = [row for row in engine.metrics(result.output_dir) if "loss" in row]
    assert len(rows) == 2
    assert all(row.get("tokens_per_s_per_device", 0) > 0 for row in rows), rows
    assert all(0 < row["padding_efficiency"] <= 1 for row in rows), rows
