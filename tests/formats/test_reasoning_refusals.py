"""Formats with no place for ``Message.reasoning_content`` refuse a conversation carrying it, never drop it.

One check in ``ChatFormat`` (``supports_reasoning``, run before every family's ``render``) covers every render
path: training (``tokenize_many`` yields the ValueError, which a build counts as a reject), inference prompts,
text answers, and a user's own format class.
"""

from __future__ import annotations

import pytest

from train.formats import FORMATS, format_options, get_format
from train.formats.base import ChatFormat, Segment
from train.formats.tokenize import tokenize_many
from train.schema import Conversation, Message, Tool, ToolCall

REASONED = Conversation(
    "reasoned",
    [
        Message("user", "Weather in Oslo?"),
        Message("assistant", tool_calls=[ToolCall("get_weather", {"city": "Oslo"}, id="call0000a")]),
        Message("tool", "3 degrees", tool_call_id="call0000a", name="get_weather"),
        Message("assistant", "It is 3 degrees.", reasoning_content="The tool said 3."),
    ],
    tools=[Tool(name="get_weather")],
)
PLAIN_TURN = Conversation("plain", [Message("user", "Hi"), Message("assistant", "Hello", reasoning_content="greet")])
# a prompt for the last turn shows the earlier turn, reasoning and all
EARLIER = Conversation("earlier", [*PLAIN_TURN.messages, Message("user", "Bye"), Message("assistant", "Bye")])
WITHOUT = [name for name in FORMATS if not get_format(name).supports_reasoning]
REASON = "messages[3] carries reasoning_content, which chat format {!r} has no place for"


def test_the_older_families_are_all_checked():
    assert {"llama3_1", "llama3_1_metatool", "qwen2_5", "mistral_v3", "mistral_nemo", "chatml"} <= set(WITHOUT)
    assert {"deepseek_coder", "toolselect_text"} <= set(WITHOUT)
    assert "qwen3" not in WITHOUT


@pytest.mark.parametrize("name", WITHOUT)
def test_a_conversation_with_reasoning_is_refused_with_the_reason(name):
    fmt = get_format(name)
    with pytest.raises(ValueError) as err:
        fmt.render(REASONED)
    assert str(err.value).startswith(REASON.format(name))
    # training: the ValueError in the conversation's place (a counted reject), the others unaffected
    results = tokenize_many(fmt, [REASONED], tokenizer=None)
    assert isinstance(results[0], ValueError) and str(results[0]).startswith(REASON.format(name))
    with pytest.raises(ValueError, match="carries reasoning_content"):
        fmt.render_prompt(EARLIER, 3)


@pytest.mark.parametrize("name", [n for n in WITHOUT if "answer_style" in format_options(n)])
def test_text_answers_refuse_it_too(name):
    with pytest.raises(ValueError, match="carries reasoning_content"):
        get_format(name, {"answer_style": "toolgt_text"}).render(PLAIN_TURN)


def test_empty_reasoning_is_no_reasoning():
    empty = Conversation("empty", [Message("user", "Hi"), Message("assistant", "Hello", reasoning_content="")])
    assert get_format("chatml").render_text(empty).endswith("Hello<|im_end|>\n")


def test_a_format_of_ones_own_refuses_unless_it_says_it_renders_reasoning():
    class Mine(ChatFormat):
        name = "mine"

        def render(self, conv):
            return [Segment(m.content or "", "text", i) for i, m in enumerate(conv.messages)]

    class Thinks(Mine):
        supports_reasoning = True

    with pytest.raises(ValueError, match="chat format 'mine' has no place for"):
        Mine().render(PLAIN_TURN)
    assert Thinks().render_text(PLAIN_TURN) == "HiHello"
