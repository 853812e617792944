"""Output paths the data verbs cannot write: one ``error:`` line naming the path, exit 2, no traceback,
and no input read first (the reader is never reached: nothing is printed to stdout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from train.cli import main

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GLAIVE = Path(__file__).resolve().parents[1] / "train" / "assets" / "demo" / "glaive_sample.json"
CORPUS = FIXTURES / "parity" / "corpus.jsonl"
PROC = Path("/proc/nope")


def verbs(out: Path) -> dict[str, list[str]]:
    return {
        "convert": ["data", "convert", "glaive", str(GLAIVE), "-o", str(out)],
        "render": ["data", "render", str(CORPUS), "--format", "chatml", "--tokenizer", "tiny_chatml", "-o", str(out)],
    }


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("verb", ["convert", "render"])
def test_an_uncreatable_folder_is_named(verb, capsys):
    out = PROC / "x.jsonl"
    assert main(verbs(out)[verb]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: cannot create the folder {PROC} for {out}: No such file or directory\n"
    assert captured.out == ""


@pytest.mark.parametrize("verb", ["convert", "render"])
def test_a_folder_in_the_way_of_the_output_file(verb, tmp_path, capsys):
    assert main(verbs(tmp_path)[verb]) == 2
    assert capsys.readouterr().err == f"error: cannot write {tmp_path}: Is a directory\n"


@pytest.mark.parametrize("verb", ["convert", "render"])
def test_a_file_in_the_way_of_the_output_folder(verb, tmp_path, capsys):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    out = blocker / "x.jsonl"
    assert main(verbs(out)[verb]) == 2
    err = f"error: cannot create the folder {blocker} for {out}: it is a file, not a folder\n"  # before reading
    assert capsys.readouterr().err == err
    assert blocker.read_text() == "x"


def test_data_build_checks_its_output_folder_before_building(tmp_path, capsys):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    inputs = str(Path(__file__).resolve().parents[1] / "train" / "assets" / "metatool_tiny" / "toolace_tiny.json")
    assert main(["data", "build", "metatool", f"toolace:{inputs}", "--out-dir", str(blocker)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: cannot create the folder {blocker}: File exists\n"
    assert captured.out == ""
