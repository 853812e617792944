"""PTR stage 1 (seed 001): rank_bm25's BM25Okapi on a hand-computed case, bundles, the two split protocols, the
ToolLens tool-level names, and the released code's first-100 BM25 numbers on the real files, pinned."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from train.papers.ptr.bundles import BM25Okapi, bundle_retriever, make_bundles, whitespace_tokens
from train.papers.ptr.data import (
    TOOLLENS_NAME_FIXES,
    DataError,
    Example,
    load_dataset,
    make_split,
    toollens_tool_name,
)
from train.papers.ptr.evaluate import Settings, check_stages, evaluate


def test_bm25okapi_on_a_hand_computed_case():
    # N = 3, lengths 2, 3, 1, avgdl = 2. df: a 1, b 2, c 1, d 1.
    docs = [["a", "b"], ["b", "c", "c"], ["d"]]
    bm25 = BM25Okapi(docs)
    common = math.log(2.5) - math.log(1.5)  # ln(N - df + 0.5) - ln(df + 0.5) for df = 1: 0.5108
    negative = math.log(1.5) - math.log(2.5)  # b, in 2 of 3 documents: -0.5108 < 0 -> the floor
    floor = 0.25 * (3 * common + negative) / 4  # epsilon * the mean idf of all four terms, the negative one included
    assert bm25.idf == pytest.approx({"a": common, "b": floor, "c": common, "d": common})
    norm = [1.5 * (0.25 + 0.75 * length / 2) for length in (2, 3, 1)]  # k1 (1 - b + b |d| / avgdl)
    # query b c: doc0 has b once; doc1 has b once and c twice; doc2 neither
    expected = [
        floor * 2.5 / (1 + norm[0]),
        floor * 2.5 / (1 + norm[1]) + common * 2 * 2.5 / (2 + norm[1]),
        0.0,
    ]
    assert bm25.scores(["b", "c"]) == pytest.approx(expected)
    assert expected == pytest.approx([0.0638532, 0.6808335, 0.0], abs=1e-6)  # the numbers, written out
    # a repeated query token counts twice; a token in no document adds nothing
    assert bm25.scores(["c", "c", "zzz"]) == pytest.approx([0.0, 2 * common * 5 / (2 + norm[1]), 0.0])


def test_the_released_codes_tokens_are_single_space_splits():
    assert whitespace_tokens("Find a  hotel\nnow") == ["Find", "a", "", "hotel\nnow"]


def test_bundles_are_unique_sorted_sets_in_first_appearance_order():
    examples = [Example("1", "q", ("b", "a")), Example("2", "q", ("c",)), Example("3", "q", ("a", "b"))]
    bundles = make_bundles(examples, {"a": "find A", "b": "book B", "c": "call C"})
    assert [(b.tools, b.text) for b in bundles] == [(("a", "b"), "a: find A+b: book B"), (("c",), "c: call C")]


def test_bm25_bundle_ties_go_to_the_first_bundle():
    examples = [Example("1", "q", ("x",)), Example("2", "q", ("y",))]
    bundles = make_bundles(examples, {"x": "same words", "y": "same words"})
    retriever = bundle_retriever("bm25", bundles)
    assert [b.tools for b in retriever.top1(["words", "nothing matches"])] == [("x",), ("x",)]


def test_dense_bundles_pick_the_nearest_text():
    from train.retrieval.embed import load_embedder

    examples = [Example("1", "q", ("Weather",)), Example("2", "q", ("Flights",))]
    bundles = make_bundles(examples, {"Weather": "forecast rain sun", "Flights": "book plane tickets"})
    retriever = bundle_retriever("dense", bundles, load_embedder("hash-bow"), use_cache=False)
    assert [b.tools for b in retriever.top1(["will it rain", "plane tickets to Rome"])] == [("Weather",), ("Flights",)]


def test_random20_split_is_seeded_disjoint_and_builds_bundles_from_training_only():
    examples = [Example(str(i), f"q{i}", (f"t{i % 7}",)) for i in range(1000)]
    split = make_split(examples, "random20", seed=3)
    assert (len(split.test), len(split.history)) == (200, 800)
    assert {e.id for e in split.test}.isdisjoint(e.id for e in split.history)
    assert split.bundle_source == split.history
    assert make_split(examples, "random20", seed=3).test == split.test
    assert make_split(examples, "random20", seed=4).test != split.test
    assert len(make_split(examples[:497], "random20", seed=0).test) == 99  # round(99.4)


def test_first100_split_tests_the_first_rows_and_builds_bundles_from_the_whole_file():
    examples = [Example(str(i), f"q{i}", ("t",)) for i in range(150)]
    split = make_split(examples, "first100", seed=7)
    assert split.test == examples[:100] and split.history == examples[100:] and split.bundle_source == examples
    with pytest.raises(DataError, match="more than 100"):
        make_split(examples[:100], "first100")


def test_toollens_names_are_cut_at_the_first_comma_or_colon_and_stripped():
    assert {name: toollens_tool_name(name) for name in TOOLLENS_NAME_FIXES} == TOOLLENS_NAME_FIXES
    assert toollens_tool_name("Worldwide Recipes") == "Worldwide Recipes"


def test_toollens_at_tool_level_covers_ptrs_314_tools(shared_data: Path):
    from train.sources.toollens import read_corpus

    ptr_names = json.loads((shared_data / "rectools_ptr" / "ToolLens_tool.json").read_text(encoding="utf-8"))
    library = next(iter(read_corpus(shared_data / "toollens" / "corpus.jsonl")))
    corpus_names = {info["tool_name"] for info in library.meta["corpus"].values()}
    assert len(library.tools) == 464 and len(corpus_names) == 314 == len(ptr_names)
    assert {toollens_tool_name(name) for name in corpus_names} == set(ptr_names)
    assert {name for name in corpus_names if name not in ptr_names} == set(TOOLLENS_NAME_FIXES)
    cut = {name: fixed for name, fixed in TOOLLENS_NAME_FIXES.items() if name.strip() != fixed}
    assert sorted(cut.values()) == ["Kubric", "Locations - Languages", "Movie", "Physical quantities"]
    dataset = load_dataset("toollens", shared_data)
    assert (len(dataset.examples), len(dataset.rejected), len(dataset.tools)) == (18770, 0, 314)
    assert {name for example in dataset.examples for name in example.tools} <= set(ptr_names)
    assert max(len(example.tools) for example in dataset.examples) == 3  # Table 3: 1-3 tools per query


def test_a_gold_tool_missing_from_the_library_is_a_counted_reject(tmp_path: Path):
    folder = tmp_path / "rectools_ptr"
    folder.mkdir()
    (folder / "RecTools_QT.json").write_text(json.dumps([{"query": "a", "tool": ["A"]}, {"query": "b", "tool": ["Z"]}]))
    (folder / "RecTools_tool.json").write_text(json.dumps({"A": "does a"}))
    dataset = load_dataset("rectools", tmp_path)
    assert [e.tools for e in dataset.examples] == [("A",)]
    assert dataset.read == 2 and [r.reason for r in dataset.rejected] == [
        "gold tool(s) 'Z' not in the rectools library"
    ]


@pytest.mark.parametrize(
    ("dataset", "bundles", "expected"),
    [
        # recall_paper, ndcg_paper, tracc, recall@k, ndcg@k of BM25 stage 1 on the first 100 rows (released protocol)
        ("rectools", 200, (0.5561230158730158, 0.619503009894009, 0.4774016109551824, 0.46092063492063495,
                           0.4709699817791678)),
        ("metatool", 88, (0.425, 0.6488045457857207, 0.425, 0.425, 0.44423502277012794)),
    ],
)  # fmt: skip
def test_first100_bm25_stage1_numbers_on_the_real_files(shared_data: Path, dataset, bundles, expected):
    (result,) = evaluate(Settings([dataset], shared_data, protocol="first100"))
    (run,) = result.runs
    assert (run["seed"], run["test"], run["bundles"]) == (None, 100, bundles)
    assert tuple(run["metrics"][key] for key in ("recall_paper", "ndcg_paper", "tracc", "recall", "ndcg")) == (
        pytest.approx(expected, abs=1e-12)
    )
    # the leak the issue names: every RecTools test query's own gold set is among the bundles
    if dataset == "rectools":
        assert sum(row["gold"] == row["bundle"] for row in result.trace) > 0


def test_stage_numbers_are_checked():
    assert check_stages([1]) == (1,) and check_stages([1, 2, 3]) == (1, 2, 3)  # stages 2-3: test_ptr_wiring.py
    with pytest.raises(ValueError, match="takes 1, 2 and 3"):
        check_stages([4])


def test_eval_recommend_cli(shared_data: Path, tmp_path: Path, capsys):
    from train.cli import main

    out = tmp_path / "m.json"
    argv = ["eval", "recommend", "metatool", "--data", str(shared_data), "--protocol", "first100", "-o", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "metatool   measured" in printed and "paper BM25 N/A" in printed
    document = json.loads(out.read_text())
    assert document["datasets"][0]["summary"]["tracc"] == {"mean": 0.425, "std": 0.0}
    assert main(["eval", "recommend", "nope", "--data", str(shared_data)]) == 2
    assert "error: unknown dataset 'nope'" in capsys.readouterr().err
    assert main(["eval", "recommend", "rectools", "--data", str(tmp_path)]) == 2
    assert "RecTools_QT.json: missing" in capsys.readouterr().err


def test_random20_reports_mean_and_std_over_seeds(shared_data: Path):
    (result,) = evaluate(Settings(["metatool"], shared_data, seeds=2))
    assert [run["seed"] for run in result.runs] == [0, 1] and all(run["test"] == 99 for run in result.runs)
    values = [run["metrics"]["tracc"] for run in result.runs]
    assert result.summary()["tracc"] == pytest.approx({"mean": np.mean(values), "std": np.std(values)})
