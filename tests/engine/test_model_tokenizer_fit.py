"""Issue 24 item 2: a model folder named on the command line (``model.path=DIR``) trains with its own tokenizer and
chat format, never silently with the recipe's; a tokenizer the model's embeddings cannot hold is one ``error:`` line
naming both sizes. The model folders are built here, offline: tiny models saved with save_pretrained beside the
tiny ChatML tokenizer (1,024 tokens) grown to a different size."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from train.engine.config import ConfigError, compose
from train.engine.model import build_model, tokenizer_fit_problem

CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
EXTRA = 8  # tokens the folders' tokenizer adds to the tiny one: 1,032, not the recipe's 1,024


def tiny_tokenizer(base, extra: int):
    """A fresh copy of the tiny ChatML tokenizer saved in ``base`` (trained once: a build costs seconds)."""
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(base))
    if extra:
        tokenizer.add_tokens([f"<extra_{i}>" for i in range(extra)], special_tokens=True)
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def save_model(folder, model_type: str, vocab_size: int, tokenizer=None):
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(
        model_type,
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
    )
    AutoModelForCausalLM.from_config(config).save_pretrained(str(folder), safe_serialization=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    from train.tokenizers import load_tokenizer

    root = tmp_path_factory.mktemp("model-folders")
    load_tokenizer("tiny_chatml", cache=False).save_pretrained(str(root / "base"))
    grown = tiny_tokenizer(root / "base", EXTRA)
    return {
        "base": root / "base",
        "llama": save_model(root / "llama", "llama", len(grown), grown),
        "qwen2": save_model(root / "qwen2", "qwen2", len(grown), grown),
        # the recipe's 1,024-token tokenizer beside 600 embedding rows: it cannot fit
        "small": save_model(root / "small", "llama", 600, tiny_tokenizer(root / "base", 0)),
    }


@pytest.fixture
def unknown_folder(folders, tmp_path):
    """A model family tooltrain has no chat format for, and a tokenizer without a chat template."""
    folder = tmp_path / "unknown"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": 1024}))
    tokenizer = tiny_tokenizer(folders["base"], 0)
    tokenizer.chat_template = None
    tokenizer.save_pretrained(str(folder))
    return folder


@pytest.mark.parametrize(("name", "chat_format"), [("llama", "chatml"), ("qwen2", "qwen2_5")])
def test_a_model_folder_brings_its_own_tokenizer_and_chat_format(folders, name, chat_format):
    cfg = compose(["recipe=tiny", f"model.path={folders[name]}"])
    assert (cfg.model.source.value, cfg.model.tokenizer, cfg.model.chat_format) == (
        "pretrained",
        str(folders[name]),
        chat_format,
    )
    from train.engine.run_folder import run_tokenizer

    assert len(run_tokenizer(cfg)) == 1024 + EXTRA  # the folder's, not the recipe's tiny_chatml


def test_what_the_command_line_names_itself_is_kept(folders):
    cfg = compose(
        ["recipe=tiny", f"model.path={folders['qwen2']}", "model.tokenizer=tiny_chatml", "model.chat_format=chatml"]
    )
    assert (cfg.model.tokenizer, cfg.model.chat_format) == ("tiny_chatml", "chatml")
    assert compose(["recipe=tiny"]).model.tokenizer == "tiny_chatml"  # no model.path: the recipe's, as before


def test_a_folder_whose_chat_format_cannot_be_told_is_refused_with_the_valid_choices(unknown_folder):
    with pytest.raises(ConfigError) as err:
        compose(["recipe=tiny", f"model.path={unknown_folder}"])
    message = str(err.value)
    assert f"cannot tell which chat format model.path={unknown_folder} uses" in message
    assert "model_type 'gpt2'" in message and "no chat template" in message
    assert "set model.chat_format to one of: llama3_1, " in message and "qwen2_5" in message


def test_a_folder_of_another_family_with_its_own_chat_template_trains_with_the_template_fallback(
    folders, tmp_path, capsys
):
    """#28's acceptance: `model.path=DIR` alone, DIR a family tooltrain writes no exact format for (Gemma 3's
    template from trl's wheel), composes to the `template` format rendering with DIR's tokenizer, and says so."""
    from pathlib import Path

    import trl

    folder = tmp_path / "gemma"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gemma3_text", "vocab_size": 1024}))
    tokenizer = tiny_tokenizer(folders["base"], 0)
    tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / "gemma3.jinja").read_text()
    tokenizer.save_pretrained(str(folder))
    cfg = compose(["recipe=tiny", f"model.path={folder}"])
    assert (cfg.model.chat_format, cfg.data.format_options.tokenizer) == ("template", str(folder))
    assert "using 'template', which renders with the model's own chat template" in capsys.readouterr().err


def test_a_recipes_own_layout_stays_with_a_model_folder(folders, unknown_folder):
    """toolselect_text is plain text (any tokenizer): the README's `recipe=toolverifier model.path=...` keeps it,
    even for a folder that says nothing of its format (a base model)."""
    for folder in (folders["llama"], unknown_folder):
        cfg = compose(["recipe=toolverifier_tiny", f"model.path={folder}"])
        assert (cfg.model.tokenizer, cfg.model.chat_format) == (str(folder), "toolselect_text")


def test_a_papers_variant_of_another_family_is_refused_not_dropped(folders):
    """mt_llama's llama3_1_metatool is Meta-Tool's layout of Llama 3.1: on a Qwen folder neither keeping it (Llama
    control tokens) nor quietly switching to qwen2_5 (the paper's layout lost) is right."""
    with pytest.raises(ConfigError) as err:
        compose(["recipe=mt_llama_tiny", f"model.path={folders['qwen2']}"])
    assert "chat format llama3_1_metatool is its paper's layout for llama3_1 models" in str(err.value)
    assert "set model.chat_format=qwen2_5" in str(err.value)


def test_a_path_that_is_not_a_folder_or_holds_no_tokenizer_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="is not a folder"):
        compose(["recipe=tiny", f"model.path={tmp_path / 'nope'}"])
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ConfigError, match="holds no tokenizer"):
        compose(["recipe=tiny", f"model.path={tmp_path}"])


def test_building_a_model_refuses_a_tokenizer_larger_than_its_embeddings(folders):
    cfg = compose(
        ["recipe=tiny", f"model.path={folders['small']}", "model.tokenizer=tiny_chatml", "model.chat_format=chatml"]
    )
    import torch

    with pytest.raises(ConfigError) as err:
        build_model(cfg.model, 1024, torch.float32, "sdpa", seed=0)  # before: resized to 1,024 rows, and trained
    assert "model.tokenizer=tiny_chatml has 1024 tokens" in str(err.value)
    assert "600 embedding rows" in str(err.value)


def test_a_special_token_past_the_embeddings_is_named():
    class Model:
        tokenizer = "x"

    problem = tokenizer_fit_problem(Model, 500, 700, 600, "model.path=m")
    assert problem.startswith("model.tokenizer=x has 500 tokens, and a special token with id 700, but model.path=m")
    assert tokenizer_fit_problem(Model, 600, 599, 600, "m") is None  # an exact fit
    assert tokenizer_fit_problem(Model, 151665, 151664, 152064, "m") is None  # Qwen2.5: fewer tokens than rows


def run_train(tooltrain_cache, out, *overrides, timeout=240):
    import os

    env = {**os.environ, "TOOLTRAIN_CACHE": str(tooltrain_cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    command = [sys.executable, "-m", "train", "train", "recipe=tiny", f"output_dir={out}", *overrides]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.slow
def test_tooltrain_train_with_a_folder_whose_tokenizer_does_not_fit_is_one_error_line(
    folders, tooltrain_cache, tmp_path
):
    result = run_train(tooltrain_cache, tmp_path / "run", f"model.path={folders['small']}")
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr[-3000:]
    assert f"has 1024 tokens, but model.path={folders['small']} (config.json) has 600 embedding rows" in errors[0]
    assert not (tmp_path / "run" / "summary.json").exists()


@pytest.mark.slow
def test_tooltrain_train_with_a_model_folder_trains_with_its_tokenizer_and_format(folders, tooltrain_cache, tmp_path):
    out = tmp_path / "run"
    result = run_train(
        tooltrain_cache,
        out,
        f"model.path={folders['llama']}",
        "data.sources.0.limit=8",
        "data.max_seq_len=256",
        "train.max_steps=1",
        "train.save_steps=1",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    saved = yaml.safe_load((out / "config.yaml").read_text())["model"]
    assert (saved["source"], saved["tokenizer"], saved["chat_format"]) == (
        "pretrained",
        str(folders["llama"]),
        "chatml",
    )
