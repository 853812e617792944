"""Issue 24 item 19: the exported chat template is a string, so a server that encodes the rendered prompt with
special-token parsing (vLLM, SGLang) turns text spelling a control token into that token, where training kept it
as text. The export's tooltrain_export.json and README.md must say so and give the requests that avoid it."""

from __future__ import annotations

import pytest

from train.engine.export import serving_metadata, write_serving_readme
from train.formats import get_format


class Names:
    def convert_ids_to_tokens(self, token_id):
        return {2: "<|im_end|>"}[token_id]


def test_the_metadata_and_readme_warn_about_control_tokens_typed_as_text(tmp_path):
    metadata = {
        "run_dir": "runs/x",
        "weights": "final",
        **serving_metadata(get_format("chatml"), tmp_path, [2], Names()),
    }
    control = metadata["control_text"]
    assert control["control_tokens"] == ["<|im_start|>", "<|im_end|>"]
    assert control["chat_endpoints_keep_text"] is False
    assert control["token_id_requests"] == {
        "vllm": {"endpoint": "/v1/completions", "field": "prompt", "value": "a list of token ids"},
        "sglang": {"endpoint": "/generate", "field": "input_ids", "value": "a list of token ids"},
    }
    assert control["encode_as_trained"] == "train.formats.tokenize.tokenize_prompt(fmt, conversation, index, tokenizer)"
    assert "(`<|im_start|>`, `<|im_end|>`) trained as those characters" in control["warning"]
    assert "special tokens recognised" in control["warning"]

    write_serving_readme(tmp_path, metadata)
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert "## Control tokens typed as text\n\n" + control["warning"] in readme
    assert "- vLLM: `POST /v1/completions` with `prompt`: a list of token ids\n" in readme
    assert "- SGLang: `POST /generate` with `input_ids`: a list of token ids\n" in readme


@pytest.mark.parametrize(
    ("name", "token"), [("llama3_1", "<|eot_id|>"), ("harmony", "<|start|>"), ("qwen3", "<think>")]
)
def test_every_format_lists_its_own_control_tokens(tmp_path, name, token):
    class Any:
        def convert_ids_to_tokens(self, token_id):
            return "?"

    control = serving_metadata(get_format(name), tmp_path, [], Any())["control_text"]
    assert token in control["control_tokens"] and f"`{token}`" in control["warning"]
