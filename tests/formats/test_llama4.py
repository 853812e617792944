"""llama4 against llama-models' reference Llama 4 ChatFormat (``encode_message`` / ``encode_dialog_prompt``, the
json tool format), on llama-models' own tokenizer.

The reference leaves tool definitions to the caller's system prompt: it is handed the system text the format
writes (``system_with_tools``), so the tool block's wording is the format's own, and everything else (headers,
``\\n\\n``, pieces encoded one by one, call JSON, ``<|eom|>`` after call turns and tool results) is the
reference's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import pytest
from family_corpora import CORPUS, real_conversations

from train.formats import get_format
from train.formats.llama4 import Llama4Format, Llama4FormatError, Llama4ParseError, system_with_tools
from train.formats.tokenize import IGNORE_INDEX, tokenize, tokenize_prompt
from train.schema import Conversation, Message, Tool, ToolCall
from train.tokenizers import BUILDERS, load_tokenizer

fmt = Llama4Format()


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("llama4")


@contextmanager
def _without_torchvision_for_images() -> Iterator[None]:
    """llama-models' Llama 4 ChatFormat imports torchvision for its image transforms at module level; text never
    reaches them. Where torchvision is not installed, empty stand-in modules let the text path import; they are
    removed again at once, so nothing else in the process (transformers checks for torchvision) ever sees them."""
    import importlib.util
    import sys
    import types

    if importlib.util.find_spec("torchvision") is not None:
        yield
        return
    transforms = types.ModuleType("torchvision.transforms")
    transforms.functional = types.ModuleType("torchvision.transforms.functional")
    root = types.ModuleType("torchvision")
    root.transforms = transforms
    stand_ins = {
        "torchvision": root,
        "torchvision.transforms": transforms,
        "torchvision.transforms.functional": transforms.functional,
    }
    sys.modules.update(stand_ins)
    try:
        yield
    finally:
        for name in stand_ins:
            sys.modules.pop(name, None)


@cache
def reference():
    with _without_torchvision_for_images():
        from llama_models.llama4.chat_format import ChatFormat
        from llama_models.llama4.tokenizer import Tokenizer

    return ChatFormat(Tokenizer.get_instance())


def raw_messages(conv: Conversation):
    from llama_models.datatypes import RawMessage
    from llama_models.datatypes import ToolCall as RawToolCall

    out = []
    for position, (_, message) in enumerate(system_with_tools(conv)):
        calls = [raw_call(RawToolCall, f"c{position}_{i}", call) for i, call in enumerate(message.tool_calls)]
        out.append(RawMessage(role=message.role, content=message.content or "", tool_calls=calls))
    return out


DEEP_ARGUMENTS: set[str] = set()  # calls whose arguments the reference's ToolCall type cannot hold (below)


def raw_call(raw_tool_call, call_id: str, call: ToolCall):
    """The reference's ToolCall. Its ``arguments`` type allows values two levels deep; deeper ones (a list of
    objects) fail its validation, so those calls are built unvalidated: the encoder only json.dumps them."""
    from pydantic import ValidationError

    try:
        return raw_tool_call(call_id=call_id, tool_name=call.name, arguments=call.arguments)
    except ValidationError:
        DEEP_ARGUMENTS.add(call.name)
        return raw_tool_call.model_construct(call_id=call_id, tool_name=call.name, arguments=call.arguments)


def reference_ids(conv: Conversation) -> list[int]:
    """``encode_dialog_prompt`` without its trailing assistant header: BOS, then every message."""
    from llama_models.datatypes import ToolPromptFormat

    chat = reference()
    ids = [chat.tokenizer.special_tokens["<|begin_of_text|>"]]
    for message in raw_messages(conv):
        ids += chat.encode_message(message, ToolPromptFormat.json)[0]
    return ids


def reference_prompt(conv: Conversation, index: int) -> list[int]:
    from llama_models.datatypes import ToolPromptFormat

    prefix = Conversation(conv.id, conv.messages[:index], tools=conv.tools)
    return reference().encode_dialog_prompt(raw_messages(prefix), ToolPromptFormat.json).tokens


# ---- parity ----------------------------------------------------------------------------------


@pytest.mark.parametrize("conv", CORPUS, ids=[c.id for c in CORPUS])
def test_corpus_ids_equal_the_reference_chat_format(tok, conv):
    assert tokenize(fmt, conv, tok).input_ids == reference_ids(conv)


@pytest.mark.parametrize("conv", CORPUS, ids=[c.id for c in CORPUS])
def test_generation_prompts_equal_encode_dialog_prompt(tok, conv):
    prompts = 0
    for index, message in enumerate(conv.messages):
        if message.role == "assistant" and index > 0:
            assert tokenize_prompt(fmt, conv, index, tok) == reference_prompt(conv, index)
            prompts += 1
    assert prompts >= 1


@pytest.mark.shared_data
def test_real_conversations_equal_the_reference_chat_format(shared_data, tok):
    real = real_conversations(shared_data)
    mismatched = [conv.id for conv in real if tokenize(fmt, conv, tok).input_ids != reference_ids(conv)]
    assert (len(real), mismatched) == (60, [])


# ---- layout, labels, refusals -----------------------------------------------------------------


def test_text_and_parallel_calls_layout():
    conv = Conversation(
        id="l4",
        tools=[Tool(name="f")],
        messages=[
            Message(role="user", content="Hi"),
            Message(role="assistant", content="Both.", tool_calls=[ToolCall("f", {"a": "é"}), ToolCall("f", {})]),
            Message(role="tool", content="r1"),
            Message(role="tool", content="r2"),
            Message(role="assistant", content="Done."),
        ],
    )
    text = fmt.render_text(conv)
    assert text.startswith("<|begin_of_text|><|header_start|>system<|header_end|>\n\nYou have access")
    assert text.endswith(
        "<|header_start|>user<|header_end|>\n\nHi<|eot|>"
        '<|header_start|>assistant<|header_end|>\n\nBoth.{"type": "function", "name": "f", "parameters": '
        '{"a": "\\u00e9"}}{"type": "function", "name": "f", "parameters": {}}<|eom|>'
        "<|header_start|>ipython<|header_end|>\n\nr1<|eom|><|header_start|>ipython<|header_end|>\n\nr2<|eom|>"
        "<|header_start|>assistant<|header_end|>\n\nDone.<|eot|>"
    )


def test_trained_tokens_are_the_assistant_turns(tok):
    conv = next(c for c in CORPUS if c.id == "parallel_calls")
    tokenized = tokenize(fmt, conv, tok)
    trained = tok.decode([label for label in tokenized.labels if label != IGNORE_INDEX])
    assert "<|header_start|>" not in trained and "ipython" not in trained
    assert trained.count("<|eom|>") + trained.count("<|eot|>") == sum(m.role == "assistant" for m in conv.messages)


def test_refusals_name_the_message_and_reason():
    builtin = Conversation(
        id="b",
        messages=[
            Message(role="user", content="q"),
            Message(role="assistant", tool_calls=[ToolCall("brave_search", {"query": "x"})]),
        ],
    )
    with pytest.raises(Llama4FormatError, match=r"messages\[1\]: 'brave_search' is a Llama 4 built-in tool"):
        fmt.render(builtin)
    answer = Message(role="assistant", content="a", reasoning_content="t")
    reasoning = Conversation(id="r", messages=[Message(role="user", content="q"), answer])
    with pytest.raises(ValueError, match=r"messages\[1\] carries reasoning_content, which chat format 'llama4' has no"):
        fmt.render(reasoning)


def test_registry_and_tokenizer(tok):
    assert isinstance(get_format("llama4"), Llama4Format) and Llama4Format.default_tokenizer in BUILDERS
    assert len(tok) == 202048
    assert tok.convert_tokens_to_ids(["<|begin_of_text|>", "<|header_start|>", "<|eom|>", "<|eot|>"]) == [
        200000,
        200005,
        200007,
        200008,
    ]


# ---- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize("conv", CORPUS, ids=[c.id for c in CORPUS])
def test_render_then_parse_round_trips(conv):
    segments = fmt.render(conv)
    for index, message in enumerate(conv.messages):
        if message.role != "assistant":
            continue
        turn = "".join(s.text for s in segments if s.assistant and s.message == index)
        content, calls = fmt.parse(turn)
        assert content == ((message.content or "").strip() or None)  # parse strips the turn's outer whitespace
        assert [(c.name, c.arguments) for c in calls] == [(c.name, c.arguments) for c in message.tool_calls]


def test_parse_plain_text_and_malformed_calls():
    assert fmt.parse("Just text.<|eot|>") == ("Just text.", [])
    assert fmt.parse('Look: {"a": 1}') == ('Look: {"a": 1}', [])
    with pytest.raises(Llama4ParseError, match="not a JSON call object"):
        fmt.parse('{"type": "function", "name": "f", "parameters": {"a": }<|eom|>')


def test_the_reference_import_leaves_no_torchvision_stand_in_behind():
    # a stand-in left in sys.modules (no __spec__) breaks every later transformers import in the same process
    import importlib.util
    import sys

    reference()
    if importlib.util.find_spec("torchvision") is None:
        assert not any(name.split(".")[0] == "torchvision" for name in sys.modules)
