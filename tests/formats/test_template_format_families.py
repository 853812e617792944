"""``model.chat_format=auto`` at compose time: the exact format for a known family, the fallback otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from train.engine.config import compose

trl = pytest.importorskip("trl")


def gemma_tokenizer():
    """A byte-level tokenizer carrying Gemma 3's template (as tests/formats/test_template_format.py builds them)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    backend = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<bos>", eos_token="<eos>")
    tokenizer.add_special_tokens({"additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"]})
    tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / "gemma3.jinja").read_text()
    return tokenizer


def test_auto_keeps_the_exact_format_of_a_known_tokenizer(capsys):
    cfg = compose(["recipe=tiny", "model.chat_format=auto"])
    assert cfg.model.chat_format == "chatml"
    assert "is a chatml model: the exact format 'chatml'" in capsys.readouterr().err


def test_auto_falls_back_to_the_models_own_template(tmp_path, capsys):
    gemma_tokenizer().save_pretrained(str(tmp_path))
    cfg = compose(["recipe=tiny", "model.chat_format=auto", f"model.tokenizer={tmp_path}"])
    assert cfg.model.chat_format == "template"
    assert cfg.data.format_options.tokenizer == str(tmp_path)
    said = capsys.readouterr().err
    assert "using 'template'" in said and "certified only for the exact formats" in said


def test_the_auto_choice_is_said_by_rank_0_only(capsys, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    cfg = compose(["recipe=tiny", "model.chat_format=auto"])
    assert cfg.model.chat_format == "chatml" and "exact format" not in capsys.readouterr().err
