"""The fallback format (``train.formats.template``): masks read off a model's own chat template, exactly.

Tiny byte-level tokenizers (one token per byte, no merges: a token never crosses a mask edge) carry real templates
of families tooltrain does not hand-write, as trl's wheel ships them (``trl/chat_templates``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from train.formats import AUTO, FALLBACK, FORMATS, auto_choice, format_class, get_format, known_format
from train.formats.mask_checks import check_sample, format_norm
from train.formats.template import TemplateFormat
from train.formats.tokenize import tokenize
from train.schema import Conversation, Message, Tool, ToolCall

trl = pytest.importorskip("trl")
TEMPLATES = Path(trl.__file__).parent / "chat_templates"
GEMMA = (["<start_of_turn>", "<end_of_turn>"], "<bos>", "<eos>")
PHI3 = (["<|system|>", "<|user|>", "<|assistant|>", "<|end|>"], None, "<|endoftext|>")
QWEN3 = (["<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>", "</think>"], None, "<|im_end|>")


def tiny_tokenizer(template: str, specials: list[str], bos: str | None, eos: str | None):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    backend = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=bos, eos_token=eos)
    tokenizer.add_special_tokens({"additional_special_tokens": specials})
    tokenizer.chat_template = (TEMPLATES / template).read_text(encoding="utf-8")
    return tokenizer


CHAT = Conversation(
    "chat",
    [
        Message(role="system", content="Be brief."),
        Message(role="user", content="hi"),
        Message(role="assistant", content="hello"),
        Message(role="user", content="bye"),
        Message(role="assistant", content="ciao"),
    ],
)
CALLS = Conversation(
    "calls",
    tools=[Tool(name="get_weather")],
    messages=[
        Message(role="user", content="weather?"),
        Message(
            role="assistant",
            content="Checking.",
            tool_calls=[ToolCall(name="get_weather", arguments={"city": "Paris"}, id="c1")],
        ),
        Message(role="tool", tool_call_id="c1", name="get_weather", content="sunny"),
        Message(role="assistant", content="It is sunny."),
    ],
)


def trained_text(tokenizer, fmt, conv) -> str:
    tokens = tokenize(fmt, conv, tokenizer)
    return tokenizer.decode([i for i, label in zip(tokens.input_ids, tokens.labels) if label != -100])


@pytest.mark.parametrize(
    ("template", "spec", "trained"),
    [
        ("gemma3.jinja", GEMMA, "hello<end_of_turn>\nciao<end_of_turn>\n"),
        ("phi3.jinja", PHI3, "hello<|end|>\nciao<|end|>\n<|endoftext|>"),
    ],
)
def test_prefix_spans_train_exactly_the_assistant_text_and_its_end(template, spec, trained):
    tokenizer = tiny_tokenizer(template, *spec)
    fmt = TemplateFormat.bound(tokenizer)
    assert fmt.render_text(CHAT) == tokenizer.apply_chat_template(
        [{"role": m.role, "content": m.content} for m in CHAT.messages], tokenize=False
    )
    assert trained_text(tokenizer, fmt, CHAT) == trained


@pytest.mark.parametrize(
    ("plain", "training", "spec"),
    [("gemma3.jinja", "gemma3_training.jinja", GEMMA)] + [("phi3.jinja", "phi3_training.jinja", PHI3)],
)
def test_generation_markers_and_prefixes_agree(plain, training, spec):
    by_prefix = TemplateFormat.bound(tiny_tokenizer(plain, *spec))
    by_marker = TemplateFormat.bound(tiny_tokenizer(training, *spec))
    assert by_prefix.render(CHAT) == by_marker.render(CHAT)
    tokenizer = tiny_tokenizer(training, *spec)
    marked = tokenizer.apply_chat_template(
        [{"role": m.role, "content": m.content} for m in CHAT.messages],
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    ours = tokenize(by_marker, CHAT, tokenizer)
    assert ours.input_ids == marked["input_ids"]
    assert [label != -100 for label in ours.labels] == [bool(m) for m in marked["assistant_masks"]]


def test_call_turn_parts_are_labelled_and_pass_the_mask_checks():
    tokenizer = tiny_tokenizer("qwen3_training.jinja", *QWEN3)
    fmt = TemplateFormat.bound(tokenizer)
    call_turn = [(seg.text, seg.part) for seg in fmt.render(CALLS) if seg.message == 1]
    assert ("get_weather", "call_name") in call_turn
    assert ('{"city": "Paris"}', "call_args") in call_turn
    assert ("Checking.", "text") in call_turn
    assert call_turn[-2:] == [("<|im_end|>", "end"), ("\n", "end")]
    assert fmt.end_of_turn_texts() == ("<|im_end|>",)
    norm = format_norm(fmt)
    assert norm is not None and norm.calls_labelled
    segments = fmt.render(CALLS)
    tokens = tokenize(fmt, CALLS, tokenizer)
    assert check_sample(CALLS, segments, [seg.assistant for seg in segments], tokens.labels, norm) is None


def test_a_template_that_rewrites_history_is_refused_naming_the_turn():
    fmt = TemplateFormat.bound(tiny_tokenizer("qwen3.jinja", *QWEN3))  # drops <think> of turns before the last
    with pytest.raises(ValueError, match=r"conversation 'calls', messages\[1\] \(assistant\).*not prefix-stable"):
        fmt.render(CALLS)


def test_what_a_template_drops_is_refused():
    fmt = TemplateFormat.bound(tiny_tokenizer("gemma3.jinja", *GEMMA))  # takes no tools=
    with_tools = Conversation("t", CHAT.messages[1:3], tools=[Tool(name="lookup")])
    with pytest.raises(ValueError, match="does not write tool 'lookup'"):
        fmt.render(with_tools)


def test_parse_reads_json_calls_best_effort():
    fmt = TemplateFormat.bound(tiny_tokenizer("qwen3_training.jinja", *QWEN3))
    content, calls = fmt.parse('Checking.\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call><|im_end|>')
    assert content == "Checking." and [(c.name, c.arguments) for c in calls] == [("f", {"a": 1})]


def test_named_apart_from_the_exact_formats_and_needs_its_tokenizer():
    assert FALLBACK not in FORMATS and known_format(FALLBACK) and format_class(FALLBACK) is TemplateFormat
    with pytest.raises(ValueError, match="data.format_options.tokenizer"):
        get_format(FALLBACK).render(CHAT)


def test_auto_choice_names_the_exact_format_or_the_fallback():
    assert auto_choice("qwen2_5", "m")[0] == "qwen2_5"
    chosen, line = auto_choice(None, "/tmp/gemma")
    assert chosen == FALLBACK and "certified only for the exact formats" in line and AUTO in line


GLM = (
    ["[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>", "<think>", "</think>"]
    + ["<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"]
    + ["<tool_response>", "</tool_response>"],
    None,
    "<|endoftext|>",
)


def test_a_turn_without_its_own_end_trains_the_stop_token_that_follows_it():
    """GLM-4.5 ends a turn with the next role's tag (its generation config's stop ids): the prefix rule trains it,
    after the last turn too (appended), as trl's glm4moe_training marks it; the two agree."""
    tokenizer = tiny_tokenizer("glm4moe.jinja", *GLM)
    by_prefix = TemplateFormat.bound(tokenizer)
    by_marker = TemplateFormat.bound(tiny_tokenizer("glm4moe_training.jinja", *GLM))
    assert by_prefix.render(CALLS) == by_marker.render(CALLS)
    assert trained_text(tokenizer, by_prefix, CALLS) == (
        "\n<think></think>\nChecking.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>"
        "\n</tool_call><|observation|>\n<think></think>\nIt is sunny.<|user|>"
    )
    assert by_prefix.end_of_turn_texts() == ("<|observation|>", "<|user|>")


def granite4_template() -> str:
    """Granite 4's chat template as BFCL's Granite handler carries it (its docstring, read as written in the source:
    the template's own ``\\n`` and ``\\'`` escapes kept), without importing it."""
    import ast
    import textwrap

    bfcl = pytest.importorskip("bfcl_eval")
    source = (Path(bfcl.__file__).parent / "model_handler" / "local_inference" / "granite_4.py").read_text("utf-8")
    method = next(
        n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == "_format_prompt"
    )
    literal = ast.get_source_segment(source, method.body[0].value)
    return textwrap.dedent(literal.removeprefix('"""').removesuffix('"""')).strip()


def test_granite_call_turns_train_their_calls_and_end():
    tokenizer = tiny_tokenizer("gemma3.jinja", ["<|start_of_role|>", "<|end_of_role|>"], None, "<|end_of_text|>")
    tokenizer.chat_template = granite4_template()
    fmt = TemplateFormat.bound(tokenizer)
    assert trained_text(tokenizer, fmt, CALLS) == (
        'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
        "<|end_of_text|>\nIt is sunny.<|end_of_text|>\n"
    )
    segments = fmt.render(CALLS)
    parts = {(seg.text, seg.part) for seg in segments if seg.message == 1}
    assert {("get_weather", "call_name"), ('{"city": "Paris"}', "call_args"), ("<|end_of_text|>", "end")} <= parts
    norm = format_norm(fmt)
    assert norm is not None and norm.calls_labelled
    labels = tokenize(fmt, CALLS, tokenizer).labels
    assert check_sample(CALLS, segments, [seg.assistant for seg in segments], labels, norm) is None
    assert fmt.parse(segments_text := "".join(s.text for s in segments if s.message == 1))[1][0].name == "get_weather"
    assert segments_text.startswith("Checking.")
