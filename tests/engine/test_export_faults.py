"""Issue 24, ``tooltrain export`` (and ``eval run``) against faults: items 7 (an export into the run it reads),
13 (damaged weights), 16 (a full disk, an --out-dir that is a file) and 25 (file modes, generation settings).
Each fault is one ``error:`` line, exit 2, and nothing changed: no input touched, no partial export left."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from train.cli import main

FILE_SIZE_LIMIT = """
import resource, signal, sys
limit = int(sys.argv.pop(1))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails (EFBIG) instead of killing
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
from train.cli import main
sys.exit(main())
"""


def tree(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (hidden ones too) -> its content hash."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def export(engine, capsys, *argv: str) -> tuple[int, str, str]:
    with engine.in_process():
        code = main(["export", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def run_copy(single_run, tmp_path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(single_run, run_dir)
    return run_dir


# ---- item 7: never into the run it reads


@pytest.mark.parametrize("target", [".", "final", "checkpoint-6", "final/sub"])
def test_export_into_its_own_run_folder_is_refused(engine, run_copy, capsys, target):
    before = tree(run_copy)
    out_dir = run_copy / target if target != "." else run_copy
    code, out, err = export(engine, capsys, str(run_copy), "--out-dir", str(out_dir))
    assert (code, out) == (2, "")
    where = "the" if target == "." else "inside the"
    assert err == (
        f"error: refusing to export into {out_dir}: it is {where} run folder {run_copy} that the export reads; "
        f"give an --out-dir outside it (the default, {run_copy / 'merged'}, is the export's own)\n"
    )
    assert tree(run_copy) == before


def test_the_default_export_folder_inside_the_run_still_works_and_is_replaced_whole(engine, run_copy, capsys):
    code, _, err = export(engine, capsys, str(run_copy))
    assert code == 0, err
    first = tree(run_copy / "merged")
    (run_copy / "merged" / "stale.bin").write_bytes(b"from an older export")
    code, _, err = export(engine, capsys, str(run_copy))
    assert code == 0, err
    assert tree(run_copy / "merged") == first  # the earlier export replaced as a whole: no stale file
    assert [p.name for p in run_copy.iterdir() if p.name.startswith(".merged")] == []


def test_export_over_a_folder_that_is_not_an_export_is_refused(engine, run_copy, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me", encoding="utf-8")
    code, out, err = export(engine, capsys, str(run_copy), "--out-dir", str(mine))
    assert (code, out) == (2, "")
    assert err == (
        f"error: refusing to export into {mine}: it holds files and is not an earlier export "
        "(no tooltrain_export.json); give a new or empty folder\n"
    )
    assert tree(mine) == {"notes.txt": hashlib.sha256(b"keep me").hexdigest()}


# ---- item 16: an --out-dir that is a file, a full disk


def test_export_to_an_out_dir_that_is_a_file_is_one_error_line(engine, run_copy, tmp_path, capsys):
    target = tmp_path / "model.bin"
    target.write_bytes(b"not a folder")
    code, out, err = export(engine, capsys, str(run_copy), "--out-dir", str(target))
    assert (code, out) == (2, "")
    assert err == f"error: --out-dir {target} is a file, not a folder: give a folder (created when missing)\n"
    assert target.read_bytes() == b"not a folder"


@pytest.mark.slow
def test_export_onto_a_full_disk_leaves_no_partial_export_and_keeps_the_previous_one(engine, run_copy, tmp_path):
    out_dir = tmp_path / "served"

    def export_with_limit(limit: int) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", FILE_SIZE_LIMIT, str(limit), "export", str(run_copy), "--out-dir", str(out_dir)],
            cwd=engine.repo,
            env=engine.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    result = export_with_limit(200_000)  # the weights are 820 kB: the write fails part way
    assert (result.returncode, result.stdout) == (2, ""), result.stderr[-3000:]
    assert result.stderr.splitlines()[-1] == (
        f"error: cannot write {out_dir}: File too large; the partial export was removed"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # nothing beside it, no temporary folder

    assert export_with_limit(100_000_000).returncode == 0  # room again: a good export
    previous = tree(out_dir)
    result = export_with_limit(200_000)
    assert result.returncode == 2 and "File too large" in result.stderr
    assert tree(out_dir) == previous
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "served"]


# ---- item 13: damaged weights, on export and on eval run


def truncate(path: Path, size: int) -> None:
    os.truncate(path, size)


def garble(path: Path, size: int) -> None:
    path.write_bytes(path.read_bytes()[:size] + b"\x00garbage")


UNREADABLE = "not a readable safetensors file (Error while deserializing header: "
DAMAGE = [
    ("final/adapter_model.safetensors", lambda p: truncate(p, 100), UNREADABLE + "invalid header length)"),
    ("final/adapter_model.safetensors", lambda p: truncate(p, p.stat().st_size - 10),
     UNREADABLE + "incomplete metadata, file not fully covered)"),
    ("final/adapter_config.json", lambda p: garble(p, 30), "not valid JSON ("),
    ("final/tokenizer.json", lambda p: truncate(p, 1000), "not valid JSON ("),
    ("config.yaml", lambda p: p.write_text("model: [unclosed\n", encoding="utf-8"), "not a readable config ("),
]  # fmt: skip


@pytest.mark.parametrize(("name", "damage", "reason"), DAMAGE, ids=[f"{d[0]}-{i}" for i, d in enumerate(DAMAGE)])
def test_a_damaged_run_file_is_named_by_export_and_eval_run(engine, run_copy, tmp_path, capsys, name, damage, reason):
    damage(run_copy / name)
    before = tree(run_copy)
    code, out, err = export(engine, capsys, str(run_copy), "--out-dir", str(tmp_path / "served"))
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {run_copy / name} is damaged: {reason}"), err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "served").exists()

    with engine.in_process():
        code = main(["eval", "run", "heldout", str(run_copy), "--limit", "1"])
    out, err = capsys.readouterr()
    assert code == 2
    assert err.splitlines()[-1].startswith(f"error: {run_copy / name} is damaged: {reason}"), err
    assert "Traceback" not in err
    assert tree(run_copy) == before


def test_a_damaged_checkpoint_is_named_when_the_run_did_not_finish(engine, run_copy, tmp_path, capsys):
    shutil.rmtree(run_copy / "final")
    weights = run_copy / "checkpoint-6" / "adapter_model.safetensors"
    truncate(weights, 4)
    code, _, err = export(engine, capsys, str(run_copy), "--out-dir", str(tmp_path / "served"))
    assert code == 2
    assert err == (
        f"error: {weights} is damaged: not a readable safetensors file "
        "(Error while deserializing header: header too small)\n"
    )


def test_a_same_size_corruption_of_a_checkpoint_is_named_by_its_saved_checksum(engine, run_copy, tmp_path, capsys):
    shutil.rmtree(run_copy / "final")
    weights = run_copy / "checkpoint-6" / "adapter_model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-3] ^= 0xFF  # inside the tensor bytes: every header check still passes
    weights.write_bytes(bytes(data))
    code, _, err = export(engine, capsys, str(run_copy), "--out-dir", str(tmp_path / "served"))
    assert code == 2
    assert err.startswith(f"error: {weights} is damaged: its bytes changed since it was saved (CRC-32 ")
    assert not (tmp_path / "served").exists()


# ---- item 25: modes a shared cluster can read, generation settings from the run's tokenizer


def test_export_files_follow_the_umask_and_the_generation_config_is_the_formats(engine, run_copy, tmp_path, capsys):
    from transformers import PreTrainedTokenizerFast

    saved = os.umask(0o022)
    try:
        code, _, err = export(engine, capsys, str(run_copy), "--out-dir", str(tmp_path / "served"))
    finally:
        os.umask(saved)
    assert code == 0, err
    served = tmp_path / "served"
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in served.iterdir()}
    assert modes == dict.fromkeys(modes, 0o644) and "model.safetensors" in modes
    assert stat.S_IMODE(served.stat().st_mode) == 0o755

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(served))
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    generation = json.loads((served / "generation_config.json").read_text())
    assert generation["use_cache"] is True
    assert generation["eos_token_id"] == [im_end]
    assert generation.get("bos_token_id") == tokenizer.bos_token_id  # None: the tiny tokenizer has no BOS
    assert generation.get("pad_token_id") == tokenizer.pad_token_id
    config = json.loads((served / "config.json").read_text())
    assert (config["bos_token_id"], config["eos_token_id"], config["use_cache"]) == (None, im_end, True)


def test_eval_run_names_a_damaged_file_of_an_exported_model(engine, run_copy, tmp_path, capsys):
    served = tmp_path / "served"
    code, _, err = export(engine, capsys, str(run_copy), "--out-dir", str(served))
    assert code == 0, err
    truncate(served / "model.safetensors", 50_000)
    data = tmp_path / "one.jsonl"
    data.write_text("{}\n", encoding="utf-8")
    with engine.in_process():
        code = main(["eval", "run", "heldout", str(served), "--data", str(data)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == (
        f"error: {served / 'model.safetensors'} is damaged: not a readable safetensors file "
        "(Error while deserializing header: incomplete metadata, file not fully covered)\n"
    )
