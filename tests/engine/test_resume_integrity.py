"""A resume is exact or says why not (issue #24, items 8, 13, 20, 21).

* 13: a damaged checkpoint (cut short, garbled, a byte changed) is never resumed from: the newest intact one is,
  saying which file of which checkpoint was damaged; with none intact, one ``error:`` line naming the file.
* 20: a checkpoint without a file a resume reads (optimizer, scheduler, RNG state) is not complete either.
* 21: training data edited since the run started is refused on resume, naming the input.
* 8: a command whose output_dir holds a completed run of other settings is refused (exit 2), nothing touched.

One run is trained per module (its input file a copy the tests may edit); each test corrupts a copy of it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from train.engine import checkpoints
from train.engine.checkpoints import COMPLETE_MARKER

STEPS = 6  # tests/engine/conftest.py: 6 steps, a checkpoint every 2


def the_error(result: subprocess.CompletedProcess, code: int) -> str:
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    everything = result.stdout + result.stderr
    assert (result.returncode, len(errors), "Traceback" in everything) == (code, 1, False), (
        f"exit {result.returncode}\n{everything[-5000:]}"
    )
    return errors[0]


def snapshot(folder: Path, skip: tuple[str, ...] = (), times: bool = True) -> dict[str, tuple[bytes, int]]:
    """Every file's bytes and modification time (ns), by relative path; ``skip``: top-level entries left out.
    ``times=False``: bytes only (a refused resume has taken the run's lock: the lock file is opened anew)."""
    return {
        path.relative_to(folder).as_posix(): (path.read_bytes(), path.stat().st_mtime_ns if times else 0)
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.relative_to(folder).parts[0] not in skip
    }


@pytest.fixture(scope="module")
def trained(engine, tmp_path_factory) -> tuple[Path, Path, tuple[str, ...]]:
    """(RUN_DIR of a completed 6-step run, its input file, the overrides every command here adds)."""
    from train.data.inputs import resolve_input

    folder = tmp_path_factory.mktemp("integrity")
    data = folder / "glaive.json"
    shutil.copyfile(resolve_input("pkg://train/assets/demo/glaive_sample.json"), data)
    extra = (f"data.sources.0.inputs=[{data}]",)
    result = engine.run(folder / "run", *extra)
    assert (result.status, result.global_step) == ("completed", STEPS)
    return folder / "run", data, extra


def train(engine, out: Path, *extra: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        engine.command(out, *extra),
        check=False,
        cwd=engine.repo,
        env=engine.env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def cut_short(path: Path, keep: int | None = None) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 if keep is None else keep])


def flip_a_byte(path: Path) -> None:
    """Same size, one byte in the middle changed: what only a checksum sees."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def garble(path: Path) -> None:
    path.write_bytes(b"#" * path.stat().st_size)


def without(name: str):
    return lambda path: path.unlink()


# ---------------------------------------------------------------- item 13 and 20: which checkpoint is intact


@pytest.mark.parametrize(
    "name, damage, expected",
    [
        ("adapter_model.safetensors", cut_short, "adapter_model.safetensors: 29,696 bytes, 59,392 when it was saved"),
        ("trainer_state.json", garble, "trainer_state.json: not valid JSON"),
        ("optimizer.pt", cut_short, "optimizer.pt: "),
        ("optimizer.pt", flip_a_byte, "optimizer.pt: its bytes changed since it was saved (CRC-32 "),
        ("adapter_model.safetensors", flip_a_byte, "adapter_model.safetensors: its bytes changed since it was saved"),
        ("optimizer.pt", without, "optimizer.pt: missing, and a resume needs it (the optimizer's moments)"),
        ("scheduler.pt", without, "scheduler.pt: missing, and a resume needs it (the learning-rate schedule)"),
        ("rng_state.pth", without, "rng_state.pth: missing, and a resume needs it (the random state"),
    ],
    ids=["safetensors-cut", "state-garbled", "optimizer-cut", "optimizer-byte", "adapter-byte", "no-optimizer",
         "no-scheduler", "no-rng"],
)  # fmt: skip
def test_a_damaged_or_short_checkpoint_is_named_with_its_file_and_why(trained, tmp_path, name, damage, expected):
    run_dir, _, _ = trained
    checkpoint = shutil.copytree(run_dir / "checkpoint-6", tmp_path / "checkpoint-6")
    assert checkpoints.resume_problem(checkpoint) is None
    (damage(name) if damage is without else damage)(checkpoint / name)
    assert checkpoints.resume_problem(checkpoint).startswith(expected)


def test_without_the_file_list_of_a_newer_marker_the_format_checks_still_see_the_damage(trained, tmp_path):
    """A checkpoint whose marker lists no files (an older run's) is still checked: the files a resume reads are
    there, the JSON parses, a safetensors header fits its file, a torch archive has its directory; and ``final/``
    (no marker at all) is checked the same way."""
    run_dir, _, _ = trained
    checkpoint = shutil.copytree(run_dir / "checkpoint-6", tmp_path / "checkpoint-6")
    marker = json.loads((checkpoint / COMPLETE_MARKER).read_text())
    (checkpoint / COMPLETE_MARKER).write_text(json.dumps({k: v for k, v in marker.items() if k != "files"}))
    assert checkpoints.resume_problem(checkpoint) is None
    cut_short(checkpoint / "optimizer.pt")
    assert checkpoints.resume_problem(checkpoint).startswith("optimizer.pt: a damaged PyTorch archive")
    (checkpoint / "optimizer.pt").unlink()
    assert checkpoints.resume_problem(checkpoint).startswith("optimizer.pt: missing, and a resume needs it")
    final = shutil.copytree(run_dir / "final", tmp_path / "final")
    assert checkpoints.verify_checkpoint(final) is None
    cut_short(final / "adapter_model.safetensors")
    assert (
        checkpoints.verify_checkpoint(final)
        == "adapter_model.safetensors: 29,696 bytes where its header says 59,392 (cut short or damaged)"
    )


def _layout(folder: Path, files: list[str], world_size: int) -> Path:
    for name in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("global_step4" if name == "latest" else "{}" if name.endswith(".json") else "x")
    (folder / COMPLETE_MARKER).write_text(json.dumps({"step": 4, "world_size": world_size}))
    return folder


# What the Trainer wrote for each strategy (observed with transformers 5, DeepSpeed, 2 CPU ranks).
COMMON = ["README.md", "adapter_config.json", "adapter_model.safetensors", "training_args.bin", "trainer_state.json"]
LAYOUTS = {
    "single": (1, [*COMMON, "optimizer.pt", "scheduler.pt", "rng_state.pth"]),
    "ddp": (2, [*COMMON, "optimizer.pt", "scheduler.pt", "rng_state_0.pth", "rng_state_1.pth"]),
    "zero3": (
        2,
        [
            *COMMON,
            "latest",
            "scheduler.pt",
            "zero_to_fp32.py",
            "rng_state_0.pth",
            "rng_state_1.pth",
            *(
                f"global_step4/zero_pp_rank_{r}_mp_rank_00_{kind}_states.pt"
                for r in (0, 1)
                for kind in ("model", "optim")
            ),
        ],
    ),
    "zero2-bf16": (
        2,
        [
            *COMMON,
            "latest",
            "scheduler.pt",
            "rng_state_0.pth",
            "rng_state_1.pth",
            "global_step4/mp_rank_00_model_states.pt",
            *(f"global_step4/bf16_zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in (0, 1)),
        ],
    ),
    "fsdp2": (
        2,
        [
            *COMMON,
            "scheduler.pt",
            "rng_state_0.pth",
            "rng_state_1.pth",
            "pytorch_model_fsdp_0/__0_0.distcp",
            "optimizer_0/__0_0.distcp",
        ],
    ),
}


@pytest.mark.parametrize("strategy", sorted(LAYOUTS))
def test_every_strategy_s_layout_is_complete_and_each_missing_part_is_named(tmp_path, strategy):
    world_size, files = LAYOUTS[strategy]
    assert checkpoints.missing_for_resume(_layout(tmp_path / "whole", files, world_size)) is None
    needed = [n for n in files if n.startswith(("rng_state", "optimizer", "scheduler", "latest", "global_step"))]
    for name in needed:
        folder = _layout(tmp_path / name.replace("/", "_"), [n for n in files if n != name], world_size)
        problem = checkpoints.missing_for_resume(folder)
        assert problem is not None and "missing, and a resume needs it" in problem, name


def test_a_resume_falls_back_from_a_damaged_newest_checkpoint_to_the_previous_one_and_says_so(
    engine, trained, tmp_path, capsys
):
    run_dir, _, extra = trained
    copy = engine.copy_run(run_dir, tmp_path / "run", keep_through_step=STEPS)
    cut_short(copy / "checkpoint-6" / "adapter_model.safetensors")
    result = engine.run(copy, *extra)
    out = capsys.readouterr().out
    assert (
        "tooltrain: checkpoint-6 is damaged (adapter_model.safetensors: 29,696 bytes, 59,392 when it was saved "
        "(cut short)); resuming from checkpoint-4 instead; the damaged one is kept as damaged-checkpoint-6\n"
    ) in out
    assert "resuming from checkpoint-4" in out
    assert (result.status, result.global_step) == ("completed", STEPS)
    assert engine.losses(copy) == engine.losses(run_dir)  # an exact resume: the same loss at every step
    engine.assert_same_tensors(engine.adapter(copy / "final"), engine.adapter(run_dir / "final"))
    assert (copy / "damaged-checkpoint-6" / "adapter_model.safetensors").stat().st_size == 29_696  # kept


# rng_state.pth in the slow tier: the same fallback resume as optimizer.pt (resume_problem names the file, the run
# resumes from checkpoint-4); that a missing rng_state.pth is named is test_a_damaged_or_short_checkpoint_...[no-rng]
@pytest.mark.parametrize("name", ["optimizer.pt", pytest.param("rng_state.pth", marks=pytest.mark.slow)])
def test_a_newest_checkpoint_without_a_file_a_resume_needs_is_passed_over_saying_which(
    engine, trained, tmp_path, capsys, name
):
    """Item 20: without optimizer.pt the Trainer resumed with fresh moments and lr 1e-3 at step 5; without
    rng_state.pth with another random state. Now the previous checkpoint is resumed from, exactly."""
    run_dir, _, extra = trained
    copy = engine.copy_run(run_dir, tmp_path / "run", keep_through_step=STEPS)
    (copy / "checkpoint-6" / name).unlink()
    result = engine.run(copy, *extra)
    out = capsys.readouterr().out
    assert f"tooltrain: checkpoint-6 is damaged ({name}: missing, and a resume needs it (" in out
    assert "resuming from checkpoint-4 instead" in out
    assert (result.status, result.global_step) == ("completed", STEPS)
    assert engine.losses(copy) == engine.losses(run_dir)
    lrs = {row["step"]: row["learning_rate"] for row in engine.metrics(copy) if "learning_rate" in row}
    assert lrs == {row["step"]: row["learning_rate"] for row in engine.metrics(run_dir) if "learning_rate" in row}


def test_with_no_intact_checkpoint_the_resume_is_refused_naming_each_file(engine, trained, tmp_path):
    from train.engine.run_dir import RunSetupError

    run_dir, _, extra = trained
    copy = engine.copy_run(run_dir, tmp_path / "run", keep_through_step=4)
    cut_short(copy / "checkpoint-4" / "optimizer.pt", keep=1000)
    (copy / "checkpoint-2" / "rng_state.pth").unlink()
    before = snapshot(copy)
    with pytest.raises(RunSetupError) as refused:
        engine.run(copy, *extra)
    assert str(refused.value) == (
        f"output_dir={copy}: no checkpoint can be resumed from: checkpoint-4/optimizer.pt: 1,000 bytes, 128,639 "
        "when it was saved (cut short); older ones too: checkpoint-2/rng_state.pth: missing, and a resume needs it "
        "(the random state, so that dropout and data order go on as if never stopped); restore the file, or move "
        "the checkpoint-N folders out of output_dir to train again from step 0, or choose another output_dir"
    )
    assert snapshot(copy) == before


@pytest.mark.slow
def test_with_no_intact_checkpoint_the_resume_is_one_error_naming_the_file_and_nothing_changes(
    engine, trained, tmp_path
):
    run_dir, _, extra = trained
    copy = engine.copy_run(run_dir, tmp_path / "run", keep_through_step=STEPS)
    for step in (2, 4, 6):
        garble(copy / f"checkpoint-{step}" / "trainer_state.json")
    before = snapshot(copy, times=False)
    error = the_error(train(engine, copy, *extra), 2)
    assert error.startswith(
        f"error: output_dir={copy}: no checkpoint can be resumed from: checkpoint-6/trainer_state.json: not valid JSON"
    )
    assert "; older ones too: checkpoint-4/trainer_state.json: not valid JSON" in error
    assert "; checkpoint-2/trainer_state.json: not valid JSON" in error
    assert snapshot(copy, times=False) == before


# ---------------------------------------------------------------- item 21: the data the run started on


def _edited_input(engine, trained, tmp_path) -> tuple[Path, Path, tuple[str, ...]]:
    """A copy of the run killed after checkpoint-4 whose input file then lost 40 of its 60 records. The copy reads
    its own input (config.yaml and data_inputs.json name it), so the module's run keeps its own."""
    run_dir, data, _ = trained
    copy = engine.copy_run(run_dir, tmp_path / "run", keep_through_step=4)
    edited = tmp_path / "glaive.json"
    edited.write_text(json.dumps(json.loads(data.read_text())[:20]))
    for record in (copy / "config.yaml", copy / "data_inputs.json"):
        if record.is_file():
            record.write_text(record.read_text().replace(str(data), str(edited)))
    return copy, edited, (f"data.sources.0.inputs=[{edited}]",)


def _changed_data_error(copy: Path, data: Path, edited: Path) -> str:
    return (
        f"output_dir={copy} resumes from checkpoint-4, but its training data changed: data.sources.0.inputs.0: "
        f"{edited}: changed since the run started ({data.stat().st_size:,} -> {edited.stat().st_size:,} bytes); "
        "the checkpoint's data position counts rows of the data it trained on. Restore the input to resume, or "
        "choose another output_dir to start a new run; to resume on the changed data anyway, delete "
        f"{copy / 'data_inputs.json'}"
    )


def test_a_resume_on_an_input_edited_since_the_run_started_is_refused_unless_its_record_is_deleted(
    engine, trained, tmp_path, capsys
):
    from train.engine.run_dir import RunSetupError

    copy, edited, extra = _edited_input(engine, trained, tmp_path)
    before = snapshot(copy)
    with pytest.raises(RunSetupError) as refused:
        engine.run(copy, *extra)
    assert str(refused.value) == _changed_data_error(copy, trained[1], edited)
    assert snapshot(copy) == before

    # the explicit override: the record deleted, the resume says it compared nothing and records the data now
    (copy / "data_inputs.json").unlink()
    result = engine.run(copy, *extra)
    assert (
        "tooltrain: resuming from checkpoint-4 without a record of the data the run started on (data_inputs.json)"
    ) in capsys.readouterr().out
    assert (result.status, result.global_step) == ("completed", STEPS)
    recorded = json.loads((copy / "data_inputs.json").read_text())["inputs"]["data.sources.0.inputs.0"]
    assert recorded["files"]["glaive.json"][0] == edited.stat().st_size


@pytest.mark.slow
def test_the_command_on_an_edited_input_is_one_error_line_and_exit_2(engine, trained, tmp_path):
    copy, edited, extra = _edited_input(engine, trained, tmp_path)
    before = snapshot(copy, times=False)
    error = the_error(train(engine, copy, *extra), 2)
    assert error == "error: " + _changed_data_error(copy, trained[1], edited)
    assert snapshot(copy, times=False) == before


def test_an_unchanged_input_touched_since_the_run_started_resumes(engine, trained, tmp_path, capsys):
    run_dir, data, extra = trained
    copy = engine.copy_run(run_dir, tmp_path / "run", keep_through_step=4)
    data.touch()  # a new modification time, the same bytes
    result = engine.run(copy, *extra)
    assert "resuming from checkpoint-4" in capsys.readouterr().out
    assert (result.status, result.global_step) == ("completed", STEPS)


# ---------------------------------------------------------------- item 8: a completed run of other settings


# What Hydra writes into output_dir once CheckBeforeLaunch.on_run_start lets the job start: its record and the
# job's log. Left out here; the test after this one asserts that the refusal (in on_run_start) leaves them too.
HYDRA_WRITES = (".hydra", "entry.log")


def _other_recipe(engine, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "train", "train", "recipe=mt_llama_tiny", f"output_dir={out}"],
        check=False, cwd=engine.repo, env=engine.env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.slow
def test_another_recipe_into_a_completed_run_is_refused_with_the_differences(engine, trained, tmp_path):
    run_dir, _, _ = trained
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    before = snapshot(copy, skip=HYDRA_WRITES)
    result = _other_recipe(engine, copy)
    error = the_error(result, 2)
    assert error.startswith(
        f"error: output_dir={copy} holds a completed run of other settings, so this command is not a rerun of it"
    )
    listed = result.stderr.splitlines()
    assert '  model.chat_format: "chatml" -> "llama3_1_metatool"' in listed
    assert '  data.builder: null -> "metatool"' in listed
    assert "nothing to do" not in result.stdout and "run completed" not in result.stdout  # not its summary
    assert snapshot(copy, skip=HYDRA_WRITES) == before


@pytest.mark.slow
def test_another_recipe_into_a_completed_run_leaves_even_hydra_s_record_untouched(engine, trained, tmp_path):
    run_dir, _, _ = trained
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (copy / ".hydra").mkdir(exist_ok=True)  # in-process runs leave none: as a command would have left it
    (copy / ".hydra" / "config.yaml").write_text("seed: 42\n")
    before = snapshot(copy)
    the_error(_other_recipe(engine, copy), 2)
    assert snapshot(copy) == before


def test_in_process_too_a_completed_run_of_other_settings_is_refused(engine, trained, tmp_path):
    from train.engine.run_dir import RunSetupError

    run_dir, _, extra = trained
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    before = snapshot(copy)
    with pytest.raises(RunSetupError, match=r"\n  optim.lr: 0.001 -> 0.5\n"):
        engine.run(copy, *extra, "optim.lr=0.5")
    assert snapshot(copy) == before
