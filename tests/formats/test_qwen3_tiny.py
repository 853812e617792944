"""``tooltrain train recipe=tiny model.chat_format=qwen3`` trains on CPU: the tiny ChatML tokenizer has no
``<think>``/``<tool_call>``/``<tool_response>`` control tokens, and a random-init model's vocabulary is its
tokenizer's, so the run adds the format's missing ones (``train.formats.control_tokens``); a tokenizer that has
them all is left as it is. Before, every conversation was refused for want of ``<think>`` and the run exited 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from train.formats import get_format
from train.formats.control_tokens import add_missing_control_tokens, format_control_tokens
from train.tokenizers import load_tokenizer

REPO = Path(__file__).resolve().parents[2]
QWEN3_TAGS = ["<tool_call>", "</tool_call>", "<think>", "</think>", "<tool_response>", "</tool_response>"]


def test_the_formats_control_tokens_are_read_from_its_rendering():
    written = format_control_tokens(get_format("qwen3"))
    assert written == ["<|im_start|>", *QWEN3_TAGS[:2], "<|im_end|>", *QWEN3_TAGS[2:]]
    assert format_control_tokens(get_format("chatml")) == ["<|im_start|>", "<|im_end|>"]
    # Llama 3.1 refuses the parallel-call probe; the single-call one still gives its call-turn tokens
    assert "<|eot_id|>" in format_control_tokens(get_format("llama3_1"))


def test_missing_control_tokens_go_after_the_tokenizers_own_ids():
    tiny = load_tokenizer("tiny_chatml", cache=False)
    assert add_missing_control_tokens(tiny, get_format("chatml")) == [] and len(tiny) == 1024  # tiny goldens hold
    assert add_missing_control_tokens(tiny, get_format("qwen3")) == QWEN3_TAGS
    assert [tiny.convert_tokens_to_ids(t) for t in QWEN3_TAGS] == list(range(1024, 1030))
    assert add_missing_control_tokens(tiny, get_format("qwen3")) == []  # once


@pytest.mark.slow  # a full run or a whole corpus: the slow tier (`.ci/run --all`)
def test_tiny_recipe_trains_in_the_qwen3_format(tooltrain_cache, tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "TOOLTRAIN_CACHE": str(tooltrain_cache), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "train", "train", "recipe=tiny", "model.chat_format=qwen3"]
    command += ["data.sources.0.limit=16", "data.max_seq_len=384", "train.max_steps=2", f"output_dir={out}"]
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads((out / "summary.json").read_text())["data"]
    # none refused by the format; 15 kept conversations make 19 samples: qwen3 rewrites history, so data.turns=auto
    # trains each turn in its own context (earlier <think> dropped)
    assert (data["read"], data["unrenderable"], data["train_rows"]) == (16, 0, 19)
    saved = json.loads((out / "final" / "tokenizer.json").read_text())
    added = {token["content"]: token["id"] for token in saved["added_tokens"]}
    assert added["<think>"] == 1026 and added["</tool_response>"] == 1029
