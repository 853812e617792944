"""``tooltrain eval retrieval`` composed by Hydra (conf/retrieval.yaml): one job writes its
metrics.json, ``-m`` sweeps α with one job per value and a sweep table, and each job's numbers are the
option form's (``--alpha 0.5,1`` in one process) on the tiny fixture."""

from __future__ import annotations

import json

import pytest

from train.cli import main


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path / "cache"))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["eval", "retrieval", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_an_alpha_sweep_runs_one_job_per_value(capsys, fixtures, tmp_path):
    tiny = fixtures / "retrieval" / "tiny.jsonl"
    code, _, _ = run(
        capsys,
        "--method",
        "metatool",
        "--embedder",
        "hash-bow",
        "--queries",
        str(tiny),
        "--alpha",
        "0.5,1",
        "-o",
        str(tmp_path / "options.json"),
    )
    assert code == 0
    expected = json.loads((tmp_path / "options.json").read_text())["rows"]
    assert [row["alpha"] for row in expected] == [0.5, 1.0]

    out_dir = tmp_path / "alpha"
    code, out, err = run(
        capsys,
        "retrieval.embedder=hash-bow",
        "-m",
        f"retrieval.queries={tiny}",
        "retrieval.alpha=0.5,1.0",
        f"output_dir={out_dir}",
    )  # -m anywhere, as with tooltrain train
    assert (code, err) == (0, "")
    sweep = tmp_path / "alpha-sweep"
    for job, row in enumerate(expected):
        metrics = json.loads((sweep / str(job) / "metrics.json").read_text())
        assert metrics["rows"] == [row]  # one process per α, the same numbers as the comma list
        assert (metrics["method"], metrics["hypothesis"], metrics["embedder"]) == ("metatool", "teacher", "hash-bow")
    jobs = json.loads((sweep / "sweep.json").read_text())["jobs"]
    assert [(job["job"], job["overrides"]["retrieval.alpha"], job["HR@1"]) for job in jobs] == [
        (0, "0.5", expected[0]["HR@1"]),
        (1, "1.0", expected[1]["HR@1"]),
    ]
    cell = lambda row, k: f"{row[f'HR@{k}']:.4f}"
    assert out.splitlines()[-3:] == [
        "retrieval.alpha    HR@1    HR@3    HR@5",
        f"            0.5  {cell(expected[0], 1)}  {cell(expected[0], 3)}  {cell(expected[0], 5)}",
        f"            1.0  {cell(expected[1], 1)}  {cell(expected[1], 3)}  {cell(expected[1], 5)}",
    ]
    assert not out_dir.exists()  # a sweep writes only under the sweep directory


def test_a_single_hydra_run_writes_its_metrics_and_per_item_rows(capsys, fixtures, tmp_path):
    tiny = fixtures / "retrieval" / "tiny.jsonl"
    code, out, _ = run(
        capsys,
        "retrieval.method=keyword",
        f"retrieval.queries={tiny}",
        "retrieval.split=test",
        "retrieval.per_item=true",
        f"output_dir={tmp_path / 'one'}",
    )
    assert code == 0
    assert out.splitlines()[1:3] == ["alpha    HR@1    HR@3    HR@5", "    -  0.5000  0.5000  1.0000"]
    assert json.loads((tmp_path / "one" / "metrics.json").read_text())["rows"] == [
        {"alpha": None, "HR@1": 0.5, "HR@3": 0.5, "HR@5": 1.0}
    ]  # ranks 1, 4, 1, 5 (the keyword test's)
    assert len((tmp_path / "one" / "per_item.jsonl").read_text().splitlines()) == 4


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--method", "keyword", "retrieval.alpha=0.5"],
            "error: --method: with Hydra overrides, give every setting as retrieval.KEY=VALUE\n",
        ),
        (["retrieval.queries=q.jsonl", "retrieval.alpha=1.5"], "error: retrieval.alpha: every α must lie in [0, 1]"),
        (["retrieval.queries=q.jsonl", "retrieval.method=magic"], "Error merging override retrieval.method=magic"),
        (["retrieval.queries=q.jsonl", "retrieval.nope=1"], "Could not override 'retrieval.nope'"),
        ([], "error: --method and --queries are required (or give Hydra overrides: retrieval.queries=...)\n"),
    ],
)
def test_bad_settings_exit_2(capsys, tmp_path, argv, message):
    code, _, err = run(capsys, *argv, *([f"output_dir={tmp_path}/x"] if argv else []))
    assert code == 2 and (err.startswith(message) or message in err)


def test_the_teacher_is_configured_by_keys_like_the_options():
    from hydra import compose, initialize_config_dir

    from train.engine.config import CONF_DIR
    from train.papers.metatool.verbs.retrieval_sweep import register, settings_from_config

    register()
    overrides = [
        "retrieval.queries=q.jsonl",
        "retrieval.teacher.kind=http",
        "retrieval.teacher.base_url=http://h/v1",
        "retrieval.teacher.model=m",
        "retrieval.teacher.timeout=5",
        "retrieval.alpha=0.8",
        "retrieval.k=[5,1]",
    ]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        settings = settings_from_config(compose("retrieval", overrides=overrides).retrieval)
    assert settings.teacher == {
        "kind": "http",
        "base_url": "http://h/v1",
        "model": "m",
        "api_key_env": None,
        "timeout": 5.0,
    }
    assert (settings.alphas, settings.ks, str(settings.queries), settings.library) == ([0.8], [1, 5], "q.jsonl", None)
