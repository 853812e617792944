"""Issue #29 item 5, single-turn half: tooltrain's per-item verdicts equal bfcl-eval's on hidden perturbations of
model outputs (tests/evaluation/bfcl_perturb.py) for every offline single-turn v4 category of the package.

Default tier: 4 items per category (fixed seed), the whole way through the reader, the task and its scorer. Slow
tier: every item of every category (3,641 items), the same comparison.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("bfcl_eval")
HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:  # the perturbation and reference helpers live beside this file
    sys.path.insert(0, HERE)

import bfcl_perturb as perturb
import bfcl_reference as ref

LABELS = {"gold", "wrong_value", "missing_required", "extra_call", "wrong_name", "reordered", "no_call", "text_answer"}


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    os.environ.setdefault("BFCL_PROJECT_ROOT", str(tmp_path_factory.mktemp("bfcl-root")))  # it creates dirs there
    return ref.load_official()


def _assert_agreement(report: dict) -> None:
    assert [name for name in report] == [entry.name for entry in perturb.SINGLE_TURN]
    disagreements = {name: row["disagreements"][:5] for name, row in report.items() if row["disagreements"]}
    assert disagreements == {}
    for name, row in report.items():
        assert row["cases"] == row["agree"] > 0 and 0 < row["valid"] < row["cases"], (name, row)


def test_sampled_perturbations_get_the_official_verdicts(official, tmp_path):
    report = perturb.agreement(official, per_category=4, folder=tmp_path)
    _assert_agreement(report)
    assert sum(row["items"] for row in report.values()) == 4 * 13


def test_every_perturbation_kind_is_built():
    entry = perturb.v4.category("parallel_multiple")
    item = next(i for i in perturb.package_items(entry) if len(i.ground_truth) > 1)
    assert {label for label, _ in perturb.perturbations(item)} == LABELS
    relevance = perturb.package_items(perturb.v4.category("irrelevance"))[0]
    assert [label for label, _ in perturb.perturbations(relevance)] == ["no_call", "text_answer", "call", "two_calls"]


# slow tier: the full sweep, every item of the 13 single-turn categories (22,247 cases, about 6 s on one core)
@pytest.mark.slow
def test_all_perturbations_of_every_item_get_the_official_verdicts(official):
    report = perturb.agreement(official, per_category=None, folder=None)
    _assert_agreement(report)
    assert sum(row["items"] for row in report.values()) == 3641


REFUSED = {"live_simple_106-63-0", "live_simple_112-68-0"}  # a nested key with no possible value: no call can match


def test_questions_the_reader_refuses_are_wrong_on_both_sides(official, tmp_path):
    entry = perturb.v4.category("live_simple")
    items = [item for item in perturb.package_items(entry) if item.id in REFUSED]
    theirs = perturb.official_verdicts(official, items)
    ours = perturb.tooltrain_verdicts(entry, items, tmp_path)
    assert len(theirs) == 14 and set(theirs.values()) == {"invalid"} and ours == theirs
