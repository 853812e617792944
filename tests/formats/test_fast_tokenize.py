"""The byte path of ``tokenize_many`` (tiktoken encodes the text runs, labels come from byte spans) against the
reference path (one batched ``tokenizers`` encode, labels from character offsets): identical ids, labels and
weights, or the same error, on the parity corpus, on crafted edge cases, and on the glaive and BFCL corpora."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest
from session_cache import shared_tokenizer

from train.formats import MaskPolicy, get_format
from train.formats.base import ChatFormat, Segment
from train.formats.byte_bpe import byte_bpe_for
from train.formats.tokenize import Tokenized, tokenize_many
from train.schema import Conversation, Message
from train.sources import Rejected, get_reader
from train.tokenizers import load_tokenizer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
POLICIES = [
    MaskPolicy(),
    MaskPolicy(last_turn_only=True, weights={"text": 0.5, "call_args": 2.0, "reasoning": 0.0}),
]
# format -> the tooltrain tokenizer it is measured with (both byte-level BPEs tiktoken can reproduce)
FORMATS = {"qwen2_5": "qwen2_5", "llama3_1": "llama3", "llama3_1_metatool": "llama3"}


@pytest.fixture(scope="module")
def tokenizers(built_tokenizer):
    return {name: built_tokenizer(name) for name in ("qwen2_5", "llama3")}


def load(path: Path) -> list[Conversation]:
    return [Conversation.from_dict(json.loads(line)) for line in path.open(encoding="utf-8")]


def outcome(item: Tokenized | ValueError) -> tuple:
    if isinstance(item, ValueError):
        return type(item).__name__, str(item)
    return item.input_ids, item.labels, item.weights


def assert_paths_agree(fmt: ChatFormat, conversations: list[Conversation], tokenizer, policy: MaskPolicy) -> None:
    fast = tokenize_many(fmt, conversations, tokenizer, policy)
    reference = tokenize_many(fmt, conversations, tokenizer, policy, fast=False)
    assert len(fast) == len(reference) == len(conversations)
    for conv, ours, theirs in zip(conversations, fast, reference):
        assert outcome(ours) == outcome(theirs), conv.id


def test_the_byte_path_is_taken_for_llama3_and_qwen2_5_only(tokenizers):
    assert byte_bpe_for(tokenizers["qwen2_5"]) is not None
    assert byte_bpe_for(tokenizers["llama3"]) is not None
    # Mistral v3: a SentencePiece BPE with byte fallback and a Metaspace pre-tokenizer
    assert byte_bpe_for(shared_tokenizer("mistral_v3")) is None


# slow tier: SmolLM2's tokenizer is built from its GGUF file (~15 s of CPU); Mistral v3 above is the default
# tier's tokenizer without the byte path
@pytest.mark.slow
def test_smollm2_has_no_byte_path():
    # GPT-2's ByteLevel regex and merges that are not all splits of its vocabulary
    assert byte_bpe_for(load_tokenizer("smollm2")) is None


def test_a_tokenizer_loaded_again_reuses_the_decision_and_another_definition_gets_its_own(tokenizers):
    from types import SimpleNamespace

    from tokenizers import Tokenizer

    # two loads of the cached tokenizer (the worker's shared object may be the one its build returned, whose
    # definition need not be the saved copy's byte for byte)
    first, again = load_tokenizer("llama3"), load_tokenizer("llama3")
    assert again is not first
    assert byte_bpe_for(again) is byte_bpe_for(first)
    # the same vocabulary and merges behind an NFKC normalizer: tiktoken cannot reproduce it, so no byte path
    definition = json.loads(tokenizers["qwen2_5"].backend_tokenizer.to_str())
    definition["normalizer"] = {"type": "NFKC"}
    nfkc = SimpleNamespace(backend_tokenizer=Tokenizer.from_str(json.dumps(definition)))
    assert byte_bpe_for(tokenizers["qwen2_5"]) is not None and byte_bpe_for(nfkc) is None


@pytest.mark.parametrize("policy", POLICIES, ids=["default", "weighted"])
@pytest.mark.parametrize("format_name", list(FORMATS))
def test_parity_corpus_gives_identical_rows(tokenizers, format_name, policy):
    corpus = load(FIXTURES / "parity" / "corpus.jsonl")
    corpus += load(FIXTURES / "formats" / "llama3_qwen2_5" / "extra_parity.jsonl")
    assert_paths_agree(get_format(format_name), corpus, tokenizers[FORMATS[format_name]], policy)


class Pieces(ChatFormat):
    """Renders each message as one segment of its role's part (a test's hand-made segment list)."""

    name: ClassVar[str] = "pieces"
    default_tokenizer: ClassVar[str] = "qwen2_5"
    PART: ClassVar[dict[str, str]] = {"user": "user", "assistant": "text", "system": "header"}

    def render(self, conv: Conversation) -> list[Segment]:
        segments = []
        for i, m in enumerate(conv.messages):
            if m.content in ("<|im_end|>", "<|eot_id|>"):
                segments.append(Segment(m.content, "end" if m.role == "assistant" else "header", i, special=True))
            else:
                segments.append(Segment(m.content or "", self.PART[m.role], i))  # type: ignore[arg-type]
        return segments


def pieces(*turns: tuple[str, str]) -> Conversation:
    return Conversation("case", [Message(role=role, content=text) for role, text in turns])


EDGE_CASES = {
    # one BPE token over masked and trained letters: both paths refuse it with the same SpanError
    "token across trained and masked text": pieces(("user", "ab"), ("assistant", "cd")),
    # whitespace merged across the edge is trained (the model must write it)
    "whitespace across the edge": pieces(("system", "x   "), ("assistant", "   y"), ("assistant", "<|im_end|>")),
    # an empty trained segment between two masked ones does not make the token between them trained
    "empty segment inside a token": pieces(("user", "ab"), ("assistant", ""), ("user", "cd")),
    # NFD text: Qwen2.5 normalizes it (the reference path encodes it), Llama 3 does not
    "text the normalizer changes": pieces(("user", "Cafe\u0301 "), ("assistant", "re\u0301sume\u0301")),
    # a multi-byte character split over several byte tokens, at a segment edge
    "multi-byte characters at an edge": pieces(("user", "天气 🌦️"), ("assistant", "🌦️ 晴")),
    "control-token lookalike text": pieces(("user", "<|im_end|> <tool_call>"), ("assistant", "<|eot_id|>x")),
    "nothing to encode": pieces(("assistant", "")),
    "a control token of another family": pieces(("user", "q"), ("assistant", "<|eot_id|>")),
}


@pytest.mark.parametrize("tokenizer_name", ["qwen2_5", "llama3"])
@pytest.mark.parametrize("case", list(EDGE_CASES))
def test_edge_cases_give_the_same_rows_or_the_same_error(tokenizers, tokenizer_name, case):
    for merge in (True, False):
        fmt = Pieces()
        fmt.merge_text_runs = merge  # type: ignore[misc]
        assert_paths_agree(fmt, [EDGE_CASES[case]], tokenizers[tokenizer_name], MaskPolicy(weights={"text": 0.5}))


def test_a_token_across_trained_and_masked_text_is_still_refused(tokenizers):
    (result,) = tokenize_many(Pieces(), [EDGE_CASES["token across trained and masked text"]], tokenizers["qwen2_5"])
    assert isinstance(result, ValueError) and "spans trained and masked text" in str(result)


def read_corpus(shared_data: Path, name: str) -> list[Conversation]:
    """glaive's two demo files, or every 4th BFCL v2 conversation of the categories with answers."""
    if name == "glaive":
        folder = shared_data / "glaive_toolcall_demo"
        items = get_reader("glaive")([folder / "glaive_toolcall_en_demo.json", folder / "glaive_toolcall_zh_demo.json"])
        return [item for item in items if not isinstance(item, Rejected)]
    folder = shared_data / "bfcl_v2"
    conversations = []
    for answers in sorted((folder / "possible_answer").glob("*.json")):
        items = get_reader("bfcl")([folder / answers.name, answers])
        conversations += [item for item in items if not isinstance(item, Rejected)][::4]
    return conversations


@pytest.mark.shared_data
@pytest.mark.parametrize("corpus", ["glaive", "bfcl"])
@pytest.mark.parametrize("format_name", ["qwen2_5", "llama3_1"])
def test_real_corpora_give_identical_rows(shared_data, tokenizers, corpus, format_name):
    conversations = read_corpus(shared_data, corpus)
    assert len(conversations) > 500
    fmt = get_format(format_name)
    for policy in POLICIES:
        assert_paths_agree(fmt, conversations, tokenizers[FORMATS[format_name]], policy)
