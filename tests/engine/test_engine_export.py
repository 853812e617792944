"""ZeRO-3 + LoRA saves a usable adapter, and ``tooltrain export RUN_DIR`` turns it into one plain model
whose logits are the adapter model's, served with the chat template of the run's chat format: a tokenizer
loaded from the export renders tools, calls and tool results exactly as the run trained on them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from train.cli import main
from train.engine.model import apply_lora, build_model, expected_adapter_shapes
from train.formats import get_format
from train.formats.hf import to_hf_messages
from train.formats.tokenize import tokenize
from train.schema import Conversation

PROMPT = (
    "<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n"
    '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather"'
)


def _config(run_dir: Path):
    return OmegaConf.load(run_dir / "config.yaml")


def _base(run_dir: Path):
    cfg = _config(run_dir)
    return build_model(cfg.model, 1024, torch.float32, "sdpa", seed=cfg.seed).eval()


def _logits(model, input_ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=input_ids).logits


def _input_ids(run_dir: Path) -> torch.Tensor:
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(run_dir / "final"))
    return torch.tensor([tokenizer(PROMPT)["input_ids"]])


@pytest.mark.slow
def test_zero3_saves_every_adapter_tensor_full_size_and_trained(engine, zero3_run):
    run_dir, _ = zero3_run
    cfg = _config(run_dir)
    expected = expected_adapter_shapes(apply_lora(_base(run_dir), cfg.peft, list(cfg.model.lora_target_modules)))
    saved = engine.adapter(run_dir / "final")
    assert {key: tuple(tensor.shape) for key, tensor in saved.items()} == expected
    untrained = [key for key, tensor in saved.items() if ".lora_B." in key and not tensor.count_nonzero()]
    assert untrained == []


@pytest.mark.slow
def test_export_reproduces_the_adapter_model_logits(engine, zero3_run, tmp_path, capsys):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    run_dir, _ = zero3_run
    out = tmp_path / "merged"
    with engine.in_process():
        assert main(["export", str(run_dir), "--out-dir", str(out)]) == 0
    # (DeepSpeed, imported on the way, may print a warning first)
    assert capsys.readouterr().out.splitlines()[-2] == (
        f"exported {run_dir / 'final'} (adapter merged into its base model, 205,120 parameters, float32) -> {out}"
    )
    metadata = json.loads((out / "tooltrain_export.json").read_text())
    assert {key: metadata[key] for key in ("run_dir", "weights", "merged_adapter", "dtype", "chat_format")} == {
        "run_dir": str(run_dir),
        "weights": "final",
        "merged_adapter": True,
        "dtype": "float32",
        "chat_format": "chatml",
    }

    input_ids = _input_ids(run_dir)
    base = _base(run_dir)
    base_logits = _logits(base, input_ids)
    adapter_logits = _logits(PeftModel.from_pretrained(base, str(run_dir / "final")).eval(), input_ids)
    merged = AutoModelForCausalLM.from_pretrained(str(out)).eval()
    assert merged.config.use_cache is True
    assert (_logits(merged, input_ids) - adapter_logits).abs().max().item() < 1e-5
    assert (adapter_logits - base_logits).abs().max().item() > 1e-3  # the adapter did change the model

    exported = PreTrainedTokenizerFast.from_pretrained(str(out))
    assert exported.get_vocab() == PreTrainedTokenizerFast.from_pretrained(str(run_dir / "final")).get_vocab()


def test_export_of_an_unfinished_run_takes_its_newest_complete_checkpoint(engine, single_run, tmp_path):
    from transformers import AutoModelForCausalLM

    run_dir = tmp_path / "run"
    shutil.copytree(single_run, run_dir)
    shutil.rmtree(run_dir / "final")
    (run_dir / "summary.json").unlink()
    with engine.in_process():
        assert main(["export", str(run_dir), "--out-dir", str(tmp_path / "from_checkpoint")]) == 0
        assert main(["export", str(single_run), "--out-dir", str(tmp_path / "from_final")]) == 0
    assert json.loads((tmp_path / "from_checkpoint" / "tooltrain_export.json").read_text())["weights"] == "checkpoint-6"
    # checkpoint-6 holds the final step's adapter: the same merged weights
    from_checkpoint = AutoModelForCausalLM.from_pretrained(str(tmp_path / "from_checkpoint")).state_dict()
    from_final = AutoModelForCausalLM.from_pretrained(str(tmp_path / "from_final")).state_dict()
    engine.assert_same_tensors(from_checkpoint, from_final)
    assert (tmp_path / "from_checkpoint" / "tokenizer.json").is_file()


CORPUS = [
    Conversation.from_dict(json.loads(line))
    for line in (Path(__file__).resolve().parents[1] / "fixtures" / "parity" / "corpus.jsonl").open(encoding="utf-8")
]
# ChatML without tools: what the export used to ship (SmolLM2's own template, the demo model's).
TOOLLESS_CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def test_export_ships_the_chat_template_the_run_trained_with(engine, single_run, tmp_path, capsys):
    """The observed bug: the exported chat_template.jinja was ChatML without tools, so
    apply_chat_template(messages, tools=...) dropped the tools and a message with tool_calls raised. The run's
    final/ tokenizer here carries that template; the export must replace it with the format's."""
    from transformers import AutoTokenizer

    run_dir = tmp_path / "run"
    shutil.copytree(single_run, run_dir)
    (run_dir / "final" / "chat_template.jinja").write_text(TOOLLESS_CHATML, encoding="utf-8")
    out = tmp_path / "served"
    with engine.in_process():
        assert main(["export", str(run_dir), "--out-dir", str(out)]) == 0

    tokenizer = AutoTokenizer.from_pretrained(str(out))  # what vLLM and SGLang load
    fmt = get_format("chatml")
    for conv in CORPUS:
        messages, tools = to_hf_messages(conv)
        assert tokenizer.apply_chat_template(messages, tools=tools, tokenize=False) == fmt.render_text(conv), conv.id
        first = next(i for i, message in enumerate(conv.messages) if message.role == "assistant")
        prompt = tokenizer.apply_chat_template(
            messages[:first], tools=tools, tokenize=False, add_generation_prompt=True
        )
        assert prompt == "".join(segment.text for segment in fmt.render_prompt(conv, first)), conv.id
        if conv.id != "control_token_lookalikes":  # a template turns typed <|im_end|> into the control token
            ids = tokenizer.apply_chat_template(messages, tools=tools, return_dict=False)
            assert ids == tokenize(fmt, conv, tokenizer).input_ids, conv.id  # the served prompt is the trained ids

    template_file = out / "chat_template.jinja"
    serve = f"vllm serve {out} --chat-template {template_file} --enable-auto-tool-choice --tool-call-parser hermes"
    assert capsys.readouterr().out.splitlines()[-1] == f"serve it with: {serve}"
    metadata = json.loads((out / "tooltrain_export.json").read_text())
    varying = ("run_dir", "tool_call_parser", "control_text")  # control_text: tests/test_export_control_text.py
    assert {key: value for key, value in metadata.items() if key not in varying} == {
        "weights": "final",
        "merged_adapter": True,
        "dtype": "float32",
        "chat_format": "chatml",
        "format_options": {"answer_style": "native"},
        "chat_template": "chat_template.jinja",
        "stop_tokens": ["<|im_end|>"],
        "serve": {
            "vllm": serve,
            "sglang": f"python -m sglang.launch_server --model-path {out} --chat-template {template_file} "
            "--tool-call-parser qwen25",
        },
    }
    assert {key: metadata["tool_call_parser"][key] for key in ("vllm", "sglang", "exact")} == {
        "vllm": "hermes",
        "sglang": "qwen25",
        "exact": True,
    }
    readme = (out / "README.md").read_text()
    assert f"    {serve}\n" in readme and "Chat format: `chatml`" in readme
    assert json.loads((out / "generation_config.json").read_text())["eos_token_id"] == [2]  # <|im_end|>


def test_export_pins_the_format_options_the_run_trained_with(engine, single_run, tmp_path):
    """A run trained with format options (here llama3_1_metatool, tools in the system block, another date)
    exports a template that renders with those options, and says so in its metadata."""
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer

    run_dir = tmp_path / "run"
    shutil.copytree(single_run, run_dir)
    cfg = OmegaConf.load(run_dir / "config.yaml")
    cfg.model.chat_format = "llama3_1_metatool"
    cfg.data.format_options = {"tools_in_user_message": False, "date_string": "01 Jan 2025"}
    OmegaConf.save(cfg, run_dir / "config.yaml")
    out = tmp_path / "served"
    with engine.in_process():
        assert main(["export", str(run_dir), "--out-dir", str(out)]) == 0
    metadata = json.loads((out / "tooltrain_export.json").read_text())
    assert metadata["format_options"] == {
        "tools_in_user_message": False,
        "date_string": "01 Jan 2025",
        "answer_style": "native",
    }
    assert (metadata["tool_call_parser"]["vllm"], metadata["tool_call_parser"]["exact"]) == ("llama3_json", False)
    fmt = get_format("llama3_1_metatool", {"tools_in_user_message": False, "date_string": "01 Jan 2025"})
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    for conv in CORPUS:
        messages, tools = to_hf_messages(conv)
        assert tokenizer.apply_chat_template(messages, tools=tools, tokenize=False) == fmt.render_text(conv), conv.id
