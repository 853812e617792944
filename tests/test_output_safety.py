"""No data verb destroys a file: outputs are written beside their target and renamed into place only
when the verb succeeds, an output that is one of the inputs is refused before anything is opened,
a full disk is one ``error:`` line, and a run that rejects every record says why and exits 1.

(``test_output_errors.py`` covers output paths that cannot be created at all.)
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from train.cli import main

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
GLAIVE = ROOT / "train" / "assets" / "demo" / "glaive_sample.json"  # 60 records
CORPUS = FIXTURES / "parity" / "corpus.jsonl"  # 16 conversations
BFCL = FIXTURES / "sources" / "bfcl"
BFCL_QUESTIONS = BFCL / "BFCL_v2_fixture.json"
BFCL_ANSWERS = BFCL / "possible_answer" / "BFCL_v2_fixture.json"
RENDER = ["--format", "chatml", "--tokenizer", "tiny_chatml"]


def convert(inp: Path | str, out: Path | str, source: str = "glaive") -> list[str]:
    return ["data", "convert", source, str(inp), "-o", str(out)]


def render(inp: Path | str, out: Path | str) -> list[str]:
    return ["data", "render", str(inp), *RENDER, "-o", str(out)]


def leftovers(folder: Path) -> list[str]:
    """Temporary files a verb left behind (they start with a dot)."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# ---------------------------------------------------------------- item 1: an output that is an input


@pytest.fixture(params=["convert", "render"])
def verb_input(request, tmp_path) -> tuple[str, Path]:
    """(verb, an input file of that verb in tmp_path/data/)."""
    folder = tmp_path / "data"
    folder.mkdir()
    if request.param == "convert":
        path = folder / "in.json"
        path.write_bytes(GLAIVE.read_bytes())
    else:
        path = folder / "in.jsonl"
        path.write_bytes(CORPUS.read_bytes())
    return request.param, path


def argv_for(verb: str, inp: Path | str, out: Path | str) -> list[str]:
    return convert(inp, out) if verb == "convert" else render(inp, out)


def assert_refused(argv: list[str], inp: Path, capsys, named: Path | str) -> None:
    before = inp.read_bytes()
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("error: refusing to write ")
    assert f"it is the input {named}" in captured.err
    assert inp.read_bytes() == before
    assert leftovers(inp.parent) == []


def test_output_equal_to_the_input_is_refused(verb_input, capsys):
    verb, inp = verb_input
    assert_refused(argv_for(verb, inp, inp), inp, capsys, inp)


def test_output_naming_the_input_another_way_is_refused(verb_input, capsys, monkeypatch):
    verb, inp = verb_input
    monkeypatch.chdir(inp.parent)
    assert_refused(argv_for(verb, f"./{inp.name}", f"../data/{inp.name}"), inp, capsys, inp.name)


@pytest.mark.parametrize("link", ["hard", "symbolic"])
def test_output_linked_to_the_input_is_refused(verb_input, link, capsys):
    verb, inp = verb_input
    out = inp.parent / "alias.jsonl"
    (os.link if link == "hard" else os.symlink)(inp, out)
    assert_refused(argv_for(verb, inp, out), inp, capsys, inp)


def test_rejects_file_equal_to_the_input_is_refused(verb_input, capsys):
    verb, inp = verb_input
    side = inp.parent / "X.rejects.jsonl"
    inp.rename(side)
    assert_refused(argv_for(verb, side, inp.parent / "X.jsonl"), side, capsys, side)
    assert not (inp.parent / "X.jsonl").exists()


@pytest.mark.parametrize("bad_input", ["missing", "folder"])
def test_failed_convert_keeps_the_previous_output(bad_input, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    out.write_text("previous\n")
    inp = tmp_path / "missing.json" if bad_input == "missing" else tmp_path / "folder"
    if bad_input == "folder":
        inp.mkdir()
    assert main(convert(inp, out)) == 2
    assert capsys.readouterr().err.startswith("error: ")
    assert out.read_text() == "previous\n"
    assert not (tmp_path / "out.rejects.jsonl").exists()
    assert leftovers(tmp_path) == []


def test_interrupted_render_keeps_the_previous_outputs(tmp_path, monkeypatch):
    out = tmp_path / "out.jsonl"
    out.write_text("previous\n")
    (tmp_path / "out.rejects.jsonl").write_text("previous rejects\n")
    from train.commands.data import render as render_module

    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    real = render_module.rendered_record
    monkeypatch.setattr(render_module, "rendered_record", interrupted)
    assert main(render(CORPUS, out)) == 130
    assert out.read_text() == "previous\n"
    assert (tmp_path / "out.rejects.jsonl").read_text() == "previous rejects\n"
    assert leftovers(tmp_path) == []


def test_a_successful_run_replaces_the_output_and_keeps_its_permissions(tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    out.write_text("previous\n")
    out.chmod(0o640)
    assert main(render(CORPUS, out)) == 0
    assert len(out.read_text().splitlines()) == 16
    assert out.stat().st_mode & 0o777 == 0o640
    assert leftovers(tmp_path) == []


def test_output_through_a_symlink_keeps_the_link(tmp_path, capsys):
    target = tmp_path / "real.jsonl"
    target.write_text("previous\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    assert main(render(CORPUS, link)) == 0
    assert link.is_symlink() and len(target.read_text().splitlines()) == 16


def test_data_build_refuses_to_overwrite_its_input(tmp_path, capsys):
    out = tmp_path / "built"
    out.mkdir()
    train = out / "train.jsonl"
    train.write_bytes(CORPUS.read_bytes())
    assert main(["data", "build", "metatool", str(train), "--out-dir", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: refusing to write {train}: it is the input {train} (the same file)\n"
    assert captured.out == ""
    assert train.read_bytes() == CORPUS.read_bytes()
    assert sorted(p.name for p in out.iterdir()) == ["train.jsonl"]


def test_eval_score_refuses_per_item_rows_onto_its_predictions(tmp_path, capsys):
    folder = FIXTURES / "evaluation" / "tracc"
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_bytes((folder / "predictions.jsonl").read_bytes())
    argv = [
        "eval",
        "score",
        "tracc",
        "--predictions",
        str(predictions),
        "--references",
        str(folder / "references.jsonl"),
    ]
    assert main([*argv, "--per-item", str(predictions)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: refusing to write {predictions}: it is the input {predictions} (the same file)\n"
    assert captured.out == ""  # refused before scoring
    assert predictions.read_bytes() == (folder / "predictions.jsonl").read_bytes()
    assert main([*argv, "--per-item", str(tmp_path / "x.json"), "-o", str(tmp_path / "x.json")]) == 2
    assert capsys.readouterr().err == f"error: refusing to write {tmp_path / 'x.json'} twice\n"


def test_eval_score_write_failure_leaves_nothing(tmp_path, capsys):
    folder = FIXTURES / "evaluation" / "tracc"
    argv = [
        "eval",
        "score",
        "tracc",
        "--predictions",
        str(folder / "predictions.jsonl"),
        "--references",
        str(folder / "references.jsonl"),
    ]
    assert main([*argv, "--per-item", str(tmp_path / "items.jsonl"), "-o", "/dev/full"]) == 2
    assert capsys.readouterr().err == "error: cannot write /dev/full: No space left on device\n"
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- item 2: full disks, devices, '' and '-'


@pytest.fixture
def dev_side_files():
    """Side files the old code created in /dev (removed again, so a failing run leaves no trace)."""
    paths = [Path("/dev/full.rejects.jsonl"), Path("/dev/null.rejects.jsonl"), Path("/dev/full.library.jsonl")]
    existed = {p for p in paths if p.exists()}
    yield paths
    for path in paths:
        if path not in existed and path.exists():
            path.unlink()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("verb", ["convert", "render"])
def test_dev_full_is_one_error_line_and_no_side_file(verb, dev_side_files, capsys):
    inp = GLAIVE if verb == "convert" else CORPUS
    assert main(argv_for(verb, inp, "/dev/full")) == 2
    captured = capsys.readouterr()
    assert captured.err == "error: cannot write /dev/full: No space left on device\n"
    assert not any(path.exists() for path in dev_side_files[:1])


def test_dev_null_writes_no_side_file_unless_asked(tmp_path, dev_side_files, capsys):
    mixed = tmp_path / "in.jsonl"
    mixed.write_text(CORPUS.read_text() + "{not json\n")
    assert main(render(mixed, "/dev/null")) == 0
    captured = capsys.readouterr()
    assert "read 17, rendered 16, rejected 1\n" in captured.out
    assert "rejects not written (the output is not a regular file): give --rejects PATH to keep them" in captured.out
    assert not Path("/dev/null.rejects.jsonl").exists()
    assert main([*render(mixed, "/dev/null"), "--rejects", str(tmp_path / "r.jsonl")]) == 0
    [reject] = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert reject["location"] == f"{mixed}:17"


def _limit_file_size():  # runs in the child: files past 64 KB fail with EFBIG, like a full disk
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64_000, 64_000))


def test_a_full_disk_mid_file_keeps_the_previous_output(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text("previous\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "train", *convert(GLAIVE, out)],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=_limit_file_size,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"error: cannot write {out}: File too large\n"
    assert out.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


def test_an_empty_output_path_is_a_clear_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(convert(GLAIVE, ""))
    assert exit_.value.code == 2
    assert capsys.readouterr().err.endswith("error: argument -o/--output: an output path cannot be empty\n")


@pytest.mark.parametrize("verb", ["convert", "render"])
def test_dash_writes_the_records_to_stdout_and_the_summary_to_stderr(verb, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    inp = GLAIVE if verb == "convert" else CORPUS
    assert main(argv_for(verb, inp, "-")) == 0
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert len(rows) == (60 if verb == "convert" else 16)
    assert captured.err.startswith("read 60, written 60, rejected 0" if verb == "convert" else "read 16, rendered 16")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- item 8: everything rejected


def test_wrong_source_exits_1_with_real_reasons_and_a_hint(tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    out.write_text("previous\n")
    assert main(convert(BFCL_QUESTIONS, out, source="glaive")) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == "read 19, written 0, rejected 19"
    layout = "neither layout: expected 'conversations' (ShareGPT) or 'system' + 'chat' (raw)"
    assert lines[1:] == [  # the first three as they are, then each kind of reason with its first real text
        f"  rejected {BFCL_QUESTIONS}:1 (id fx_good): {layout}",
        f"  rejected {BFCL_QUESTIONS}:2: invalid JSON at column 54: Unterminated string starting at",
        f"  rejected {BFCL_QUESTIONS}:3: record: expected an object, got list",
        f"  rejected 17 like: {layout}",
        "  rejected 1 like: invalid JSON at column 54: Unterminated string starting at",
        "  rejected 1 like: record: expected an object, got list",
    ]
    err = captured.err.splitlines()
    assert err[0] == f"error: nothing written: all 19 records were rejected; {out} is unchanged"
    assert err[1].startswith(
        "hint: is glaive the right source for these files, and are they in the order it reads? glaive reads: "
    )
    assert out.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


def test_swapped_bfcl_files_exit_1_and_name_the_expected_order(tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    assert main(["data", "convert", "bfcl", str(BFCL_ANSWERS), str(BFCL_QUESTIONS), "-o", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("read ")
    assert ", written 0, " in captured.out.splitlines()[0]
    assert f"  rejected {BFCL_ANSWERS}:1 " in captured.out
    hint = captured.err.splitlines()[1]
    assert hint.startswith(
        "hint: is bfcl the right source for these files, and are they in the order it reads? "
        "bfcl reads: BFCL_<version>_<category>.json (JSON Lines of questions), then optionally its "
        "possible_answer/ file"
    )
    assert not out.exists()


def test_bfcl_questions_without_answers_say_there_is_no_assistant_turn(tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    assert main(["data", "convert", "bfcl", str(BFCL_QUESTIONS), "-o", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    written = int(printed[0].split(", ")[1].split()[-1])
    assert written > 0
    assert (
        f"  note: {written} of {written} conversations have no assistant turn (nothing to train on); "
        "bfcl reads: BFCL_<version>_<category>.json (JSON Lines of questions), then optionally its "
        "possible_answer/ file" in printed
    )
    # with the answers every conversation ends with its gold calls: no note
    assert main(["data", "convert", "bfcl", str(BFCL_QUESTIONS), str(BFCL_ANSWERS), "-o", str(out)]) == 0
    assert "no assistant turn" not in capsys.readouterr().out


def test_render_of_nothing_renderable_exits_1(tmp_path, capsys):
    inp = tmp_path / "queries.jsonl"
    inp.write_text('{"id": "q1", "query": "weather?", "gold_tools": ["get_weather"]}\n{"id": 7}\n')
    out = tmp_path / "out.jsonl"
    assert main(render(inp, out)) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "read 2, rendered 0, rejected 2",
        f"  rejected {inp}:1: not a canonical conversation: conversation: missing key 'messages'",
        f"  rejected {inp}:2: not a canonical conversation: conversation: missing key 'messages'",
    ]
    assert captured.err.splitlines()[0] == f"error: nothing written: all 2 records were rejected; {out} is unchanged"
    assert not out.exists()


def test_an_empty_input_writes_nothing_and_keeps_an_earlier_output(tmp_path, capsys):
    """An empty input renders nothing: as when every record is rejected (issue #24 item 23's rule), exit 1 and an
    earlier output stays, rather than an empty file over it."""
    inp = tmp_path / "empty.jsonl"
    inp.write_text("")
    out = tmp_path / "out.jsonl"
    out.write_text("an earlier render\n")
    assert main(render(inp, out)) == 1
    captured = capsys.readouterr()
    assert captured.out == "read 0, rendered 0, rejected 0\n"
    assert captured.err.startswith(f"error: nothing written: the input holds no record; {out} is unchanged\n")
    assert out.read_text() == "an earlier render\n"
