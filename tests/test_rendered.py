"""``train.data.rendered``: a conversation as ``data render`` writes and shows it (the verb's files and --show are
tested in tests/test_render_cli.py; ``trained_runs`` also in tests/formats/test_expansion.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from train.data.bench_render import first_conversations
from train.data.rendered import part_runs, part_segments, rendered_record, trained_runs
from train.formats import MaskPolicy, get_format
from train.formats.base import Segment

CORPUS = Path(__file__).resolve().parent / "fixtures" / "parity" / "corpus.jsonl"


@pytest.fixture(scope="module")
def chatml():
    from train.tokenizers import load_tokenizer

    return get_format("chatml"), load_tokenizer("tiny_chatml")


def test_rendered_record_adds_weights_and_text_only_when_asked(chatml):
    fmt, tokenizer = chatml
    conv = first_conversations(CORPUS, 1)[0][0]
    record, tokens = rendered_record(conv, fmt, tokenizer, MaskPolicy(), with_text=False)
    assert sorted(record) == ["id", "input_ids", "labels"] and record["input_ids"] == tokens.input_ids
    record, _ = rendered_record(conv, fmt, tokenizer, MaskPolicy(weights={"call_args": 2.0}), with_text=True)
    assert record["text"] == fmt.render_text(conv) and 2.0 in record["weights"]


def test_the_runs_spell_the_conversation_and_carry_its_parts(chatml):
    fmt, tokenizer = chatml
    conv = first_conversations(CORPUS, 1)[0][0]
    _, tokens = rendered_record(conv, fmt, tokenizer, MaskPolicy(), with_text=False)
    runs = trained_runs(tokens, tokenizer)
    segments = part_segments(fmt, conv)
    assert "".join(text for text, _ in runs) == fmt.render_text(conv) == "".join(s.text for s in segments)
    parts = part_runs(runs, segments)
    assert "".join(text for text, _, _ in parts) == fmt.render_text(conv)
    trained_parts = {part for _, trained, part in parts if trained}
    assert {"call_name", "call_args"} <= trained_parts


def test_part_runs_without_matching_text_keep_no_part():
    runs = [("ab", True), ("c", False)]
    assert part_runs(runs, [Segment("abc", "text")]) == [("ab", True, "text"), ("c", False, "text")]
    assert part_runs(runs, [Segment("xyz", "text")]) == [("ab", True, None), ("c", False, None)]
    split = part_runs([("abcd", True)], [Segment("ab", "text"), Segment("cd", "end")])
    assert split == [("ab", True, "text"), ("cd", True, "end")]
