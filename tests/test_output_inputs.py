"""Issue 24 item 6: no verb writes onto an input, or into an input folder (``check_outputs``'s rule, shared by every
verb that writes): ``eval recommend -o`` a file of its --data folder, ``eval score`` (BFCL folders) ``-o`` /
``--per-item`` a references file, ``eval run -o`` a file of the run folder it reads. Each is refused before anything
is read, with one ``error:`` line and exit 2, and the input is byte for byte as it was."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from train.cli import main as cli_main
from train.commands.outputs import OutputError, check_outputs

BFCL = Path(__file__).resolve().parent / "fixtures" / "evaluation" / "bfcl" / "folders"


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_an_output_inside_an_input_folder_is_refused(tmp_path):
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    with pytest.raises(OutputError, match=r"it is inside the input folder .*data; write it outside that folder"):
        check_outputs([data / "sub" / "new.json"], [data])
    with pytest.raises(OutputError, match="inside the input folder"):  # the same folder spelled another way
        check_outputs([tmp_path / "data" / ".." / "data" / "x.json"], [data])
    (tmp_path / "link").symlink_to(data)
    with pytest.raises(OutputError, match="inside the input folder"):
        check_outputs([tmp_path / "link" / "x.json"], [data])
    check_outputs([tmp_path / "data2.json", tmp_path / "datax" / "m.json"], [data])  # beside it: fine
    check_outputs([Path("/dev/null")], [data])  # a device is never inside anything


def test_eval_recommend_output_in_its_data_folder_is_refused(capsys, tmp_path):
    data = tmp_path / "data"
    (data / "rectools_ptr").mkdir(parents=True)
    target = data / "rectools_ptr" / "RecTools_QT.json"
    target.write_text('{"queries": "the published file"}\n', encoding="utf-8")
    for option in ("-o", "--per-item"):
        code, out, err = cli(capsys, "eval", "recommend", "rectools", "--data", str(data), option, str(target))
        assert (code, out) == (2, "")
        assert err == (
            f"error: refusing to write {target}: it is inside the input folder {data}; write it outside that folder\n"
        )
        assert target.read_text(encoding="utf-8") == '{"queries": "the published file"}\n'


@pytest.mark.parametrize("option", ["-o", "--per-item"])
def test_eval_score_bfcl_folders_never_write_a_references_file(capsys, tmp_path, option):
    data = tmp_path / "data"
    shutil.copytree(BFCL / "data", data)
    results = tmp_path / "result"
    shutil.copytree(BFCL / "result", results)
    target = data / "BFCL_v3_simple_python.json"
    before = target.read_bytes()
    code, out, err = cli(
        capsys, "eval", "score", "bfcl", "--predictions", str(results), "--references", str(data), option, str(target)
    )
    assert (code, out) == (2, "")
    assert err == (
        f"error: refusing to write {target}: it is inside the input folder {data}; write it outside that folder\n"
    )
    assert target.read_bytes() == before
    assert sorted(p.name for p in data.iterdir()) == sorted(p.name for p in (BFCL / "data").iterdir())


def test_eval_run_output_into_the_run_folder_it_reads_is_refused(capsys, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("seed: 1\n", encoding="utf-8")
    code, out, err = cli(capsys, "eval", "run", "heldout", str(run_dir), "-o", str(run_dir / "config.yaml"))
    assert (code, out) == (2, "")
    written = run_dir / "config.yaml"
    assert err.startswith(f"error: refusing to write {written}: it is inside the input folder {run_dir}")
    assert (run_dir / "config.yaml").read_text(encoding="utf-8") == "seed: 1\n"
