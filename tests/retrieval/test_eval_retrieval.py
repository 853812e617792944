"""``tooltrain eval retrieval`` and its stages on the tiny fixture (hand-derived numbers), the rule teacher,
sampling; and one real-data run with the packaged MiniLM model."""

from __future__ import annotations

import json

import pytest

from train.cli import main
from train.papers.metatool.hypothesis import RuleTeacher, clean_request, gold_hypothesis
from train.papers.metatool.retrieval_eval import build_pairs, evaluate, hit_rates, sample_queries
from train.papers.metatool.retrieve import ToolHypothesis
from train.retrieval.embed import load_embedder
from train.retrieval.index import ToolIndex, read_library
from train.schema import ToolQuery


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def tiny(fixtures):
    return fixtures / "retrieval" / "tiny.jsonl"


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["eval", "retrieval", *args])
    out, err = capsys.readouterr()
    return code, out, err


# Keyword (BM25) ranks on tiny.jsonl, derived by hand: q1 "traffic" matches only get_traffic_report (rank 1);
# q2 "book table" puts book_table first, "recipe" does not match "recipes" (no stemming) so search_recipes keeps
# its library position among the zero scores (rank 4); q3 and q6 match nothing: convert_currency is 5th in the
# library, get_weather 2nd; q4's translate_text is not in the library (a miss); q5 has no gold tool (skipped).
def test_keyword_table_on_the_tiny_fixture(capsys, tiny):
    code, out, _ = cli(capsys, "--method", "keyword", "--queries", str(tiny))
    assert code == 0
    assert out.splitlines() == [
        (
            "method keyword (bm25), embedder -, 5 queries, 6 gold tools, 5 rankings, 6 library tools, "
            "1 gold tools not in the library (misses), 1 queries without gold tools skipped"
        ),
        "alpha    HR@1    HR@3    HR@5",
        "    -  0.3333  0.5000  0.8333",  # ranks 1, 1, 4, 5, 2 and a miss over 6 pairs
    ]


def test_split_sample_k_and_outputs(capsys, tiny, tmp_path):
    per_item, metrics = tmp_path / "items.jsonl", tmp_path / "m.json"
    code, out, _ = cli(
        capsys,
        "--method",
        "keyword",
        "--queries",
        str(tiny),
        "--split",
        "test",
        "--k",
        "5,1",
        "--per-item",
        str(per_item),
        "-o",
        str(metrics),
    )
    assert code == 0
    assert out.splitlines()[1:] == ["alpha    HR@1    HR@5", "    -  0.5000  1.0000"]  # ranks 1, 4, 1, 5
    items = [json.loads(line) for line in per_item.read_text().splitlines()]
    assert [(i["id"], i["gold"], i["rank"]) for i in items] == [
        ("q1", "get_traffic_report", 1),
        ("q2", "search_recipes", 4),
        ("q2", "book_table", 1),
        ("q3", "convert_currency", 5),
    ]
    assert items[0]["retrieved"] == [
        "get_traffic_report",
        "get_weather",
        "book_table",
        "search_recipes",
        "convert_currency",
    ]
    summary = json.loads(metrics.read_text())
    assert summary["rows"] == [{"alpha": None, "HR@1": 0.5, "HR@5": 1.0}]
    assert (summary["queries"], summary["pairs"], summary["unknown_gold"], summary["skipped_queries"]) == (3, 4, 0, [])


def test_alpha_sweep_prints_one_row_per_alpha(capsys, tiny):
    # gold hypotheses are the gold tools' own texts: each finds itself first at every α; translate_text is a miss
    code, out, _ = cli(
        capsys,
        "--method",
        "metatool",
        "--hypothesis",
        "gold",
        "--alpha",
        "0.5,0.65,0.8,1.0",
        "--embedder",
        "hash-bow",
        "--queries",
        str(tiny),
    )
    assert code == 0
    assert out.splitlines() == [
        (
            "method metatool (gold hypothesis), embedder hash-bow, 5 queries, 6 gold tools, 5 rankings, 6 library "
            "tools, 1 gold tools not in the library (misses), 1 queries without gold tools skipped"
        ),
        "alpha    HR@1    HR@3    HR@5",
        "  0.5  0.8333  0.8333  0.8333",
        " 0.65  0.8333  0.8333  0.8333",
        "  0.8  0.8333  0.8333  0.8333",
        "    1  0.8333  0.8333  0.8333",
    ]


def test_teacher_and_rewrite_hypotheses_run(capsys, tiny):
    for hypothesis, rankings in (("teacher", 5), ("rewrite", 5)):
        code, out, _ = cli(
            capsys, "--method", "metatool", "--hypothesis", hypothesis, "--embedder", "hash-bow", "--queries", str(tiny)
        )
        assert code == 0
        assert f"{rankings} rankings" in out.splitlines()[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--alpha", "0.5,x"], "--alpha: expected a comma list of numbers, got '0.5,x'"),
        (["--alpha", "1.2"], "--alpha: every α must lie in [0, 1], got 1.2"),
        (["--k", "0,5"], "--k: every k must be at least 1, got 0,5"),
        (["--sample", "0"], "--sample: expected a positive number, got 0"),
        (["--library", "/nonexistent/l.jsonl"], "--library: /nonexistent/l.jsonl: no such file"),
    ],
)
def test_bad_arguments_exit_2_with_the_reason(capsys, tiny, args, message):
    code, out, err = cli(capsys, "--method", "keyword", "--queries", str(tiny), *args)
    assert (code, out, err) == (2, "", f"error: {message}\n")


def test_a_bad_query_line_is_named(capsys, tmp_path, fixtures):
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "a", "query": "x", "gold_tools": []}\n{"id": "b", "query": 3, "gold_tools": []}\n')
    code, _, err = cli(
        capsys,
        "--method",
        "keyword",
        "--queries",
        str(queries),
        "--library",
        str(fixtures / "retrieval" / "tiny.library.jsonl"),
    )
    assert code == 2
    assert err == f"error: {queries}:2: not a tool query ({queries}:2.query: expected str, got int)\n"


def test_hit_rates_and_pairs(fixtures):
    assert hit_rates([1, None, 3, 6], (1, 3, 5)) == {"HR@1": 0.25, "HR@3": 0.5, "HR@5": 0.5}
    assert hit_rates([], (1,)) == {"HR@1": None}
    index = ToolIndex(read_library(fixtures / "retrieval" / "tiny.library.jsonl"), None)
    queries = [ToolQuery("a", "Book a table", ["book_table", "ghost", "book_table"]), ToolQuery("b", "hi", [])]
    pairs = build_pairs(queries, index, "metatool", "gold")
    assert pairs.requests == [
        ToolHypothesis("Book a table at a restaurant", ("The restaurant name", "Number of people"))
    ]
    assert (pairs.pair_gold, pairs.pair_request, pairs.skipped_queries) == (["book_table", "ghost"], [0, -1], ["b"])
    shared = build_pairs(queries, index, "history")
    assert (shared.requests, shared.pair_request) == (["Book a table"], [0, -1])  # one ranking shared; ghost is unknown


def test_sample_is_deterministic_and_independent_of_file_order():
    queries = [ToolQuery(f"q{i}", "x", ["t"]) for i in range(50)]
    first = [q.id for q in sample_queries(queries, 7)]
    assert len(first) == 7
    assert sorted(q.id for q in sample_queries(queries[::-1], 7)) == sorted(first)
    assert sample_queries(queries, 100) == queries


def test_rule_teacher_reads_the_request():
    teacher = RuleTeacher()
    assert (
        clean_request("Hi,  can you please help me find a gif of a sunset on the beach?")
        == "find a gif of a sunset on the beach?"
    )
    assert teacher.hypothesis("Can you find a gif of a sunset on the beach?") == ToolHypothesis(
        "Find a gif of a sunset on the beach.", ("The sunset", "The beach")
    )
    assert teacher.hypothesis("I'm looking for dinner ideas using the ingredient salmon.") == ToolHypothesis(
        "Dinner ideas using the ingredient salmon.", ("The ingredient salmon",)
    )
    assert (
        teacher.keywords("I'm looking for dinner ideas using the ingredient salmon.")
        == "dinner ideas using ingredient salmon"
    )


def test_gold_hypothesis_is_the_tools_own_texts(fixtures):
    recipes = read_library(fixtures / "retrieval" / "tiny.library.jsonl")[3]
    assert gold_hypothesis(recipes) == ToolHypothesis("Search recipes by ingredient", ("ingredient",))


@pytest.mark.slow
def test_metatool_queries_with_the_real_minilm(shared_data, tmp_path):
    """200 MetaTool single-tool queries over its 199 tools with all-MiniLM-L6-v2 (offline, from the package)."""
    from train.sources.metatool import read

    records = list(
        read([shared_data / "metatool" / "all_clean_data.csv", shared_data / "metatool" / "plugin_des.json"])
    )
    library = next(r for r in records if hasattr(r, "tools"))
    queries = sample_queries([r for r in records if isinstance(r, ToolQuery)], 200)
    index = ToolIndex(library.tools, load_embedder())
    gold = evaluate(queries, index, "metatool", hypothesis="gold")
    teacher = evaluate(queries, index, "metatool", hypothesis="teacher")
    history = evaluate(queries, index, "history")
    assert (gold["queries"], gold["pairs"], gold["unknown_gold"]) == (200, 200, 0)
    # MetaTool tools have no parameters: a gold hypothesis is the description itself
    assert gold["rows"][0]["HR@1"] >= 0.99
    assert teacher["rows"][0]["HR@5"] > 0.5
    assert history["rows"][0]["HR@5"] > 0.4
