"""harmony against openai-harmony's own renderer (``HARMONY_GPT_OSS``), offline.

openai-harmony downloads ``o200k_base.tiktoken`` unless ``TIKTOKEN_ENCODINGS_BASE`` names a folder holding
it: ``offline_encodings_dir`` rebuilds that file from quicktok and points the variable at it. The reference
conversation is built from the canonical one with openai-harmony's own objects (``official_harmony_ids``,
also the helper for the history-rewriting expansion test), the history rule applied as vLLM applies it.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from train.formats import get_format
from train.formats.harmony import HarmonyFormat, parse_harmony
from train.formats.tokenize import IGNORE_INDEX, encode_text, tokenize
from train.schema import Conversation, Message, Tool, ToolCall
from train.tokenizers.harmony import O200K_BASE_SHA256, o200k_tiktoken_file, offline_encodings_dir

openai_harmony = pytest.importorskip("openai_harmony")  # tests/requirements-reference.txt

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def load(path: Path) -> list[Conversation]:
    return [Conversation.from_dict(json.loads(line)) for line in path.open(encoding="utf-8")]


CORPUS = load(FIXTURES / "parity" / "corpus.jsonl")
REASONING = load(FIXTURES / "formats" / "harmony" / "reasoning.jsonl")
CASES = {conv.id: conv for conv in CORPUS + REASONING}
fmt = HarmonyFormat()


@pytest.fixture(scope="session")
def encodings_dir(tmp_path_factory) -> Path:
    return offline_encodings_dir(tmp_path_factory.mktemp("tiktoken"))


@pytest.fixture(scope="session")
def encoding(encodings_dir):
    return openai_harmony.load_harmony_encoding(openai_harmony.HarmonyEncodingName.HARMONY_GPT_OSS)


@pytest.fixture(scope="session")
def tok(built_tokenizer):
    return built_tokenizer("o200k_harmony")


# --- the reference --------------------------------------------------------------------------------


def _harmony_messages(messages: list[Message], tools: list[Tool], **options) -> list:
    """The canonical conversation as openai-harmony messages, before the history rule."""
    h = openai_harmony
    system = (
        h.SystemContent.new()
        .with_model_identity(
            options.get("model_identity", "You are ChatGPT, a large language model trained by OpenAI.")
        )
        .with_reasoning_effort(h.ReasoningEffort(options.get("reasoning_effort", "medium").capitalize()))
        .with_knowledge_cutoff(options.get("knowledge_cutoff", "2024-06"))
    )
    if options.get("current_date"):
        system = system.with_conversation_start_date(options["current_date"])
    out = [h.Message.from_role_and_content(h.Role.SYSTEM, system)]
    rest = list(messages)
    developer = h.DeveloperContent.new()
    if rest and rest[0].role == "system":
        developer = developer.with_instructions(rest.pop(0).content or "")
    if tools:
        developer = developer.with_function_tools(
            [h.ToolDescription.new(t.name, t.description, t.parameters) for t in tools]
        )
    if developer.instructions is not None or tools:
        out.append(h.Message.from_role_and_content(h.Role.DEVELOPER, developer))
    names: dict[str, str] = {}
    for message in rest:
        if message.role == "user":
            out.append(h.Message.from_role_and_content(h.Role.USER, message.content or ""))
        elif message.role == "tool":
            name = message.name or names[message.tool_call_id]
            author = h.Author.new(h.Role.TOOL, f"functions.{name}")
            result = h.Message.from_author_and_content(author, message.content or "")
            out.append(result.with_channel("commentary").with_recipient("assistant"))
        else:
            said = h.Message.from_role_and_content
            if message.reasoning_content is not None:
                out.append(said(h.Role.ASSISTANT, message.reasoning_content).with_channel("analysis"))
            if message.tool_calls and message.content:
                out.append(said(h.Role.ASSISTANT, message.content).with_channel("commentary"))
            for call in message.tool_calls:
                names[call.id] = call.name
                arguments = json.dumps(call.arguments, ensure_ascii=False)
                out.append(
                    said(h.Role.ASSISTANT, arguments)
                    .with_channel("commentary")
                    .with_recipient(f"functions.{call.name}")
                    .with_content_type("<|constrain|>json")
                )
            if not message.tool_calls:
                out.append(said(h.Role.ASSISTANT, message.content or "").with_channel("final"))
    return out


@functools.lru_cache(maxsize=1)
def _encoding():
    return openai_harmony.load_harmony_encoding(openai_harmony.HarmonyEncodingName.HARMONY_GPT_OSS)


def official_harmony_ids(messages: list[Message], tools: list[Tool], **options) -> list[int]:
    """openai-harmony's ``render_conversation_for_training`` of the conversation as a model writing its last
    assistant message sees it: analysis before the last final answer of the earlier messages dropped (vLLM's
    ``auto_drop_analysis_messages``), the last message's final answer ending ``<|return|>``.

    ``options`` are the harmony format's (model_identity, reasoning_effort, knowledge_cutoff, current_date).
    Needs ``TIKTOKEN_ENCODINGS_BASE`` (the ``encodings_dir`` fixture sets it)."""
    h = openai_harmony
    last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=len(messages))
    context = _harmony_messages(messages[:last], tools, **options)
    whole = _harmony_messages(messages, tools, **options)
    finals = [i for i, m in enumerate(context) if m.author.role == h.Role.ASSISTANT and m.channel == "final"]
    cut = finals[-1] if finals else -1
    kept = [m for i, m in enumerate(context) if not (i < cut and m.channel == "analysis")]
    conversation = h.Conversation.from_messages(kept + whole[len(context) :])
    config = h.RenderConversationConfig(auto_drop_analysis=False)
    return _encoding().render_conversation_for_training(conversation, config)


# --- the offline tokenizer ------------------------------------------------------------------------


def test_o200k_file_is_rebuilt_offline_with_the_published_hash(tmp_path):
    import hashlib

    path = o200k_tiktoken_file(tmp_path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == O200K_BASE_SHA256
    assert path.read_bytes().count(b"\n") == 199998


def test_openai_harmony_loads_without_network(tmp_path):
    """A fresh process with every proxy pointing nowhere: loads from the rebuilt file, and without it fails."""
    env = {**os.environ, "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    env.update(https_proxy=env["HTTPS_PROXY"], http_proxy=env["HTTP_PROXY"], HF_HUB_OFFLINE="1")
    env["TIKTOKEN_RS_CACHE_DIR"] = str(tmp_path / "empty-cache")
    env.pop("TIKTOKEN_ENCODINGS_BASE", None)
    script = (
        "import sys\nfrom openai_harmony import load_harmony_encoding, HarmonyEncodingName\n"
        "enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)\n"
        "print(enc.encode('<|start|>hi', allowed_special='all'))\n"
    )
    online = subprocess.run(
        [sys.executable, "-c", script], env=env, check=False, capture_output=True, text=True, timeout=120
    )
    assert online.returncode != 0  # no file, no network: the download is what fails
    env["TIKTOKEN_ENCODINGS_BASE"] = str(o200k_tiktoken_file(tmp_path / "enc").parent)
    offline = subprocess.run(
        [sys.executable, "-c", script], env=env, check=False, capture_output=True, text=True, timeout=120
    )
    assert offline.returncode == 0, offline.stderr
    assert offline.stdout.strip() == "[200006, 3686]"


def test_tokenizer_ids_and_specials(tok, encoding):
    assert len(tok) == 201088
    named = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"]
    assert tok.convert_tokens_to_ids(named) == [200006, 200007, 200008, 200005, 200003, 200002, 200012]
    assert (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id) == (199998, 200002, 199999)
    for text in ["Hello  world\n\n\tx", "Привет 世界 🎉 1234567 don't", " <|start|> is text here", "a\r\nb   "]:
        assert encode_text(tok, text)[0] == encoding.encode(text, allowed_special=set(), disallowed_special=())


# --- parity ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_harmony_matches_openai_harmony(tok, encodings_dir, case):
    conv = CASES[case]
    assert tokenize(fmt, conv, tok).input_ids == official_harmony_ids(conv.messages, conv.tools)


def _real_conversations(shared_data) -> list[Conversation]:
    from train.sources import get_reader

    glaive = shared_data / "glaive_toolcall_demo"
    conversations = [
        r
        for name in ("glaive_toolcall_en_demo.json", "glaive_toolcall_zh_demo.json")
        for r in get_reader("glaive")([glaive / name])
        if isinstance(r, Conversation)
    ]
    bfcl = shared_data / "bfcl_v2"
    for name in ("simple", "multiple", "parallel", "parallel_multiple"):
        pair = [bfcl / f"BFCL_v2_{name}.json", bfcl / "possible_answer" / f"BFCL_v2_{name}.json"]
        conversations += [r for r in get_reader("bfcl")(pair) if isinstance(r, Conversation)]
    return conversations


@pytest.mark.shared_data
def test_real_glaive_and_bfcl_conversations_match_openai_harmony(tok, encodings_dir, shared_data):
    conversations = _real_conversations(shared_data)
    disagreements, refused = [], 0
    for conv in conversations:
        try:
            ours = tokenize(fmt, conv, tok).input_ids
        except ValueError:
            ours = None
        try:
            reference = official_harmony_ids(conv.messages, conv.tools)
        except Exception:  # noqa: BLE001 - the reference's refusal: KeyError (no tool name), HarmonyError
            reference = None
        refused += ours is None
        if ours != reference:
            disagreements.append(conv.id)
    assert len(conversations) - refused >= 50
    assert disagreements == []


def test_options_match_openai_harmony(tok, encodings_dir):
    conv = CASES["reasoning_call_result_final"]
    options = {"model_identity": "You are a tool agent.", "reasoning_effort": "high", "current_date": "2026-01-02"}
    ids = tokenize(HarmonyFormat(**options), conv, tok).input_ids
    assert ids == official_harmony_ids(conv.messages, conv.tools, **options)
    assert "Current date: 2026-01-02\n\nReasoning: high" in HarmonyFormat(**options).render_text(conv)


def test_registry_and_defaults():
    assert isinstance(get_format("harmony"), HarmonyFormat)
    assert fmt.default_tokenizer == "o200k_harmony"
    assert fmt.end_of_turn_texts() == ("<|call|>", "<|return|>")


# --- the history rule, masks ----------------------------------------------------------------------


def test_history_rule_drops_reasoning_up_to_the_last_earlier_final():
    text = fmt.render_text(CASES["reasoning_multi_turn_history_dropped"])
    assert "Call it." not in text and "Answer." not in text.replace("Answer again.", "")
    assert "Call again." in text and "Answer again." in text
    three = fmt.render_text(CASES["reasoning_three_turns"])
    assert ("t1" in three, "t2" in three, "t3" in three) == (False, False, True)


def trained_text(tok, conv) -> str:
    tokenized = tokenize(fmt, conv, tok)
    return tok.decode([t if label != IGNORE_INDEX else 0 for t, label in zip(tokenized.input_ids, tokenized.labels)])


def test_trained_tokens_are_what_the_model_writes(tok):
    conv = CASES["reasoning_parallel_calls"]
    tokenized = tokenize(fmt, conv, tok)
    runs, current = [], []
    for label in tokenized.labels + [IGNORE_INDEX]:
        if label != IGNORE_INDEX:
            current.append(label)
        elif current:
            runs.append(tok.decode(current))
            current = []
    assert runs == [
        (
            "<|channel|>analysis<|message|>Two calls.<|end|><|start|>assistant to=functions.get_weather<|channel|>"
            'commentary <|constrain|>json<|message|>{"city": "Oslo"}<|call|>'
        ),
        ' to=functions.search<|channel|>commentary <|constrain|>json<|message|>{"q": "Oslo news", "n": 3}<|call|>',
        "<|channel|>final<|message|>Cold, no news.<|return|>",
    ]
    history = tokenize(fmt, CASES["reasoning_three_turns"], tok)
    ends = [label for t, label in zip(history.input_ids, history.labels) if t == 200007 and label != IGNORE_INDEX]
    # trained: t3's analysis <|end|> only; a final answer in history ends <|end|>, which the model never writes
    assert len(ends) == 1


def test_refusals():
    with pytest.raises(ValueError, match="system message after the first"):
        fmt.render(Conversation("x", [Message("user", "a"), Message("system", "b"), Message("assistant", "c")]))
    with pytest.raises(ValueError, match="cannot be a recipient"):
        fmt.render(Conversation("x", [Message("user", "a"), Message("assistant", tool_calls=[ToolCall("a b")])]))
    with pytest.raises(ValueError, match="tool cannot be told"):
        fmt.render(Conversation("x", [Message("user", "a"), Message("tool", "r")]))
    with pytest.raises(ValueError, match="neither an answer nor a call"):
        fmt.render(Conversation("x", [Message("user", "a"), Message("assistant", reasoning_content="hm")]))


# --- parser ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_render_then_parse_round_trips(case):
    conv = CASES[case]
    for index, message in enumerate(conv.messages):
        if message.role != "assistant":
            continue
        # the completion: the turn's text after the prompt's <|start|>assistant
        completion = "".join(s.text for s in fmt.render(conv) if s.message == index)[len("<|start|>assistant") :]
        content, calls = fmt.parse(completion)
        assert content == (message.content if message.content and message.content.strip() else None)
        assert [(c.name, c.arguments) for c in calls] == [(c.name, c.arguments) for c in message.tool_calls]


def test_parse_reads_the_model_s_own_header_order_and_reports_broken_calls():
    text = (
        "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>commentary to=functions.f "
        '<|constrain|>json<|message|>{"a": 1}<|call|>'
    )
    assert parse_harmony(text) == (None, [ToolCall("f", {"a": 1})])
    assert parse_harmony("<|channel|>final<|message|>Hi<|return|>") == ("Hi", [])
    with pytest.raises(ValueError, match="invalid JSON"):
        parse_harmony(" to=functions.f<|channel|>commentary json<|message|>{oops<|call|>")
    with pytest.raises(ValueError, match="not a function"):
        parse_harmony("<|channel|>analysis to=python<|message|>print(1)<|call|>")
