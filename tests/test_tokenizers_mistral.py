"""The offline Mistral tokenizers against mistral-common's own encoders (v3 SentencePiece, tekken)."""

from __future__ import annotations

import random
from functools import cache

import pytest

from train.tokenizers.mistral import TEKKEN_FILE, V3_FILE, build_mistral_tekken, build_mistral_v3, mistral_data_file

CONTROL = [
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[TOOL_CALLS]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
]


@cache
def reference(file_name: str):
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    return MistralTokenizer.from_file(str(mistral_data_file(file_name))).instruct_tokenizer.tokenizer


@cache
def built(name: str):
    return {"v3": build_mistral_v3, "tekken": build_mistral_tekken}[name]()


@pytest.fixture(params=["v3", "tekken"])
def pair(request):
    """(our fast tokenizer, mistral-common's tokenizer) for one vocabulary."""
    return built(request.param), reference({"v3": V3_FILE, "tekken": TEKKEN_FILE}[request.param])


def encode(tokenizer, text: str) -> list[int]:
    """Text as text: control-token parsing off, no <s> (what formats use)."""
    return tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]


def varied_strings() -> list[str]:
    """300 strings: whitespace runs, leading spaces, scripts, emoji, code, control-token look-alikes."""
    fixed = [
        "",
        " ",
        "  ",
        "   ",
        "\n",
        "\n\n",
        " \n ",
        "\t",
        "\t\tx",
        "a\tb",
        "  leading",
        "trailing  ",
        "   \n\n   ",
        "hello world",
        "Hello, World!",
        "multiple   spaces   inside",
        "line one\nline two\n",
        "\r\nwindows\r\n",
        "多语言文本处理",
        "帮我订机票。",
        "日本語のテキスト",
        "한국어 문장",
        "مرحبا بالعالم",
        "احجز لي رحلة",
        "emoji 🛫🇫🇷✅",
        "👩‍👩‍👧‍👦 family",
        "ÆØÅ-42 ß é ñ",
        "Ω≈ç√∫",
        "\u200b zero width",
        "ﬁ ligature",
        "Ｆｕｌｌ width",
        "e\u0301 combining",
        "1234567890",
        "3.14159 -0.0 1e10",
        "▁already underlined",
        "<0x0A>",
        "def f(x):\n    return x  # comment\n",
        "for (int i = 0; i < n; ++i) { sum += a[i]; }",
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        '[{"type": "function"}]',
        "<s> literal bos",
        "</s>",
        "<unk>",
        "[INST] x [/INST]",
        '[TOOL_CALLS] [{"a": 1}]',
        "[AVAILABLE_TOOLS][/AVAILABLE_TOOLS]",
        "[TOOL_RESULTS] r [/TOOL_RESULTS]",
        "<|eot_id|><|im_end|>",
    ]
    rng = random.Random(20240718)
    alphabet = (
        list("abcxyzXYZ  \n\t,.;:!?{}[]\"'0123456789_-/\\<>|")
        + list("中文日本語한국어عربي")
        + [
            "🙂",
            "🇫🇷",
            "é",
            "ß",
            "▁",
            "<s>",
            "</s>",
            "[INST]",
            "[TOOL_CALLS]",
            "    ",
            "\n\n",
            "def ",
            "return ",
        ]
    )
    strings = list(fixed)
    while len(strings) < 300:
        strings.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))))
    return strings


def test_control_token_ids_match_mistral_common(pair):
    ours, ref = pair
    for text in CONTROL:
        assert ours.convert_tokens_to_ids(text) == ref.get_special_token(text), text
    assert (ours.bos_token_id, ours.eos_token_id) == (ref.bos_id, ref.eos_id) == (1, 2)
    assert len(ours) == ref.n_words


def test_every_control_id_is_a_special_token_with_the_reference_text(pair):
    ours, ref = pair
    controls = sorted(ref.special_ids)
    assert len(controls) == ref.num_special_tokens  # 750 for v3, 1000 for tekken
    assert ours.convert_ids_to_tokens(controls) == [ref.id_to_piece(i) for i in controls]
    special = {i for i, token in ours.added_tokens_decoder.items() if token.special}
    assert set(controls) <= special


def test_known_ids_per_vocabulary():
    v3, tekken = built("v3"), built("tekken")
    assert v3.convert_tokens_to_ids(CONTROL) == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert tekken.convert_tokens_to_ids(CONTROL) == [1, 2, 3, 4, 9, 5, 6, 7, 8]
    assert (len(v3), len(tekken)) == (32768, 131072)


def test_300_varied_strings_encode_like_mistral_common(pair):
    ours, ref = pair
    strings = varied_strings()
    assert len(strings) == 300
    mismatched = [s for s in strings if encode(ours, s) != ref.encode(s, bos=False, eos=False)]
    assert mismatched == []


def test_decode_gives_back_the_text(pair):
    ours, _ = pair
    # "▁" is how SentencePiece writes a space: a literal one cannot come back (nor does it in
    # SentencePiece itself).
    for s in (s for s in varied_strings() if "▁" not in s):
        ids = encode(ours, s)
        assert ours.decode(ids) == s, repr(s)


def test_literal_control_token_text_stays_text(pair):
    ours, ref = pair
    text = "x [INST] <s> </s> [TOOL_CALLS] [AVAILABLE_TOOLS] [TOOL_RESULTS] [/INST] y"
    ids = encode(ours, text)
    control_ids = set(ours.convert_tokens_to_ids(CONTROL))
    assert not control_ids & set(ids)
    assert ids == ref.encode(text, bos=False, eos=False)


def test_plain_call_starts_with_bos_like_the_hf_mistral_tokenizers(pair):
    ours, ref = pair
    assert ours("hello world")["input_ids"] == [1, *ref.encode("hello world", bos=False, eos=False)]


def test_v3_user_defined_pieces_are_one_token_with_a_known_whitespace_difference():
    # SentencePiece matches user-defined "[REFERENCE_DOC_n]" inside text and puts its dummy prefix
    # only at the start of the string; the fast pipeline prefixes every piece between added tokens.
    ours, ref = built("v3"), reference(V3_FILE)
    text = "x [REFERENCE_DOC_0] y"
    assert ref.encode(text, bos=False, eos=False) == [2086, 29473, 770, 1105]
    assert encode(ours, text) == [2086, 29473, 770, 29473, 1105]


def test_cached_tokenizer_encodes_like_the_built_one(tmp_path, monkeypatch):
    from train.tokenizers import BUILD_VERSION, load_tokenizer, mistral

    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path))
    # the builders' products are this module's (built by the same builders): not built a second time
    monkeypatch.setattr(mistral, "build_mistral_v3", lambda: built("v3"))
    monkeypatch.setattr(mistral, "build_mistral_tekken", lambda: built("tekken"))
    for name, file_name in (("mistral_v3", V3_FILE), ("mistral_tekken", TEKKEN_FILE)):
        fresh = load_tokenizer(name)  # "builds" and writes the cache
        cached = load_tokenizer(name)  # reads it back
        assert (tmp_path / "tokenizers" / f"{name}-v{BUILD_VERSION}" / "tokenizer.json").is_file()
        ref = reference(file_name)
        for s in varied_strings():
            expected = ref.encode(s, bos=False, eos=False)
            assert encode(fresh, s) == expected
            assert encode(cached, s) == expected
        assert cached.convert_tokens_to_ids(CONTROL) == fresh.convert_tokens_to_ids(CONTROL)
