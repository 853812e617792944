"""Mistral tokenizers built offline from the files mistral-common ships.

* ``build_mistral_v3``: Mistral 7B Instruct v0.3, a SentencePiece BPE model
  (``mistral_instruct_tokenizer_240323.model.v3``). transformers' default conversion of that file
  gets whitespace pieces and the dummy prefix wrong, so the fast tokenizer is assembled here:
  merges ordered by the score of the piece they make (SentencePiece BPE merges the best-scoring
  pair first), control pieces as special tokens, user-defined pieces as plain added tokens
  (SentencePiece matches those inside text), and the dummy prefix only at the start of each
  encoded string, as ``SentencePieceProcessor.encode`` does.
* ``build_mistral_tekken``: Mistral Nemo's tiktoken-style BPE (``tekken_240718.json``) through
  transformers' own Mistral converter.

Both agree with mistral-common's ``tokenizer.encode(s, bos=False, eos=False)`` (see
tests/test_tokenizers_mistral.py). Control-token ids differ between the two vocabularies, so
formats look them up by string, never by number.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

V3_FILE = "mistral_instruct_tokenizer_240323.model.v3"
V7_FILE = "mistral_instruct_tokenizer_241114.model.v7"  # SentencePiece v7 (Mistral Large 2411)
TEKKEN_FILE = "tekken_240718.json"
SPIECE_UNDERLINE = "▁"


def mistral_data_file(name: str) -> Path:
    """A tokenizer file inside the installed mistral-common package."""
    import mistral_common

    path = Path(mistral_common.__file__).parent / "data" / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: install mistral-common (it ships the Mistral tokenizer files)")
    return path


# sentencepiece_model.proto's ModelProto.SentencePiece.Type values
_PIECE_KINDS = {1: "normal", 2: "unknown", 3: "control", 4: "user_defined", 5: "unused", 6: "byte"}


def _spm_pieces(model_file: Path) -> list[tuple[str, float, str]]:
    """(piece, score, kind) per id, read from the model proto (the processor API hides user-defined)."""
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(model_file.read_bytes())
    if model.trainer_spec.model_type != sentencepiece_model_pb2.TrainerSpec.BPE:
        raise ValueError(f"{model_file}: expected a SentencePiece BPE model")
    spec = model.normalizer_spec
    if not spec.add_dummy_prefix or spec.remove_extra_whitespaces or spec.precompiled_charsmap:
        # The fast pipeline below reproduces exactly this normalizer and no other.
        raise ValueError(f"{model_file}: unsupported normalizer (dummy prefix on, whitespace kept, no charsmap)")
    return [(p.piece, p.score, _PIECE_KINDS[p.type]) for p in model.pieces]


def build_sentencepiece_bpe(model_file: Path) -> Any:
    """A SentencePiece BPE model file -> ``PreTrainedTokenizerFast`` with the same segmentation."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers
    from transformers.convert_slow_tokenizer import generate_merges

    pieces = _spm_pieces(model_file)
    vocab = {piece: i for i, (piece, _, _) in enumerate(pieces)}
    # Only ordinary pieces take part in merging; control and user-defined pieces come whole.
    scores = {piece: score for piece, score, kind in pieces if kind == "normal"}
    merges = generate_merges(vocab, scores, skip_tokens={p for p, _, k in pieces if k != "normal"})
    unk = next(piece for piece, _, kind in pieces if kind == "unknown")

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=unk, byte_fallback=True, fuse_unk=True))
    # add_dummy_prefix: one "▁" before each encoded string, spaces become "▁", and no
    # pre-tokenizer (SentencePiece merges across spaces). Metaspace(prepend_scheme="first") would
    # skip the prefix for text that already starts with a space, which SentencePiece does not.
    # Known limit: the normalizer runs once per piece between added tokens, so text around a
    # user-defined piece ("[REFERENCE_DOC_0]") gets an extra "▁" that SentencePiece does not add.
    tok.normalizer = normalizers.Sequence(
        [normalizers.Prepend(SPIECE_UNDERLINE), normalizers.Replace(" ", SPIECE_UNDERLINE)]
    )
    tok.pre_tokenizer = None
    tok.decoder = decoders.Sequence(
        [
            decoders.Replace(SPIECE_UNDERLINE, " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(content=" ", left=1, right=0),
        ]
    )
    tok.add_special_tokens(
        [AddedToken(p, special=True, normalized=False) for p, _, k in pieces if k in ("unknown", "control")]
    )
    tok.add_tokens([AddedToken(p, special=False, normalized=False) for p, _, k in pieces if k == "user_defined"])
    return _with_bos(tok)


def build_mistral_v3() -> Any:
    """Mistral 7B Instruct v0.3's tokenizer (32,768 pieces; [INST]=3, [TOOL_CALLS]=5)."""
    return build_sentencepiece_bpe(mistral_data_file(V3_FILE))


def build_mistral_v7() -> Any:
    """Mistral's SentencePiece v7 tokenizer (32,768 pieces; v3's ids plus [SYSTEM_PROMPT]=16,
    [/SYSTEM_PROMPT]=17, [TOOL_CONTENT]=18)."""
    return build_sentencepiece_bpe(mistral_data_file(V7_FILE))


def is_tekken_file(path: Path) -> bool:
    """Whether ``path`` is a mistral-common ``tekken.json`` (a ``config`` with a ``pattern``, and a ``vocab`` list)."""
    import json

    if path.suffix != ".json" or not path.is_file():
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and isinstance(data.get("vocab"), list) and "pattern" in data.get("config", {})


def build_tekken_file(path: Path) -> Any:
    """Any ``tekken.json`` (v3, or the v7 / v11 files that ship with Mistral Small 2501 and later
    models but not with mistral-common 1.13.1), its special tokens read from the file."""
    from transformers.integrations.mistral import MistralConverter

    return _with_bos(MistralConverter(vocab_file=str(path), add_prefix_space=False).converted())


def build_mistral_tekken() -> Any:
    """Mistral Nemo's tekken tokenizer (131,072 ids, the first 1,000 are control tokens)."""
    return build_tekken_file(mistral_data_file(TEKKEN_FILE))


def _with_bos(tok: Any) -> Any:
    """Wrap a raw tokenizer; like the official HF Mistral tokenizers, plain calls start with <s>.

    Chat formats encode with add_special_tokens=False and place <s> themselves.
    """
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    bos = ("<s>", tok.token_to_id("<s>"))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[bos])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


__all__ = [
    "build_mistral_tekken",
    "build_mistral_v3",
    "build_mistral_v7",
    "build_sentencepiece_bpe",
    "build_tekken_file",
    "is_tekken_file",
    "mistral_data_file",
]
