"""The exported harmony chat template (train/formats/templates/harmony.jinja) renders what the harmony format trains.

tests/formats/test_serving_templates.py holds it to the format on the parity corpus; here: the reasoning cases
(analysis channel and the history rule, generation prompts included), tool schemas in every shape harmony's
TypeScript-like rendering has a rule for, the real glaive and BFCL conversations, the pinned options, and the
one thing the template cannot tell (an assistant turn with reasoning and no content: Hugging Face messages carry
that content as ``""``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jinja2.exceptions import TemplateError

from train.formats.harmony import HarmonyFormat
from train.formats.harmony_tools import functions_namespace
from train.formats.hf import to_hf_messages
from train.formats.serving import chat_template as make_template
from train.formats.serving import serving, vllm_command
from train.schema import Conversation, Message, Tool, ToolCall

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
REASONING = {
    conv.id: conv
    for conv in (Conversation.from_dict(json.loads(line)) for line in (FIXTURES / "harmony" / "reasoning.jsonl").open())
}
fmt = HarmonyFormat()
TEMPLATE = make_template(fmt)


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")))


def render(tokenizer, conv: Conversation, count: int | None = None, template: str = TEMPLATE, **options) -> str:
    messages, tools = to_hf_messages(conv)
    messages = messages if count is None else messages[:count]
    return tokenizer.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False, **options)


@pytest.mark.parametrize("case", sorted(REASONING))
def test_reasoning_cases_and_their_prompts_render_as_the_format(tokenizer, case):
    conv = REASONING[case]
    assert render(tokenizer, conv) == fmt.render_text(conv)
    for index, message in enumerate(conv.messages):
        if message.role == "assistant":  # the history rule for the turn being written: reasoning before it dropped
            prompt = "".join(s.text for s in fmt.render_prompt(conv, index))
            assert render(tokenizer, conv, index, add_generation_prompt=True) == prompt, index
    prompt = "".join(s.text for s in fmt.render_prompt(conv, len(conv.messages)))
    assert render(tokenizer, conv, add_generation_prompt=True) == prompt


def test_history_rule_in_the_template(tokenizer):
    text = render(tokenizer, REASONING["reasoning_three_turns"])
    assert ("t1" in text, "t2" in text, "t3" in text) == (False, False, True)
    assert text.endswith("<|return|>")
    prompt = render(tokenizer, REASONING["reasoning_three_turns"], add_generation_prompt=True)
    assert "t3" not in prompt and prompt.endswith("<|end|><|start|>assistant")  # the last final is history now


SCHEMA_TOOLS = [
    Tool(
        name="search",
        description="Search things.\r\nSecond line.\n",
        parameters={
            "type": "object",
            "description": "The query object.",
            "properties": {
                "q": {"type": "string", "description": "Query", "examples": ["cats", "dogs"], "title": "Q"},
                "mode": {"type": "string", "enum": ["fast", "full"], "default": "fast"},
                "label": {"type": "string", "default": 'x "y"'},
                "n": {"type": "integer", "default": 3, "nullable": True},
                "ratio": {"type": ["number", "integer", "null"]},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
                "raw": {"type": "array"},
                "flag": {"type": "boolean", "default": False},
                "filter": {
                    "type": "object",
                    "properties": {"field": {"type": "string"}, "deep": {"type": "object", "properties": {}}},
                    "required": ["field"],
                },
                "when": {
                    "description": "A date or a range.",
                    "default": "today",
                    "oneOf": [
                        {"type": "string", "description": "A date.", "default": "now"},
                        {"type": "object", "properties": {"from": {"type": "string"}}, "nullable": True},
                    ],
                },
                "same": {
                    "description": "Same.",
                    "oneOf": [{"type": "string", "description": "Same."}, {"type": "null"}],
                },
                "anything": {},
                "odd": {"type": "tuple"},
            },
            "required": ["q", "when"],
        },
    ),
    Tool(name="bare", description="", parameters={"type": "object", "properties": {}}),
    Tool(name="top_one_of", description="x", parameters={"oneOf": [{"type": "string"}, {"type": "number"}]}),
]


def test_tool_schemas_render_as_harmony_tools_writes_them(tokenizer):
    conv = Conversation(
        "schemas",
        [Message("system", "Be brief."), Message("user", "q"), Message("assistant", "a")],
        tools=SCHEMA_TOOLS,
    )
    text = render(tokenizer, conv)
    assert text == fmt.render_text(conv)
    assert functions_namespace(SCHEMA_TOOLS) in text
    assert '// default: "x "y""' in text and "n?: number | null, // default: 3" in text


@pytest.mark.shared_data
def test_real_glaive_and_bfcl_conversations_render_as_the_format(tokenizer, shared_data):
    from train.sources import get_reader

    conversations = [
        r
        for name in ("glaive_toolcall_en_demo.json", "glaive_toolcall_zh_demo.json")
        for r in get_reader("glaive")([shared_data / "glaive_toolcall_demo" / name])
        if isinstance(r, Conversation)
    ]
    bfcl = shared_data / "bfcl_v2"
    for name in ("simple", "multiple", "parallel", "parallel_multiple"):
        pair = [bfcl / f"BFCL_v2_{name}.json", bfcl / "possible_answer" / f"BFCL_v2_{name}.json"]
        conversations += [r for r in get_reader("bfcl")(pair) if isinstance(r, Conversation)]
    same, refused = 0, 0
    for conv in conversations:
        try:
            want = fmt.render_text(conv), None
        except ValueError as err:
            want = None, str(err)
        try:
            got = render(tokenizer, conv), None
        except TemplateError as err:
            got = None, str(err)
        assert got == want, conv.id
        same, refused = same + (want[1] is None), refused + (want[1] is not None)
    assert (same, refused) == (1597, 2)


def test_options_are_pinned_and_a_caller_may_override_them(tokenizer):
    conv = REASONING["reasoning_call_result_final"]
    options = {"model_identity": "You are a tool agent.", "reasoning_effort": "high", "current_date": "2026-01-02"}
    pinned = make_template(HarmonyFormat(**options))
    assert render(tokenizer, conv, template=pinned) == HarmonyFormat(**options).render_text(conv)
    assert render(tokenizer, conv, reasoning_effort="low") == HarmonyFormat(reasoning_effort="low").render_text(conv)


def test_refusals_are_the_format_s(tokenizer):
    cases = [
        Conversation("sys", [Message("user", "a"), Message("system", "b"), Message("assistant", "c")]),
        Conversation("space", [Message("user", "a"), Message("assistant", tool_calls=[ToolCall("a b", {})])]),
        Conversation("tool_space", [Message("user", "a"), Message("assistant", "b")], tools=[Tool("x\ty")]),
        Conversation("marker", [Message("user", "a"), Message("assistant", tool_calls=[ToolCall("f<|end|>", {})])]),
        Conversation("untold", [Message("user", "a"), Message("tool", "r")]),
    ]
    for conv in cases:
        with pytest.raises(ValueError) as expected:
            fmt.render(conv)
        with pytest.raises(TemplateError) as got:
            render(tokenizer, conv)
        assert str(got.value) == str(expected.value), conv.id


def test_reasoning_without_content_is_refused_only_when_the_content_is_null(tokenizer):
    """The format refuses reasoning with no answer and no call; Hugging Face messages write the missing content
    as "" (train.formats.hf), which the template renders as an empty final answer. A request with content null
    (as an OpenAI client sends it) is refused with the format's reason."""
    conv = REASONING["reasoning_empty_string"]
    turn = Message("assistant", None, reasoning_content="hm")
    refused = Conversation("no_content", [Message("user", "a"), turn])
    with pytest.raises(ValueError, match="neither an answer nor a call") as expected:
        fmt.render(refused)
    messages, _ = to_hf_messages(refused)
    assert render(tokenizer, refused).endswith("<|channel|>final<|message|><|return|>")
    messages[1]["content"] = None
    with pytest.raises(TemplateError) as got:
        tokenizer.apply_chat_template(messages, chat_template=TEMPLATE, tokenize=False)
    assert str(got.value) == str(expected.value)
    assert render(tokenizer, conv) == fmt.render_text(conv)  # reasoning "" with an answer renders as trained


def test_serving_recipe():
    spec = serving("harmony")
    assert (spec.vllm_parser, spec.reasoning_parser, spec.exact) == ("openai", "openai_gptoss", True)
    assert vllm_command("OUT", fmt) == (
        "vllm serve OUT --chat-template OUT/chat_template.jinja --reasoning-parser openai_gptoss "
        "--enable-auto-tool-choice --tool-call-parser openai"
    )


def test_the_schema_cases_are_openai_harmony_s_own_rendering(tmp_path):
    """The schemas above are not only the format's text: openai-harmony writes the same namespace."""
    h = pytest.importorskip("openai_harmony")  # tests/requirements-reference.txt
    from train.tokenizers.harmony import offline_encodings_dir

    offline_encodings_dir(tmp_path)
    encoding = h.load_harmony_encoding(h.HarmonyEncodingName.HARMONY_GPT_OSS)
    tools = [h.ToolDescription.new(t.name, t.description, t.parameters) for t in SCHEMA_TOOLS]
    developer = h.Message.from_role_and_content(h.Role.DEVELOPER, h.DeveloperContent.new().with_function_tools(tools))
    text = encoding.decode_utf8(encoding.render_conversation(h.Conversation.from_messages([developer])))
    assert functions_namespace(SCHEMA_TOOLS) in text


def test_the_export_check_accepts_the_template(tokenizer):
    """``tooltrain export`` checks the template on its probe conversation before writing anything."""
    from train.engine.export import check_chat_template

    tokenizer.chat_template = TEMPLATE
    check_chat_template(tokenizer, fmt)  # raises ExportError when the template renders the probe otherwise
