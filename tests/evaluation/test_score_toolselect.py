"""ToolSelect accuracy (ToolVerifier §2.1): the tool in ``Act: CALLTOOL[...]`` or in one tool call."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from train.evaluation.toolselect import ChoiceError, chosen_tool, chosen_tool_in_text, gold_tool, score_toolselect


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ('Thought: reviews of a book.\nAct: CALLTOOL["Book Review"]', "Book Review"),
        ("Thought: x\nAct: CALLTOOL[CarFinder()]", "CarFinder"),  # the paper's Figure 2 form
        ("Act: CALLTOOL[ 'Sun-Rise Time tool' ]", "Sun-Rise Time tool"),
        ('Act:CALLTOOL["  News "]', "News"),
        ('Act: CALLTOOL["A"]\nAct: CALLTOOL["B"]', "A"),  # the first Act decides
        ('Act: CALLTOOL["A"] and then Act: CALLTOOL["B"]', "A"),
        ("Thought: the user said Act: nothing\nAct: CALLTOOL[Weather]", "Weather"),
    ],
)
def test_choice_in_text(text, name):
    assert chosen_tool_in_text(text) == name


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Thought: I would use Book Review.", "no 'Act: CALLTOOL[...]' in the text"),
        ('CALLTOOL["Book Review"]', "no 'Act: CALLTOOL[...]' in the text"),
        ('Act: CALLTOOL["Book Review"', "no 'Act: CALLTOOL[...]' in the text"),  # never closed
        ("Act: CALLTOOL[]", "cannot read a tool name in 'Act: CALLTOOL[]'"),
        ('Act: CALLTOOL["]', "cannot read a tool name in 'Act: CALLTOOL[\"]'"),
        ('Act: CALLTOOL["A"B"]', 'cannot read a tool name in \'Act: CALLTOOL["A"B"]\''),
        ("", "no 'Act: CALLTOOL[...]' in the text"),
        (None, "content is NoneType, not text"),
        (["Act: CALLTOOL[x]"], "content is list, not text"),
    ],
)
def test_malformed_text_has_no_choice(text, reason):
    with pytest.raises(ChoiceError) as err:
        chosen_tool_in_text(text)
    assert str(err.value) == reason


def test_tool_calls_win_over_text_and_must_be_one():
    assert chosen_tool({"content": 'Act: CALLTOOL["A"]', "tool_calls": [{"name": "B", "arguments": {}}]}) == "B"
    assert chosen_tool({"content": 'Act: CALLTOOL["A"]', "tool_calls": []}) == "A"
    with pytest.raises(ChoiceError, match="expected one tool choice, got 2 calls"):
        chosen_tool({"tool_calls": [{"name": "A"}, {"name": "A"}]})
    with pytest.raises(ChoiceError, match=r"tool_calls\[0\]: expected a non-empty string 'name'"):
        chosen_tool({"tool_calls": [{"name": ""}]})


def test_gold_layouts():
    assert gold_tool({"id": "x", "gold_tool": "A"}) == "A"
    assert gold_tool({"id": "x", "meta": {"gold_tool": "B"}}) == "B"
    assert gold_tool({"id": "x", "query": "q", "gold_tools": ["C"]}) == "C"
    conversation = {
        "id": "x",
        "messages": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": "Thought: t",
                "tool_calls": [{"type": "function", "function": {"name": "D", "arguments": {}}}],
            },
        ],
    }
    assert gold_tool(conversation) == "D"
    with pytest.raises(ChoiceError, match="expected exactly one gold tool, got 2"):
        gold_tool({"id": "x", "gold_tools": ["A", "B"]})


def test_score_counts_malformed_missing_and_duplicated_predictions():
    references = [{"id": str(i), "gold_tool": name} for i, name in enumerate(["A", "B", "C", "D", "E", "F"])] + [
        {"id": "bad"}
    ]
    predictions = [
        {"id": "0", "content": 'Thought: t\nAct: CALLTOOL["A"]'},  # right
        {"id": "1", "content": 'Act: CALLTOOL["A"]'},  # wrong tool
        {"id": "2", "content": "I think C."},  # malformed: wrong
        {"id": "3", "tool_calls": [{"name": "D", "arguments": {}}]},  # right, from a parsed call
        {"id": "4", "tool_calls": [{"name": "E"}, {"name": "E"}]},  # two calls: wrong
        {"id": "0", "content": 'Act: CALLTOOL["Z"]'},  # repeated id: the first row is scored
    ]
    result = score_toolselect(predictions, references)
    assert result["overall"] == {"accuracy": 2 / 6, "correct": 2, "total": 6}
    assert [(i["id"], i["predicted"], i["correct"], i["error"]) for i in result["per_item"]] == [
        ("0", "A", True, None),
        ("1", "A", False, None),
        ("2", None, False, "no 'Act: CALLTOOL[...]' in the text"),
        ("3", "D", True, None),
        ("4", None, False, "expected one tool choice, got 2 calls"),
        ("5", None, False, "missing prediction"),
    ]
    assert result["duplicate_prediction_ids"] == ["0"]
    assert result["reference_errors"] == [
        {
            "id": "bad",
            "reason": (
                "no gold tool: expected 'gold_tool', meta.gold_tool, one 'gold_tools' name or an assistant answer"
            ),
        }
    ]


def test_empty_predictions():
    result = score_toolselect([], [{"id": "a", "gold_tool": "A"}])
    assert result["overall"] == {"accuracy": 0.0, "correct": 0, "total": 1}
    assert score_toolselect([], [])["overall"] == {"accuracy": None, "correct": 0, "total": 0}


def test_toolselect_train_set_labels_score_against_the_reader(shared_data: Path):
    """Each row's own "Thought ... Act" text as the prediction, against the reader's records: right except
    the three rows whose label "Sun" was cut at a hyphen (the reader's gold is "Sun-Rise Time tool")."""
    from train.sources import toolselect

    path = shared_data / "toolselect_toolverifier" / "train.csv"
    references = [record.to_dict() for record in toolselect.read([path])]
    with path.open(encoding="utf-8", newline="") as handle:
        texts = [row["text"] for row in csv.DictReader(handle)]
    predictions = [{"id": f"train-{index}", "content": text.split("\n###\n")[-1]} for index, text in enumerate(texts)]
    result = score_toolselect(predictions, references)
    assert result["overall"] == {"accuracy": 552 / 555, "correct": 552, "total": 555}
    wrong = [(item["predicted"], item["gold"]) for item in result["per_item"] if not item["correct"]]
    assert wrong == [("Sun", "Sun-Rise Time tool")] * 3
