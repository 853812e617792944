"""A limit on Meta-Bench is a counted cut, noted for the console, never a silent one: the rows are in build order
(one source after another), so a prefix is not a sample of the bench."""

from __future__ import annotations

from train.papers.metatool.metabench import MetaBenchTask, limit_notice
from train.schema import Conversation, Message


def chat_row(index: int) -> Conversation:
    messages = [Message(role="user", content="hi"), Message(role="assistant", content="hello")]
    return Conversation(f"row-{index}", messages, meta={"category": "chat", "turn": 1})


def test_a_cut_is_noted_with_its_count_for_the_caller_to_print(capsys):
    # prepare has no rank: it notes the line and the caller prints it on the main rank (tests/engine/test_mends37.py)
    prepared = MetaBenchTask(embedder="hash-bow").prepare([chat_row(i) for i in range(5)], limit=3)
    assert len(prepared.items) == 3
    assert prepared.notes == [
        "Meta-Bench: evaluating 3 of 5 rows (limit=3: 2 left unread; the first rows in file order)"
    ]
    assert capsys.readouterr().out == ""


def test_no_line_when_nothing_is_cut():
    assert MetaBenchTask(embedder="hash-bow").prepare([chat_row(i) for i in range(3)], limit=3).notes == []
    assert MetaBenchTask(embedder="hash-bow").prepare([chat_row(i) for i in range(3)], limit=None).notes == []


def test_skipped_rows_are_not_counted_as_cut():
    assert limit_notice(kept=2, skipped=1, rows=3, limit=2) == ""
    assert limit_notice(kept=2, skipped=1, rows=4, limit=2).startswith("Meta-Bench: evaluating 2 of 4 rows")
