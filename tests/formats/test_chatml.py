"""The chatml format (ChatML + Hermes tool calls) on the SmolLM2 tokenizer.

References: SmolLM2's own chat template (from its GGUF) for conversations without tools; for tool
conversations, hand-checked renderings in tests/fixtures/formats/chatml/ and, independently, trl's
copy of the Qwen2.5 template (the same Hermes layout) with only the wording and the tool role swapped.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from train.formats import MaskPolicy, get_format
from train.formats.chatml import (
    SMOLLM2_SYSTEM,
    TOOLS_INSTRUCTION,
    TOOLS_PREAMBLE,
    ChatMLFormat,
    ToolCallParseError,
)
from train.formats.tokenize import encode_text, tokenize
from train.schema import Conversation, ToolCall

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CORPUS = [
    Conversation.from_dict(json.loads(line)) for line in (FIXTURES / "parity" / "corpus.jsonl").open(encoding="utf-8")
]
CASES = {conv.id: conv for conv in CORPUS}
NO_TOOLS = [conv.id for conv in CORPUS if not conv.tools]
WITH_TOOLS = [conv.id for conv in CORPUS if conv.tools]
IM_START, IM_END = 1, 2


@pytest.fixture(scope="module")
def tok():
    from session_cache import shared_tokenizer

    from train.models import ModelFetchError

    try:
        return shared_tokenizer("smollm2")
    except ModelFetchError as err:  # a fresh machine with no package index: nothing to compare against
        pytest.skip(str(err))


fmt = ChatMLFormat()


def assistant_bodies(conv: Conversation) -> list[str]:
    """What each assistant turn holds between its header and <|im_end|>, from the rendering."""
    text = fmt.render_text(conv)
    bodies = text.split("<|im_start|>assistant\n")[1:]
    return [body.split("<|im_end|>")[0] for body in bodies]


def trained_runs(tok, tokenized) -> list[str]:
    runs, current = [], []
    for label in tokenized.labels + [-100]:
        if label != -100:
            current.append(label)
        elif current:
            runs.append(tok.decode(current))
            current = []
    return runs


def test_registry_returns_chatml():
    assert isinstance(get_format("chatml"), ChatMLFormat)
    assert ChatMLFormat.default_tokenizer == "smollm2"


# ---- parity ------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", NO_TOOLS)
def test_no_tool_cases_match_smollm2_chat_template(tok, case):
    conv = CASES[case]
    reference = tok.apply_chat_template([m.to_dict() for m in conv.messages], tokenize=True)["input_ids"]
    assert tokenize(fmt, conv, tok).input_ids == reference


def test_default_system_prompt_is_the_templates(tok):
    conv = CASES["no_tools_chat"]
    assert conv.messages[0].role != "system"
    assert fmt.render_text(conv).startswith(f"<|im_start|>system\n{SMOLLM2_SYSTEM}<|im_end|>\n<|im_start|>user\n")
    assert SMOLLM2_SYSTEM in tok.chat_template


@pytest.mark.parametrize("case", WITH_TOOLS)
def test_tool_cases_render_the_hand_checked_text(case):
    expected = (FIXTURES / "formats" / "chatml" / f"{case}.txt").read_text(encoding="utf-8")
    assert fmt.render_text(CASES[case]) == expected


def test_single_call_renders_exactly():
    text = fmt.render_text(CASES["single_call_json_result"])
    tail = text[text.index("<|im_start|>user") :]
    assert tail == (
        "<|im_start|>user\nWhat's the weather in Paris?<|im_end|>\n"
        "<|im_start|>assistant\n<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n'
        '<|im_start|>tool\n<tool_response>\n{"temperature": 18, "condition": "cloudy"}\n</tool_response><|im_end|>\n'
        "<|im_start|>assistant\nIt is 18 °C and cloudy in Paris.<|im_end|>\n"
    )
    tools_line = json.dumps(CASES["single_call_json_result"].tools[0].to_dict(), ensure_ascii=False)
    assert text.startswith(
        f"<|im_start|>system\n{SMOLLM2_SYSTEM}{TOOLS_PREAMBLE}\n{tools_line}{TOOLS_INSTRUCTION}<|im_end|>\n"
    )


def test_parallel_calls_and_their_results_share_one_turn_each():
    text = fmt.render_text(CASES["parallel_calls"])
    assert (
        "<|im_start|>assistant\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_time", "arguments": {"timezone": "Europe/Lisbon"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>tool\n"
        '<tool_response>\n{"temperature": 25}\n</tool_response>\n'
        '<tool_response>\n{"time": "14:03"}\n</tool_response><|im_end|>\n'
    ) in text


def test_text_before_a_call_is_separated_by_one_newline():
    body = assistant_bodies(CASES["text_and_call"])[0]
    assert body == (
        "Let me check the current weather in London.\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "London"}}\n</tool_call>'
    )


QWEN_TOOLS_PREAMBLE = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
QWEN_TOOLS_INSTRUCTION = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
    "<args-json-object>}\n</tool_call>"
)


@pytest.mark.parametrize("case", [c.id for c in CORPUS])
def test_same_layout_as_qwen25_hermes_template(tok, case):
    """Qwen2.5's template is ChatML + Hermes too: after swapping its wording, default system prompt
    and the role of tool results (user -> tool, as Hermes 2 Pro), it must give our exact text."""
    template = (resources.files("trl") / "chat_templates" / "qwen2_5.jinja").read_text(encoding="utf-8")
    conv = CASES[case]
    qwen = tok.apply_chat_template(
        [m.to_dict() for m in conv.messages],
        tools=[t.to_dict() for t in conv.tools] or None,
        chat_template=template,
        tokenize=False,
    )
    assert QWEN_TOOLS_PREAMBLE in qwen or not conv.tools
    ours = (
        qwen.replace(QWEN_TOOLS_PREAMBLE, TOOLS_PREAMBLE)
        .replace(QWEN_TOOLS_INSTRUCTION, TOOLS_INSTRUCTION)
        .replace("You are Qwen, created by Alibaba Cloud. You are a helpful assistant.", SMOLLM2_SYSTEM)
        .replace("<|im_start|>user\n<tool_response>", "<|im_start|>tool\n<tool_response>")
    )
    assert fmt.render_text(conv) == ours


# ---- control tokens and injection -------------------------------------------------------------


def test_control_token_lookalikes_stay_text(tok):
    conv = CASES["control_token_lookalikes"]
    ids = tokenize(fmt, conv, tok).input_ids
    # five turns (system, user, assistant, tool, assistant): the user's "<|im_end|>" and the tool
    # result's "<|im_start|>" must not add a sixth control token of either kind
    assert ids.count(IM_START) == 5 and ids.count(IM_END) == 5
    decoded = tok.decode(ids)
    assert conv.messages[0].content in decoded and conv.messages[2].content in decoded


EXTRA_FILE = FIXTURES / "formats" / "llama3_qwen2_5" / "extra_parity.jsonl"
SYSTEM_LOOKALIKES = Conversation.from_dict(
    next(
        obj
        for obj in map(json.loads, EXTRA_FILE.open(encoding="utf-8"))
        if obj["id"] == "lookalikes_in_system_and_tool_descriptions"
    )
)


def test_system_and_tool_description_lookalikes_stay_text(tok):
    """Control-token text in the system prompt and in tool descriptions: the system turn is one text
    run between the format's own <|im_start|> and <|im_end|>, encoded with no control id in it."""
    conv = SYSTEM_LOOKALIKES
    ids = tokenize(fmt, conv, tok).input_ids
    assert ids.count(IM_START) == 5 and ids.count(IM_END) == 5  # system, user, assistant, tool, assistant
    assert tok.convert_tokens_to_ids("<|endoftext|>") not in ids
    text = fmt.render_text(conv)
    assert tok.decode(ids) == text
    end = text.index("</tool_call><|im_end|>\n<|im_start|>user\nWeather") + len("</tool_call>")
    run = text[len("<|im_start|>") : end]
    assert conv.messages[0].content in run and "Current weather. <|eot_id|>" in run
    plain = tok(run, add_special_tokens=False, split_special_tokens=True)["input_ids"]
    assert ids[1 : 1 + len(plain)] == plain and ids[1 + len(plain)] == IM_END


def test_system_and_tool_description_lookalikes_match_the_hermes_layout(tok):
    """Where the official (Qwen2.5 Hermes) template agrees, i.e. its text with our wording, the text is the same."""
    template = (resources.files("trl") / "chat_templates" / "qwen2_5.jinja").read_text(encoding="utf-8")
    conv = SYSTEM_LOOKALIKES
    qwen = tok.apply_chat_template(
        [m.to_dict() for m in conv.messages],
        tools=[t.to_dict() for t in conv.tools],
        chat_template=template,
        tokenize=False,
    )
    ours = (
        qwen.replace(QWEN_TOOLS_PREAMBLE, TOOLS_PREAMBLE)
        .replace(QWEN_TOOLS_INSTRUCTION, TOOLS_INSTRUCTION)
        .replace("<|im_start|>user\n<tool_response>", "<|im_start|>tool\n<tool_response>")
    )
    assert fmt.render_text(conv) == ours


def test_tool_call_tags_are_plain_text_in_this_vocabulary(tok):
    """<tool_call> is not a SmolLM2 token: a user's <tool_call> is the same tokens as a real call's."""
    assert tok.convert_tokens_to_ids("<tool_call>") == tok.unk_token_id
    user_ids = encode_text(tok, "\n<tool_call>\n")[0]
    assert user_ids == tok.encode("\n<tool_call>\n", add_special_tokens=False)
    assert len(user_ids) > 1


# ---- labels -----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", [c.id for c in CORPUS])
def test_trained_tokens_are_exactly_the_assistant_turns(tok, case):
    conv = CASES[case]
    tokenized = tokenize(fmt, conv, tok)
    assert trained_runs(tok, tokenized) == [body + "<|im_end|>" for body in assistant_bodies(conv)]
    assert len(tokenized.labels) == len(tokenized.input_ids)
    assert all(label in (-100, token) for label, token in zip(tokenized.labels, tokenized.input_ids))


def test_last_turn_only_trains_the_final_answer(tok):
    tokenized = tokenize(fmt, CASES["multi_turn_tools"], tok, MaskPolicy(last_turn_only=True))
    assert trained_runs(tok, tokenized) == ["It is 08:15 in Berlin.<|im_end|>"]


def test_part_weights_reach_the_tokens(tok):
    tokenized = tokenize(fmt, CASES["trailing_call"], tok, MaskPolicy(weights={"call_args": 2.0}))
    heavy = "".join(tok.decode([t]) for t, w in zip(tokenized.input_ids, tokenized.weights) if w == 2.0)
    # ' {"' and '}}' are single tokens straddling syntax and arguments: they take the larger weight
    assert heavy == ' {"timezone": "Asia/Tokyo"}}'
    assert sorted(set(tokenized.weights)) == [0.0, 1.0, 2.0]


def test_call_name_and_call_args_weights_land_on_their_own_tokens(tok):
    """Reasoning (text in a turn with calls), call name and call arguments each get their own weight;
    the final answer's text keeps the default 1.0 because only "reasoning" was weighted."""
    policy = MaskPolicy(weights={"call_name": 3.0, "call_args": 2.0, "reasoning": 0.5})
    tokenized = tokenize(fmt, CASES["text_and_call"], tok, policy)

    def weighted(weight: float) -> str:
        return "".join(tok.decode([t]) for t, w in zip(tokenized.input_ids, tokenized.weights) if w == weight)

    assert weighted(0.5) == "Let me check the current weather in London."
    assert weighted(3.0) == "get_weather"
    assert weighted(2.0) == ' {"city": "London"}}'  # ' {"' and '}}' straddle syntax and arguments: the larger weight
    assert weighted(1.0) == (
        '\n<tool_call>\n{"name": "", "arguments":\n</tool_call><|im_end|>Yes, it is raining in London.<|im_end|>'
    )
    assert tokenized.labels == tokenize(fmt, CASES["text_and_call"], tok).labels  # weights never move the mask


def test_text_weight_covers_reasoning_unless_reasoning_has_its_own(tok):
    conv = CASES["text_and_call"]
    text_only = tokenize(fmt, conv, tok, MaskPolicy(weights={"text": 0.5})).weights
    both = tokenize(fmt, conv, tok, MaskPolicy(weights={"text": 0.5, "reasoning": 0.5})).weights
    assert text_only == both
    apart = tokenize(fmt, conv, tok, MaskPolicy(weights={"text": 0.5, "reasoning": 4.0})).weights
    assert apart.count(4.0) == 9 and apart.count(0.5) == 9  # 'Let me check ... London.' / 'Yes, it is ... London.'


# ---- parsing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", [c.id for c in CORPUS])
def test_parse_round_trips_every_assistant_turn(case):
    conv = CASES[case]
    turns = [m for m in conv.messages if m.role == "assistant"]
    for message, body in zip(turns, assistant_bodies(conv), strict=True):
        content, calls = fmt.parse(body)
        assert content == (message.content or None)
        assert calls == [ToolCall(name=c.name, arguments=c.arguments) for c in message.tool_calls]


def test_parse_tolerates_whitespace_and_a_stop_token():
    text = (
        'Checking.\n<tool_call>  {"name": "f", "arguments": {"a": [1, "</tool_call>"]}}\n\n</tool_call>\n \n'
        '<tool_call>{"name": "g", "arguments": {}}</tool_call>\n<|im_end|>'
    )
    assert fmt.parse(text) == ("Checking.", [ToolCall("f", {"a": [1, "</tool_call>"]}), ToolCall("g", {})])
    assert fmt.parse("Paris.<|im_end|>") == ("Paris.", [])
    assert fmt.parse("") == (None, [])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '<tool_call>\n{"name": "f", "arguments": {}\n</tool_call>',
            "tool call 1: invalid JSON: Expecting ',' delimiter at char 42",
        ),
        ('<tool_call>\n{"name": "f", "arguments": {}}', "tool call 1: missing </tool_call>"),
        (
            '<tool_call>\n{"name": "f"}\n</tool_call>',
            "tool call 1: expected a JSON object with keys 'name' and 'arguments'",
        ),
        (
            '<tool_call>\n["f", {}]\n</tool_call>',
            "tool call 1: expected a JSON object with keys 'name' and 'arguments'",
        ),
        ('<tool_call>\n{"name": "", "arguments": {}}\n</tool_call>', "tool call 1: 'name' must be a non-empty string"),
        (
            '<tool_call>\n{"name": "f", "arguments": "{\\"a\\": 1}"}\n</tool_call>',
            "tool call 1: 'arguments' must be a JSON object",
        ),
        (
            (
                '<tool_call>{"name": "f", "arguments": {}}</tool_call>\n<tool_call>{"name": 3, "arguments": '
                "{}}</tool_call>"
            ),
            "tool call 2: 'name' must be a non-empty string",
        ),
        ('<tool_call>{"name": "f", "arguments": {}}</tool_call> and then', "text after tool call 1: 'and then'"),
    ],
)
def test_parse_rejects_malformed_calls(text, message):
    with pytest.raises(ToolCallParseError) as err:
        fmt.parse(text)
    assert str(err.value) == message


# ---- variants ---------------------------------------------------------------------------------


def test_a_chatml_model_without_default_system_prompt():
    class PlainChatML(ChatMLFormat):
        default_system = None

    plain = PlainChatML()
    assert plain.render_text(CASES["no_tools_chat"]).startswith("<|im_start|>user\n")
    with_tools = plain.render_text(CASES["tools_no_call"])
    assert with_tools.startswith(f"<|im_start|>system\n{TOOLS_PREAMBLE}")


def test_parse_gives_none_for_whitespace_only_content():
    assert fmt.parse(" \n") == (None, [])
    assert fmt.parse(' \n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>') == (None, [ToolCall("f", {})])
