"""``tooltrain bench data``: the one-process rates of both paths, then the build and the read in fresh processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from train.cli import main

CORPUS_FILE = Path(__file__).resolve().parent / "fixtures" / "parity" / "corpus.jsonl"


@pytest.fixture(scope="module")
def smollm2():
    from train.models import ModelFetchError
    from train.tokenizers import load_tokenizer

    try:
        return load_tokenizer("smollm2")
    except ModelFetchError as err:
        pytest.skip(str(err))


@pytest.mark.slow  # a full run or a whole corpus: the slow tier (`.ci/run --all`)
def test_bench_data_reports_both_rates_the_build_and_the_read(smollm2, tmp_path, capsys):
    tiny = tmp_path / "tiny.jsonl"
    lines = CORPUS_FILE.read_text(encoding="utf-8").splitlines()
    tiny.write_text("\n".join(["{broken", *lines[:2]]) + "\n", encoding="utf-8")
    argv = ["bench", "data", str(tiny), "--format", "chatml", "--workers", "1", "--repeat", "1", "--max-seq-len", "512"]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "data benchmark: format chatml, tokenizer smollm2"
    assert out[1] == f"2 conversations from {tiny}; left out: 0 that a path cannot render; unreadable lines: 1"
    assert out[2] == "render+tokenize+mask, one process, best of 1 passes after a warm-up:"
    assert out[3].split() == ["path", "conversations", "tokens", "conv/s", "tokens/s"]
    assert out[4].split()[:4] == ["tooltrain", "chatml", "2", "611"]  # 312 + 299 tokens, as bench render counts
    assert out[5].split()[:4] == ["trl", "qwen2_5_training.jinja", "2", "609"]
    assert out[6].startswith("ratio tooltrain chatml / trl qwen2_5_training.jinja: ") and out[6].endswith("x")
    # the reader counts the broken line as read (and rejected): 3 read, 2 rows of 312 + 299 tokens
    assert out[7].startswith("build (data.num_workers=1, fresh process): 3 read, 2 rows, 611 tokens in ")
    assert "peak RSS " in out[7] and out[7].endswith(" MiB before the build)")
    assert out[8].startswith("trl qwen2_5_training.jinja, every row kept in memory (fresh process): 2 rows; peak RSS")
    # 312 + 299 > 512: best-fit packing makes two rows, one batch
    assert out[9].startswith(
        "read (fresh process): open the built set, pack and collate one epoch: 2 packed rows of <= 512 tokens "
        "in 1 batches of 8, "
    )
    assert out[9].endswith(" MiB before opening)")
    assert len(out) == 10


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--workers", "0"], "tooltrain bench data: error: argument --workers: must be at least 1, got 0"),
        (["--repeat", "0"], "tooltrain bench data: error: argument --repeat: must be at least 1, got 0"),
    ],
)
def test_bench_data_refuses_a_count_below_one(extra, message, capsys):
    with pytest.raises(SystemExit) as stop:  # refused as the command line is parsed (train.commands.arg_types.count)
        main(["bench", "data", str(CORPUS_FILE), "--format", "chatml", *extra])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == message


def test_bench_data_names_a_missing_file(tmp_path, capsys):
    missing = tmp_path / "missing.jsonl"
    assert main(["bench", "data", str(CORPUS_FILE), str(missing), "--format", "chatml"]) == 2
    assert capsys.readouterr().err.strip() == f"error: {missing}: no such file"
