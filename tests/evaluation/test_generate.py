"""Prompts for generation (``ChatFormat.render_prompt``) against the official generation prompts, and
generation itself: a scripted backend for exact parse results and errors, the tiny random model for
batching, stopping and never crashing.

Parity: for every assistant turn of every parity-corpus conversation, the prompt equals what the
official reference gives for the messages before it with a generation prompt: trl's Qwen2.5 and
Llama 3.1 templates (``add_generation_prompt=True``), mistral-common in test mode (a request that
ends with the user or tool turn), SmolLM2's template (ChatML without tools) and, for ChatML with
tools, trl's Qwen2.5 template with its wording swapped as in tests/formats/test_chatml.py.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path

import pytest

from train.formats import FORMATS, get_format
from train.formats.chatml import SMOLLM2_SYSTEM, TOOLS_INSTRUCTION, TOOLS_PREAMBLE
from train.formats.hf import to_hf_messages
from train.formats.tokenize import tokenize_prompt
from train.schema import Conversation, Message, ToolCall

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CORPUS = [
    Conversation.from_dict(json.loads(line)) for line in (FIXTURES / "parity" / "corpus.jsonl").open(encoding="utf-8")
]
CASES = {conv.id: conv for conv in CORPUS}
TURNS = [(conv.id, i) for conv in CORPUS for i, m in enumerate(conv.messages) if m.role == "assistant"]
LOOKALIKES = (
    "control_token_lookalikes"  # templates turn the user's literal control text into control ids; formats keep text
)


def before(conv: Conversation, index: int) -> Conversation:
    return Conversation(id=conv.id, messages=conv.messages[:index], tools=conv.tools, meta=conv.meta)


def prompt_text(fmt, conv: Conversation, index: int) -> str:
    return "".join(seg.text for seg in fmt.render_prompt(conv, index))


@cache
def template(name: str) -> str:
    return (resources.files("trl") / "chat_templates" / name).read_text(encoding="utf-8")


def tokenizer(name: str):
    from session_cache import shared_tokenizer

    return shared_tokenizer(name)


def template_prompt(tok, conv: Conversation, name: str, tokenize: bool = False):
    messages, tools = to_hf_messages(conv)
    return tok.apply_chat_template(
        messages,
        tools=tools,
        chat_template=template(name),
        tokenize=tokenize,
        add_generation_prompt=True,
        return_dict=False,
    )


# ---- parity with the official generation prompts ------------------------------------------------


@pytest.mark.parametrize("case,index", TURNS)
def test_qwen2_5_prompt_is_the_templates_generation_prompt(case, index):
    conv, tok, fmt = CASES[case], tokenizer("qwen2_5"), get_format("qwen2_5")
    assert prompt_text(fmt, conv, index) == template_prompt(tok, before(conv, index), "qwen2_5.jinja")
    if case != LOOKALIKES:
        assert tokenize_prompt(fmt, conv, index, tok) == template_prompt(
            tok, before(conv, index), "qwen2_5.jinja", tokenize=True
        )


def test_llama3_1_prompts_match_the_template_or_are_refused_with_the_reason():
    tok, fmt = tokenizer("llama3"), get_format("llama3_1")
    compared, refused = 0, {}
    for case, index in TURNS:
        conv = CASES[case]
        try:
            ids = tokenize_prompt(fmt, conv, index, tok)
        except ValueError as err:
            refused[(case, index)] = str(err)
            continue
        assert prompt_text(fmt, conv, index) == template_prompt(tok, before(conv, index), "llama3_1.jinja"), (
            case,
            index,
        )
        if case != LOOKALIKES:
            assert ids == template_prompt(tok, before(conv, index), "llama3_1.jinja", tokenize=True), (case, index)
        compared += 1
    assert compared == 30
    # an earlier turn the official template cannot hold (as in training), never the turn being written
    assert {key: reason.split(";")[0] for key, reason in refused.items()} == {
        ("parallel_calls", 4): "llama3_1: message 1 has 2 tool calls",
        ("text_and_call", 3): "llama3_1: message 1 has both text and a tool call",
    }


def test_metatool_prompt_before_any_call_is_llama3_1s():
    tok, fmt = tokenizer("llama3"), get_format("llama3_1_metatool")
    first_turns = [
        (case, i) for case, i in TURNS if not any(m.role in ("assistant", "tool") for m in CASES[case].messages[:i])
    ]
    assert len(first_turns) == len(CORPUS)
    for case, index in first_turns:
        assert prompt_text(fmt, CASES[case], index) == template_prompt(
            tok, before(CASES[case], index), "llama3_1.jinja"
        ), case


@pytest.mark.parametrize("family", ["mistral_v3", "mistral_nemo"])
def test_mistral_prompts_are_mistral_commons_test_mode_encoding(family):
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.protocol.instruct.validator import ValidationMode
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    from train.formats.mistral import with_mistral_call_ids
    from train.tokenizers.mistral import TEKKEN_FILE, V3_FILE, build_mistral_tekken, build_mistral_v3, mistral_data_file

    build, data_file = {"mistral_v3": (build_mistral_v3, V3_FILE), "mistral_nemo": (build_mistral_tekken, TEKKEN_FILE)}[
        family
    ]
    tok, fmt = build(), get_format(family)
    reference = MistralTokenizer.from_file(str(mistral_data_file(data_file)), mode=ValidationMode.test)
    compared, refused = 0, []
    for case, index in TURNS:
        try:
            ids = tokenize_prompt(fmt, CASES[case], index, tok)
        except ValueError as err:
            refused.append((case, index, "both text and tool calls" in str(err)))
            continue
        data = with_mistral_call_ids(before(CASES[case], index)).to_dict()
        request = ChatCompletionRequest(tools=data["tools"] or None, messages=data["messages"])
        assert ids == reference.encode_chat_completion(request).tokens, (case, index)
        compared += 1
    assert compared == 31 and refused == [("text_and_call", 3, True)]


def test_chatml_prompts_without_tools_are_smollm2s_generation_prompt():
    from train.models import ModelFetchError

    try:
        tok = tokenizer("smollm2")
    except ModelFetchError as err:  # a fresh machine with no package index
        pytest.skip(str(err))
    fmt = get_format("chatml")
    turns = [(case, index) for case, index in TURNS if not CASES[case].tools]
    assert len(turns) == 3
    for case, index in turns:
        messages = [m.to_dict() for m in CASES[case].messages[:index]]
        reference = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)["input_ids"]
        assert tokenize_prompt(fmt, CASES[case], index, tok) == reference


@pytest.mark.parametrize("case,index", [turn for turn in TURNS if CASES[turn[0]].tools])
def test_chatml_prompts_with_tools_have_the_hermes_layout_of_qwen2_5s_template(case, index):
    qwen = template_prompt(tokenizer("qwen2_5"), before(CASES[case], index), "qwen2_5.jinja")
    ours = (
        qwen.replace(
            "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
            TOOLS_PREAMBLE,
        )
        .replace(
            "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
            '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
            "<args-json-object>}\n</tool_call>",
            TOOLS_INSTRUCTION,
        )
        .replace("You are Qwen, created by Alibaba Cloud. You are a helpful assistant.", SMOLLM2_SYSTEM)
        .replace("<|im_start|>user\n<tool_response>", "<|im_start|>tool\n<tool_response>")
    )
    assert prompt_text(get_format("chatml"), CASES[case], index) == ours


# ---- what the prompt is, whatever the family ----------------------------------------------------


# toolselect_text holds one question and one argument-free choice: its own test (tests/formats/test_toolselect_text.py)
@pytest.mark.parametrize("name", [name for name in FORMATS if name != "toolselect_text"])
def test_the_prompt_never_depends_on_the_answer_being_written(name):
    fmt = get_format(name)
    conv = CASES["single_call_json_result"]
    last = len(conv.messages) - 1
    changed = Conversation.from_dict(conv.to_dict())
    other_call = ToolCall(name="get_weather", arguments={"city": "Oslo"}, id="call9999z")
    changed.messages[last] = Message(role="assistant", tool_calls=[other_call])
    if name == "deepseek_coder":  # no tool syntax (it refuses this conversation): a text answer changes instead
        conv = Conversation("text", [Message(role="user", content="q"), Message(role="assistant", content="a")])
        changed, last = Conversation("text", [conv.messages[0], Message(role="assistant", content="b")]), 1
    assert fmt.render_prompt(changed, last) == fmt.render_prompt(conv, last)


def test_a_new_turn_after_the_last_message_gets_the_generation_prompt():
    tok, fmt = tokenizer("qwen2_5"), get_format("qwen2_5")
    conv = before(CASES["multi_round"], 3)  # ends with a tool result: the model writes the next turn
    assert conv.messages[-1].role == "tool"
    assert prompt_text(fmt, conv, len(conv.messages)) == template_prompt(tok, conv, "qwen2_5.jinja")


def test_only_an_assistant_turn_or_a_new_turn_can_be_prompted():
    fmt, conv = get_format("chatml"), CASES["single_call_json_result"]
    with pytest.raises(ValueError, match=r"messages\[0\] is a 'user' message, not an assistant turn"):
        fmt.render_prompt(conv, 0)
    with pytest.raises(ValueError, match=r"message index 5 is outside the conversation \(0\.\.4\)"):
        fmt.render_prompt(conv, 5)


def test_end_of_turn_tokens_of_every_format():
    assert {name: get_format(name).end_of_turn_texts() for name in FORMATS} == {
        "llama3_1": ("<|eot_id|>",),
        "llama3_1_metatool": ("<|eom_id|>", "<|eot_id|>"),  # a call turn hands over to the executor
        "llama4": ("<|eom|>", "<|eot|>"),  # as llama-models' Llama 4 ChatFormat ends a call turn
        "qwen2_5": ("<|im_end|>",),
        "mistral_v3": ("</s>",),
        "mistral_nemo": ("</s>",),
        "mistral_v7": ("</s>",),
        "chatml": ("<|im_end|>",),
        "deepseek_coder": ("<|EOT|>",),
        "deepseek_v3": ("<｜end▁of▁sentence｜>",),
        "toolselect_text": ("</s>",),  # Llama-2's EOS after the Act
        "qwen3": ("<|im_end|>",),
        "harmony": ("<|call|>", "<|return|>"),
    }


# ---- generation with a scripted backend: exact parses and recorded errors ------------------------


class Scripted:
    """A backend that "generates" given texts (encoded with the tokenizer), recording what it was asked."""

    def __init__(self, tok, outputs: list[str]):
        self.tok, self.outputs, self.calls = tok, outputs, []

    def __call__(self, prompts, max_new_tokens, stop_ids):
        self.calls.append((prompts, max_new_tokens, stop_ids))
        return [self.tok.encode(text, add_special_tokens=False) for text in self.outputs]


def test_outputs_are_cut_at_the_stop_token_and_parsed_or_recorded_as_parse_errors():
    from train.evaluation.generate import generate

    tok, fmt = tokenizer("qwen2_5"), get_format("qwen2_5")
    conv = CASES["single_call_json_result"]
    outputs = [
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>ignored',
        "It is sunny.<|im_end|>",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par',  # ran into max_new_tokens
        "<tool_call>\n[1, 2]\n</tool_call><|im_end|>",
    ]
    backend = Scripted(tok, outputs)
    generations = generate([(conv, 1), (conv, 3), (conv, 1), (conv, 1)], fmt, tok, backend, 32)
    prompt = tokenize_prompt(fmt, conv, 1, tok)
    assert backend.calls[0][0][0] == prompt and backend.calls[0][1:] == (32, [tok.convert_tokens_to_ids("<|im_end|>")])
    first, second, cut, broken = generations
    assert (first.content, [c.to_dict() for c in first.tool_calls], first.error, first.stopped) == (
        None,
        [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        None,
        True,
    )
    assert first.prompt_tokens == len(prompt) and first.text.endswith("</tool_call>")
    assert (second.content, second.tool_calls, second.error, second.stopped) == ("It is sunny.", [], None, True)
    assert (cut.content, cut.tool_calls, cut.stopped) == (None, [], False)
    assert cut.error == "parse: tool call 1: invalid JSON: Unterminated string starting at at char 58"
    assert broken.error == "parse: tool call 1: expected a JSON object with keys 'name' and 'arguments'"


def test_a_text_answer_keeps_its_text_after_the_reasoning_for_benchmarks_that_decode_it_their_own_way():
    from train.evaluation.generate import generate

    tok, conv = tokenizer("qwen2_5"), CASES["single_call_json_result"]
    output = "<thinking>1. get_weather fits.</thinking>[get_weather(city=Paris)]<|im_end|>"
    text_answers = get_format("qwen2_5", {"answer_style": "toolgt_text"})
    (generation,) = generate([(conv, 1)], text_answers, tok, Scripted(tok, [output]), 32)
    # qwen2_5 has no reasoning block of its own: the whole answer (ToolGT's <thinking> is the benchmark's to strip)
    assert generation.answer_text == "<thinking>1. get_weather fits.</thinking>[get_weather(city=Paris)]"
    assert generation.to_dict()["answer_text"] == generation.answer_text
    (native,) = generate([(conv, 1)], get_format("qwen2_5"), tok, Scripted(tok, [output]), 32)
    assert native.answer_text is None and "answer_text" not in native.to_dict()


def test_a_prompt_the_format_cannot_render_is_an_error_row_and_the_backend_still_sees_a_stand_in():
    from train.evaluation.generate import generate

    tok, fmt = tokenizer("llama3"), get_format("llama3_1")
    conv = CASES["parallel_calls"]  # message 1 holds two calls: Llama 3.1's template cannot write it
    backend = Scripted(tok, ["Done.", "Done."])
    generations = generate([(conv, 4), (conv, 1)], fmt, tok, backend, 8)
    assert backend.calls[0][0][0] == [tok.convert_tokens_to_ids("<|eot_id|>")]  # same number of prompts on every rank
    assert generations[0].text is None and generations[0].tool_calls == [] and generations[0].content is None
    assert generations[0].error.startswith("prompt: llama3_1: message 1 has 2 tool calls")
    assert (generations[1].content, generations[1].error) == ("Done.", None)


def test_cut_at_stop():
    from train.evaluation.generate import cut_at_stop

    assert cut_at_stop([5, 6, 2, 7, 2], [2, 9]) == ([5, 6], True)
    assert cut_at_stop([5, 9], [2, 9]) == ([5], True)
    assert cut_at_stop([5, 6], [2]) == ([5, 6], False)


# ---- the tiny random model -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny recipe's model (random init, seed 42) and tokenizer, and the demo conversations."""
    import torch

    from train.data.inputs import resolve_input
    from train.engine.config import compose
    from train.engine.model import build_model
    from train.sources import get_reader
    from train.tokenizers import load_tokenizer

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TOOLTRAIN_CACHE", str(tmp_path_factory.mktemp("cache")))
        cfg = compose(["recipe=tiny"])
        tok = load_tokenizer(cfg.model.tokenizer)
        model = build_model(cfg.model, len(tok), torch.float32, "sdpa", seed=42).eval()
    demo = resolve_input("pkg://train/assets/demo/glaive_sample.json")
    convs = [c for c in get_reader("glaive")([demo]) if isinstance(c, Conversation)]
    return model, tok, convs


def test_tiny_model_generation_batched_equals_one_by_one_and_never_crashes(tiny):
    import torch

    from train.evaluation.generate import HFBackend, generate

    model, tok, convs = tiny
    fmt = get_format("chatml")
    prompts = [(conv, i) for conv in convs[:5] for i, m in enumerate(conv.messages) if m.role == "assistant"][:6]
    torch.set_num_threads(1)
    batched = generate(prompts, fmt, tok, HFBackend(model, tok.pad_token_id, batch_size=4), 12)
    single = generate(prompts, fmt, tok, HFBackend(model, tok.pad_token_id, batch_size=1), 12)
    assert [g.to_dict() for g in batched] == [g.to_dict() for g in single]  # left padding changes nothing
    assert len(batched) == 6
    for (conv, index), generation in zip(prompts, batched):
        assert generation.prompt_tokens == len(tokenize_prompt(fmt, conv, index, tok))
        assert generation.text is not None and 1 <= generation.new_tokens <= 12
        assert generation.error is None or generation.error.startswith("parse: ")
        assert generation.error is not None or (generation.content, generation.tool_calls) == fmt.parse(generation.text)


def test_greedy_generation_leaves_the_rng_alone_and_sampling_is_seeded(tiny):
    import torch

    from train.evaluation.generate import HFBackend, generate

    model, tok, convs = tiny
    fmt = get_format("chatml")
    state = torch.get_rng_state()
    generate([(convs[0], 1)], fmt, tok, HFBackend(model, tok.pad_token_id), 4)
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(0)
    first = generate([(convs[0], 1)], fmt, tok, HFBackend(model, tok.pad_token_id, temperature=1.0), 6)[0].text
    torch.manual_seed(0)
    assert generate([(convs[0], 1)], fmt, tok, HFBackend(model, tok.pad_token_id, temperature=1.0), 6)[0].text == first
