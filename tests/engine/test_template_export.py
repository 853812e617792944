"""``tooltrain export`` of a run in the fallback format (``train.formats.template``) ships the model's own chat
template, the one the run rendered with, instead of a tooltrain template (there is none for another family)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from train.cli import main

trl = pytest.importorskip("trl")
# Qwen2.5's official template: ChatML, so the tiny ChatML vocabulary of the run carries its control tokens
OWN_TEMPLATE = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text(encoding="utf-8")


def test_export_of_a_template_run_ships_the_models_own_template(engine, single_run, tmp_path):
    from transformers import AutoTokenizer

    run_dir = tmp_path / "run"
    shutil.copytree(single_run, run_dir)
    (run_dir / "final" / "chat_template.jinja").write_text(OWN_TEMPLATE, encoding="utf-8")
    cfg = OmegaConf.load(run_dir / "config.yaml")
    cfg.model.chat_format = "template"
    cfg.data.format_options = {"tokenizer": str(run_dir / "final")}
    OmegaConf.save(cfg, run_dir / "config.yaml")
    out = tmp_path / "served"
    with engine.in_process():
        assert main(["export", str(run_dir), "--out-dir", str(out)]) == 0
    assert (out / "chat_template.jinja").read_text(encoding="utf-8") == OWN_TEMPLATE
    assert AutoTokenizer.from_pretrained(str(out)).chat_template == OWN_TEMPLATE
    metadata = json.loads((out / "tooltrain_export.json").read_text())
    assert metadata["chat_format"] == "template" and metadata["stop_tokens"] == ["<|im_end|>"]
    assert metadata["tool_call_parser"]["vllm"] == "" and metadata["tool_call_parser"]["exact"] is False
