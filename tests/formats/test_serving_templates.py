"""The chat template ``tooltrain export`` writes (``train.formats.serving.chat_template``) renders what each
format trained on.

Every conversation of the parity corpus (tests/fixtures/parity), the Llama/Qwen extra cases and the Mistral
edge cases goes, for every format, through transformers' own ``apply_chat_template(tokenize=False,
tools=...)`` on a tokenizer carrying the template. The text must equal the format's ``render_text``; a
conversation the format refuses must raise the format's own reason; a generation prompt must equal
``render_prompt``; and the calls the format's own ``parse`` reads back from a rendered assistant turn must be
the conversation's calls. Mistral conversations go in with Mistral-valid call ids (``with_mistral_call_ids``,
the ids tooltrain trains with): the template cannot compute tooltrain's hashed replacement ids, and has its
own (tested below). Conversations that end before an assistant turn are, for Mistral, the generation prompt
(Mistral's is empty), so they are compared with ``render_prompt``.

Where tooltrain already matches an official template (trl's llama3_1.jinja and qwen2_5.jinja), the exported
template's text equals the official template's text too.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from jinja2.exceptions import TemplateError

from train.formats import FORMATS, get_format, mistral
from train.formats.hermes import with_hermes_text
from train.formats.hf import to_hf_messages
from train.formats.llama3 import Llama31Format
from train.formats.mistral import with_mistral_call_ids
from train.formats.serving import chat_template, serving
from train.schema import Conversation

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FILES = ("parity/corpus.jsonl", "formats/llama3_qwen2_5/extra_parity.jsonl", "formats/mistral/edge_cases.jsonl")
CONVERSATIONS = {
    conv.id: conv
    for name in FILES
    for conv in (Conversation.from_dict(json.loads(line)) for line in (FIXTURES / name).open(encoding="utf-8"))
}
# What the Mistral template cannot check: JSON Schema validity of tool parameters (it renders them).
TEMPLATE_CANNOT_REFUSE = {
    ("mistral_v3", "invalid_tool_schema"),
    ("mistral_nemo", "invalid_tool_schema"),
    ("mistral_v7", "invalid_tool_schema"),
}


@pytest.fixture(scope="module")
def tokenizer():
    """Any tokenizer will do for tokenize=False; a one-word one costs nothing to build."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")))


def is_mistral(name: str) -> bool:
    return name.startswith("mistral")


def template_input(name: str, conv: Conversation) -> Conversation:
    """The conversation as a server would pass it: for Mistral, with Mistral-valid call ids when it has them."""
    if is_mistral(name):
        try:
            return with_mistral_call_ids(conv)
        except ValueError:
            return conv  # the template must then refuse it as the format does
    return conv


def render(tokenizer, template: str, conv: Conversation, count: int | None = None, **options) -> str:
    messages, tools = to_hf_messages(conv)
    messages = messages if count is None else messages[:count]
    return tokenizer.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False, **options)


def expected(fmt, conv: Conversation) -> tuple[str | None, str | None]:
    """(text, None) as the format renders the conversation, or (None, reason) when it refuses it."""
    try:
        if is_mistral(fmt.name) and conv.messages and conv.messages[-1].role != "assistant":
            return "".join(s.text for s in fmt.render_prompt(conv, len(conv.messages))), None
        return fmt.render_text(conv), None
    except ValueError as err:
        return None, str(err)


def outcome(tokenizer, template: str, conv: Conversation, count: int | None = None, **options):
    try:
        return render(tokenizer, template, conv, count, **options), None
    except TemplateError as err:
        return None, str(err)


@pytest.mark.parametrize("name", list(FORMATS))
def test_template_renders_every_conversation_as_the_format_does(tokenizer, name):
    fmt = get_format(name)
    template = chat_template(fmt)
    counts = {"same text": 0, "same refusal": 0}
    for case, conv in CONVERSATIONS.items():
        want = expected(fmt, conv)
        got = outcome(tokenizer, template, template_input(name, conv))
        if (name, case) in TEMPLATE_CANNOT_REFUSE:
            assert want[0] is None and got[1] is None, case  # refused by the format, rendered by the template
            continue
        assert got == want, case
        counts["same text" if want[1] is None else "same refusal"] += 1
    refused = {
        "llama3_1": 7,
        "llama3_1_metatool": 1,
        "mistral_v3": 13,
        "mistral_nemo": 13,
        "mistral_v7": 9,  # v3's 13 but the ones with text and calls in one turn
        "deepseek_v3": 4,  # a second call turn, or results its template would mangle (train/formats/deepseek_v3.py)
        "deepseek_coder": 35,  # every conversation with tools: it has no tool syntax
        "toolselect_text": 48,  # only 2 parity conversations are one question, tools and one tool choice
        "harmony": 5,  # a system message after the first: harmony has one developer message
    }.get(name, 0)
    assert counts == {
        "same text": len(CONVERSATIONS) - refused - (name in ("mistral_v3", "mistral_nemo", "mistral_v7")),
        "same refusal": refused,
    }


@pytest.mark.parametrize("name", list(FORMATS))
def test_generation_prompt_is_the_format_prompt(tokenizer, name):
    fmt = get_format(name)
    template = chat_template(fmt)
    compared, mismatches = 0, []
    for case, conv in CONVERSATIONS.items():
        for index in range(1, len(conv.messages) + 1):  # transformers refuses an empty conversation itself
            if index < len(conv.messages) and conv.messages[index].role != "assistant":
                continue
            try:
                want = "".join(s.text for s in fmt.render_prompt(conv, index)), None
            except ValueError as err:
                want = None, str(err)
            got = outcome(tokenizer, template, template_input(name, conv), index, add_generation_prompt=True)
            if (name, case) in TEMPLATE_CANNOT_REFUSE:
                continue
            compared += 1
            if got != want:
                mismatches.append((case, index, want, got))
    assert mismatches == []
    assert compared > 100


def completion(fmt, rendered_turn: str) -> str:
    """What a model generates for a turn: its text up to and including the end-of-turn token."""
    end = max(rendered_turn.rfind(token) + len(token) for token in fmt.end_of_turn_texts())
    return rendered_turn[:end]


@pytest.mark.parametrize("name", list(FORMATS))
def test_calls_parsed_back_from_the_rendered_turn_are_the_conversation_calls(tokenizer, name):
    fmt = get_format(name)
    template = chat_template(fmt)
    turns, calls_checked = 0, 0
    for case, conv in CONVERSATIONS.items():
        served = template_input(name, conv)
        if expected(fmt, conv)[1] is not None or (name, case) in TEMPLATE_CANNOT_REFUSE:
            continue
        for index, message in enumerate(served.messages):
            if message.role != "assistant" or index == 0:
                continue
            prompt = render(tokenizer, template, served, index, add_generation_prompt=True)
            whole = render(tokenizer, template, served, index + 1)
            if name == "qwen3" and not whole.startswith(prompt):
                # Qwen3's template is not prefix-preserving: a prompt right after an assistant turn shows that
                # turn (then the last message) with an empty <think> block, the longer conversation does not
                assert served.messages[index - 1].role == "assistant", (case, index)
                continue
            assert whole.startswith(prompt), (case, index)
            content, calls = fmt.parse(completion(fmt, whole[len(prompt) :]))
            want = [(call.name, call.arguments) for call in message.tool_calls]
            assert [(call.name, call.arguments) for call in calls] == want, (case, index)
            if is_mistral(name):
                assert [call.id for call in calls] == [call.id for call in message.tool_calls], (case, index)
            if name == "toolselect_text":  # its parse gives a turn without an Act back whole, for the scorer
                compare = bool(message.tool_calls)
            else:
                compare = not message.tool_calls or name in ("chatml", "qwen2_5", "llama3_1_metatool", "mistral_v7")
            if compare:
                assert (content or "").strip() == (message.content or "").strip(), (case, index)
            turns, calls_checked = turns + 1, calls_checked + len(calls)
    assert (turns, calls_checked) == {
        "llama3_1": (74, 27),
        "llama3_1_metatool": (85, 39),
        "mistral_v3": (62, 29),
        "mistral_nemo": (62, 29),
        "mistral_v7": (71, 35),
        "deepseek_v3": (74, 34),
        "deepseek_coder": (18, 0),  # the text turns of the conversations without tools
        "toolselect_text": (2, 0),  # no parity call is argument-free; real rows: tests/formats/test_toolselect_text.py
        "qwen3": (84, 39),  # 2 turns follow an assistant turn: not a prefix of the longer render (see above)
        "harmony": (76, 38),  # the turns of the 5 conversations it refuses (a system message after the first)
    }.get(name, (86, 40))


@pytest.mark.parametrize("name", ["llama3_1", "qwen2_5"])
def test_official_template_gives_the_same_text(tokenizer, name):
    """tooltrain matches trl's copy of the official template; so does the exported one, turn by turn."""
    official = (resources.files("trl") / "chat_templates" / f"{name}.jinja").read_text(encoding="utf-8")
    bos = {"bos_token": "<|begin_of_text|>"} if name == "llama3_1" else {}  # the official template writes bos_token
    fmt = get_format(name)
    template = chat_template(fmt)
    # qwen2_5 writes a call turn's text less one trailing newline, which the official template keeps (hermes_text)
    as_written = with_hermes_text if name == "qwen2_5" else (lambda conv: conv)
    same = 0
    for case, conv in CONVERSATIONS.items():
        if expected(fmt, conv)[1] is not None:
            continue
        assert render(tokenizer, template, conv) == render(tokenizer, official, as_written(conv), **bos), case
        for index in range(1, len(conv.messages)):
            if conv.messages[index].role == "assistant":
                ours = render(tokenizer, template, conv, index, add_generation_prompt=True)
                theirs = render(tokenizer, official, as_written(conv), index, add_generation_prompt=True, **bos)
                assert ours == theirs, (case, index)
        same += 1
    assert same == {"llama3_1": 43, "qwen2_5": 50}[name]


def test_llama_options_are_pinned_and_a_caller_may_override_them(tokenizer):
    conv = CONVERSATIONS["single_call_with_system"]
    odd_date = 'Jan "1" \\ 2025\n☃ 😀'
    fmt = Llama31Format(tools_in_user_message=False, date_string=odd_date)
    template = chat_template(fmt)
    assert render(tokenizer, template, conv) == fmt.render_text(conv)
    assert f"Today Date: {odd_date}\n\n" in render(tokenizer, template, conv)
    overridden = render(tokenizer, template, conv, date_string="01 Jan 2025", tools_in_user_message=True)
    assert overridden == Llama31Format(date_string="01 Jan 2025").render_text(conv)


def test_chatml_default_system_prompt_is_pinned(tokenizer):
    fmt = get_format("chatml")
    conv = CONVERSATIONS["no_tools_chat"]
    system_turn = f"<|im_start|>system\n{fmt.default_system}<|im_end|>"
    assert render(tokenizer, chat_template(fmt), conv).startswith(system_turn)
    assert render(tokenizer, chat_template(fmt), conv, default_system=None).startswith("<|im_start|>user\n")


def server_shaped(conv: Conversation) -> tuple[list[dict], list[dict]]:
    """The conversation as an OpenAI client sends it: arguments as compact JSON strings, content null beside
    calls, tool definitions without description (null) or parameters and with extra keys."""
    messages, tools = to_hf_messages(conv)
    for message in messages:
        for call in message.get("tool_calls", []):
            arguments = call["function"]["arguments"]
            call["function"]["arguments"] = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
        if "tool_calls" in message and "content" not in message:
            message["content"] = None
    for tool in tools or []:
        function = tool["function"]
        if function["description"] == "":
            function["description"] = None
        if function["parameters"] == {"type": "object", "properties": {}}:
            del function["parameters"]
        function["strict"] = False
    return messages, tools


@pytest.mark.parametrize("name", list(FORMATS))
def test_requests_shaped_like_a_servers_render_like_canonical_ones(tokenizer, name):
    fmt = get_format(name)
    template = chat_template(fmt)
    rendered = 0
    for case, conv in CONVERSATIONS.items():
        served = template_input(name, conv)
        want = expected(fmt, conv)
        if want[1] is not None or (name, case) in TEMPLATE_CANNOT_REFUSE:
            continue
        messages, tools = server_shaped(served)
        got = tokenizer.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False)
        assert got == want[0], case
        rendered += 1
    # deepseek_coder renders no tool conversation; toolselect_text: 555 real rows in its own tests
    assert rendered >= {"deepseek_coder": 15, "toolselect_text": 2}.get(name, 30)


@pytest.mark.parametrize("name", ["mistral_v3", "mistral_nemo"])
def test_mistral_template_replaces_ids_mistral_cannot_take_and_links_results(tokenizer, name, monkeypatch):
    """tooltrain replaces a call id that is not 9 letters or digits by a hash of the conversation id and the
    call's position; the template, which cannot hash, numbers the call (callNNNNN). With tooltrain's id
    function swapped for that numbering, every conversation renders the same with its original ids: results
    follow the latest call with their id, a result without an id answers the earliest pending call of its
    tool, an unknown id is refused."""
    monkeypatch.setattr(mistral, "mistral_call_id", lambda conversation_id, position: f"call{position:05d}")
    fmt = get_format(name)
    template = chat_template(fmt)
    replaced = 0
    for case, conv in CONVERSATIONS.items():
        if (name, case) in TEMPLATE_CANNOT_REFUSE:
            continue
        assert outcome(tokenizer, template, conv) == expected(fmt, conv), case
        ids = [call.id for message in conv.messages for call in message.tool_calls]
        replaced += expected(fmt, conv)[1] is None and any(not (i and mistral.CALL_ID.match(i)) for i in ids)
    assert replaced >= 15


def result_conversation(result: str) -> Conversation:
    conv = CONVERSATIONS["single_call_json_result"].to_dict()
    conv["messages"][1]["tool_calls"][0]["id"] = "abcdefghi"
    conv["messages"][2].update(tool_call_id="abcdefghi", content=result)
    return Conversation.from_dict(conv)


@pytest.mark.parametrize("name", ["mistral_v3", "llama3_1_metatool"])
@pytest.mark.parametrize(
    "result",
    [
        '{"temperature": 18, "sky": ["cloudy", "grey"], "wind": {"speed": 3, "gust": null}, "ok": true}',
        '{\n  "temperature": 18,\n  "sky": [\n    "cloudy",\n    "grey"\n  ],\n  "quote": "a \\" b \\\\"\n}',
        '{"temperature":18,"sky":["cloudy","grey"],"note":"x, y: z"}',
        '[{"a": [], "b": {}}, -2.5e-07, "\\\\"]',
        "42",
        "true",
        '"quoted"',
        "plain text",
        "",
        "  ",
        '{"a": 1,}',
        "[1 2]",
        "1,2",
        '{"a" 1}',
        "tru",
        '{"a": "x"}{"b": 2}',
        '{"a": "raw\nnewline"}',
        "[1, 2",
        json.dumps({"rows": [{"id": f"r{i}", "tags": ["a", "b"], "ok": i % 2 == 0} for i in range(300)]}, indent=2),
        "[" + "1 2, " * 600 + "3]",
    ],
)
def test_json_tool_results_are_read_as_the_format_reads_them(tokenizer, name, result):
    """Mistral and Meta-Tool parse JSON tool results at training time; the template re-spaces JSON the way
    json.dumps writes it and quotes everything else, as the format does."""
    fmt = get_format(name)
    conv = result_conversation(result)
    assert render(tokenizer, chat_template(fmt), conv) == fmt.render_text(conv)


@pytest.mark.parametrize("name", ["mistral_v3", "llama3_1_metatool"])
def test_numbers_in_json_tool_results_are_kept_as_written(tokenizer, name):
    """The one documented difference: a template has no JSON parser to re-spell 1.50 or 1e5 as Python does."""
    fmt = get_format(name)
    conv = result_conversation('{"price": 1.50, "count": 1e2}')
    assert '"price": 1.50, "count": 1e2' in render(tokenizer, chat_template(fmt), conv)
    assert '"price": 1.5, "count": 100.0' in fmt.render_text(conv)


def test_every_format_has_a_template_and_a_parser():
    specs = {name: serving(name) for name in FORMATS}  # each format's own serving attribute
    assert all(spec.templates for spec in specs.values())
    assert {name: (spec.vllm_parser, spec.exact) for name, spec in specs.items()} == {
        "llama3_1": ("llama3_json", True),
        "llama3_1_metatool": ("llama3_json", False),
        "llama4": ("llama4_json", False),  # parallel calls side by side: not known to be split by it
        "qwen2_5": ("hermes", True),
        "mistral_v3": ("mistral", True),
        "mistral_nemo": ("mistral", True),
        "mistral_v7": ("mistral", True),
        "chatml": ("hermes", True),
        "deepseek_v3": ("deepseek_v3", True),
        "deepseek_coder": ("", True),  # no tool syntax: no parser, plain chat
        "toolselect_text": ("", False),  # plain text, read by tooltrain's parse (tests/formats/test_toolselect_text.py)
        "qwen3": ("hermes", True),  # with vLLM's qwen3 reasoning parser (tests/formats/test_qwen3.py)
        "harmony": ("openai", True),  # with vLLM's openai_gptoss reasoning parser (names from vLLM, not run)
    }
