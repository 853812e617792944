"""What a run's training build read, recorded when the run starts and compared when it resumes.

A checkpoint's data position counts rows of the data it was trained on; the config check
(train/engine/resume_config.py) sees the input paths, not their content. So a fresh start records, in
RUN_DIR/data_inputs.json, each input file of ``data.sources`` (each file of an input folder, as the
dataset's cache key reads them: train/data/dataset.py::cache_key) with its size and SHA-256. A resume whose
inputs differ is refused, naming the input, the file and how it changed. To resume on the changed data
anyway, the user deletes data_inputs.json: an explicit act, no config key needed; the resume then says it
has no record and records the inputs as they are now, which later resumes are checked against.

SHA-256, as the cache key, and from the same function (``train.base.records.file_sha256``): a fresh run
reads each input once for both, memoized on its path, size and modification time.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from train.base.records import file_sha256, input_files

RECORD_NAME = "data_inputs.json"


def describe_input(path: Path) -> dict[str, list]:
    """file name (relative to an input folder; the file's own name for a file) -> [size, SHA-256]."""
    described = {}
    for file in input_files(path):
        name = file.relative_to(path).as_posix() if path.is_dir() else file.name
        described[name] = [file.stat().st_size, file_sha256(file)]
    return described


def data_inputs(cfg: Any) -> dict[str, dict[str, Any]]:
    """``data.sources.I.inputs.J`` -> {"input": as configured, "folder": whether it is one, "files":
    ``describe_input``} for every input."""
    from train.data.inputs import resolve_input

    found = {}
    for index, spec in enumerate(cfg.data.sources):
        for number, name in enumerate(spec.inputs):
            path = resolve_input(str(name))
            found[f"data.sources.{index}.inputs.{number}"] = {
                "input": str(name),
                "folder": path.is_dir(),
                "files": describe_input(path),
            }
    return found


def record_data_inputs(out: Path, cfg: Any) -> None:
    """Write RUN_DIR/data_inputs.json (temporary file, then rename)."""
    temporary = out / (RECORD_NAME + ".tmp")
    temporary.write_text(json.dumps({"inputs": data_inputs(cfg)}, indent=1) + "\n", encoding="utf-8")
    os.replace(temporary, out / RECORD_NAME)


def read_record(out: Path) -> dict[str, Any] | None:
    """The recorded inputs; None when the run has no record (an older run, or the user deleted it)."""
    try:
        record = json.loads((out / RECORD_NAME).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        return {"unreadable": str(err)}
    inputs = record.get("inputs") if isinstance(record, dict) else None
    return inputs if isinstance(inputs, dict) else {"unreadable": "no 'inputs' object"}


def data_changes(recorded: dict[str, Any], now: dict[str, dict[str, Any]]) -> list[str]:
    """One phrase per input whose files differ from the record: the input, the file and how."""
    changes = []
    for key, entry in now.items():
        saved = recorded.get(key)
        if not isinstance(saved, dict) or not isinstance(saved.get("files"), dict):
            continue  # an input the config check already compared (data.* is fixed): nothing recorded for it
        before, after = saved["files"], entry["files"]
        for name in sorted(set(before) | set(after)):
            file = f"{key}: {entry['input']}" + (f"/{name}" if entry["folder"] or saved.get("folder") else "")
            if name not in after:
                changes.append(f"{file}: gone (it was read when the run started)")
            elif name not in before:
                changes.append(f"{file}: new (it was not there when the run started)")
            elif after[name] != before[name]:
                size_then, size_now = before[name][0], after[name][0]
                how = f"{size_then:,} -> {size_now:,} bytes" if size_then != size_now else "same size, other bytes"
                changes.append(f"{file}: changed since the run started ({how})")
    return changes
