"""Text answers (``answer_style=toolgt_text``): ToolGT's ``<thinking>…</thinking>[func(a=1)]`` turns, rendered as
plain trained text by every family, and read back into calls by the parser the eval tasks use."""

from __future__ import annotations

import pytest

from train.formats import ChatFormat, Segment, check_format_options, get_format, mask_segments
from train.formats.text_answers import (
    SYSTEM_PROMPT,
    call_list_text,
    parse_text_answer,
    text_system_prompt,
)
from train.schema import Conversation, Message, Tool, ToolCall

FAMILIES = ("chatml", "qwen2_5", "llama3_1", "mistral_v3", "mistral_nemo")
WEATHER = Tool(
    name="get_weather",
    description="Weather of a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
)
ANSWER = (
    '<thinking>1. The user wants the weather.\n6. get_weather(city="Paris")</thinking>[get_weather(city="Paris", '
    "days=2)]"
)


def toolgt_sample(answer: str = ANSWER) -> Conversation:
    """What the ToolGT builder writes: the prompt with the functions as the system message, the answer as text."""
    return Conversation(
        "s1",
        [
            Message(role="system", content=text_system_prompt([WEATHER])),
            Message(role="user", content="Weather in Paris for two days?"),
            Message(role="assistant", content=answer),
        ],
    )


# ---------------------------------------------------------------- the parser, on hand-written answers


def calls_of(text: str) -> list[tuple[str, dict]]:
    answer = parse_text_answer(text)
    assert answer.error is None, answer.error
    return [(call.name, call.arguments) for call in answer.calls]


def test_a_well_formed_answer_gives_its_reasoning_and_calls():
    answer = parse_text_answer(ANSWER)
    assert answer.well_formed
    assert answer.reasoning == '1. The user wants the weather.\n6. get_weather(city="Paris")'
    assert [(c.name, c.arguments) for c in answer.calls] == [("get_weather", {"city": "Paris", "days": 2})]


def test_parallel_calls_nested_arguments_and_names_with_spaces():
    text = (
        '<thinking>two calls</thinking>\n[Market Trends API(trend_type="MARKET_INDEXES", country="us"), '
        'book(guests=[{"name": "Ann", "age": 30}], flags={"vip": true, "note": None}, ratio=-0.5)]'
    )
    assert calls_of(text) == [
        ("Market Trends API", {"trend_type": "MARKET_INDEXES", "country": "us"}),
        ("book", {"guests": [{"name": "Ann", "age": 30}], "flags": {"vip": True, "note": None}, "ratio": -0.5}),
    ]


def test_a_missing_close_tag_ends_the_reasoning_at_the_call_list():
    assert calls_of('<thinking>1. pick get_weather\n[get_weather(city="Rome")]') == [("get_weather", {"city": "Rome"})]
    unclosed = parse_text_answer("<thinking>1. I am still thinking about it")
    assert (unclosed.reasoning, unclosed.error) == (
        "1. I am still thinking about it",
        "no call list after the reasoning",
    )


def test_strings_holding_brackets_and_tags_are_values_not_syntax():
    text = '<thinking>x</thinking>[search(q="a [b] (c)], </thinking> d", path="C:\\\\tmp")]'
    assert calls_of(text) == [("search", {"q": "a [b] (c)], </thinking> d", "path": "C:\\tmp"})]


def test_function_tags_around_the_list_and_no_reasoning_at_all():
    assert calls_of("<function>[f(a=1)]</function>") == [("f", {"a": 1})]
    assert calls_of("<thinking>r</thinking><function>[f(a=1), g()]</function>") == [("f", {"a": 1}), ("g", {})]
    assert calls_of("[]") == []  # well-formed, no call (an irrelevance answer)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "<thinking>none fits</thinking>None of the functions can be used.",
            "the answer is not a call list: 'None of the functions can be used.'",
        ),
        ("I would call get_weather for Paris.", "the answer is not a call list: 'I would call get_weather for Paris.'"),
        ('[get_weather("Paris")]', "get_weather: 1 positional argument(s); every argument of a text answer is named"),
        (
            "[get_weather(city=x)]",
            "malformed call list: item 0: get_weather: argument 'city': a variable x is not a literal",
        ),
        ("[f(a=g(b=1))]", "malformed call list: item 0: f: argument 'a': nested call g(b=1) is not a literal"),
        ('[f(a="x"', "malformed call list: not valid Python: EOF in multi-line statement"),
        ("<function>[f(a=1)]</function> and more", "text after </function>: 'and more'"),
        ("", "no call list after the reasoning"),
    ],
)
def test_answers_that_are_not_call_lists_get_their_reason(text, error):
    answer = parse_text_answer(text)
    assert (answer.well_formed, answer.calls, answer.error) == (False, [], error)


def test_the_call_list_writer_round_trips_through_the_parser():
    calls = [
        ToolCall(
            name="f",
            arguments={
                "s": 'say "hi" [x]',
                "n": 3,
                "x": 1.5,
                "b": False,
                "z": None,
                "l": [1, "a"],
                "d": {"k": [True]},
                "u": "é",
            },
        )
    ]
    text = call_list_text(calls)
    assert text == '[f(s="say \\"hi\\" [x]", n=3, x=1.5, b=False, z=None, l=[1, "a"], d={"k": [True]}, u="é")]'
    assert calls_of(text) == [("f", calls[0].arguments)]


# ---------------------------------------------------------------- the option, in every family


def test_the_option_is_checked_at_compose_time():
    assert check_format_options("qwen2_5", {"answer_style": "text"}) == [
        "chat format 'qwen2_5' option 'answer_style' must be one of native, toolgt_text, got 'text'"
    ]
    assert check_format_options("llama3_1", {"answer_style": "toolgt_text"}) == []


@pytest.mark.parametrize("family", FAMILIES)
def test_the_assistant_turn_is_its_text_trained_as_a_whole(family):
    fmt = get_format(family, {"answer_style": "toolgt_text"})
    segments = fmt.render(toolgt_sample())
    weights = mask_segments(segments)
    trained = "".join(seg.text for seg, w in zip(segments, weights) if w and not seg.special)
    assert trained.strip() == ANSWER
    assert {seg.part for seg, w in zip(segments, weights) if w} <= {"text", "end"}
    text = fmt.render_text(toolgt_sample())
    assert text.count(text_system_prompt([WEATHER]).strip()) == 1  # the prompt as given, not written twice
    assert "<tools>" not in text and "[AVAILABLE_TOOLS]" not in text and "Environment: ipython" not in text
    assert fmt.parse(ANSWER + "".join(fmt.end_of_turn_texts()[:1])) == (
        '1. The user wants the weather.\n6. get_weather(city="Paris")',
        [ToolCall(name="get_weather", arguments={"city": "Paris", "days": 2})],
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_a_benchmark_question_gets_the_prompt_composed_from_its_tools(family):
    question = Conversation(
        "q",
        [Message(role="system", content="Answer in French."), Message(role="user", content="Weather in Paris?")],
        tools=[WEATHER],
    )
    fmt = get_format(family, {"answer_style": "toolgt_text"})
    prompt = "".join(seg.text for seg in fmt.render_prompt(question, 2))
    # BFCL's prompting handler: its prompt, then the question's own system text
    assert text_system_prompt([WEATHER]) + "\n\nAnswer in French." in prompt
    assert SYSTEM_PROMPT.split("{functions}")[0] in prompt


@pytest.mark.parametrize("family", FAMILIES)
def test_gold_calls_are_written_as_the_text_the_model_learns(family):
    conv = Conversation(
        "c",
        [
            Message(role="user", content="Weather in Paris?"),
            Message(
                role="assistant",
                content="<thinking>r</thinking>",
                tool_calls=[ToolCall(name="get_weather", arguments={"city": "Paris"})],
            ),
        ],
        tools=[WEATHER],
    )
    fmt = get_format(family, {"answer_style": "toolgt_text"})
    # a turn with text and a call (llama3_1 and mistral cannot write it natively) is one text turn here
    assert '<thinking>r</thinking>\n[get_weather(city="Paris")]' in fmt.render_text(conv)


def test_tool_results_are_refused_not_dropped():
    conv = Conversation(
        "c",
        [
            Message(role="user", content="q"),
            Message(
                role="assistant", tool_calls=[ToolCall(name="get_weather", arguments={"city": "P"}, id="call0000a")]
            ),
            Message(role="tool", tool_call_id="call0000a", name="get_weather", content="sun"),
            Message(role="assistant", content="Sunny."),
        ],
        tools=[WEATHER],
    )
    with pytest.raises(ValueError, match=r"messages\[2\]: answer_style=toolgt_text has no tool-result turns"):
        get_format("chatml", {"answer_style": "toolgt_text"}).render(conv)


def test_no_serving_template_claims_to_render_text_answers():
    from train.formats.serving import chat_template

    assert "tooltrain chat template" in chat_template(get_format("qwen2_5"))
    with pytest.raises(ValueError, match="no chat template for qwen2_5 with answer_style=toolgt_text"):
        chat_template(get_format("qwen2_5", {"answer_style": "toolgt_text"}))


@pytest.mark.parametrize("family", FAMILIES)
def test_segments_point_at_the_conversations_own_messages_when_the_prompt_is_put_in_front(family):
    conv = Conversation(
        "q",
        [Message(role="user", content="Weather in Paris?"), Message(role="assistant", content=ANSWER)],
        tools=[WEATHER],
    )
    fmt = get_format(family, {"answer_style": "toolgt_text"})
    segments = fmt.render(conv)
    assert {seg.message for seg in segments if seg.part == "user"} == {0}
    assert {seg.message for seg, w in zip(segments, mask_segments(segments)) if w} == {1}
    assert {seg.message for seg in segments if seg.part == "system"} == {-1}  # the prompt is no message of its own
    prompt = "".join(seg.text for seg in fmt.render_prompt(conv, 1))
    assert fmt.render_text(conv).startswith(prompt) and "Weather in Paris?" in prompt and ANSWER not in prompt


def test_a_config_with_an_unknown_answer_style_fails_at_compose_time():
    from train.engine.config import ConfigError, compose

    cfg = compose(["recipe=tiny", "+data.format_options.answer_style=toolgt_text"])
    assert dict(cfg.data.format_options) == {"answer_style": "toolgt_text"}
    with pytest.raises(ConfigError, match="option 'answer_style' must be one of native, toolgt_text, got 'text'"):
        compose(["recipe=tiny", "+data.format_options.answer_style=text"])


# ---------------------------------------------------------------- the dispatch lives in the format base


class _Plain(ChatFormat):
    """A format of one's own (``module:attr``) that writes only its own syntax: ``<call>NAME</call>`` turns."""

    name = "plain_test"
    default_tokenizer = "none"

    def __init__(self, answer_style: str = "native"):
        self.answer_style = answer_style

    def render(self, conv: Conversation) -> list[Segment]:
        segments = []
        for index, message in enumerate(conv.messages):
            part = "text" if message.role == "assistant" else "system" if message.role == "system" else "user"
            segments.append(Segment(f"{message.role}: ", "header", index))
            segments.append(Segment(message.content or "", part, index))
            segments += [Segment(f"<call>{call.name}</call>", "call_name", index) for call in message.tool_calls]
            if message.role == "assistant":
                segments.append(Segment("<end>", "end", index, special=True))
        return segments

    def parse(self, text: str) -> tuple[str | None, list[ToolCall]]:
        return text, []


def test_a_format_of_ones_own_gets_text_answers_from_the_base():
    conv = Conversation(
        "c",
        [
            Message(role="user", content="Weather in Paris?"),
            Message(role="assistant", tool_calls=[ToolCall(name="get_weather", arguments={"city": "Paris"})]),
        ],
        tools=[WEATHER],
    )
    native, text = _Plain(), _Plain(answer_style="toolgt_text")
    assert "<call>get_weather</call>" in native.render_text(conv)
    rendered = text.render_text(conv)
    assert "<call>" not in rendered and 'assistant: [get_weather(city="Paris")]<end>' in rendered
    assert rendered.startswith("system: " + text_system_prompt([WEATHER]))
    assert native.parse(ANSWER) == (ANSWER, [])
    assert text.parse(ANSWER + "<end>")[1] == [ToolCall(name="get_weather", arguments={"city": "Paris", "days": 2})]
    with pytest.raises(ValueError, match="text answer: the answer is not a call list"):
        text.parse("Sunny.")


def test_qwen3_text_answers_read_the_think_block_off_first():
    fmt = get_format("qwen3", {"answer_style": "toolgt_text"})
    completion = "<think>\nweigh it\n</think>\n\n" + ANSWER + "<|im_end|>"
    reasoning, content, calls = fmt.parse_with_reasoning(completion)
    assert reasoning == "weigh it" and content.startswith("1. The user wants the weather.")
    assert calls == [ToolCall(name="get_weather", arguments={"city": "Paris", "days": 2})]
    assert fmt.parse(completion) == (content, calls)
