"""data.part_weights in the built rows: weights ride along as ``loss_weights`` only when they change
the loss, aligned with the labels and truncated with them; 0/1 weights leave the rows untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from train.data.dataset import BuildReport, build_rows
from train.formats import get_format
from train.formats.tokenize import tokenize
from train.schema import Conversation
from train.tokenizers import load_tokenizer

CORPUS = Path(__file__).resolve().parent / "fixtures" / "parity" / "corpus.jsonl"
CONVS = [Conversation.from_dict(json.loads(line)) for line in CORPUS.open(encoding="utf-8")]


@pytest.fixture(scope="module")
def tiny():
    return load_tokenizer("tiny_chatml")


def rows(tokenizer, **data) -> list[dict]:
    cfg = {"max_seq_len": 4096, "overlong": "truncate", "eval_fraction": 0.0, **data}
    return build_rows(CONVS, get_format("chatml"), tokenizer, cfg, BuildReport()).train


def test_weights_of_zero_and_one_leave_the_rows_as_they_were(tiny):
    plain = rows(tiny)
    assert all(set(row) == {"id", "input_ids", "labels"} for row in plain)
    assert rows(tiny, part_weights={"call_args": 1.0, "text": 1.0, "reasoning": 1.0}) == plain
    masked = rows(tiny, part_weights={"call_syntax": 0.0})  # 0.0 masks: labels say it, no weights needed
    assert all("loss_weights" not in row for row in masked) and masked != plain


def test_weighted_rows_carry_the_format_weights_aligned_with_labels(tiny):
    weighted = rows(tiny, part_weights={"call_args": 2.0})
    plain = rows(tiny)
    assert [row["id"] for row in weighted] == [row["id"] for row in plain]
    fmt = get_format("chatml")
    from train.formats import MaskPolicy

    by_id = {conv.id: conv for conv in CONVS}
    for row, base in zip(weighted, plain):
        assert row["input_ids"] == base["input_ids"] and row["labels"] == base["labels"]
        expected = tokenize(fmt, by_id[row["id"]], tiny, MaskPolicy(weights={"call_args": 2.0})).weights
        assert row["loss_weights"] == expected
        assert all((w > 0) == (label != -100) for w, label in zip(row["loss_weights"], row["labels"]))
    assert any(2.0 in row["loss_weights"] for row in weighted)


def test_truncation_cuts_weights_with_the_labels(tiny):
    full = {row["id"]: row for row in rows(tiny, part_weights={"call_args": 2.0})}
    cut = rows(tiny, part_weights={"call_args": 2.0}, max_seq_len=460)
    assert any(len(full[row["id"]]["input_ids"]) > 460 for row in cut)  # something was cut
    for row in cut:
        assert len(row["loss_weights"]) == len(row["labels"]) == len(row["input_ids"]) <= 460
        assert row["loss_weights"] == full[row["id"]]["loss_weights"][: len(row["input_ids"])]
