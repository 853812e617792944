"""What trl's ``gptoss.jinja`` renders differently from openai-harmony (the gpt-oss reference renderer), each
shown on a real render of the same conversation: trl's template through transformers' ``apply_chat_template``
(reasoning passed in its ``thinking`` field), openai-harmony through ``official_harmony_ids`` (the harmony parity
test's reference) decoded. tooltrain's harmony format follows openai-harmony (tests/formats/test_harmony.py)."""

from __future__ import annotations

import datetime
import sys
from importlib import resources
from pathlib import Path

import pytest
from session_cache import shared_tokenizer

from train.formats.hf import to_hf_messages
from train.schema import Conversation, Message, Tool, ToolCall

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:  # importlib mode: the parity test's reference render beside this file
    sys.path.insert(0, HERE)

from test_harmony import official_harmony_ids

WEATHER = Tool(
    name="get_weather",
    description="Weather in a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"], "default": "c"}},
        "required": ["city"],
    },
)
SEARCH = Tool(
    name="search", description="Search.", parameters={"type": "object", "properties": {"q": {"type": "string"}}}
)
# a turn with a preamble and two calls, their results; the model's next turn is still to come
CONV = Conversation(
    "trl_vs_harmony",
    [
        Message("user", "Weather and news in Oslo?"),
        Message(
            "assistant",
            "Checking both.",
            tool_calls=[ToolCall("get_weather", {"city": "Oslo"}, id="c1"), ToolCall("search", {"q": "Oslo"}, id="c2")],
        ),
        Message("tool", "-3C", tool_call_id="c1", name="get_weather"),
        Message("tool", "No news.", tool_call_id="c2", name="search"),
    ],
    tools=[WEATHER, SEARCH],
)


@pytest.fixture(scope="module")
def texts(tmp_path_factory) -> tuple[str, str]:
    """(trl's gptoss.jinja text, openai-harmony's text) of CONV."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    from train.tokenizers.harmony import offline_encodings_dir

    offline_encodings_dir(tmp_path_factory.mktemp("tiktoken"))
    template = (resources.files("trl") / "chat_templates" / "gptoss.jinja").read_text(encoding="utf-8")
    blank = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")))
    messages, tools = to_hf_messages(CONV)
    trl_text = blank.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False)
    harmony_text = shared_tokenizer("o200k_harmony").decode(official_harmony_ids(CONV.messages, CONV.tools))
    return trl_text, harmony_text


def test_calls_lose_the_constrain_token(texts):
    trl_text, harmony_text = texts
    assert (
        '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Oslo"}' in trl_text
    )
    assert "to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>" in harmony_text
    assert "<|constrain|>" not in trl_text


def test_tool_results_are_json_quoted(texts):
    trl_text, harmony_text = texts
    assert 'functions.get_weather to=assistant<|channel|>commentary<|message|>"-3C"<|end|>' in trl_text
    assert "functions.get_weather to=assistant<|channel|>commentary<|message|>-3C<|end|>" in harmony_text


def test_today_s_date_is_written(texts):
    trl_text, harmony_text = texts
    today = datetime.date.today().isoformat()  # a training set rendered with it changes every day
    assert f"Knowledge cutoff: 2024-06\nCurrent date: {today}\n\n" in trl_text
    assert "Current date" not in harmony_text


def test_its_own_rendering_of_tool_schemas(texts):
    trl_text, harmony_text = texts
    developer = [
        text[text.index("<|start|>developer") : text.index("<|end|>", text.index("<|start|>developer"))]
        for text in texts
    ]
    assert developer[0] != developer[1]
    # a property with a default: openai-harmony ends the line with the comment, trl writes a comma after it
    assert 'unit?: "c" | "f", // default: c\n' in harmony_text
    assert 'unit?: "c" | "f", // default: c,\n' in trl_text


def test_text_beside_calls_goes_to_analysis(texts):
    trl_text, harmony_text = texts
    assert "<|start|>assistant<|channel|>analysis<|message|>Checking both.<|end|>" in trl_text
    assert "<|start|>assistant<|channel|>commentary<|message|>Checking both.<|end|>" in harmony_text


def test_only_a_turn_s_first_call_is_rendered(texts):
    trl_text, harmony_text = texts
    assert "to=functions.search" not in trl_text and "to=functions.search" in harmony_text
    # and both results are then attributed to the first call's tool
    assert trl_text.count("<|start|>functions.get_weather to=assistant") == 2
