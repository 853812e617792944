"""``data build toolselect`` (seed 003, §2.1, A.4): seeded gold shuffle, the ablation arguments, held-out rows,
exact counts and byte-identical rebuilds, on the real ToolSelect rows."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from train.builders import bind, make_args, parse_args
from train.cli import main
from train.papers.toolverifier.builder import ToolSelectArgs, build, shorten
from train.schema import Conversation
from train.sources.toolselect import read

READ, HARD = 555, 73  # the published rows; 73 of them have fewer than 8 candidates


@pytest.fixture
def inputs(shared_data):
    folder = shared_data / "toolselect_toolverifier"
    return [folder / "train.csv", folder / "tools.csv"]


@pytest.fixture
def rows(inputs):
    return [conv for conv in read(inputs) if isinstance(conv, Conversation)]


def built(rows, seed=42, **args):
    dropped = Counter()
    out = list(build(rows, seed=seed, on_drop=lambda reason: dropped.update([reason]), **args))
    return out, dropped


def positions(rows):
    return Counter((len(conv.tools), conv.meta["gold_position"]) for conv in rows)


def test_the_gold_position_is_shuffled_by_the_seed_and_reaches_every_position(rows):
    first, _ = built(rows, seed=42)
    again, _ = built(list(reversed(rows)), seed=42)  # a row's order depends on its seed and id, not its neighbours
    other, _ = built(rows, seed=7)
    assert [c.to_dict() for c in first] == [c.to_dict() for c in reversed(again)]
    assert [c.meta["candidates"] for c in first] != [c.meta["candidates"] for c in other]
    for size in (2, 3, 4, 8):  # every position of every candidate-list size is reached
        assert {pos for (n, pos) in positions(first) if n == size} == set(range(size))
    for conv, original in zip(first, rows):
        assert sorted(conv.meta["candidates"]) == sorted(original.meta["candidates"])
        assert conv.meta["candidates"] == [tool.name for tool in conv.tools]
        assert conv.tools[conv.meta["gold_position"]].name == conv.meta["gold_tool"]
        assert conv.messages == original.messages  # the note and the gold call are untouched


def test_gold_first_puts_the_gold_first_and_keeps_the_others_in_row_order(rows):
    out, _ = built(rows, gold_first=True)
    assert set(positions(out)) == {(n, 0) for n in (2, 3, 4, 8)}
    for conv, original in zip(out, rows):
        gold = conv.meta["gold_tool"]
        assert conv.meta["candidates"] == [gold] + [n for n in original.meta["candidates"] if n != gold]


def test_drop_hard_drops_exactly_the_rows_with_fewer_than_8_candidates(rows):
    kept, dropped = built(rows)
    assert (len(kept), sum(c.meta["hard"] for c in kept), dropped) == (READ, HARD, Counter())
    easy, dropped = built(rows, drop_hard=True)
    assert (len(easy), dropped) == (READ - HARD, Counter({"hard row (drop_hard)": HARD}))
    assert all(len(conv.tools) == 8 and not conv.meta["hard"] for conv in easy)


def test_short_notes_cut_the_notes_at_a_sentence_end_within_the_word_limit(rows):
    full, _ = built(rows)
    short, _ = built(rows, short_notes=True)
    notes = [(f.messages[1].content, s.messages[1].content) for f, s in zip(full, short)]
    assert max(len(n.split()) for n, _ in notes) > 150  # the full notes are long (mean 1054 characters)
    assert all(len(s.split()) <= 150 and n.startswith(s) for n, s in notes)
    cut = [(n, s) for n, s in notes if n != s]
    assert len(cut) == sum(len(n.split()) > 150 for n, _ in notes) > 0
    assert all(s.endswith((".", "!", "?")) for _, s in cut)
    assert [c.messages[1].tool_calls for c in short] == [c.messages[1].tool_calls for c in full]
    assert shorten("One two. Three four five six.", 4) == "One two."
    assert shorten("one two three four five", 3) == "one two three"  # no sentence end: the word cut
    assert shorten("Short.", 3) == "Short."


def test_heldout_rows_are_chosen_by_the_seed_alone_and_never_trained(rows):
    train, dropped = built(rows, heldout=50)
    assert (len(train), dropped) == (READ - 50, Counter({"held out": 50}))
    ablated, _ = built(rows, heldout=50, drop_hard=True, gold_first=True, short_notes=True)
    held = {c.id for c in rows} - {c.id for c in train}
    assert held.isdisjoint(c.id for c in ablated) and len(held) == 50  # the same rows whatever the ablation
    other, _ = built(rows, seed=1, heldout=50)
    assert {c.id for c in rows} - {c.id for c in other} != held


def test_arguments_are_typed_and_checked(rows):
    assert parse_args("toolselect", ["gold_first=true", "heldout=40"]) == {"gold_first": True, "heldout": 40}
    assert make_args("toolselect", {"drop_hard": True}) == ToolSelectArgs(drop_hard=True)
    with pytest.raises(ValueError, match="unknown argument.*valid: drop_hard, gold_first, heldout, short_note_words"):
        make_args("toolselect", {"shuffle": False})
    with pytest.raises(ValueError, match="heldout must be 0 or more"):
        make_args("toolselect", {"heldout": -1})
    with pytest.raises(ValueError, match="heldout=600 but only 555 rows were read"):
        list(bind("toolselect", 42, {"heldout": 600})(rows))


def test_data_build_writes_the_rows_the_counts_and_rebuilds_byte_identically(inputs, tmp_path, capsys):
    spec = "toolselect:" + ",".join(map(str, inputs))
    args = [spec, "heldout=55", "drop_hard=true", "--seed", "3"]
    assert main(["data", "build", "toolselect", *args, "--out-dir", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [
        "read 555: training rows 432 (0 hard), held out 55, dropped 123, rejected 0",
        "ablations: drop_hard; notes shortened 0",
    ]
    assert main(["data", "build", "toolselect", *args, "--out-dir", str(tmp_path / "b")]) == 0
    for name in ("train.jsonl", "heldout.jsonl", "report.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    held_hard = report["heldout"]["hard"]
    assert report["read"] == 555 and report["rejected"] == {}
    assert report["dropped"] == {"held out": 55, "hard row (drop_hard)": HARD - held_hard}
    assert report["read"] == sum(report["dropped"].values()) + report["train"]["rows"]
    assert report["options"] == {**vars(ToolSelectArgs()), "heldout": 55, "drop_hard": True}
    heldout = [json.loads(line) for line in (tmp_path / "a" / "heldout.jsonl").read_text().splitlines()]
    assert len(heldout) == 55 and sum(row["meta"]["hard"] for row in heldout) == held_hard


def parts(conv):
    """(candidate order, note, gold call) of a built row: what the three switches may change."""
    answer = conv.messages[-1]
    return conv.meta["candidates"], answer.content, [(c.name, c.arguments) for c in answer.tool_calls]


@pytest.mark.parametrize(
    ("switch", "changes"),
    [("gold_first", {"order"}), ("short_notes", {"note"}), ("drop_hard", {"rows"})],
)
def test_each_switch_changes_exactly_its_part(rows, switch, changes):
    """Against the Full Data build with the same seed: gold_first only reorders candidates, short_notes only cuts
    notes, drop_hard only removes the hard rows (every kept row byte-identical)."""
    full = {c.id: c for c in built(rows)[0]}
    ablated = {c.id: c for c in built(rows, **{switch: True})[0]}
    changed = set()
    if set(ablated) != set(full):
        assert set(full) - set(ablated) == {c.id for c in full.values() if c.meta["hard"]}
        changed.add("rows")
    for row_id, conv in ablated.items():
        (order, note, call), (order0, note0, call0) = parts(conv), parts(full[row_id])
        assert call == call0 and conv.messages[0] == full[row_id].messages[0]
        assert sorted(order) == sorted(order0)
        changed |= {"order"} if order != order0 else set()
        changed |= {"note"} if note != note0 else set()
        if (order, note) == (order0, note0):
            assert conv.to_dict() == full[row_id].to_dict()
    assert changed == changes
