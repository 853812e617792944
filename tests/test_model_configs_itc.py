"""The ITC paper's models (seed 002 §5.1) as model configs: each composes with its chat format and tokenizer, and
``model.source=config`` builds the real shapes (checked on the meta device, no weights: parameter counts against
the counts the model cards publish)."""

from __future__ import annotations

import pytest
import yaml

from train.engine.config import compose

# name -> (hub id, chat format, tokenizer, parameters in billions as the model card rounds them)
ITC_MODELS = {
    "qwen2_5_3b": ("Qwen/Qwen2.5-3B-Instruct", "qwen2_5", "qwen2_5", 3.09),
    "qwen2_5_coder_3b": ("Qwen/Qwen2.5-Coder-3B-Instruct", "qwen2_5", "qwen2_5", 3.09),
    "qwen2_5_coder_7b": ("Qwen/Qwen2.5-Coder-7B-Instruct", "qwen2_5", "qwen2_5", 7.62),
    "deepseek_coder_1_3b": (
        "deepseek-ai/deepseek-coder-1.3b-instruct",
        "deepseek_coder",
        "deepseek-ai/deepseek-coder-1.3b-instruct",
        1.35,
    ),
    "deepseek_coder_7b_v1_5": (
        "deepseek-ai/deepseek-coder-7b-instruct-v1.5",
        "deepseek_coder",
        "deepseek-ai/deepseek-coder-7b-instruct-v1.5",
        6.91,
    ),
}


@pytest.mark.parametrize("name", list(ITC_MODELS))
def test_each_itc_model_config_composes_with_its_format_and_tokenizer(name):
    cfg = compose(["recipe=tiny", f"model={name}"])
    path, chat_format, tokenizer, _ = ITC_MODELS[name]
    model = cfg.model
    assert (model.name, model.source, model.path, model.chat_format, model.tokenizer) == (
        name,
        "pretrained",
        path,
        chat_format,
        tokenizer,
    )


def meta_model(name):
    """What ``model=NAME model.source=config`` trains: train.engine.model.build_model, on the meta device (no
    memory)."""
    import torch

    from train.engine.model import build_model

    model_cfg = compose(["recipe=tiny", f"model={name}", "model.source=config"]).model
    attention = "sdpa" if model_cfg.attn_implementation == "auto" else model_cfg.attn_implementation  # gpt-oss: eager
    with torch.device("meta"):
        model = build_model(model_cfg, vocab_size=1, dtype=torch.bfloat16, attn_implementation=attention)
    return model.config, model


@pytest.mark.parametrize("name", list(ITC_MODELS))
def test_source_config_builds_the_published_size(name):
    config, model = meta_model(name)
    parameters = sum(p.numel() for p in model.parameters())  # tied embeddings are counted once
    assert round(parameters / 1e9, 2) == ITC_MODELS[name][3]
    head_dim = config.hidden_size // config.num_attention_heads
    attention = model.model.layers[0].self_attn
    assert attention.k_proj.weight.shape == (config.num_key_value_heads * head_dim, config.hidden_size)
    assert model.get_input_embeddings().weight.shape == (config.vocab_size, config.hidden_size)
    assert len(model.model.layers) == config.num_hidden_layers


def test_the_deepseek_shapes_are_their_own_not_coder_6_7bs():
    """1.3B: Coder's 32,256-token vocabulary and RoPE base 1e5 with linear x4 scaling; 7B-v1.5: DeepSeek-LLM's
    102,400 tokens, RoPE base 1e4, 4K positions, 30 layers."""
    small, _ = meta_model("deepseek_coder_1_3b")
    large, _ = meta_model("deepseek_coder_7b_v1_5")
    theta = small.rope_parameters["rope_theta"]
    assert (small.vocab_size, theta, small.max_position_embeddings) == (32256, 100000.0, 16384)
    assert small.rope_parameters["factor"] == 4.0 and small.rope_parameters["rope_type"] == "linear"
    theta = large.rope_parameters["rope_theta"]
    assert (large.vocab_size, theta, large.max_position_embeddings, large.num_hidden_layers) == (
        102400,
        10000.0,
        4096,
        30,
    )
    assert (small.eos_token_id, large.eos_token_id) == (32021, 100015)  # <|EOT|> in each vocabulary


def model_configs_with_an_arch() -> list[str]:
    # Read from the files, not composed: this runs at collection, in every worker (its 20 composes took ~5 s there).
    # The test composes each one it is given, and test_model_config_files_are_plain_yaml keeps the reading right.
    from train.engine.config import CONF_DIR

    paths = sorted((CONF_DIR / "model").glob("*.yaml"))
    return [path.stem for path in paths if (yaml.safe_load(path.read_text()) or {}).get("arch")]


# slow tier: composes every model config once more; test_config's test_every_model_composes composes each in the
# default tier (this one guards the parametrization below against a model file gaining a defaults list)
@pytest.mark.slow
def test_model_config_files_are_plain_yaml():
    """No model file has a defaults list, so its `arch` is the one it composes to: the parametrization above may
    read the files. A model config that gains a defaults list fails here rather than leaving its build untested."""
    from train.engine.config import CONF_DIR

    paths = sorted((CONF_DIR / "model").glob("*.yaml"))
    with_an_arch = [path.stem for path in paths if compose(["recipe=tiny", f"model={path.stem}"]).model.arch]
    assert model_configs_with_an_arch() == with_an_arch


@pytest.mark.parametrize("name", model_configs_with_an_arch())
def test_every_model_config_with_an_arch_builds_on_the_meta_device(name):
    """Before: llama3_1_8b (a list of eos ids) and the DeepSeek-Coder 1.3B config (nested rope_scaling) failed in
    build_model, transformers 5 refusing OmegaConf containers inside the config kwargs."""
    config, model = meta_model(name)
    assert len(model.model.layers) == config.num_hidden_layers


# name -> (hub id, parameters in billions as the model cards round them: Qwen3-8B 8.2B, Qwen3-32B 32.8B)
QWEN3_MODELS = {"qwen3_8b": ("Qwen/Qwen3-8B", 8.19), "qwen3_32b": ("Qwen/Qwen3-32B", 32.76)}


@pytest.mark.parametrize("name", list(QWEN3_MODELS))
def test_qwen3_configs_build_the_published_size_with_their_format(name):
    model_cfg = compose(["recipe=tiny", f"model={name}"]).model
    assert (model_cfg.path, model_cfg.chat_format, model_cfg.tokenizer) == (QWEN3_MODELS[name][0], "qwen3", "qwen3")
    config, model = meta_model(name)
    parameters = sum(p.numel() for p in model.parameters())
    assert round(parameters / 1e9, 2) == QWEN3_MODELS[name][1]
    attention = model.model.layers[0].self_attn
    # head_dim 128 is its own setting: 32-B's 64 heads x 128 = 8192 query width on a 5120 hidden size
    assert attention.q_proj.weight.shape == (config.num_attention_heads * 128, config.hidden_size)
    assert attention.k_proj.weight.shape == (8 * 128, config.hidden_size)
    assert hasattr(attention, "q_norm") and model.lm_head.weight is not model.get_input_embeddings().weight
