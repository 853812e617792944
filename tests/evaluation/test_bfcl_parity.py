"""Parity of train/evaluation/bfcl/ with the official BFCL checker (bfcl-eval, tests/requirements-reference.txt).

The corpus: every ground truth of every scorable v4 (from the bfcl-eval package) and v2 (shared/data) category
as a gold prediction, plus systematic perturbations (tests/evaluation/bfcl_corpus.py). Every case must get the
official verdict *and* error type, except where the official checker raises: those cases are listed in
tests/fixtures/evaluation/bfcl/official_raises.json and the test asserts that list exactly.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import sys
import zlib
from pathlib import Path

import pytest

pytest.importorskip("bfcl_eval")
HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:  # pytest imports tests in importlib mode: put the corpus helpers beside this file in reach
    sys.path.insert(0, HERE)

import bfcl_reference as ref

from train.evaluation.bfcl.summary import summarize_bfcl

# Exact corpus sizes: a category that silently failed to load, or a perturbation that stopped firing, shows here.
CORPUS_SIZES = {"v4": 162737, "v2": 162136}
SAMPLE_SIZES = {"v4": 19798, "v2": 20062}
RAISES_FILE = Path(__file__).resolve().parents[1] / "fixtures" / "evaluation" / "bfcl" / "official_raises.json"


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    os.environ.setdefault("BFCL_PROJECT_ROOT", str(tmp_path_factory.mktemp("bfcl-root")))  # it creates dirs there
    return ref.load_official()


@pytest.fixture(scope="module")
def documented_raises() -> list[dict]:
    return json.loads(RAISES_FILE.read_text(encoding="utf-8"))


def _data_dir(version: str, official, request) -> Path:
    if version == "v4":
        return official.data_dir
    return request.getfixturevalue("shared_data") / "bfcl_v2"


SMALL_CATEGORIES = {"live_parallel", "live_parallel_multiple", "live_relevance"}  # 16 to 41 items each: all kept


def _in_sample(documented: list[dict]):
    """About one item in ten, chosen by a stable hash, plus the small categories whole and every item with a
    documented official raise."""
    always = {tuple(row["case"].split("/")[1:3]) for row in documented}

    def keep(category: str, item_id: str) -> bool:
        if category in SMALL_CATEGORIES or (category, item_id) in always:
            return True
        return zlib.crc32(f"{category}/{item_id}".encode()) % 10 == 0

    return keep


def _assert_parity(official, cases: list, documented: list[dict]):
    disagreements, raises = [], []
    for case in cases:
        theirs = ref.official_verdict(official, case)
        ours = ref.our_verdict(case)
        if theirs[0].startswith("raises"):
            raises.append({"case": case.key, "official": theirs[0], "ours": " ".join(ours)})
        elif ours != theirs:
            disagreements.append((case.key, theirs, ours))
    assert disagreements == [], f"{len(disagreements)} disagreements, first: {disagreements[:10]}"
    built = {case.key for case in cases}
    assert raises == [row for row in documented if row["case"] in built]


# v2's sample is the slow tier's (with both full corpora): v4, the current release, is the default tier's
@pytest.mark.parametrize("version", ["v4", pytest.param("v2", marks=pytest.mark.slow)])
def test_sampled_corpus_gets_the_official_verdicts(version, official, documented_raises, request):
    cases = ref.build_corpus({version: _data_dir(version, official, request)}, keep=_in_sample(documented_raises))
    assert len(cases) == SAMPLE_SIZES[version]
    _assert_parity(official, cases, documented_raises)


@pytest.mark.slow
@pytest.mark.parametrize("version", ["v4", "v2"])
def test_full_corpus_gets_the_official_verdicts(version, official, documented_raises, request):
    cases = ref.build_corpus({version: _data_dir(version, official, request)})
    assert len(cases) == CORPUS_SIZES[version]
    _assert_parity(official, cases, documented_raises)


def test_documented_raises_are_all_in_the_corpus(documented_raises):
    assert len(documented_raises) == 31
    assert {row["case"].rsplit("/", 1)[0] for row in documented_raises} == {
        "v2/parallel_multiple/parallel_multiple_179"
    }
    assert {(row["official"], row["ours"]) for row in documented_raises} == {
        ("raises TypeError", "invalid reference_error:function_not_offered")
    }


def test_sample_covers_both_verdicts_in_every_category(official, documented_raises):
    cases = ref.build_corpus({"v4": official.data_dir}, keep=_in_sample(documented_raises))
    seen: dict[str, set] = {}
    for case in cases:
        seen.setdefault(case.category, set()).add(ref.our_verdict(case)[0])
    assert len(seen) == 13
    assert all(verdicts == {"valid", "invalid"} for verdicts in seen.values()), seen


def test_scoring_leaves_its_inputs_unchanged(official, documented_raises):
    cases = ref.build_corpus({"v4": official.data_dir}, keep=_in_sample(documented_raises))[::23]
    for case in cases:
        before = copy.deepcopy((case.result, case.functions, case.ground_truth))
        ref.our_verdict(case)
        assert (case.result, case.functions, case.ground_truth) == before, case.key


# ---- where the official checker raises: one synthetic case per class documented in bfcl.py -----------------

_F = [{"name": "f", "parameters": {"type": "dict", "properties": {"a": {"type": "string"}}, "required": []}}]


def _doc(param_type: str, **extra) -> list:
    spec = {"type": param_type, **extra}
    return [{"name": "f", "parameters": {"type": "dict", "properties": {"a": spec}, "required": []}}]


OFFICIAL_RAISES = [
    # (why, category, functions, ground truth, result, official exception, our verdict)
    ("ground truth names a function not offered", "parallel", _F, [{"g": {"a": ["x"]}}], [{"g": {"a": "x"}}],
     "TypeError", ("invalid", "reference_error:function_not_offered")),
    ("same, multiple category", "multiple", _F, [{"g": {"a": ["x"]}}], [{"g": {"a": "x"}}],
     "TypeError", ("invalid", "reference_error:function_not_offered")),
    ("list of dicts with a non-dict element, let through by a '' answer", "simple_python",
     _doc("array", items={"type": "dict"}), [{"f": {"a": [[{"k": ["v"]}], ""]}}], [{"f": {"a": [5]}}],
     "AttributeError", ("invalid", "value_error:list_dict_count")),
    ("dict value whose possible answer is a number", "simple_python", _doc("dict"),
     [{"f": {"a": [{"k": 5}]}}], [{"f": {"a": {"k": 5}}}], "TypeError", ("invalid", "value_error:dict_value")),
    ("list whose later possible answer is a number", "simple_python", _doc("array", items={"type": "integer"}),
     [{"f": {"a": [[1], 5]}}], [{"f": {"a": [2]}}], "TypeError", ("invalid", "value_error:list/tuple")),
    ("dict whose later possible answer is not a dict", "simple_python", _doc("dict"),
     [{"f": {"a": [{"k": ["v"]}, 5]}}], [{"f": {"a": {"k": "w"}}}], "TypeError", ("invalid", "dict_checker:unclear")),
    ("possible answers not a list", "simple_python", _F, [{"f": {"a": 5}}], [{"f": {"a": "x"}}],
     "TypeError", ("invalid", "possible_answer:malformed")),
    ("parameter type without a mapping", "simple_python", _doc("number"), [{"f": {"a": [1]}}], [{"f": {"a": 1}}],
     "KeyError", ("invalid", "type_error:unsupported")),
    ("array without an element type", "simple_python", _doc("array"), [{"f": {"a": [[1]]}}], [{"f": {"a": [1]}}],
     "KeyError", ("invalid", "type_error:unsupported")),
    ("Java Set", "simple_java", _doc("Set"), [{"f": {"a": [[1]]}}], [{"f": {"a": "new HashSet<>()"}}],
     "NotImplementedError", ("invalid", "type_error:unsupported")),
    ("int too large for a float", "simple_python", _doc("float"), [{"f": {"a": [1.0]}}], [{"f": {"a": 10**400}}],
     "OverflowError", ("invalid", "type_error:simple")),
    ("empty ground truth", "simple_python", _F, [], [{"f": {"a": "x"}}],
     "IndexError", ("invalid", "reference_error:malformed")),
    ("no function offered", "simple_python", [], [{"f": {"a": ["x"]}}], [{"f": {"a": "x"}}],
     "IndexError", ("invalid", "reference_error:malformed")),
    ("JavaScript Bigint ending in a newline", "simple_javascript", _doc("Bigint"), [{"f": {"a": [5]}}],
     [{"f": {"a": "5n\n"}}], "ValueError", ("valid", "")),
]  # fmt: skip


@pytest.mark.parametrize(
    "category, functions, ground_truth, result, exception, ours",
    [row[1:] for row in OFFICIAL_RAISES],
    ids=[row[0] for row in OFFICIAL_RAISES],
)
def test_documented_cases_where_the_official_checker_raises(
    official, category, functions, ground_truth, result, exception, ours
):
    case = ref.Case("synthetic", category, "x", "synthetic", result, functions, ground_truth)
    assert ref.official_verdict(official, case) == (f"raises {exception}", "")
    assert ref.our_verdict(case) == ours


# ---- leaderboard aggregation against bfcl-eval's own CSV writer --------------------------------------------

# CSV file -> column -> our summary key (or category name)
LEADERBOARD_COLUMNS = {
    "data_overall.csv": {
        "Overall Acc": "overall", "Non-Live AST Acc": "non_live_ast_summary", "Live Acc": "live_overall",
        "Multi Turn Acc": "multi_turn_overall", "Web Search Acc": "web_search_summary",
        "Memory Acc": "memory_summary", "Relevance Detection": "relevance", "Irrelevance Detection": "irrelevance",
    },
    "data_non_live.csv": {
        "Non-Live Overall Acc": "non_live_overall", "AST Summary": "non_live_ast_summary",
        "Simple AST": "non_live_simple_ast", "Python Simple AST": "simple_python", "Java Simple AST": "simple_java",
        "JavaScript Simple AST": "simple_javascript", "Multiple AST": "multiple", "Parallel AST": "parallel",
        "Parallel Multiple AST": "parallel_multiple", "Irrelevance Detection": "irrelevance_category",
    },
    "data_live.csv": {
        "Live Overall Acc": "live_overall", "AST Summary": "live_ast_summary", "Python Simple AST": "live_simple",
        "Python Multiple AST": "live_multiple", "Python Parallel AST": "live_parallel",
        "Python Parallel Multiple AST": "live_parallel_multiple", "Irrelevance Detection": "live_irrelevance",
        "Relevance Detection": "live_relevance",
    },
    "data_multi_turn.csv": {"Multi Turn Overall Acc": "multi_turn_overall"},
    "data_agentic.csv": {
        "Agentic Overall Acc": "agentic_overall", "Web Search Summary": "web_search_summary",
        "Memory Summary": "memory_summary",
    },
}  # fmt: skip

_ALL_V4 = [
    "simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple", "irrelevance",
    "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance", "live_relevance",
    "multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context",
    "web_search_base", "web_search_no_snippet", "memory_kv", "memory_vector", "memory_rec_sum",
]  # fmt: skip
COMPLETE = {name: {"accuracy": (7 * i + 3) % 19 / 19, "total": 10 + 37 * i} for i, name in enumerate(_ALL_V4)}
AST_ONLY = {name: COMPLETE[name] for name in _ALL_V4[:13] if name not in ("parallel", "live_multiple")}


@pytest.mark.parametrize("scores", [COMPLETE, AST_ONLY], ids=["all categories", "AST only, two missing"])
def test_summary_matches_the_official_leaderboard(official, tmp_path, scores):
    from bfcl_eval.eval_checker.eval_runner_helper import generate_leaderboard_csv

    table = {
        ref.PLAIN_MODEL: {name: {"accuracy": s["accuracy"], "total_count": s["total"]} for name, s in scores.items()}
    }
    generate_leaderboard_csv(table, tmp_path)
    ours = summarize_bfcl(scores, version="v4")
    values = {**ours["categories"], **ours, "irrelevance_category": ours["categories"]["irrelevance"]}

    compared = 0
    for file_name, columns in LEADERBOARD_COLUMNS.items():
        (row,) = list(csv.DictReader((tmp_path / file_name).open(encoding="utf-8")))
        for column, key in columns.items():
            if row[column] != "N/A":  # BFCL hides a summary with a missing part but still counts it as 0
                assert row[column] == f"{values[key] * 100:.2f}%", (file_name, column)
                compared += 1
    assert compared == (30 if scores is COMPLETE else 21)
