"""A Hermes-family call turn that comes back from vLLM as history renders as it was trained (issue #28, item 7).

vLLM's hermes tool parser returns as ``content`` everything before the first ``<tool_call>``, verbatim: with a
text-and-call turn that is the text *and* the newline the format writes before a call. An OpenAI-style client
sends that message back as history. The formats (and so their exported chat templates) write a call turn's
content less one trailing newline, so ``text\\n`` renders as ``text`` did: ``text\\n<tool_call>``.

``vllm_hermes`` below is vLLM's ``Hermes2ProToolParser.extract_tool_calls`` (vllm/tool_parsers/hermes_tool_parser.py)
and ``vllm_qwen3_reasoning`` its ``Qwen3ReasoningParser.extract_reasoning`` (vllm/reasoning/), non-streaming, on
the text the model generated (vLLM keeps special tokens when tools are given, so the text is the rendering's).
For every call turn that a later message follows (a call turn sent back as history) of the parity corpus, the
Llama/Qwen extra cases, Qwen3's reasoning cases and the cases below, the parsed turn goes back into the
conversation, which is rendered through the exported template and through the format: both must equal the
trained rendering of the original conversation.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from train.formats import get_format
from train.formats.hf import to_hf_messages
from train.formats.serving import chat_template
from train.schema import Conversation, Message, ToolCall

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FILES = ("parity/corpus.jsonl", "formats/llama3_qwen2_5/extra_parity.jsonl", "formats/qwen3/reasoning_parity.jsonl")
TOOLS = [{"type": "function", "function": {"name": "lookup", "description": "Look a word up", "parameters": {}}}]


def call(word: str, call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": {"word": word}}}


def text_and_call(case: str, text: str, calls: int = 1) -> Conversation:
    """A call turn with ``text`` before its calls, its results, then a further user turn and answer."""
    ids = [f"c{n}" for n in range(calls)]
    return Conversation.from_dict(
        {
            "id": case,
            "tools": TOOLS,
            "messages": [
                {"role": "user", "content": "Look up cat."},
                {"role": "assistant", "content": text, "tool_calls": [call(f"w{n}", i) for n, i in enumerate(ids)]},
                *({"role": "tool", "tool_call_id": i, "name": "lookup", "content": "a word"} for i in ids),
                {"role": "assistant", "content": "Done."},
                {"role": "user", "content": "And dog?"},
                {"role": "assistant", "content": "Checking.", "tool_calls": [call("dog", "d1")]},
                {"role": "tool", "tool_call_id": "d1", "name": "lookup", "content": "a word"},
                {"role": "assistant", "content": "Also a word."},
            ],
        }
    )


# Text a call turn can carry before its calls, the trailing newline cases first (the comment in
# train/formats/hermes.py, hermes_text, says how each is written).
EDGE_CASES = [
    text_and_call("plain_text", "Let me look."),
    text_and_call("one_newline", "Let me look.\n"),
    text_and_call("two_newlines", "Let me look.\n\n"),
    text_and_call("only_newline", "\n"),
    text_and_call("crlf", "Let me look.\r\n"),
    text_and_call("trailing_spaces", "Let me look.  "),
    text_and_call("leading_newlines", "\n\nLet me look."),
    text_and_call("parallel_with_newline", "Both:\n", calls=2),
]
CORPUS = [
    conv
    for name in FILES
    for conv in (Conversation.from_dict(json.loads(line)) for line in (FIXTURES / name).open(encoding="utf-8"))
] + EDGE_CASES
FORMATS = [("chatml", {}), ("qwen2_5", {}), ("qwen3", {"mode": "instruct_2507"})]


# ------------------------------------------------------------------------- vLLM's parsers, emulated


def vllm_hermes(text: str) -> tuple[str | None, list[dict]]:
    """vLLM's hermes parser, non-streaming: (content, OpenAI tool calls). The content is the text before the
    first ``<tool_call>``, verbatim (None when empty); arguments come back as ``json.dumps`` of the parsed object."""
    if "<tool_call>" not in text:
        return text, []
    blocks = re.findall(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", text, re.DOTALL)
    parsed = [json.loads(closed or open_) for closed, open_ in blocks]
    calls = [
        {
            "id": f"call{n}",
            "type": "function",
            "function": {"name": p["name"], "arguments": json.dumps(p["arguments"], ensure_ascii=False)},
        }
        for n, p in enumerate(parsed)
    ]
    content = text[: text.find("<tool_call>")]
    return (content if content else None), calls


def vllm_qwen3_reasoning(text: str) -> tuple[str | None, str | None]:
    """vLLM's qwen3 reasoning parser, non-streaming, thinking enabled: (reasoning, content)."""
    before, tag, after = text.partition("<think>")
    text = after if tag else before
    if "</think>" in text:
        reasoning, _, content = text.partition("</think>")
        return reasoning, content or None
    return text, None  # (its <tool_call><function=...> branch is Qwen3.5's call syntax, never written here)


# ------------------------------------------------------------------------- the round trip


def generated_text(fmt, conv: Conversation, index: int) -> str:
    """What the model generated for assistant turn ``index`` when it was the last turn: its trained text, less
    the end-of-turn token (a server stops there) and the header."""
    upto = dataclasses.replace(conv, messages=conv.messages[: index + 1])
    return "".join(s.text for s in fmt.render(upto) if s.message == index and s.part not in ("header", "end"))


def served_turn(fmt, text: str) -> dict:
    """The assistant message an OpenAI-style client gets back from vLLM, as it sends it back as history."""
    reasoning = None
    if fmt.name == "qwen3" and fmt.thinks:  # served with --reasoning-parser qwen3
        reasoning, text = vllm_qwen3_reasoning(text)
    content, calls = vllm_hermes(text or "")
    message = {"role": "assistant", "content": content, "tool_calls": calls}
    return message if reasoning is None else {**message, "reasoning_content": reasoning}


def as_message(served: dict) -> Message:
    calls = [
        ToolCall(c["function"]["name"], json.loads(c["function"]["arguments"]), c["id"]) for c in served["tool_calls"]
    ]
    return Message("assistant", served["content"], calls, reasoning_content=served.get("reasoning_content"))


def exported(tokenizer, fmt, conv: Conversation) -> str:
    """``conv`` rendered through the format's exported chat template."""
    messages, tools = to_hf_messages(conv)
    return tokenizer.apply_chat_template(messages, tools=tools, chat_template=chat_template(fmt), tokenize=False)


def history_turns(conv: Conversation) -> list[int]:
    """The call turns a later message follows: the ones a client sends back as history."""
    last = len(conv.messages) - 1
    return [i for i, m in enumerate(conv.messages) if m.role == "assistant" and m.tool_calls and i < last]


@pytest.fixture(scope="module")
def tokenizer():
    """Any tokenizer will do for tokenize=False; a one-word one costs nothing to build."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")))


def round_trip(
    tokenizer, name: str, options: dict, client=lambda served: served
) -> tuple[int, list[tuple[str, int, str]]]:
    """(call turns checked, [(conversation, turn, "template" | "format")] where history renders otherwise); ``client``
    is what the client does to the served message before sending it back."""
    fmt = get_format(name, options)
    template = chat_template(fmt)
    checked, differ = 0, []
    for conv in CORPUS:
        try:
            trained = fmt.render_text(conv)
        except ValueError:
            continue  # a conversation this format refuses
        for index in history_turns(conv):
            checked += 1
            served = client(served_turn(fmt, generated_text(fmt, conv, index)))
            messages, tools = to_hf_messages(conv)
            messages[index] = served
            text = tokenizer.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False)
            if text != trained:
                differ.append((conv.id, index, "template"))
            replaced = [as_message(served) if i == index else m for i, m in enumerate(conv.messages)]
            if fmt.render_text(dataclasses.replace(conv, messages=replaced)) != trained:
                differ.append((conv.id, index, "format"))
    return checked, differ


@pytest.mark.parametrize(("name", "options"), FORMATS, ids=lambda value: str(value or ""))
def test_a_call_turn_served_by_vllm_renders_as_trained_in_history(tokenizer, name, options):
    checked, differ = round_trip(tokenizer, name, options)
    assert checked == 35  # 19 in the fixtures' conversations, 16 in the cases above
    assert differ == []


def without_think_newlines(served: dict) -> dict:
    """What is left for a Qwen3 thinking-mode client to do, and this fix does not: vLLM's qwen3 reasoning parser
    returns the newlines around the <think> block (reasoning ``"\\n\\n"`` for an empty block, content starting
    with the ``"\\n\\n"`` after ``</think>``), and Qwen3's history rule (its official template's, which qwen3
    follows) writes a turn with any reasoning_content as a <think> block, and a turn before the last query as its
    content verbatim."""
    reasoning = (served.get("reasoning_content") or "").strip("\n") or None
    return {**served, "content": (served["content"] or "").removeprefix("\n\n") or None, "reasoning_content": reasoning}


def test_qwen3_thinking_history_renders_as_trained_once_the_think_newlines_are_gone(tokenizer):
    """The trailing newline is the format's to drop; the <think> newlines are not (without_think_newlines)."""
    checked, differ = round_trip(tokenizer, "qwen3", {}, without_think_newlines)
    # leading_newlines' text trains as "Let me look." in a <think> turn (the template's lstrip) and comes back so
    assert checked == 50 and {(case, index) for case, index, _ in differ} == {("leading_newlines", 1)}
    _, differ = round_trip(tokenizer, "qwen3", {})
    assert len({(case, index) for case, index, _ in differ}) == 48  # of 50: the gap left to a thinking-mode client


# ------------------------------------------------------------------------- the rule, written out


@pytest.mark.parametrize("name", ["chatml", "qwen2_5", "qwen3"])
@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("Let me look.", "Let me look.\n<tool_call>"),
        ("Let me look.\n", "Let me look.\n<tool_call>"),  # the parser's newline, or the author's: one is dropped
        ("Let me look.\n\n", "Let me look.\n\n<tool_call>"),
        ("Let me look.\r\n", "Let me look.\r\n<tool_call>"),
        ("Let me look.  ", "Let me look.  \n<tool_call>"),  # only a newline is the parser's
    ],
)
def test_a_call_turn_writes_its_text_less_one_trailing_newline(tokenizer, name, text, written):
    fmt = get_format(name, {"mode": "instruct_2507"}) if name == "qwen3" else get_format(name)
    conv = text_and_call("case", text)
    rendered = fmt.render_text(conv)
    assert "<|im_start|>assistant\n" + written in rendered
    assert exported(tokenizer, fmt, conv) == rendered


@pytest.mark.parametrize("name", ["chatml", "qwen2_5", "qwen3"])
def test_text_without_calls_keeps_its_trailing_newline(tokenizer, name):
    fmt = get_format(name, {"mode": "instruct_2507"}) if name == "qwen3" else get_format(name)
    conv = Conversation.from_dict(
        {"id": "t", "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello.\n"}]}
    )
    rendered = fmt.render_text(conv)
    assert "<|im_start|>assistant\nHello.\n<|im_end|>" in rendered
    assert exported(tokenizer, fmt, conv) == rendered
