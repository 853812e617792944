"""``tooltrain train recipe=tiny model.chat_format=harmony`` trains on CPU: the tiny ChatML tokenizer gains
Harmony's seven control tokens after its own ids (``train.formats.control_tokens``), and the format's
``rewrites_history`` makes ``data.turns=auto`` expand each conversation per assistant turn. The tiny vocabulary
spends many tokens on Harmony's system and developer messages, so some long samples lose every trained token to
``data.max_seq_len`` and are counted as dropped, never silently."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from train.formats import get_format
from train.formats.control_tokens import format_control_tokens

REPO = Path(__file__).resolve().parents[2]
HARMONY_TOKENS = ["<|start|>", "<|message|>", "<|end|>", "<|channel|>", "<|constrain|>", "<|call|>", "<|return|>"]


def test_the_formats_control_tokens_are_read_from_its_rendering():
    assert format_control_tokens(get_format("harmony")) == HARMONY_TOKENS


@pytest.mark.slow  # a full run or a whole corpus: the slow tier (`.ci/run --all`)
def test_tiny_recipe_trains_in_the_harmony_format(tooltrain_cache, tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "TOOLTRAIN_CACHE": str(tooltrain_cache), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "train", "train", "recipe=tiny", "model.chat_format=harmony"]
    command += ["data.sources.0.limit=16", "data.max_seq_len=1024", "train.max_steps=2", f"output_dir={out}"]
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads((out / "summary.json").read_text())["data"]
    # 16 conversations, none refused, expanded to 45 per-turn samples; 11 truncated to nothing trained
    assert (data["read"], data["unrenderable"], data["conversations_rendered"], data["samples"]) == (16, 0, 16, 45)
    assert (data["dropped_untrained"], data["truncated"], data["train_rows"]) == (11, 18, 34)
    assert (data["trained_tokens"], data["masked_tokens"]) == (7919, 16617)
    saved = json.loads((out / "final" / "tokenizer.json").read_text())
    added = {token["content"]: token["id"] for token in saved["added_tokens"]}
    assert [added[token] for token in HARMONY_TOKENS] == list(range(1024, 1031))
