"""Issue 24 item 18: nothing from the config becomes a command or a path outside output_dir in the batch script
`tooltrain launch` writes. Names (run_name, launcher.job_name) keep to a safe character set, checked at compose
time; #SBATCH values (which sbatch reads unquoted) are refused outside Slurm's characters; every value on a shell
line is quoted, and a comment line stays one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from train.cli import main
from train.engine.config import ConfigError, compose


def launch(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["launch", *argv])
    out, err = capsys.readouterr()
    return code, out, err


BAD_NAMES = ["a\nrm -rf ~", "$(touch pwned)", "../../escape", ".hidden", "two words", "x" * 101, ""]


@pytest.mark.parametrize("key", ["run_name", "launcher.job_name"])
@pytest.mark.parametrize("name", BAD_NAMES)
def test_an_unsafe_name_is_refused_at_compose_time_with_the_rule(key, name):
    with pytest.raises(ConfigError) as err:
        compose(["recipe=tiny", f"{key}='{name}'"])
    assert str(err.value) == (
        f"invalid configuration:\n  - {key}={name!r} is not a safe name: use 1-100 characters from "
        "A-Z a-z 0-9 . _ -, not starting with a dot"
    )


@pytest.mark.parametrize("name", ["a\nrm -rf ~", "../../escape", "$(touch pwned)"])
def test_launch_with_an_unsafe_job_name_writes_no_script_anywhere(capsys, tmp_path, name):
    run = tmp_path / "a" / "b" / "run"
    code, out, err = launch(
        capsys, "recipe=tiny", "--dry-run", f"launcher.job_name='{name}'", f"output_dir={run}", "launcher.log_dir=/x"
    )
    assert code == 2 and out == ""
    assert err.startswith("error: the configuration does not compose: invalid configuration:\n  - launcher.job_name=")
    assert err.count("error:") == 1
    assert list(tmp_path.rglob("*.sbatch")) == [] and not (tmp_path / "pwned").exists()


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("launcher.partition='gpu --uid=0'", "launcher.partition"),
        ("launcher.account='proj\nrm -rf ~'", "launcher.account"),
        ("launcher.log_dir='/scratch/my logs'", "launcher.log_dir"),
        ("launcher.sbatch_options=['--exclusive\nrm -rf ~']", "launcher.sbatch_options"),
    ],
)
def test_an_sbatch_value_outside_slurms_characters_is_refused(capsys, tmp_path, override, key):
    code, out, err = launch(capsys, "recipe=tiny", "--dry-run", override, f"output_dir={tmp_path / 'run'}")
    assert code == 2 and out == ""
    assert err.startswith(f"error: {key}=") and "cannot go into an #SBATCH line: use only A-Z a-z 0-9" in err
    assert list(tmp_path.rglob("*.sbatch")) == []


def test_every_config_value_in_the_script_is_quoted(capsys, tmp_path):
    """Odd but legal values (spaces and a quote in a path, a newline, $(...)): bash runs the script as written, and
    its last line hands each value to the training script as one word; nothing from a value runs as a command
    (before: a newline in an override ended the preview comment and its second half ran)."""
    run = tmp_path / "my run's dir"
    odd = ["optim.name='adamw_torch\ntouch injected'", "data.sources.0.inputs=['/data/a b/$(touch injected).jsonl']"]
    code, _, err = launch(
        capsys, "recipe=tiny", "--dry-run", *odd, f'output_dir="{run}"', f"launcher.log_dir={tmp_path}/logs"
    )
    assert code == 0, err
    script = (run / "tiny.sbatch").read_text()
    assert script.count("\nexec bash ") == 1
    # run it, the final exec printing the words it would pass, and the log folder it exports
    runnable = script.replace("\nexec bash ", '\nprintf "%s\\0" "$LOG_DIR" ', 1)
    result = subprocess.run(
        ["bash", "-c", runnable], cwd=tmp_path, capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "injected").exists()
    words = result.stdout.split("\0")[:-1]
    assert words[0] == f"{tmp_path}/logs"
    assert words[2:] == ["recipe=tiny", *odd, f"output_dir={run}"]  # words[1]: launch/slurm/train.sbatch
    preview = next(line for line in script.splitlines() if line.startswith("#   "))
    assert "\\ntouch injected" in preview  # the newline shown as its escape: the comment stays one line


def test_the_script_path_stays_inside_output_dir(capsys, tmp_path):
    code, _, _ = launch(capsys, "recipe=tiny", "--dry-run", "run_name=v1.2_lr-3", f"output_dir={tmp_path / 'r'}")
    assert code == 0
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.sbatch")) == [Path("r/v1.2_lr-3.sbatch")]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
