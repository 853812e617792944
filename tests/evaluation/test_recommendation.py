"""TRACC, Recall@K and NDCG@K (PTR paper §3, §4.1) on hand-computed cases and RecTools."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from train.papers.ptr.scorer import (
    ndcg_at_k,
    ndcg_paper,
    recall_at_k,
    recall_paper,
    score_item,
    score_tracc,
    tracc,
)

LOG3 = math.log2(3)


@pytest.mark.parametrize(
    ("gold", "recommended", "expected"),
    [
        ({"a", "d"}, ["a", "b", "c"], (1 - 1 / 4) * 1 / 2),  # n1=2, n2=3, |A∪B|=4, |A∩B|=1
        ({"x", "y"}, ["x"], (1 - 1 / 2) * 1 / 2),
        ({"a", "b", "c"}, ["a", "b", "c", "d", "e"], (1 - 2 / 5) * 1),  # all found, two too many
        ({"a", "b"}, ["b", "a"], 1.0),
        ({"a", "b"}, ["c", "d"], 0.0),  # right size, nothing right
        ({"a"}, [], 0.0),  # |n2 - n1| = |A ∪ B|
    ],
)
def test_tracc_formula(gold, recommended, expected):
    assert tracc(gold, recommended) == pytest.approx(expected)


def test_recall_and_ndcg_at_k():
    gold = {"a", "b"}
    assert recall_at_k(gold, ["c", "a", "b"], 2) == 0.5
    # DCG = 1/log2(3) (hit at rank 2); IDCG = 1 + 1/log2(3)
    assert ndcg_at_k(gold, ["c", "a", "b"], 2) == pytest.approx((1 / LOG3) / (1 + 1 / LOG3))
    assert ndcg_at_k(gold, ["c", "a", "b"], 2) == pytest.approx(0.38685280723454163)
    assert ndcg_at_k(gold, ["a", "b"], 2) == 1.0
    assert ndcg_at_k(gold, ["a"], 2) == pytest.approx(1 / (1 + 1 / LOG3))  # a short list has fewer terms


@pytest.mark.parametrize(
    ("gold", "recommended", "recall", "ndcg", "recall_k", "ndcg_k"),
    [
        # rel = [0, 1, 1], K = 2: DCG@2 = 1/log2(3); both ideals are [1, 1]
        ({"a", "b"}, ["c", "a", "b"], 1.0, (1 / LOG3) / (1 + 1 / LOG3), 0.5, (1 / LOG3) / (1 + 1 / LOG3)),
        # one of three found at rank 1: its own ideal is [1] -> 1.0; the textbook ideal is 1 + 1/log2(3) + 1/2
        ({"a", "b", "c"}, ["a"], 1 / 3, 1.0, 1 / 3, 1 / (1 + 1 / LOG3 + 0.5)),
        # the hit sits past K = 1: the paper's Recall counts it (no cut), its NDCG@1 does not (DCG@1 = 0)
        ({"a"}, ["x", "y", "a"], 1.0, 0.0, 0.0, 0.0),
        # rel = [0, 1, 0, 1], K = 2: DCG@2 = 1/log2(3), own ideal [1, 1] = 1 + 1/log2(3)
        ({"a", "b"}, ["x", "a", "y", "b"], 1.0, (1 / LOG3) / (1 + 1 / LOG3), 0.5, (1 / LOG3) / (1 + 1 / LOG3)),
        ({"a", "b"}, ["x", "y"], 0.0, 0.0, 0.0, 0.0),  # no hit: no ideal, 0
        ({"a", "b"}, [], 0.0, 0.0, 0.0, 0.0),
    ],
)
def test_paper_and_textbook_recall_and_ndcg(gold, recommended, recall, ndcg, recall_k, ndcg_k):
    assert recall_paper(gold, recommended) == pytest.approx(recall)
    assert ndcg_paper(gold, recommended) == pytest.approx(ndcg)
    assert recall_at_k(gold, recommended, len(gold)) == pytest.approx(recall_k)
    assert ndcg_at_k(gold, recommended, len(gold)) == pytest.approx(ndcg_k)


def test_tracc_reads_a_as_the_gold_set_and_n1_as_its_size():
    # §3: A = ground truth (n1), B = recommendation (n2), ACC = |A ∩ B| / n1. Swapping them changes the value:
    # gold {a}, recommended [a, b, c]: (1 - 2/3) * 1/1 = 1/3; read the other way round it would be (1 - 2/3) * 1/3.
    assert tracc({"a"}, ["a", "b", "c"]) == pytest.approx(1 / 3)
    assert tracc({"a", "b", "c"}, ["a"]) == pytest.approx(1 / 9)


def test_repeated_recommendations_keep_their_first_rank():
    item = score_item(["a", "b"], ["a", "a", "b"])
    assert item == {
        "tracc": 1.0,
        "recall": 1.0,
        "ndcg": 1.0,
        "recall_paper": 1.0,
        "ndcg_paper": 1.0,
        "k": 2,
        "correct": True,
        "repeats_dropped": 1,
    }


def test_score_tracc_rows_and_issues():
    predictions = [
        {"id": "q1", "tools": ["a", "b", "c"]},
        {"id": "q2", "tools": ["x"]},
        {"id": "q5", "tools": "x"},  # malformed: scored as an empty recommendation
        {"id": "stray", "tools": ["a"]},
    ]
    references = [
        {"id": "q1", "tools": ["a", "d"]},
        {"id": "q2", "query": "...", "gold_tools": ["x", "y", "y"]},  # ToolQuery layout; a repeated gold counts once
        {"id": "q3", "tools": ["a"]},  # no prediction
        {"id": "q4", "tools": []},  # no gold: not scorable
        {"id": "q5", "tools": ["a"]},
    ]
    result = score_tracc(predictions, references)
    q1_ndcg = 1 / (1 + 1 / LOG3)
    assert result["overall"] == {
        "tracc": pytest.approx((0.375 + 0.25 + 0 + 0) / 4),
        "recall@k": pytest.approx((0.5 + 0.5 + 0 + 0) / 4),
        "ndcg@k": pytest.approx((q1_ndcg + q1_ndcg + 0 + 0) / 4),
        "recall_paper": pytest.approx((0.5 + 0.5 + 0 + 0) / 4),
        "ndcg_paper": pytest.approx((1 + 1 + 0 + 0) / 4),  # each finds its one hit at rank 1: its own ideal
        "queries": 4,
    }
    assert [(i["id"], i["error"]) for i in result["per_item"]] == [
        ("q1", None),
        ("q2", None),
        ("q3", "missing prediction"),
        ("q5", "unreadable prediction: 'tools' must be a list of tool names"),
    ]
    assert result["reference_errors"] == [{"id": "q4", "reason": "empty gold tool set: TRACC and Recall@K need n1 > 0"}]
    assert result["unknown_prediction_ids"] == ["stray"]


def test_empty_predictions_score_zero():
    result = score_tracc([], [{"id": "q1", "tools": ["a"]}, {"id": "q2", "tools": ["b", "c"]}])
    assert result["overall"] == {
        "tracc": 0.0,
        "recall@k": 0.0,
        "ndcg@k": 0.0,
        "recall_paper": 0.0,
        "ndcg_paper": 0.0,
        "queries": 2,
    }
    assert result["missing_prediction_ids"] == ["q1", "q2"]


def test_no_references_gives_null_metrics():
    assert score_tracc([], [])["overall"] == {
        "tracc": None,
        "recall@k": None,
        "ndcg@k": None,
        "recall_paper": None,
        "ndcg_paper": None,
        "queries": 0,
    }


def test_rectools_gold_scores_one_and_reversed_order_keeps_tracc(shared_data: Path):
    queries = json.loads((shared_data / "rectools_ptr" / "RecTools_QT.json").read_text(encoding="utf-8"))
    references = [{"id": f"RecTools_QT-{i}", "tools": q["tool"]} for i, q in enumerate(queries)]
    perfect = score_tracc([{"id": r["id"], "tools": r["tools"]} for r in references], references)
    assert perfect["overall"] == {
        "tracc": 1.0,
        "recall@k": 1.0,
        "ndcg@k": 1.0,
        "recall_paper": 1.0,
        "ndcg_paper": 1.0,
        "queries": 1000,
    }
    # Recommending only the first gold tool: TRACC = (1 - (n1-1)/n1) * 1/n1 = 1/n1^2, Recall@K = 1/n1.
    first_only = score_tracc([{"id": r["id"], "tools": r["tools"][:1]} for r in references], references)
    sizes = [len(set(r["tools"])) for r in references]
    assert first_only["overall"]["tracc"] == pytest.approx(sum(1 / n**2 for n in sizes) / 1000)
    assert first_only["overall"]["recall@k"] == pytest.approx(sum(1 / n for n in sizes) / 1000)
