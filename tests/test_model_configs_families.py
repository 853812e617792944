"""Model configs of the families issue 17 adds (Mistral Small v7, Llama 4 Scout, DeepSeek-V3): each composes with
its chat format and tokenizer and LoRA targets, and ``model.source=config`` builds the published shapes on the meta
device (no weights), counted against the model cards."""

from __future__ import annotations

import pytest

from train.engine.config import compose

# name -> (hub id, chat format, tokenizer, LoRA targets)
FAMILY_MODELS = {
    "deepseek_v3": (
        "deepseek-ai/DeepSeek-V3",
        "deepseek_v3",
        "deepseek-ai/DeepSeek-V3",
        ["q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    ),
    "llama4_scout": (
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        "llama4",
        "llama4",
        ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    ),
    "mistral_small_v7": (
        "mistralai/Mistral-Small-24B-Instruct-2501",
        "mistral_v7",
        "mistralai/Mistral-Small-24B-Instruct-2501",
        ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    ),
}


@pytest.mark.parametrize("name", list(FAMILY_MODELS))
def test_config_composes_with_its_format_tokenizer_and_lora_targets(name):
    model = compose(["recipe=tiny", f"model={name}"]).model
    path, chat_format, tokenizer, targets = FAMILY_MODELS[name]
    assert (model.name, model.path, model.chat_format, model.tokenizer) == (name, path, chat_format, tokenizer)
    assert list(model.lora_target_modules) == targets


def meta_model(name):
    import torch

    from train.engine.model import build_model

    model_cfg = compose(["recipe=tiny", f"model={name}", "model.source=config"]).model
    with torch.device("meta"):
        return build_model(model_cfg, vocab_size=1, dtype=torch.bfloat16, attn_implementation="sdpa")


def test_mistral_small_v7_is_24b_with_its_shapes():
    model = meta_model("mistral_small_v7")
    config = model.config
    parameters = sum(p.numel() for p in model.parameters())
    assert round(parameters / 1e9, 2) == 23.57  # the model card's "24B"
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (5120, 40, 32)
    assert (config.num_key_value_heads, config.head_dim, config.intermediate_size) == (8, 128, 32768)
    assert model.get_input_embeddings().weight.shape == (131072, 5120)


def test_llama4_scout_is_the_16_expert_moe_text_model():
    """transformers 5.24's llama4_text: 107.77B parameters (the card's 109B adds the vision encoder), 16 routed
    experts per layer; the LoRA targets hit attention and the shared expert, never the fused routed experts."""
    model = meta_model("llama4_scout")
    config = model.config
    assert type(model).__name__ == "Llama4ForCausalLM"
    assert round(sum(p.numel() for p in model.parameters()) / 1e9, 2) == 107.77
    assert (config.num_hidden_layers, config.num_local_experts, config.num_experts_per_tok) == (48, 16, 1)
    assert model.get_input_embeddings().weight.shape == (202048, 5120)
    layer = dict(model.model.layers[0].named_modules())
    targets = set(FAMILY_MODELS["llama4_scout"][3])
    adapted = sorted(name for name, module in layer.items() if name.split(".")[-1] in targets)
    assert adapted == [
        "feed_forward.shared_expert.down_proj",
        "feed_forward.shared_expert.gate_proj",
        "feed_forward.shared_expert.up_proj",
        "self_attn.k_proj",
        "self_attn.o_proj",
        "self_attn.q_proj",
        "self_attn.v_proj",
    ]


def test_deepseek_v3_is_671b_with_lora_on_attention_and_shared_experts():
    """671.03B parameters on the meta device (the card's 671B; its 685B adds the multi-token-prediction module)."""
    model = meta_model("deepseek_v3")
    assert type(model).__name__ == "DeepseekV3ForCausalLM"
    assert round(sum(p.numel() for p in model.parameters()) / 1e9, 2) == 671.03
    layer = dict(model.model.layers[3].named_modules())  # the first MoE layer
    targets = set(FAMILY_MODELS["deepseek_v3"][3])
    adapted = sorted(name for name in layer if name.split(".")[-1] in targets)
    assert adapted == [
        "mlp.shared_experts.down_proj",
        "mlp.shared_experts.gate_proj",
        "mlp.shared_experts.up_proj",
        "self_attn.kv_a_proj_with_mqa",
        "self_attn.kv_b_proj",
        "self_attn.o_proj",
        "self_attn.q_a_proj",
        "self_attn.q_b_proj",
    ]
