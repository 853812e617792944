"""What a format says about itself is an attribute of its class, so a format of one's own (``module:attr``) says it
too: how it is served (``serving``: chat template files and server parsers, read by ``tooltrain export``), and how
it stands to a model folder (``any_tokenizer``, ``variant_of``, read by ``train.engine.model_folder``)."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from train.base.errors import ConfigError
from train.engine.export import serving_metadata
from train.engine.model_folder import folder_chat_format
from train.formats import FORMATS, get_format
from train.formats.serving import chat_template, serving, template_text

PLUGIN = "tt_plugin_formats"
MODULE = textwrap.dedent(
    """
    from typing import ClassVar

    from train.formats.chatml import ChatMLFormat
    from train.formats.serving import Serving


    class PluggedFormat(ChatMLFormat):
        name = "plugged"
        serving: ClassVar[Serving] = Serving(
            templates=("common.jinja", "tt_plugin_formats:plugged.jinja"),
            variables=("default_system",),
            vllm_parser="plugged_vllm",
            sglang_parser="plugged_sglang",
            exact=False,
            notes="the plug-in's own notes",
            reasoning_parser="plugged_reasoning",
        )


    class PlainTextFormat(ChatMLFormat):
        name = "plain_text"
        any_tokenizer = True


    class ChatMLVariant(ChatMLFormat):
        name = "chatml_variant"
        variant_of = "chatml"


    class Unserved(ChatMLFormat):
        name = "unserved"
        serving = None
    """
)


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """A package of one's own on sys.path: its formats module and its template file beside it."""
    package = tmp_path / "site" / PLUGIN
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "formats.py").write_text(MODULE)
    own = "{#- the plug-in's own template file -#}\n" + template_text("chatml.jinja")
    (package / "plugged.jinja").write_text(own, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    yield f"{PLUGIN}.formats"
    for name in [name for name in sys.modules if name.split(".")[0] == PLUGIN]:
        del sys.modules[name]


class Names:
    def convert_ids_to_tokens(self, token_id):
        return {2: "<|im_end|>"}[token_id]


def test_a_plugged_format_is_exported_with_its_own_serving_attribute(plugin, tmp_path):
    fmt = get_format(f"{plugin}:PluggedFormat")
    assert serving(fmt) is type(fmt).serving and serving(type(fmt)) is type(fmt).serving
    metadata = serving_metadata(fmt, tmp_path / "out", [2], Names())  # what tooltrain export writes
    assert metadata["chat_format"] == "plugged"
    assert metadata["format_options"] == {"answer_style": "native"}
    assert metadata["tool_call_parser"] == {
        "vllm": "plugged_vllm",
        "sglang": "plugged_sglang",
        "exact": False,
        "notes": "the plug-in's own notes",
        "reasoning_parser": "plugged_reasoning",
    }
    assert (
        "--reasoning-parser plugged_reasoning --enable-auto-tool-choice --tool-call-parser plugged_vllm"
        in (metadata["serve"]["vllm"])
    )
    assert metadata["serve"]["sglang"].endswith("--tool-call-parser plugged_sglang")
    template = chat_template(fmt)  # its own file, found beside its module, after the shared macros
    assert '{%- set format_name = "plugged" %}' in template
    assert template.index(template_text("common.jinja")) < template.index("{#- the plug-in's own template file -#}")


def test_a_format_without_serving_is_refused_by_name(plugin, tmp_path):
    fmt = get_format(f"{plugin}:Unserved")
    with pytest.raises(ValueError, match="no serving recipe for chat format 'unserved'"):
        serving_metadata(fmt, tmp_path / "out", [2], Names())


def test_every_registered_format_is_served_from_its_own_attribute():
    for name in FORMATS:
        cls = FORMATS.get(name)
        assert serving(name) is cls.serving is not None, name
        assert all(template_text(file) for file in cls.serving.templates)


def test_a_model_folder_reads_the_formats_own_layout_attributes(plugin, tmp_path):
    llama = tmp_path / "llama"  # a Llama 3.1 folder; its own format would be llama3_1
    llama.mkdir()
    (llama / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (llama / "tokenizer_config.json").write_text(json.dumps({"chat_template": "<|start_header_id|>"}))
    smol = tmp_path / "smol"  # a ChatML folder
    smol.mkdir()
    (smol / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (smol / "tokenizer_config.json").write_text(json.dumps({"chat_template": "<|im_start|>"}))

    assert folder_chat_format(f"{plugin}:PlainTextFormat", llama, "llama") == f"{plugin}:PlainTextFormat"
    assert folder_chat_format(f"{plugin}:ChatMLVariant", smol, "smol") == f"{plugin}:ChatMLVariant"
    with pytest.raises(ConfigError, match="layout for chatml models, but model.path=llama is a llama3_1 model"):
        folder_chat_format(f"{plugin}:ChatMLVariant", llama, "llama")
    assert folder_chat_format(f"{plugin}:PluggedFormat", llama, "llama") == "llama3_1"  # a family: follows
    # the registered ones say the same through their attributes
    assert folder_chat_format("toolselect_text", llama, "llama") == "toolselect_text"
    assert folder_chat_format("llama3_1_metatool", llama, "llama") == "llama3_1_metatool"
    assert folder_chat_format("chatml", llama, "llama") == "llama3_1"


def test_a_family_names_its_registered_variants_from_their_attribute():
    from train.formats import variants_of

    assert variants_of("llama3_1") == ["llama3_1_metatool"]  # its class says variant_of = "llama3_1"
    assert variants_of("qwen3") == []
    assert get_format("llama3_1").variants == "llama3_1_metatool"  # the refusals' way out, pinned in the template
    assert '{%- set tt_variants = "llama3_1_metatool" %}' in chat_template(get_format("llama3_1"))
