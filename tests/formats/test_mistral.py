"""Mistral v0.3 and Nemo formats, token for token against mistral-common 1.13's finetuning encoder.

The reference: ``MistralTokenizer.from_file(FILE, mode=ValidationMode.finetuning)
.encode_chat_completion(ChatCompletionRequest(tools=..., messages=...))``, fed the same
conversation with the same (Mistral-valid) call ids our format uses.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
from session_cache import shared_tokenizer

from train.formats import MaskPolicy, get_format
from train.formats.mistral import (
    CALL_ID,
    JOIN,
    TOOL_CALLS,
    MistralFormatError,
    MistralNemoFormat,
    MistralParseError,
    MistralV3Format,
    call_segments,
    mistral_call_id,
    mistral_turns,
    render_mistral,
    to_json,
    with_mistral_call_ids,
)
from train.formats.tokenize import IGNORE_INDEX, tokenize
from train.schema import Conversation, ToolCall
from train.tokenizers import BUILDERS
from train.tokenizers.mistral import TEKKEN_FILE, V3_FILE, mistral_data_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def load(path: Path) -> list[Conversation]:
    return [Conversation.from_dict(json.loads(line)) for line in path.open(encoding="utf-8")]


CORPUS = load(FIXTURES / "parity" / "corpus.jsonl")
EDGES = load(FIXTURES / "formats" / "mistral" / "edge_cases.jsonl")
CASES = {conv.id: conv for conv in CORPUS + EDGES}
# The one corpus case Mistral cannot write, and the reason both sides give.
CORPUS_REJECTED = {"text_and_call": "both text and tool calls"}
FAMILIES = {
    "v3": (MistralV3Format, "mistral_v3", V3_FILE),
    "nemo": (MistralNemoFormat, "mistral_tekken", TEKKEN_FILE),
}


def tokenizer(family: str):
    """This session's build of the family's tokenizer (the worker's shared object: test_tokenizers_mistral checks
    that the cached tokenizer encodes as the freshly built one does)."""
    return shared_tokenizer(FAMILIES[family][1])


@cache
def reference(family: str):
    from mistral_common.protocol.instruct.validator import ValidationMode
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    return MistralTokenizer.from_file(str(mistral_data_file(FAMILIES[family][2])), mode=ValidationMode.finetuning)


def reference_conversation(conv: Conversation) -> Conversation:
    """The conversation our format writes, ids included; for ones it refuses, any valid ids."""
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


def reference_request(conv: Conversation):
    from mistral_common.protocol.instruct.request import ChatCompletionRequest

    data = reference_conversation(conv).to_dict()
    return ChatCompletionRequest(tools=data["tools"] or None, messages=data["messages"])


def reference_ids(family: str, conv: Conversation) -> list[int]:
    return reference(family).encode_chat_completion(reference_request(conv)).tokens


def reference_assistant_turns(family: str, conv: Conversation) -> list[list[int]]:
    """Each normalized assistant turn as mistral-common's own assistant encoder writes it."""
    from mistral_common.protocol.instruct.messages import AssistantMessage
    from mistral_common.protocol.instruct.normalize import InstructRequestNormalizer

    request = InstructRequestNormalizer.normalizer().from_chat_completion_request(reference_request(conv))
    encoder = reference(family).instruct_tokenizer
    return [
        encoder.encode_assistant_message(message, is_before_last_user_message=False)
        for message in request.messages
        if isinstance(message, AssistantMessage)
    ]


def fmt(family: str):
    return FAMILIES[family][0]()


ACCEPTED = [c.id for c in CORPUS if c.id not in CORPUS_REJECTED]
EDGE_MATCH = [c.id for c in EDGES if c.meta["expect"] == "match"]
EDGE_REJECT = [c.id for c in EDGES if c.meta["expect"] == "reject"]


# ---- parity ----------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("case", ACCEPTED + EDGE_MATCH)
def test_input_ids_equal_mistral_common(family, case):
    conv = CASES[case]
    assert tokenize(fmt(family), conv, tokenizer(family)).input_ids == reference_ids(family, conv)


@pytest.mark.parametrize("family", FAMILIES)
def test_corpus_parity_counts(family):
    """15 of the 16 corpus conversations match exactly; the 16th is refused by both sides."""
    matched, refused = [], []
    for conv in CORPUS:
        try:
            ours = tokenize(fmt(family), conv, tokenizer(family)).input_ids
        except MistralFormatError:
            refused.append(conv.id)
            continue
        matched += [conv.id] if ours == reference_ids(family, conv) else []
    assert (len(matched), len(CORPUS)) == (15, 16)
    assert refused == list(CORPUS_REJECTED)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("case", list(CORPUS_REJECTED) + EDGE_REJECT)
def test_refused_where_mistral_common_refuses(family, case):
    from mistral_common.exceptions import MistralCommonException
    from pydantic import ValidationError

    conv = CASES[case]
    expected = CORPUS_REJECTED.get(case) or conv.meta["error"]
    with pytest.raises(MistralFormatError, match=expected):
        fmt(family).render(conv)
    with pytest.raises((MistralCommonException, ValidationError, ValueError)):
        reference_ids(family, conv)


def test_text_and_call_error_names_the_message_and_the_reason():
    with pytest.raises(MistralFormatError) as err:
        render_mistral(CASES["text_and_call"])
    assert str(err.value) == (
        "messages[1]: an assistant turn with both text and tool calls cannot be written in Mistral's format "
        "(mistral-common: 'Assistant message must have either content or tool_calls, but not both')"
    )


def test_empty_conversation_and_missing_content_are_refused():
    with pytest.raises(MistralFormatError, match="no messages"):
        render_mistral(Conversation(id="e", messages=[]))
    messages = [{"role": "user", "content": None}, {"role": "assistant", "content": "x"}]
    conv = Conversation.from_dict({"id": "n", "messages": messages})
    with pytest.raises(MistralFormatError, match=r"messages\[0\]: a user message needs content"):
        render_mistral(conv)


# ---- labels ----------------------------------------------------------------------------------


def trained_runs(tokenized) -> list[tuple[int, list[int]]]:
    """(position before the run, ids) for each maximal run of trained positions."""
    runs: list[tuple[int, list[int]]] = []
    for position, label in enumerate(tokenized.labels):
        if label == IGNORE_INDEX:
            continue
        if runs and runs[-1][0] + len(runs[-1][1]) == position - 1:
            runs[-1][1].append(label)
        else:
            runs.append((position - 1, [label]))
    return runs


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("case", ACCEPTED + EDGE_MATCH)
def test_trained_positions_are_exactly_the_assistant_turns(family, case):
    conv, tok = CASES[case], tokenizer(family)
    tokenized = tokenize(fmt(family), conv, tok)
    runs = trained_runs(tokenized)
    assert [ids for _, ids in runs] == reference_assistant_turns(family, conv)
    closers = set(tok.convert_tokens_to_ids(["[/INST]", "[/TOOL_RESULTS]"]))
    assert all(tokenized.input_ids[before] in closers for before, _ in runs)
    assert all(ids[-1] == tok.eos_token_id for _, ids in runs)


def test_decoded_labels_read_as_the_assistant_turns_plus_eos():
    conv, tok = CASES["multi_round"], tokenizer("nemo")
    tokenized = tokenize(MistralNemoFormat(), conv, tok)
    trained = [label for label in tokenized.labels if label != IGNORE_INDEX]
    ids = with_mistral_call_ids(conv)
    first, second = (m.tool_calls[0].id for m in ids.messages if m.tool_calls)
    assert tok.decode(trained) == (
        f'[TOOL_CALLS][{{"name": "search", "arguments": {{"query": "capital of Australia"}}, "id": "{first}"}}]</s>'
        f'[TOOL_CALLS][{{"name": "get_weather", "arguments": {{"city": "Canberra"}}, "id": "{second}"}}]</s>'
        "Canberra is the capital; it is 12 °C there.</s>"
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_last_turn_only_trains_the_final_assistant_turn(family):
    conv = CASES["multi_turn_tools"]
    tokenized = tokenize(fmt(family), conv, tokenizer(family), MaskPolicy(last_turn_only=True))
    assert [ids for _, ids in trained_runs(tokenized)] == reference_assistant_turns(family, conv)[-1:]


def test_part_weights_follow_the_segment_parts():
    conv = CASES["single_call_json_result"]
    weights = tokenize(MistralV3Format(), conv, tokenizer("v3"), MaskPolicy(weights={"call_syntax": 0.5})).weights
    assert sorted(set(weights)) == [0.0, 0.5, 1.0]


# ---- injection -------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_control_token_text_in_user_and_tool_text_stays_text(family):
    tok = tokenizer(family)
    ids = tokenize(fmt(family), CASES["control_token_lookalikes"], tok).input_ids
    # The user writes "[INST]" and "[TOOL_CALLS]", the tool writes "[/INST]": one of each is real.
    counts = {"[INST]": 1, "[/INST]": 1, "[TOOL_CALLS]": 1, "[TOOL_RESULTS]": 1, "</s>": 2, "<s>": 1}
    for control, count in counts.items():
        assert ids.count(tok.convert_tokens_to_ids(control)) == count, control
    user_text = CASES["control_token_lookalikes"].messages[0].content
    inst, end_inst = ids.index(tok.convert_tokens_to_ids("[INST]")), ids.index(tok.convert_tokens_to_ids("[/INST]"))
    assert tok.decode(ids[inst + 1 : end_inst]).strip() == user_text


# ---- rendering details -----------------------------------------------------------------------


def test_call_segments_join_into_the_reference_json():
    calls = [(ToolCall("a", {"x": [1, {"é": None}]}, "abcdefghi"), 1), (ToolCall("b", {}, "ABCDEFGHI"), 1)]
    segments = call_segments(calls)
    assert "".join(s.text for s in segments) == json.dumps(
        [
            {"name": "a", "arguments": {"x": [1, {"é": None}]}, "id": "abcdefghi"},
            {"name": "b", "arguments": {}, "id": "ABCDEFGHI"},
        ],
        ensure_ascii=False,
    )
    assert [s.part for s in segments if s.part != "call_syntax"] == ["call_name", "call_args", "call_name", "call_args"]


def test_system_prompt_goes_into_the_last_user_turn_and_tools_before_it():
    text = MistralNemoFormat().render_text(CASES["system_after_user_mid_conversation"])
    assert text.startswith("<s>[INST]Hi[/INST]Hello.</s>[AVAILABLE_TOOLS]")
    assert "[/AVAILABLE_TOOLS][INST]Be brief.\n\nUse metric units.\n\nWeather in Paris?[/INST]" in text


def test_mistral_call_id_is_stable_and_valid():
    ids = [mistral_call_id("conv-1", i) for i in range(50)]
    assert all(CALL_ID.match(i) for i in ids) and len(set(ids)) == 50
    assert mistral_call_id("conv-1", 0) == mistral_call_id("conv-1", 0) != mistral_call_id("conv-2", 0)
    assert mistral_call_id("single_call_json_result", 0) == "QdAyZ1Eyl"


def test_call_ids_are_replaced_and_results_relinked():
    out = with_mistral_call_ids(CASES["reused_source_ids_across_turns"])
    calls = [m.tool_calls[0].id for m in out.messages if m.tool_calls]
    results = [m.tool_call_id for m in out.messages if m.role == "tool"]
    generated = [mistral_call_id("reused_source_ids_across_turns", i) for i in (0, 1)]
    assert calls == results == generated
    kept = with_mistral_call_ids(CASES["valid_mistral_ids_kept"])
    assert [m.tool_calls[0].id for m in kept.messages if m.tool_calls] == ["abcDEF123"]
    linked = with_mistral_call_ids(CASES["tool_result_without_call_id"])
    generated = mistral_call_id("tool_result_without_call_id", 0)
    assert linked.messages[2].tool_call_id == linked.messages[1].tool_calls[0].id == generated
    assert CASES["reused_source_ids_across_turns"].messages[1].tool_calls[0].id == "call_0"  # input untouched


def test_result_for_an_unknown_invalid_call_id_is_refused():
    conv = Conversation.from_dict(
        {
            "id": "u",
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "tool_calls": [{"id": "call_0", "function": {"name": "f", "arguments": {}}}]},
                {"role": "tool", "tool_call_id": "call_9", "content": "r"},
                {"role": "assistant", "content": "a"},
            ],
        }
    )
    with pytest.raises(MistralFormatError, match=r"messages\[2\]: tool result for unknown call id 'call_9'"):
        render_mistral(conv)


def test_registry_and_tokenizer_names():
    assert isinstance(get_format("mistral_v3"), MistralV3Format)
    assert isinstance(get_format("mistral_nemo"), MistralNemoFormat)
    assert {MistralV3Format.default_tokenizer, MistralNemoFormat.default_tokenizer} <= set(BUILDERS)


# ---- parsing ---------------------------------------------------------------------------------


def expected_assistant_turns(conv: Conversation) -> list[tuple[set[int], str | None, list[ToolCall]]]:
    """(message indices, content, calls) of each assistant turn after the reference's merging."""
    _, turns = mistral_turns(with_mistral_call_ids(conv))
    return [
        (
            {i for _, i in turn.texts + turn.calls},
            JOIN.join(text for text, _ in turn.texts).rstrip(" ") or None,
            [call for call, _ in turn.calls],
        )
        for turn in turns
        if turn.role == "assistant"
    ]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("case", ACCEPTED + EDGE_MATCH)
def test_render_then_parse_round_trips_every_assistant_turn(family, case):
    conv, f, tok = CASES[case], fmt(family), tokenizer(family)
    segments = f.render(conv)
    turns = expected_assistant_turns(conv)
    runs = trained_runs(tokenize(f, conv, tok))
    assert len(runs) == len(turns)
    for (indices, content, calls), (_, ids) in zip(turns, runs):
        rendered = "".join(s.text for s in segments if s.assistant and s.message in indices)
        for text in (rendered, tok.decode(ids)):
            parsed_content, parsed_calls = f.parse(text)
            assert parsed_content == content
            assert [c.to_dict() for c in parsed_calls] == [c.to_dict() for c in calls]


def test_parse_plain_text_and_calls():
    f = MistralV3Format()
    assert f.parse("  Hello there.</s>") == ("Hello there.", [])
    assert f.parse("") == (None, [])
    content, calls = f.parse(' [TOOL_CALLS] [{"name": "f", "arguments": {"a": [1, 2]}, "id": "abcdefghi"}]\n</s>')
    assert content is None and [c.to_dict() for c in calls] == [ToolCall("f", {"a": [1, 2]}, "abcdefghi").to_dict()]
    # Text before the calls (which the format itself never writes) is kept as content.
    content, calls = f.parse('Checking.[TOOL_CALLS][{"name": "f", "arguments": "{\\"a\\": 1}"}]')
    assert content == "Checking." and calls == [ToolCall("f", {"a": 1}, None)]


@pytest.mark.parametrize(
    "text, message",
    [
        (f"{TOOL_CALLS}[{{'name': 'f'}}]", "is not JSON"),
        (f'{TOOL_CALLS}{{"name": "f", "arguments": {{}}}}', "non-empty JSON list"),
        (f"{TOOL_CALLS}[]", "non-empty JSON list"),
        (f'{TOOL_CALLS}[{{"name": "f", "arguments": {{}}}}] and more', "unexpected text after"),
        (f'{TOOL_CALLS}["f"]', "call 0: expected an object, got str"),
        (f'{TOOL_CALLS}[{{"arguments": {{}}}}]', "call 0: 'name' must be a non-empty string"),
        (f'{TOOL_CALLS}[{{"name": "f", "arguments": [1]}}]', "call 0: 'arguments' must be an object, got list"),
        (f'{TOOL_CALLS}[{{"name": "f", "arguments": "nope"}}]', "call 0: 'arguments' is a string that is not JSON"),
        (f'{TOOL_CALLS}[{{"name": "f", "arguments": {{}}, "id": 7}}]', "call 0: 'id' must be a string"),
        (f'{TOOL_CALLS}[{{"name": "f", "args": {{}}}}]', "call 0: unknown key\\(s\\) 'args'"),
    ],
)
def test_parse_rejects_malformed_calls(text, message):
    with pytest.raises(MistralParseError, match=message):
        MistralV3Format().parse(text)


def test_parse_never_evaluates():
    payload = f'{TOOL_CALLS}[{{"name": "__import__(\'os\').system(\'x\')", "arguments": {{}}}}]'
    _, calls = MistralV3Format().parse(payload)
    assert calls[0].name == "__import__('os').system('x')"


def test_to_json_matches_reference_separators():
    assert to_json({"a": ["é", 1.5, None]}) == '{"a": ["é", 1.5, null]}'


# ---- real data -------------------------------------------------------------------------------


@pytest.mark.shared_data
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("file_name", ["glaive_toolcall_en_demo.json", "glaive_toolcall_zh_demo.json"])
def test_glaive_demo_conversations_match_or_are_refused_by_both(shared_data, family, file_name):
    from train.sources import get_reader

    path = shared_data / "glaive_toolcall_demo" / file_name
    conversations = [r for r in get_reader("glaive")([path]) if isinstance(r, Conversation)]
    assert conversations
    disagreements = []
    for conv in conversations:
        try:
            ours = tokenize(fmt(family), conv, tokenizer(family)).input_ids
        except MistralFormatError:
            ours = None
        try:
            ref = reference_ids(family, conv)
        except Exception:  # noqa: BLE001 - any refusal of the reference: its exceptions, pydantic's, ValueError
            ref = None
        if ours != ref:
            disagreements.append(conv.id)
    assert disagreements == []
