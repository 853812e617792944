"""mistral_v7, token for token against mistral-common 1.13's v7 finetuning encoder.

The reference: ``MistralTokenizer.from_file(<v7 file>, mode=ValidationMode.finetuning)
.encode_chat_completion(ChatCompletionRequest(...))``, fed the conversation with the (Mistral-valid)
call ids our format writes. Two vocabularies: the SentencePiece v7 model mistral-common ships, and a
tekken v7 file built here from the shipped tekken vocabulary with v7's special-token table (no real
tekken v7 file ships offline; the layout of its specials is that of Mistral Small 2501's).
"""

from __future__ import annotations

import json

import pytest
from family_corpora import CORPUS, MISTRAL_EDGES, real_conversations

from train.formats import get_format
from train.formats.mistral import MistralFormatError, mistral_call_id, with_mistral_call_ids
from train.formats.mistral_v7 import MistralV7Format
from train.formats.tokenize import IGNORE_INDEX, tokenize
from train.schema import Conversation, Message, ToolCall
from train.tokenizers import BUILDERS, load_tokenizer
from train.tokenizers.mistral import TEKKEN_FILE, V7_FILE, build_mistral_v7, mistral_data_file

CASES = {conv.id: conv for conv in CORPUS + MISTRAL_EDGES}
fmt = MistralV7Format()


def tekken_v7_file(folder):
    """tekken_240718.json relabelled v7, with the special-token table v7 tekken files carry."""
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    data = json.loads(mistral_data_file(TEKKEN_FILE).read_text(encoding="utf-8"))
    data["config"]["version"] = "v7"
    data["special_tokens"] = [
        {"rank": t["rank"], "token_str": str(t["token_str"].value), "is_control": True}
        for t in Tekkenizer.DEPRECATED_SPECIAL_TOKENS
    ]
    path = folder / "tekken.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def vocabularies(tmp_path_factory):
    """name -> (our tokenizer, mistral-common's reference)."""
    from mistral_common.protocol.instruct.validator import ValidationMode
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    tekken = tekken_v7_file(tmp_path_factory.mktemp("tekken_v7"))
    spm = mistral_data_file(V7_FILE)
    return {
        "spm": (build_mistral_v7(), MistralTokenizer.from_file(str(spm), mode=ValidationMode.finetuning)),
        "tekken": (
            load_tokenizer(str(tekken)),
            MistralTokenizer.from_file(str(tekken), mode=ValidationMode.finetuning),
        ),
    }


def reference_conversation(conv: Conversation) -> Conversation:
    try:
        return with_mistral_call_ids(conv)
    except MistralFormatError:
        out = Conversation.from_dict(conv.to_dict())
        for message in out.messages:
            for call in message.tool_calls:
                call.id = mistral_call_id(call.id or "none", 0)
            if message.role == "tool":
                message.tool_call_id = mistral_call_id(message.tool_call_id or "none", 0)
        return out


def reference_ids(reference, conv: Conversation) -> list[int] | None:
    """mistral-common's ids, or None where it refuses the conversation."""
    from mistral_common.protocol.instruct.request import ChatCompletionRequest

    data = reference_conversation(conv).to_dict()
    try:
        request = ChatCompletionRequest(tools=data["tools"] or None, messages=data["messages"])
        return reference.encode_chat_completion(request).tokens
    except Exception:  # noqa: BLE001 - any refusal of the reference: its exceptions, pydantic's, ValueError
        return None


def our_ids(tok, conv: Conversation) -> list[int] | None:
    try:
        return tokenize(fmt, conv, tok).input_ids
    except MistralFormatError:
        return None


# ---- parity ----------------------------------------------------------------------------------


@pytest.mark.parametrize("vocabulary", ["spm", "tekken"])
def test_fixture_conversations_equal_mistral_common_v7(vocabularies, vocabulary):
    """Every corpus and edge case: the same ids, or refused by both. v7 writes text + call
    (``text_and_call``), which v3 refused; the edge cases v3 refused stay refused but that one kind."""
    tok, reference = vocabularies[vocabulary]
    outcomes = {case: (our_ids(tok, conv), reference_ids(reference, conv)) for case, conv in CASES.items()}
    assert [case for case, (ours, ref) in outcomes.items() if ours != ref] == []
    matched = [case for case, (ours, _) in outcomes.items() if ours is not None]
    assert "text_and_call" in matched
    assert len([c for c in CORPUS if c.id in matched]) == len(CORPUS) == 16


@pytest.mark.shared_data
@pytest.mark.parametrize("vocabulary", ["spm", "tekken"])
def test_real_conversations_equal_mistral_common_v7(shared_data, vocabularies, vocabulary):
    tok, reference = vocabularies[vocabulary]
    real = real_conversations(shared_data)
    outcomes = [(conv.id, our_ids(tok, conv), reference_ids(reference, conv)) for conv in real]
    assert [case for case, ours, ref in outcomes if ours != ref] == []
    matched = [case for case, ours, _ in outcomes if ours is not None]
    # BFCL names hold dots (math.factorial), which Mistral's validator refuses: both sides refuse them.
    assert (len(real), len(matched)) == (60, 42)


# ---- layout and labels -----------------------------------------------------------------------


def test_system_text_and_call_and_tool_result_layout():
    conv = Conversation.from_dict(
        {
            "id": "v7",
            "tools": [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {}}}],
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
                {
                    "role": "assistant",
                    "content": "Checking. ",
                    "tool_calls": [{"id": "abcdefghi", "function": {"name": "f", "arguments": {"a": 1}}}],
                },
                {"role": "tool", "tool_call_id": "abcdefghi", "content": '{"r":2}'},
                {"role": "assistant", "content": "Done."},
            ],
        }
    )
    assert fmt.render_text(conv) == (
        "<s>[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT]"
        '[AVAILABLE_TOOLS][{"type": "function", "function": {"name": "f", "description": "d", "parameters": {}}}]'
        "[/AVAILABLE_TOOLS][INST]Hi[/INST]"
        'Checking.[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "abcdefghi"}]</s>'
        '[TOOL_RESULTS]abcdefghi[TOOL_CONTENT]{"r":2}[/TOOL_RESULTS]Done.</s>'
    )


def test_trained_tokens_are_the_assistant_turns(vocabularies):
    tok, _ = vocabularies["spm"]
    tokenized = tokenize(fmt, CASES["text_and_call"], tok)
    trained = [label for label in tokenized.labels if label != IGNORE_INDEX]
    text = tok.decode(trained)
    assert text.count("</s>") == sum(m.role == "assistant" for m in CASES["text_and_call"].messages)
    assert "[TOOL_CALLS]" in text and "[TOOL_RESULTS]" not in text and "[INST]" not in text


def test_reasoning_is_refused_with_the_reason():
    conv = Conversation(
        id="r",
        messages=[Message(role="user", content="q"), Message(role="assistant", content="a", reasoning_content="hm")],
    )
    with pytest.raises(ValueError, match=r"messages\[1\] carries reasoning_content, which chat format 'mistral_v7'"):
        MistralV7Format().render(conv)


def test_registry_and_tokenizer_names():
    assert isinstance(get_format("mistral_v7"), MistralV7Format)
    assert MistralV7Format.default_tokenizer in BUILDERS


def test_a_tekken_file_is_told_from_other_json(tmp_path):
    from train.tokenizers.mistral import is_tekken_file

    other = tmp_path / "config.json"
    other.write_text("{}", encoding="utf-8")
    assert is_tekken_file(tekken_v7_file(tmp_path)) and not is_tekken_file(other)


# slow tier: builds a 131k tokenizer from the file; the test above has the file told from other JSON, and
# test_tokenizers_mistral has the tekken build itself
@pytest.mark.slow
def test_tekken_file_is_loaded_from_a_path_and_other_json_is_not(tmp_path):
    path = tekken_v7_file(tmp_path)
    tok = load_tokenizer(str(path))
    assert tok.convert_tokens_to_ids(["[SYSTEM_PROMPT]", "[TOOL_CONTENT]", "[TOOL_CALLS]"]) == [17, 19, 9]
    other = tmp_path / "config.json"
    other.write_text("{}", encoding="utf-8")
    with pytest.raises(OSError):  # not tekken: handed to transformers, which finds no tokenizer there
        load_tokenizer(str(other))


# ---- parsing ---------------------------------------------------------------------------------


def test_parse_text_and_calls():
    content, calls = fmt.parse('Checking.[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "abcdefghi"}]</s>')
    assert content == "Checking." and calls == [ToolCall("f", {"a": 1}, "abcdefghi")]
    assert fmt.parse("Just text.</s>") == ("Just text.", [])


@pytest.mark.parametrize("case", sorted(CASES))
def test_render_then_parse_round_trips_each_assistant_turn(case):
    conv = CASES[case]
    try:
        segments = fmt.render(conv)
    except MistralFormatError:
        return
    ids_conv = with_mistral_call_ids(conv)
    turns, current = [], []
    for seg in segments:
        if seg.assistant:
            current.append(seg.text)
            if seg.part == "end":
                turns.append("".join(current))
                current = []
    expected = []
    for message_group in _assistant_groups(ids_conv):
        text = "\n\n".join(m.content for m in message_group if m.content).rstrip(" ") or None
        expected.append((text, [c for m in message_group for c in m.tool_calls]))
    assert [fmt.parse(turn) for turn in turns] == expected


def _assistant_groups(conv: Conversation) -> list[list[Message]]:
    groups: list[list[Message]] = []
    previous = None
    for message in conv.messages:
        if message.role == "assistant":
            if previous == "assistant":
                groups[-1].append(message)
            else:
                groups.append([message])
        previous = message.role
    return groups
