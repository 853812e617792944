"""llama3_1 against Llama 3.1's official template (trl's llama3_1.jinja), and llama3_1_metatool on exact strings.

Parity: for every corpus conversation (tests/fixtures/parity) and the extra cases in
tests/fixtures/formats/llama3_qwen2_5, ``input_ids`` equal ``apply_chat_template`` with the trl
template on the same tokenizer, or the format raises the documented ``ValueError`` where the
template cannot express the conversation. The one deliberate difference: control-token text
inside messages. ``apply_chat_template`` turns a user's literal ``<|eot_id|>`` into the control
id; the format encodes it as text, the way llama_models' ChatFormat encodes message content. That
case is compared with a reference built from the template's text where only the template's own
control tokens are control ids (``content_as_text_reference``), text encoded by llama_models.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import trl
from jinja2.exceptions import TemplateError

from train.formats import MaskPolicy, get_format
from train.formats.hf import to_hf_messages
from train.formats.llama3 import Llama31Format
from train.formats.tokenize import IGNORE_INDEX, tokenize
from train.papers.metatool.format import Llama31MetaToolFormat
from train.schema import Conversation, ToolCall
from train.tokenizers.tiktoken_based import llama3_reference_tokenizer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TEMPLATE = (Path(trl.__file__).parent / "chat_templates" / "llama3_1.jinja").read_text()


def load(path: Path) -> list[Conversation]:
    return [Conversation.from_dict(json.loads(line)) for line in path.open(encoding="utf-8")]


CORPUS = load(FIXTURES / "parity" / "corpus.jsonl")
EXTRA = load(FIXTURES / "formats" / "llama3_qwen2_5" / "extra_parity.jsonl")
CASES = {conv.id: conv for conv in CORPUS + EXTRA}
# Conversations the official template cannot express, and the error llama3_1 raises for each.
REFUSED = {
    "parallel_calls": "llama3_1: message 1 has 2 tool calls; the official Llama 3.1 template allows one call per "
    "assistant turn (llama3_1_metatool expresses parallel calls)",
    "text_and_call": "llama3_1: message 1 has both text and a tool call; the official Llama 3.1 template drops the "
    "text of a call turn (llama3_1_metatool keeps it)",
    "three_results_in_a_row": "llama3_1: message 1 has 3 tool calls; the official Llama 3.1 template allows one "
    "call per assistant turn (llama3_1_metatool expresses parallel calls)",
    "assistant_speaks_first_with_tools": "llama3_1: tools go into the first user message, but message 0 is "
    "'assistant'; use tools_in_user_message=False",
}
# Both formats put tools into the first user message by default; a conversation that opens with
# another role cannot take them there (the template would relabel that message as user text).
META_REFUSED = {"assistant_speaks_first_with_tools"}
# Control-token text in user and tool text; in the system prompt and the tool descriptions.
LOOKALIKES = {"control_token_lookalikes", "lookalikes_in_system_and_tool_descriptions"}
EOT, EOM, PYTHON_TAG = 128009, 128008, 128010

fmt = Llama31Format()
meta = Llama31MetaToolFormat()


@pytest.fixture(scope="module")
def tok(built_tokenizer):
    return built_tokenizer("llama3")


@pytest.fixture(scope="module")
def text_encoder():
    reference = llama3_reference_tokenizer()
    return lambda text: reference.encode(text, bos=False, eos=False, allowed_special=set(), disallowed_special=())


def template_ids(tok, conv: Conversation, **options) -> list[int]:
    messages, tools = to_hf_messages(conv)
    return tok.apply_chat_template(messages, tools=tools, chat_template=TEMPLATE, return_dict=False, **options)


def template_text(tok, conv: Conversation, **options) -> str:
    messages, tools = to_hf_messages(conv)
    return tok.apply_chat_template(messages, tools=tools, chat_template=TEMPLATE, tokenize=False, **options)


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


def content_as_text_reference(tok, conv: Conversation, encode_text, **options) -> list[int]:
    """The template's text, with only the control tokens the template itself wrote as control ids."""
    names = sorted(tok.added_tokens_encoder, key=len, reverse=True)
    controls = re.compile("|".join(map(re.escape, names)))
    messages, tools = to_hf_messages(conv)
    text = tok.apply_chat_template(
        _mark(messages, controls), tools=_mark(tools, controls), chat_template=TEMPLATE, tokenize=False, **options
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
    """Decoded runs of consecutive trained positions."""
    runs, current = [], []
    for label in tokenized.labels + [IGNORE_INDEX]:
        if label != IGNORE_INDEX:
            current.append(label)
        elif current:
            runs.append(tok.decode(current))
            current = []
    return runs


def official_turn(message) -> str:
    """What the official template makes of an assistant turn, from the canonical record alone."""
    if message.tool_calls:
        call = message.tool_calls[0]
        body = f'{{"name": "{call.name}", "parameters": {json.dumps(call.arguments, ensure_ascii=False)}}}'
    else:
        body = (message.content or "").strip()
    return body + "<|eot_id|>"


# --- llama3_1 parity ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_llama3_1_matches_the_official_template(tok, text_encoder, case):
    conv = CASES[case]
    if case in REFUSED:
        with pytest.raises(ValueError) as err:
            tokenize(fmt, conv, tok)
        assert str(err.value) == REFUSED[case]
        return
    ids = tokenize(fmt, conv, tok).input_ids
    assert fmt.render_text(conv) == template_text(tok, conv)
    if case in LOOKALIKES:
        assert ids == content_as_text_reference(tok, conv, text_encoder)
        # the template's own tokenization turns the user's look-alikes into control ids
        assert ids != template_ids(tok, conv)
    else:
        assert ids == template_ids(tok, conv)
        assert ids == content_as_text_reference(tok, conv, text_encoder)  # the reference agrees when no look-alikes


def test_parity_counts(tok):
    counts = {"ids_equal_template": 0, "documented_error": 0, "content_as_text": 0}
    for case in sorted(c.id for c in CORPUS):
        if case in REFUSED:
            counts["documented_error"] += 1
        elif case in LOOKALIKES:
            counts["content_as_text"] += 1
        else:
            counts["ids_equal_template"] += tokenize(fmt, CASES[case], tok).input_ids == template_ids(tok, CASES[case])
    assert counts == {"ids_equal_template": 13, "documented_error": 2, "content_as_text": 1}


def test_refused_cases_are_ones_the_template_mangles_or_refuses(tok):
    with pytest.raises(TemplateError, match="only supports single tool-calls"):
        template_text(tok, CASES["parallel_calls"])
    assert "Let me check the current weather in London." not in template_text(tok, CASES["text_and_call"])
    relabeled = template_text(tok, CASES["assistant_speaks_first_with_tools"])
    assert "Do not use variables.\n\n" in relabeled and "}\n\nHello! Which city?<|eot_id|>" in relabeled


@pytest.mark.parametrize("case", sorted(set(CASES) - {"parallel_calls", "text_and_call", "three_results_in_a_row"}))
def test_tools_in_system_message_matches_the_template(tok, text_encoder, case):
    conv, option = CASES[case], Llama31Format(tools_in_user_message=False)
    assert option.render_text(conv) == template_text(tok, conv, tools_in_user_message=False)
    ids = tokenize(option, conv, tok).input_ids
    assert ids == content_as_text_reference(tok, conv, text_encoder, tools_in_user_message=False)
    if case not in LOOKALIKES:
        assert ids == template_ids(tok, conv, tools_in_user_message=False)


def test_date_string_option_matches_the_template(tok):
    conv = CASES["single_call_json_result"]
    option = Llama31Format(date_string="01 Jan 2025")
    assert tokenize(option, conv, tok).input_ids == template_ids(tok, conv, date_string="01 Jan 2025")
    assert "Today Date: 01 Jan 2025\n\n" in option.render_text(conv)


def test_to_hf_messages_keeps_template_branches_honest():
    conv = CASES["text_and_call"]
    messages, tools = to_hf_messages(conv)
    assert messages == [
        {"role": "user", "content": "Is it raining in London?"},
        {
            "role": "assistant",
            "content": "Let me check the current weather in London.",
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": {"city": "London"}},
                }
            ],
        },
        {"role": "tool", "content": '{"condition": "rain"}', "tool_call_id": "call_0", "name": "get_weather"},
        {"role": "assistant", "content": "Yes, it is raining in London."},
    ]
    assert tools == [conv.tools[0].to_dict()]
    messages[1]["tool_calls"][0]["function"]["arguments"]["city"] = "Paris"
    assert conv.messages[1].tool_calls[0].arguments == {"city": "London"}  # nothing shared
    # no tools -> None (the Llama template prompts for tools on any list, even []); call-only turns have no content
    assert to_hf_messages(CASES["no_tools_chat"])[1] is None
    assert "content" not in to_hf_messages(CASES["trailing_call"])[0][1]
    assert to_hf_messages(CASES["empty_tool_result_and_empty_answer"])[0][2]["content"] == ""


def test_registry_gives_the_default_options():
    assert isinstance(get_format("llama3_1"), Llama31Format)
    assert isinstance(get_format("llama3_1_metatool"), Llama31MetaToolFormat)
    assert (fmt.tools_in_user_message, fmt.date_string, fmt.default_tokenizer) == (True, "26 Jul 2024", "llama3")


# --- labels, injection, mask policy -------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(set(CASES) - set(REFUSED)))
def test_llama3_1_trains_exactly_the_assistant_turns(tok, case):
    conv = CASES[case]
    expected = [official_turn(m) for m in conv.messages if m.role == "assistant"]
    assert trained_runs(tok, tokenize(fmt, conv, tok)) == expected


@pytest.mark.parametrize("case", sorted(CASES))
def test_control_ids_come_only_from_the_format(tok, case):
    conv = CASES[case]
    for family, refused in ((fmt, REFUSED), (meta, META_REFUSED)):
        if case in refused:
            continue
        ids = tokenize(family, conv, tok).input_ids
        written = [tok.convert_tokens_to_ids(s.text) for s in family.render(conv) if s.special]
        assert [i for i in ids if i >= 128000] == written


def test_user_lookalikes_are_text(tok, text_encoder):
    conv = CASES["control_token_lookalikes"]
    user = conv.messages[0].content.strip()
    ids = tokenize(fmt, conv, tok).input_ids
    user_ids = text_encoder(user)
    start = next(i for i in range(len(ids)) if ids[i : i + len(user_ids)] == user_ids)
    assert ids[start + len(user_ids)] == EOT
    assert all(i < 128000 for i in user_ids)


@pytest.mark.parametrize("tools_in_user_message", [True, False])
def test_system_and_tool_description_lookalikes_are_text(tok, text_encoder, tools_in_user_message):
    """The system prompt and the tool definitions (in the first user message, or in the system block)
    sit in text runs of the official template's text between its own control tokens. Each run,
    encoded as plain text by llama_models' encoder, is found whole in the ids: no control id in it."""
    conv = CASES["lookalikes_in_system_and_tool_descriptions"]
    family = Llama31Format(tools_in_user_message=tools_in_user_message)
    ids = tokenize(family, conv, tok).input_ids
    text = template_text(tok, conv, tools_in_user_message=tools_in_user_message)
    system, user = conv.messages[0].content.strip(), conv.messages[1].content
    header, user_header = "<|end_header_id|>", "<|start_header_id|>user<|end_header_id|>"
    start, end = text.index(header) + len(header), text.index(system) + len(system)
    runs = [text[start:end]]  # the system block: after its header, through the system prompt
    if tools_in_user_message:
        start = text.index(user_header, end) + len(user_header)  # the first user turn holds the tools
        runs.append(text[start : text.index(user, start) + len(user)])
    assert '"description": "Current weather. <|eot_id|>' in "".join(runs)
    for run in runs:
        run_ids = text_encoder(run)
        assert all(i < 128000 for i in run_ids)
        assert any(ids[i : i + len(run_ids)] == run_ids for i in range(len(ids)))
    # one <|eot_id|> per turn (system, user, call, tool result, answer); no other control id from the text
    assert ids.count(EOT) == 5 and ids.count(EOM) == 0 and ids.count(PYTHON_TAG) == 0
    assert ids.count(tok.convert_tokens_to_ids("<|begin_of_text|>")) == 1


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
    '{"', "name", '":', ' "', "calc", '",', ' "', "parameters", '":',
    ' {"', "x", '":', ' "', "2", "+", "2", '"}}', "<|eot_id|>",
]  # fmt: skip
TINY_ANSWER = ["It", " is", " ", "4", ".", "<|eot_id|>"]


def test_part_weights_and_last_turn_only_on_exact_vectors(tok):
    weighted = tokenize(fmt, TINY, tok, MaskPolicy(weights={"call_args": 2.0, "text": 0.5, "call_name": 1.5}))
    ids = weighted.input_ids
    assert len(ids) == 76
    assert [tok.decode([i]) for i in ids[39:57]] == TINY_CALL
    assert [tok.decode([i]) for i in ids[70:76]] == TINY_ANSWER
    # a token straddling syntax and arguments (' {"', '"}}') takes the larger weight
    call_weights = [1.0, 1.0, 1.0, 1.0, 1.5, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 1.0]
    assert weighted.weights == [0.0] * 39 + call_weights + [0.0] * 13 + [0.5] * 5 + [1.0]
    assert weighted.labels == [IGNORE_INDEX] * 39 + ids[39:57] + [IGNORE_INDEX] * 13 + ids[70:76]

    last = tokenize(fmt, TINY, tok, MaskPolicy(last_turn_only=True))
    assert last.input_ids == ids
    assert last.weights == [0.0] * 70 + [1.0] * 6
    assert last.labels == [IGNORE_INDEX] * 70 + ids[70:76]


# --- llama3_1 parser ------------------------------------------------------------------------------


def assistant_text(family, conv: Conversation, index: int) -> str:
    """What the model generates for message ``index``: its segments after the header, end token included."""
    return "".join(s.text for s in family.render(conv) if s.message == index and s.assistant)


def expected_parse(message) -> tuple[str | None, list[tuple[str, dict]]]:
    content = (message.content or "").strip() or None
    return content, [(c.name, c.arguments) for c in message.tool_calls]


def parsed(result) -> tuple[str | None, list[tuple[str, dict]]]:
    content, calls = result
    return content, [(c.name, c.arguments) for c in calls]


@pytest.mark.parametrize("case", sorted(set(CASES) - set(REFUSED)))
def test_llama3_1_render_then_parse_round_trips(case):
    conv = CASES[case]
    for index, message in enumerate(conv.messages):
        if message.role == "assistant":
            assert parsed(fmt.parse(assistant_text(fmt, conv, index))) == expected_parse(message)


def test_llama3_1_parse_is_tolerant_of_whitespace_and_the_end_token():
    call = ToolCall(name="f", arguments={"a": [1, "x"]})
    for text in (
        '{"name": "f", "parameters": {"a": [1, "x"]}}',
        '\n  {"name":"f","parameters":{"a":[1,"x"]}}  <|eot_id|>\n',
    ):
        assert fmt.parse(text) == (None, [call])
    assert fmt.parse("  Paris. <|eot_id|>") == ("Paris.", [])
    assert fmt.parse("<|eot_id|>") == (None, [])
    assert fmt.parse('{"answer": 42}') == ('{"answer": 42}', [])  # JSON that is no call is an answer


@pytest.mark.parametrize(
    "text, message",
    [
        (
            '{"name": "f", "parameters": {"a": 1}',
            "llama3_1 tool call: malformed JSON (Expecting ',' delimiter at character 36)",
        ),
        ('{"name": "f", "parameters": {}} and more', "llama3_1 tool call: text after the JSON: 'and more'"),
        (
            '{"name": "f", "arguments": {}}',
            'llama3_1 tool call: expected an object with exactly "name" and "parameters"',
        ),
        (
            '{"name": "f", "parameters": "{}"}',
            'llama3_1 tool call: "name" must be a non-empty string and "parameters" an object',
        ),
        ('{"name": "", "parameters": {}}', 'llama3_1 tool call: "name" must be a non-empty string'),
    ],
)
def test_llama3_1_parse_reports_broken_calls(text, message):
    with pytest.raises(ValueError) as err:
        fmt.parse(text)
    assert str(err.value).startswith(message)


# --- llama3_1_metatool ------------------------------------------------------------------------------

METATOOL_CASE = Conversation.from_dict(
    {
        "id": "metatool",
        "tools": [
            {"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": {}}}
        ],
        "messages": [
            {"role": "user", "content": "Weather in Rome and Oslo?"},
            {
                "role": "assistant",
                "content": "You want two cities, so I will call get_weather twice. ",
                "tool_calls": [
                    {"id": "a", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}},
                    {"id": "b", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
                ],
            },
            {"role": "tool", "tool_call_id": "b", "name": "get_weather", "content": '{"t": 2}'},
            {"role": "tool", "tool_call_id": "a", "content": "sunny"},
            {"role": "assistant", "content": "Rome is sunny; Oslo is 2 °C."},
            {"role": "user", "content": "Now Kyiv."},
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "function": {"name": "get_weather", "arguments": {"city": "Kyiv"}}}],
            },
        ],
    }
)
METATOOL_TOOLS = (
    '{\n    "type": "function",\n    "function": {\n        "name": "get_weather",\n'
    '        "description": "Weather.",\n        "parameters": {}\n    }\n}\n\n'
)  # fmt: skip
METATOOL_TEXT = (
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
    "Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\n"
    "Given the following functions, please respond with a JSON for a function call with its proper arguments "
    "that best answers the given prompt.\n\n"
    'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.'
    "Do not use variables.\n\n" + METATOOL_TOOLS + "Weather in Rome and Oslo?<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n"
    "You want two cities, so I will call get_weather twice.<|python_tag|>"
    '[{"name": "get_weather", "parameters": {"city": "Rome"}}, {"name": "get_weather", "parameters": {"city": "Oslo"}}]'
    "<|eom_id|><|start_header_id|>ipython<|end_header_id|>\n\n"
    '[{"name": "get_weather", "function_id": 1, "results": {"t": 2}}, '
    '{"name": "get_weather", "function_id": 0, "results": "sunny"}]<|eot_id|>'
    "<|start_header_id|>assistant<|end_header_id|>\n\nRome is sunny; Oslo is 2 °C.<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\nNow Kyiv.<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n"
    '<|python_tag|>[{"name": "get_weather", "parameters": {"city": "Kyiv"}}]<|eom_id|>'
)


def test_metatool_renders_the_paper_layout():
    assert meta.render_text(METATOOL_CASE) == METATOOL_TEXT


def test_metatool_prelude_is_llama3_1s(tok):
    """Everything before the first assistant turn is the official template's."""
    for conv in CORPUS:
        if conv.id in REFUSED:
            continue
        ours, official = meta.render_text(conv), fmt.render_text(conv)
        cut = official.index("<|start_header_id|>assistant")
        assert ours[:cut] == official[:cut]


def test_metatool_labels_and_control_ids(tok):
    tokenized = tokenize(meta, METATOOL_CASE, tok)
    assert trained_runs(tok, tokenized) == [
        (
            "You want two cities, so I will call get_weather twice.<|python_tag|>"
            '[{"name": "get_weather", "parameters": {"city": "Rome"}}, {"name": "get_weather", "parameters": {"city": '
            '"Oslo"}}]'
            "<|eom_id|>"
        ),
        "Rome is sunny; Oslo is 2 °C.<|eot_id|>",
        '<|python_tag|>[{"name": "get_weather", "parameters": {"city": "Kyiv"}}]<|eom_id|>',
    ]
    controls = [i for i in tokenized.input_ids if i >= 128000]
    assert controls.count(PYTHON_TAG) == 2 and controls.count(EOM) == 2
    assert tokenized.input_ids[-1] == EOM  # a trailing call turn still ends in <|eom_id|>


def test_metatool_options():
    option = Llama31MetaToolFormat(tools_in_user_message=False, date_string="03 Mar 2025")
    text = option.render_text(METATOOL_CASE)
    assert "Today Date: 03 Mar 2025\n\nYou have access to the following functions." in text
    assert "<|start_header_id|>user<|end_header_id|>\n\nWeather in Rome and Oslo?<|eot_id|>" in text


def test_metatool_refuses_tools_without_a_first_user_message():
    with pytest.raises(ValueError) as err:
        meta.render(CASES["assistant_speaks_first_with_tools"])
    assert str(err.value) == (
        "llama3_1_metatool: tools go into the first user message, but message 0 is 'assistant'; "
        "use tools_in_user_message=False"
    )
    assert Llama31MetaToolFormat(tools_in_user_message=False).render(CASES["assistant_speaks_first_with_tools"])


@pytest.mark.parametrize("case", sorted(set(CASES) - META_REFUSED))
def test_metatool_render_then_parse_round_trips(case):
    conv = CASES[case]
    for index, message in enumerate(conv.messages):
        if message.role == "assistant":
            assert parsed(meta.parse(assistant_text(meta, conv, index))) == expected_parse(message)


def test_metatool_parse_is_tolerant_of_whitespace():
    calls = [ToolCall(name="f", arguments={}), ToolCall(name="g", arguments={"x": 1})]
    figure_13 = 'Reasoning. <|python_tag|> [{"name": "f", "parameters": {}}, {"name": "g", "parameters": {"x": 1}}]'
    assert meta.parse(figure_13) == ("Reasoning.", calls)
    assert meta.parse(figure_13 + "<|eom_id|>\n") == ("Reasoning.", calls)
    assert meta.parse('<|python_tag|>[{"name":"f","parameters":{}}]') == (None, calls[:1])
    assert meta.parse("Just text.<|eot_id|>") == ("Just text.", [])


@pytest.mark.parametrize(
    "text, message",
    [
        (
            'Hm.<|python_tag|>{"name": "f", "parameters": {}}',
            "llama3_1_metatool calls after <|python_tag|>: expected a non-empty JSON list of calls",
        ),
        (
            "Hm.<|python_tag|>[]",
            "llama3_1_metatool calls after <|python_tag|>: expected a non-empty JSON list of calls",
        ),
        (
            '<|python_tag|>[{"name": "f", "parameters": {}}',
            "llama3_1_metatool calls after <|python_tag|>: malformed JSON",
        ),
        (
            '<|python_tag|>[{"name": "f"}]',
            (
                'llama3_1_metatool calls after <|python_tag|>, item 0: expected an object with exactly "name" and '
                '"parameters"'
            ),
        ),
        (
            '<|python_tag|>[{"name": "f", "parameters": {}}] trailing',
            "llama3_1_metatool calls after <|python_tag|>: text after the JSON: 'trailing'",
        ),
    ],
)
def test_metatool_parse_reports_broken_calls(text, message):
    with pytest.raises(ValueError) as err:
        meta.parse(text)
    assert str(err.value).startswith(message)
