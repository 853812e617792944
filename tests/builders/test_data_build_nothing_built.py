"""Issue 24 item 23: ``data build`` whose inputs are all rejected, or whose teacher calls all fail, made no
training rows yet exited 0 and replaced a previous good build's files with empty ones. It must exit 1 with one
``error:`` line saying why, and leave a previous build in --out-dir byte for byte as it was."""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path

from train.cli import main


def hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed when the block ends: a connection is refused at once


def test_all_inputs_rejected_keeps_the_previous_build_and_exits_1(tmp_path, fixtures, capsys):
    out = tmp_path / "built"
    good = [str(fixtures / "builders" / "dialogues.jsonl"), "glaive:train/assets/demo/glaive_sample.json"]
    options = ["holdout_fraction=0.2", "embedder=hash-bow", "pool_size=10"]
    assert main(["data", "build", "metatool", *good, *options, "--out-dir", str(out)]) == 0
    before = hashes(out)
    assert (out / "train.jsonl").stat().st_size > 0
    capsys.readouterr()

    broken = str(fixtures / "builders" / "broken.jsonl")
    assert main(["data", "build", "metatool", broken, *options, "--out-dir", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        f"error: no training rows for {out / 'train.jsonl'}: all 2 records were rejected "
        "(e.g. a tool_query, not a conversation); the previous build there is unchanged\n"
    )
    assert captured.out.startswith("read 2: training rows 0")
    assert hashes(out) == before  # no file replaced, no temporary file left


def test_every_teacher_call_failing_writes_nothing_and_exits_1(tmp_path, capsys):
    conversations = tmp_path / "glaive.jsonl"
    assert main(["data", "convert", "glaive", "train/assets/demo/glaive_sample.json", "-o", str(conversations)]) == 0
    # 3 failures in a row stop the teacher: glaive_sample-1 (no functions: no sample) and -10 (one sample)
    lines = [conversations.read_text(encoding="utf-8").splitlines()[k] for k in (1, 10)]
    conversations.write_text("\n".join(lines) + "\n", encoding="utf-8")
    capsys.readouterr()

    out = tmp_path / "built"
    url = f"http://127.0.0.1:{closed_port()}/v1"
    teacher = ["teacher.kind=http", f"teacher.base_url={url}", "teacher.model=x", "cache_dir=none"]
    assert main(["data", "build", "toolgt", str(conversations), *teacher, "--out-dir", str(out)]) == 1
    captured = capsys.readouterr()
    assert "failures 1" in captured.out
    assert captured.err.startswith(
        f"error: no training rows for {out / 'train.jsonl'}: 2 of 2 records were read and none became a training row "
        "(dropped: "
    )
    assert f"detail stage1: teacher failed: cannot reach {url}/chat/completions" in captured.err
    assert captured.err.endswith("; nothing written\n") and len(captured.err.splitlines()) == 1
    assert not out.exists()  # the folder the refused build made is gone too

    assert main(["data", "build", "toolgt", str(conversations), "--out-dir", str(out)]) == 0  # offline teacher
    assert json.loads((out / "report.json").read_text())["train"]["rows"] > 0
