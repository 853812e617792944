"""A source whose file names its columns otherwise trains through ``data.sources.N.columns`` (the reader's key ->
the file's column): the build reads the same conversations as from the file with the reader's own names, and a
source without a mapping keys its build as before the option existed."""

from __future__ import annotations

import json
from pathlib import Path

from train.data.dataset import BuildReport, read_conversations
from train.data.inputs import cache_key
from train.tokenizers import load_tokenizer

XLAM = Path(__file__).resolve().parents[1] / "fixtures" / "sources" / "xlam" / "records.jsonl"


def test_a_column_mapping_reads_a_file_whose_columns_are_named_otherwise(tmp_path):
    renamed = tmp_path / "renamed.jsonl"
    rows = [json.loads(line) for line in XLAM.read_text().splitlines()]
    renamed.write_text(
        "".join(json.dumps({"question" if k == "query" else k: v for k, v in r.items()}) + "\n" for r in rows)
    )
    plain, mapped = BuildReport(), BuildReport()
    expected = list(read_conversations([{"name": "xlam", "inputs": [str(XLAM)]}], plain))
    got = list(
        read_conversations([{"name": "xlam", "inputs": [str(renamed)], "columns": {"query": "question"}}], mapped)
    )
    assert [c.to_dict() for c in got] == [c.to_dict() for c in expected] and expected
    assert (mapped.read, mapped.rejected_by_reader) == (plain.read, plain.rejected_by_reader)


def test_no_mapping_keys_the_build_as_a_source_written_without_the_option():
    tokenizer = load_tokenizer("tiny_chatml")
    source = {"name": "xlam", "inputs": [str(XLAM)]}
    without = cache_key({"name": "t", "sources": [source]}, "chatml", tokenizer)
    assert cache_key({"name": "t", "sources": [{**source, "columns": {}}]}, "chatml", tokenizer) == without
    assert cache_key({"name": "t", "sources": [{**source, "columns": {"query": "q"}}]}, "chatml", tokenizer) != without
