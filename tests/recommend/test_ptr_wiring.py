"""PTR stages 2-3 wired into the evaluation (seed 001): ``recommend_with_stages`` through ``pipeline.Recommender``
with a scripted teacher and the angle embedder, the ``--llm`` backbones, the command's traces and its errors, and
the optional RecTools query cleaning."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ptr_fakes import AngleEmbedder, scripted_teacher

from train.papers.ptr.data import Dataset, Example, clean_query, load_dataset
from train.papers.ptr.evaluate import (
    Settings,
    check_stages,
    evaluate_dataset,
    format_table,
    make_backbone,
    recommend_with_stages,
)
from train.papers.ptr.pipeline import Recommender

LIBRARY = {"A": "a", "B": "b", "C": "c", "D": "d"}
HISTORY = [Example("h1", "past one", ("C",)), Example("h2", "past two", ("D",))]
TEST = [Example("t1", "need A and C", ("A", "C"))]
ANGLES = {"A: a": 0, "B: b": 90, "C: c": 180, "D: d": 270, "past one": 180, "past two": 270}
ANGLES |= {"need A": 0, "need C": 180, "need A and C": 100}


def teacher():
    return scripted_teacher(
        lambda query: "- need A\n- need C", lambda requirement, tools: "- A: a" if requirement == "need A" else "None"
    )


@pytest.mark.parametrize(
    ("stages", "ranking", "bundle_in_trace"),
    [
        ("1,2,3", ["A", "C"], ["B", "A"]),  # A kept from the bundle, C added for "need C"
        ("2,3", ["A", "C"], []),  # Table 2: no bundle, both requirements re-ranked
        ("1,3", ["B", "A"], ["B", "A"]),  # the query's nearest tool (B) is in the bundle already: nothing added
    ],
)
def test_recommend_with_stages_runs_the_pipeline(stages, ranking, bundle_in_trace):
    recommender = Recommender(LIBRARY, HISTORY, teacher(), AngleEmbedder(ANGLES), stages, k=1)
    rankings, traces = recommend_with_stages(recommender, TEST, [("B", "A")])
    assert rankings == [ranking]
    (trace,) = traces
    assert trace["ranking"] == ranking and trace["bundle"] == bundle_in_trace and trace["seconds"] >= 0
    assert json.loads(json.dumps(trace)) == trace  # one JSONL line


def test_stage_1_alone_is_the_bundle_without_a_trace():
    assert recommend_with_stages(None, TEST, [("B", "A")]) == ([["B", "A"]], [{}])


def test_evaluate_dataset_with_every_stage():
    # 10 past/test queries over the four tools; random20 seed 0 tests 2 of them
    examples = [Example(str(i), f"query {i} word{i % 4}", (("A", "B", "C", "D")[i % 4],)) for i in range(10)]
    angles = ANGLES | {ex.query: 90 * (i % 4) for i, ex in enumerate(examples)}
    angles |= {f"query {i}": 90 * (i % 4) for i in range(10)}
    dataset = Dataset("tiny", dict(LIBRARY), examples)
    settings = Settings(["tiny"], Path("."), stages=(1, 2, 3), seeds=1)
    script = scripted_teacher(lambda query: "- " + query.rsplit(" ", 1)[0], lambda requirement, tools: "None")
    result = evaluate_dataset(settings, dataset, stage_embedder=AngleEmbedder(angles), teacher=script)
    (run,) = result.runs
    assert run["test"] == 2 and run["history"] == 8 and run["seconds_per_query"] >= 0
    assert [row["id"] for row in result.trace] == ["7", "8"]
    for row in result.trace:  # nothing matched: every bundle tool dropped, the requirement's nearest tool added
        gold = row["gold"]
        assert row["trace"]["kept"] == [] and row["trace"]["unsolved"] == [row["query"].rsplit(" ", 1)[0]]
        assert row["recommended"] == gold and row["tracc"] == 1.0
    assert run["metrics"]["recall_paper"] == 1.0


def test_check_stages_takes_every_stage_now():
    assert check_stages([3, 1, 2]) == (1, 2, 3) and check_stages([2, 3]) == (2, 3)
    with pytest.raises(ValueError, match="takes 1, 2 and 3"):
        check_stages([4])


def test_backbones():
    embedder = AngleEmbedder({})
    offline = make_backbone(Settings([], Path("."), stages=(1, 2, 3)), embedder)
    assert offline.backend.model == "offline-ptr-1:angles:0.3"
    assert make_backbone(Settings([], Path("."), stages=(1, 3)), embedder) is None  # stage 2 off: nothing asked
    loaded = []
    run_settings = Settings([], Path("."), stages=(1, 2, 3), llm=".")
    assert make_backbone(run_settings, None, lambda path: loaded.append(path) or "backend").backend == "backend"
    assert loaded == [Path(".")]
    with pytest.raises(ValueError, match="needs a run loader"):
        make_backbone(run_settings, None)
    with pytest.raises(ValueError, match="--llm http needs --llm-base-url and --llm-model"):
        make_backbone(Settings([], Path("."), stages=(1, 2, 3), llm="http"), None)
    with pytest.raises(ValueError, match=r"--llm http: setting\(s\) \['path'\] do not apply"):
        make_backbone(Settings([], Path("."), stages=(2, 3), llm="http", llm_settings={"path": "x"}), None)
    with pytest.raises(ValueError, match="'gpt' is neither offline, http, hf nor an existing"):
        make_backbone(Settings([], Path("."), stages=(2, 3), llm="gpt"), None)


def test_the_table_puts_the_paper_ptr_rows_beside_the_measured_ones():
    examples = [Example(str(i), f"query {i}", (("A", "B", "C", "D")[i % 4],)) for i in range(10)]
    dataset = Dataset("rectools", dict(LIBRARY), examples)
    settings = Settings(["rectools"], Path("."), stages=(1,), seeds=1)
    result = evaluate_dataset(settings, dataset)
    settings.stages = (1, 2, 3)
    table = format_table(settings, [result])
    assert "paper BM25 +PTR+GPT-4o" in table and "paper SimCSE +PTR+open-mistral-7b" in table
    assert re.search(r"paper SimCSE \+PTR\+GPT-4o\s+0\.609\s+0\.896\s+0\.591\s", table)  # Table 1, RecTools
    settings.stages = (2, 3)
    assert re.search(r"paper w/o bundle PTR\+GPT-4o\s+0\.581\s+0\.916\s+0\.439\s", format_table(settings, [result]))


def test_clean_query_cuts_the_generator_leftovers():
    assert clean_query("**\n\nPlan a trip.\n\nTool Combination: A, B") == "Plan a trip."
    assert clean_query("** Find a venue.\n\n**Explanation:** x") == "Find a venue."
    assert clean_query("**Bold** start.\nsecond line") == "**Bold** start.\nsecond line"


def test_rectools_queries_are_as_published_unless_cleaned(shared_data: Path):
    published = load_dataset("rectools", shared_data)
    cleaned = load_dataset("rectools", shared_data, clean_queries=True)
    assert published.cleaned == 0 and sum("\n\n" in ex.query.strip("* \n") for ex in published.examples) == 93
    assert cleaned.cleaned == 121 and not any("\n\n" in ex.query for ex in cleaned.examples)
    assert not any("Tool Combination" in ex.query or "Explanation:" in ex.query for ex in cleaned.examples)
    assert [ex.tools for ex in cleaned.examples] == [ex.tools for ex in published.examples]


def test_the_command_runs_stages_2_3_and_writes_traces(shared_data: Path, tmp_path: Path, capsys):
    from train.cli import main

    per_item, metrics = tmp_path / "items.jsonl", tmp_path / "m.json"
    argv = ["eval", "recommend", "rectools", "--data", str(shared_data), "--stages", "1,2,3", "--embedder",
            "hash-bow", "--no-cache", "--protocol", "first100", "--limit", "3", "--per-item", str(per_item),
            "-o", str(metrics)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr()
    assert "PTR stages 1,2,3, LLM offline" in out.out and "paper SimCSE +PTR+GPT-4o" in out.out
    assert "stage 2's LLM" in out.err
    rows = [json.loads(line) for line in per_item.read_text().splitlines()]
    assert len(rows) == 3 and all(row["trace"]["ranking"] == row["recommended"] for row in rows)
    assert all(row["trace"]["requirements"] for row in rows)
    document = json.loads(metrics.read_text())
    assert document["datasets"][0]["runs"][0]["test"] == 3
    assert document["datasets"][0]["teacher"]["backend"] == "offline"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--llm", "gpt-4o"], "error: --llm 'gpt-4o' is neither offline, http, hf nor an existing tooltrain run"),
        (["--llm", "http"], "error: --llm http needs --llm-base-url and --llm-model"),
        (["--llm", "http", "--llm-path", "m"], "error: --llm http: setting(s) ['path'] do not apply"),
        (["--llm", "hf"], "error: --llm hf needs --llm-path"),
        (["--llm", "{tmp}"], "has no config.yaml: is it a tooltrain run directory?"),
        (["--stages", "1,4"], "error: --stages takes 1, 2 and 3, got 1,4"),
        (["--limit", "0"], "error: --limit must be at least 1, got 0"),
        (["--stages", "1", "--llm", "gpt-4o"], "error: --llm 'gpt-4o' is neither"),  # checked with stage 2 off too
    ],
)
def test_bad_llm_values_are_one_error_line(shared_data: Path, tmp_path: Path, capsys, extra, message):
    from train.cli import main

    extra = [part.replace("{tmp}", str(tmp_path)) for part in extra]
    stages = [] if "--stages" in extra else ["--stages", "1,2,3"]
    argv = ["eval", "recommend", "metatool", "--data", str(shared_data), *stages, *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]


def test_the_ptr_tiny_recipe_runs_stages_2_3(tmp_path: Path):
    from train.engine.config import compose
    from train.engine.entry import start as run  # the ptr recipes run PTR's evaluation-only job (PaperSpec.job)

    overrides = ["recipe=ptr_tiny", "ptr.stages=[1,2,3]", "ptr.limit=2", "ptr.seeds=1", "ptr.embedder=hash-bow",
                 f"output_dir={tmp_path / 'run'}"]  # fmt: skip
    result = run(compose(overrides))
    (evaluated,) = result.summary["recommend"]
    assert result.status == "evaluated" and evaluated["runs"][0]["test"] == 2
    assert evaluated["teacher"]["backend"] == "offline" and evaluated["teacher"]["asked"] > 2  # D.1 and D.2s
    with pytest.raises(Exception, match="ptr: --llm http needs --llm-base-url"):
        run(compose([*overrides, "ptr.llm=http"]))


def test_a_run_folder_without_weights_is_one_error_line(shared_data: Path, tmp_path: Path, capsys):
    from train.cli import main

    (tmp_path / "config.yaml").write_text("run_name: x\nmodel: {source: config}\n")  # a run config, no weights
    argv = ["eval", "recommend", "metatool", "--data", str(shared_data), "--stages", "1,2,3", "--llm", str(tmp_path)]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: --llm {tmp_path}: {tmp_path} holds no trained weights: neither final/ nor a complete checkpoint-N/"
    )
