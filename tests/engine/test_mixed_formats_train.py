"""Issue 28's acceptance for mixing: a Parquet file and an xLAM-layout JSON Lines file train together through
``recipe=tiny`` at 3:1, and the run's summary counts each source (read, accepted, rejected, after weighting)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

XLAM = Path(__file__).resolve().parents[1] / "fixtures" / "sources" / "xlam" / "records.jsonl"


@pytest.mark.slow  # a training run (3 steps of the tiny model); the mixing rules are unit-tested in test_source_mixing
def test_a_parquet_and_an_xlam_json_file_train_at_three_to_one(tmp_path, tooltrain_cache, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from train.engine.config import compose
    from train.engine.run import run
    from train.engine.summary import format_summary

    rows = [json.loads(line) for line in XLAM.read_text().splitlines()]
    parquet = tmp_path / "apigen.parquet"
    pq.write_table(pa.Table.from_pylist([{**row, "id": f"p{row['id']}"} for row in rows]), parquet)
    sources = f"[{{name: xlam, inputs: ['{parquet}'], weight: 3}}, {{name: xlam, inputs: ['{XLAM}']}}]"
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tooltrain_cache))
    cfg = compose(
        ["recipe=tiny", f"data.sources={sources}", "data.eval_fraction=0", "eval=none", "train.max_steps=3",
         "data.overlong=truncate", f"output_dir={tmp_path / 'run'}"]
    )  # fmt: skip
    result = run(cfg)
    assert (result.status, result.global_step) == ("completed", 3)
    per_source = result.summary["data"]["per_source"]
    accepted = per_source[0]["accepted"]
    assert accepted == per_source[1]["accepted"] > 0  # the same records, read from the two formats
    assert [entry["weighted"] for entry in per_source] == [3 * accepted, accepted]
    assert per_source[0]["read"] == per_source[1]["read"] == len(rows)
    lines = format_summary(result.summary, [], tmp_path / "run").splitlines()
    rejected = per_source[0]["rejected"]
    counts = f"{len(rows)} read, {accepted} accepted, {rejected} rejected -> {3 * accepted} after"
    expected = f"  source 0  xlam x3: {counts}"
    assert any(line.startswith(expected) for line in lines), lines
