"""Format options (a format constructor's keyword arguments) reach the format from the registry, the
training config (data.format_options, checked at compose time) and ``data render --format-option``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from train.cli import main
from train.formats import check_format_options, format_options, get_format, parse_format_option
from train.formats.llama3 import Llama31Format
from train.formats.tokenize import tokenize
from train.schema import Conversation

CORPUS_FILE = Path(__file__).resolve().parents[1] / "fixtures" / "parity" / "corpus.jsonl"
CASES = {c.id: c for c in (Conversation.from_dict(json.loads(line)) for line in CORPUS_FILE.open(encoding="utf-8"))}


def test_the_registry_lists_and_passes_each_formats_options():
    assert format_options("llama3_1") == {
        "tools_in_user_message": True,
        "date_string": "26 Jul 2024",
        "answer_style": "native",
    }
    assert format_options("llama3_1_metatool") == format_options("llama3_1")
    assert all(
        format_options(name) == {"answer_style": "native"}
        for name in ("qwen2_5", "mistral_v3", "mistral_nemo", "chatml")
    )
    fmt = get_format("llama3_1", {"tools_in_user_message": False, "date_string": "01 Jan 2025"})
    assert (fmt.tools_in_user_message, fmt.date_string) == (False, "01 Jan 2025")
    conv = CASES["single_call_json_result"]
    direct = Llama31Format(tools_in_user_message=False, date_string="01 Jan 2025")
    assert fmt.render_text(conv) == direct.render_text(conv)
    assert get_format("llama3_1", {}).render_text(conv) == Llama31Format().render_text(conv)


def test_bad_options_name_the_valid_ones():
    assert check_format_options("llama3_1", {"tools_in_system": True, "date_string": 2025}) == [
        (
            "chat format 'llama3_1' has no option 'tools_in_system'; valid options: answer_style, date_string, "
            "tools_in_user_message"
        ),
        "chat format 'llama3_1' option 'date_string' must be a str, got 2025",
    ]
    assert check_format_options("llama3_1", {"tools_in_user_message": 0}) == [
        "chat format 'llama3_1' option 'tools_in_user_message' must be a bool, got 0"
    ]
    with pytest.raises(ValueError, match=r"^chat format 'qwen2_5' has no option 'x'; valid options: answer_style$"):
        get_format("qwen2_5", {"x": 1})


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("tools_in_user_message=false", ("tools_in_user_message", False)),
        ("tools_in_user_message=True", ("tools_in_user_message", True)),
        ("date_string=01 Jan 2025", ("date_string", "01 Jan 2025")),
        ("date_string=", ("date_string", "")),
    ],
)
def test_command_line_options_take_their_defaults_type(spec, parsed):
    assert parse_format_option("llama3_1", spec) == parsed


def test_command_line_option_errors():
    with pytest.raises(ValueError, match="expected KEY=VALUE for a format option, got 'tools_in_user_message'"):
        parse_format_option("llama3_1", "tools_in_user_message")
    with pytest.raises(ValueError, match="option 'tools_in_user_message' must be true or false, got 'maybe'"):
        parse_format_option("llama3_1", "tools_in_user_message=maybe")


def test_render_with_format_options(tmp_path, capsys, built_tokenizer):
    out = tmp_path / "out.jsonl"
    args = [
        "data",
        "render",
        str(CORPUS_FILE),
        "--format",
        "llama3_1",
        "-o",
        str(out),
        "--text",
        "--format-option",
        "tools_in_user_message=false",
        "--format-option",
        "date_string=01 Jan 2025",
    ]
    assert main(args) == 0
    fmt, tok = Llama31Format(tools_in_user_message=False, date_string="01 Jan 2025"), built_tokenizer("llama3")
    rows = {row["id"]: row for row in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    assert rows and "single_call_json_result" in rows
    for conv_id, row in rows.items():
        assert row["input_ids"] == tokenize(fmt, CASES[conv_id], tok).input_ids
        assert row["text"] == fmt.render_text(CASES[conv_id])
    assert "Today Date: 01 Jan 2025" in rows["single_call_json_result"]["text"]
    assert "You have access to the following functions" in rows["single_call_json_result"]["text"]  # tools in system


def test_render_refuses_an_unknown_option_listing_the_valid_ones(tmp_path, capsys):
    args = [
        "data",
        "render",
        str(CORPUS_FILE),
        "--format",
        "llama3_1",
        "-o",
        str(tmp_path / "o.jsonl"),
        "--format-option",
        "tools=none",
    ]
    assert main(args) == 2
    assert capsys.readouterr().err == (
        "error: chat format 'llama3_1' has no option 'tools'; valid options: answer_style, date_string, "
        "tools_in_user_message\n"
    )
    assert not (tmp_path / "o.jsonl").exists()


def test_config_format_options_are_checked_at_compose_time():
    from train.engine.config import ConfigError, compose

    cfg = compose(["recipe=mt_llama_tiny", "+data.format_options.tools_in_user_message=false"])
    assert dict(cfg.data.format_options) == {"tools_in_user_message": False}
    with pytest.raises(ConfigError) as err:
        compose(["recipe=mt_llama_tiny", "+data.format_options.tools_in_system=true"])
    assert str(err.value) == (
        "invalid configuration:\n  - data.format_options: chat format 'llama3_1_metatool' has no option "
        "'tools_in_system'; valid options: answer_style, date_string, tools_in_user_message"
    )


def test_format_options_are_part_of_the_dataset_cache_key():
    from train.data.inputs import cache_key
    from train.tokenizers import load_tokenizer

    tiny = load_tokenizer("tiny_chatml")
    base = {"name": "t", "sources": [], "max_seq_len": 64, "format_options": {}}
    keys = {
        cache_key({**base, "format_options": options}, "llama3_1", tiny)
        for options in ({}, {"tools_in_user_message": False}, {"date_string": "01 Jan 2025"})
    }
    assert len(keys) == 3
