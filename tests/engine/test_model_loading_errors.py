"""A model that cannot load is one ``error:`` line naming the folder and why, never a traceback: a dtype no one
has is refused when the config is composed, a folder's broken config, unreadable JSON or missing weights when
the model loads (``ConfigError``, which the entry prints as one line, exit 2)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from train.base.errors import ConfigError
from train.engine.config import MODEL_DTYPES, check, compose
from train.engine.model import DTYPES, build_model

TINY = {"model_type": "llama", "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1}


def test_a_dtype_no_one_has_is_refused_at_compose_time_with_the_valid_names():
    with pytest.raises(ConfigError, match=r"model.dtype=fp17 is not a dtype; valid: auto, float32, fp32, bfloat16"):
        check(compose(["recipe=tiny", "model.dtype=fp17"]))
    assert set(MODEL_DTYPES) == {"auto", *DTYPES}  # the check and the loader name the same dtypes


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        ({"config.json": "{broken"}, "is not a valid JSON file"),
        ({"config.json": json.dumps({**TINY, "hidden_size": "wide"})}, "hidden_size"),
        ({"config.json": json.dumps({**TINY, "num_attention_heads": 2, "vocab_size": 64})}, "model.safetensors"),
    ],
    ids=["unreadable-json", "bad-field", "no-weights"],
)
def test_a_folder_that_cannot_load_is_one_line_naming_it_and_why(tmp_path, files, reason):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    model_cfg = SimpleNamespace(source="pretrained", path=str(tmp_path), trust_remote_code=False)
    with pytest.raises(ConfigError) as raised:
        build_model(model_cfg, 64, torch.float32, "sdpa")
    message = str(raised.value)
    assert message.startswith(f"model.path={tmp_path}: the model cannot be loaded: ") and reason in message
    assert "\n" not in message
