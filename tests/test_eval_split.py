"""The eval split is decided once (``train.data.dataset.split_eval``), on each conversation together with
its row: the held-out conversations never reach training, and each eval row's conversation is the
one it was built from, exactly as the build paired them before the split was made in one place."""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from train.data.dataset import build_dataset, split_eval
from train.schema import Conversation, Message, dumps
from train.tokenizers import load_tokenizer

DEMO = "pkg://train/assets/demo/glaive_en_300.json"
SEED = 7
# Recorded with the build before this change (the split decided on conversations, again on rows,
# then re-paired by id), on the same data, seed and settings.
BEFORE = {
    "train_rows": 214,
    "eval_rows": 62,
    "eval_ids_sha256": "061e1813cd811dccc2c19dcb4f3810e5288528c82aaa3b90e14d1c3c3042e618",
    "eval_conversations_sha256": "c45edcbf9272a11bdb54936d184f70db1406ce5ff64549d5bef00fba823e22e4",
}


def seeded_shuffle(conversations, on_drop):
    """A recipe-builder stand-in: the stream in an order fixed by SEED, not the file's."""
    items = list(conversations)
    random.Random(SEED).shuffle(items)
    return iter(items)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cfg = {
        "name": "split",
        "sources": [{"name": "glaive", "inputs": [DEMO], "limit": None}],
        "builder": None,
        "builder_args": {},
        "max_seq_len": 2048,
        "overlong": "drop",
        "packing": False,
        "last_turn_only": False,
        "part_weights": {},
        "eval_fraction": 0.2,
        "cache_dir": None,
    }
    return build_dataset(
        cfg,
        "chatml",
        load_tokenizer("tiny_chatml"),
        tmp_path_factory.mktemp("cache"),
        transform=seeded_shuffle,
        key_extra={"seed": SEED},
    )


def digest(texts) -> str:
    return hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()


def test_held_out_conversations_never_reach_training(built):
    assert built.report.dropped_overlong and built.report.invalid  # rows dropped between reading and the split
    held_out = {conv.id for conv in built.eval_conversations}
    assert held_out and not held_out & {row["id"] for row in built.train}
    assert [conv.id for conv in built.eval_conversations] == [row["id"] for row in built.eval]


def test_the_pairing_is_the_one_the_build_made_before(built):
    now = {
        "train_rows": len(built.train),
        "eval_rows": len(built.eval),
        "eval_ids_sha256": digest(row["id"] for row in built.eval),
        "eval_conversations_sha256": digest(dumps(conv) for conv in built.eval_conversations),
    }
    assert now == BEFORE


def test_split_eval_keeps_each_conversation_with_its_row():
    convs = [
        Conversation(f"c{i}", [Message(role="user", content="q"), Message(role="assistant", content="a")])
        for i in range(40)
    ]
    rows = [(conv, {"id": conv.id, "n": n}) for n, conv in enumerate(convs)]
    split = split_eval(rows, 0.25)
    assert len(split.eval) + len(split.train) == 40 and split.eval
    assert [row["n"] for row in split.eval] == [convs.index(conv) for conv in split.eval_conversations]
    assert split_eval(rows, 0.0).eval == [] and len(split_eval(rows, 0.0).train) == 40
    assert json.dumps(split_eval(rows, 0.25).eval) == json.dumps(split.eval)  # the same ids every time
