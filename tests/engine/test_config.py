"""The training config contract: every documented override composes, a bad one fails at compose time
with a message that says what is valid, ``check`` rejects conflicting fields, every recipe composes;
and the two entry points (``tooltrain train``, ``python -m train train``) and ``-m`` sweeps behave."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException, MissingConfigException

from train.engine.config import CONF_DIR, REPO_ROOT, ConfigError, check, compose

MODELS = sorted(p.stem for p in (CONF_DIR / "model").glob("*.yaml"))
STRATEGIES = sorted(p.stem for p in (CONF_DIR / "distributed").glob("*.yaml"))
RECIPES = sorted(p.stem for p in (REPO_ROOT / "recipes").glob("*.yaml"))


# -- overrides that compose -----------------------------------------------------------------------


def test_the_run_overrides_compose_into_the_fields_they_name(tmp_path):
    cfg = compose(["recipe=tiny", f"output_dir={tmp_path}/x", "seed=7", "train.max_steps=3", "train.save_steps=2"])
    assert (cfg.output_dir, cfg.seed, cfg.train.max_steps, cfg.train.save_steps) == (f"{tmp_path}/x", 7, 3, 2)


def test_output_dir_defaults_to_runs_slash_the_run_name():
    assert compose(["recipe=tiny"]).output_dir == "runs/tiny"


@pytest.mark.parametrize("model", MODELS)
def test_every_model_composes(model):
    cfg = compose([f"model={model}"])
    assert cfg.model.name == model
    assert cfg.model.chat_format and cfg.model.tokenizer


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_distributed_choice_composes(strategy):
    assert compose(["recipe=tiny", f"distributed={strategy}"]).distributed.strategy.value == strategy


def test_zero3_offload_turns_both_offloads_on():
    d = compose(["distributed=zero3_offload"]).distributed
    assert (d.zero_stage, d.offload_optimizer, d.offload_params) == (3, True, True)


@pytest.mark.parametrize(("peft", "kind"), [("lora", "lora"), ("none", "none")])
def test_peft_choices_compose(peft, kind):
    assert compose(["recipe=tiny", f"peft={peft}"]).peft.kind.value == kind


@pytest.mark.parametrize(
    ("tracker", "switches"), [("none", []), ("tensorboard", ["tensorboard"]), ("wandb", ["wandb"])]
)
def test_tracking_choices_compose(tracker, switches):
    tracking = compose(["recipe=tiny", f"tracking={tracker}"]).tracking
    assert [name for name in ("tensorboard", "wandb") if tracking[name]] == switches


@pytest.mark.parametrize("recipe", RECIPES)
def test_every_recipe_composes_and_passes_check(recipe):
    cfg = compose([f"recipe={recipe}"])  # compose runs check()
    assert cfg.data.sources, f"recipe {recipe} trains on nothing"


def test_a_recipe_changes_only_what_it_lists():
    base, demo = compose([]), compose(["recipe=demo"])
    assert (demo.model.name, demo.data.name, demo.run_name) == ("smollm2_135m", "demo", "demo")
    assert demo.peft.dropout == base.peft.dropout and demo.optim.name == base.optim.name


# -- overrides that fail at compose time ------------------------------------------------------------


@pytest.mark.parametrize(("group", "valid"), [("recipe", RECIPES), ("model", MODELS), ("distributed", STRATEGIES)])
def test_an_unknown_choice_fails_and_lists_the_valid_ones(group, valid):
    with pytest.raises(MissingConfigException) as err:
        compose([f"{group}=nope"])
    message = str(err.value)
    assert message.startswith(f"In 'train': Could not find '{group}/nope'\n\nAvailable options in '{group}':\n")
    listed = message.split(f"Available options in '{group}':\n")[1].split("Config search path")[0].split()
    assert listed == valid


def test_a_wrong_type_fails_at_compose_time():
    with pytest.raises(ConfigCompositionException) as err:
        compose(["recipe=tiny", "train.max_steps=abc"])
    assert str(err.value) == "Error merging override train.max_steps=abc"
    assert str(err.value.__cause__).startswith(
        "Value 'abc' of type 'str' could not be converted to Integer\n    full_key: train.max_steps"
    )


def test_a_value_outside_an_enum_lists_the_valid_ones():
    with pytest.raises(ConfigCompositionException) as err:
        compose(["distributed.strategy=fsdp9"])
    assert str(err.value.__cause__).startswith(
        "Invalid value 'fsdp9', expected one of [single, ddp, zero2, zero3, zero3_offload, fsdp2]"
    )


@pytest.mark.parametrize("override", ["train.nope=1", "nope=1", "data.packing_mode=bfd"])
def test_an_unknown_key_fails_at_compose_time(override):
    key = override.split("=")[0]
    with pytest.raises(ConfigCompositionException) as err:
        compose(["recipe=tiny", override])
    assert str(err.value) == f"Could not override '{key}'.\nTo append to your config use +{override}"


def test_an_unknown_key_appended_with_plus_fails_too():
    with pytest.raises(ConfigError) as err:
        compose(["recipe=tiny", "+train.max_step=3", "+nope=1", "+data.sources.0.limt=4"])
    message = str(err.value)
    assert "unknown key train.max_step (added with '+'); train has: " in message
    assert ", max_steps, " in message
    assert "unknown key nope (added with '+'); the config has: data, distributed, dpo, eval, " in message
    assert "unknown key data.sources[0].limt (added with '+'); data.sources[0] has: " in message


def test_plus_still_adds_keys_to_free_form_dicts():
    cfg = compose(["recipe=tiny", "+data.part_weights.call_args=2", "+model.arch.rope_theta=10000.0"])
    assert cfg.data.part_weights.call_args == 2 and cfg.model.arch.rope_theta == 10000.0


# -- check(): fields valid alone, conflicting together ------------------------------------------------


def test_check_lists_every_conflict_at_once():
    with pytest.raises(ConfigError) as err:
        compose(
            [
                "recipe=tiny",
                "train.global_batch_size=6",
                "train.micro_batch_size=4",
                "data.eval_fraction=1.0",
                "train.max_steps=-1",
                "train.epochs=0",
                "+data.part_weights.call_args=2",
                "+data.part_weights.thought=1",
            ]
        )
    assert str(err.value) == (
        "invalid configuration:\n"
        "  - train.global_batch_size=6 is not a multiple of train.micro_batch_size=4\n"
        "  - set train.max_steps > 0 or train.epochs > 0\n"
        "  - data.eval_fraction must be in [0, 1), got 1.0\n"
        "  - data.part_weights has unknown part(s) ['thought']; valid: call_args, call_name, call_syntax, end, "
        "reasoning, text"
    )


def test_check_rejects_a_model_without_weights_or_architecture():
    with pytest.raises(ConfigError, match=r"model=llama3_1_8b has source=pretrained but no model.path"):
        compose(["model=llama3_1_8b", "model.path=null"])
    cfg = compose(["recipe=tiny"])
    cfg.model.arch = {}  # an override can only merge into arch, not empty it
    with pytest.raises(ConfigError) as err:
        check(cfg)
    assert str(err.value) == "invalid configuration:\n  - model=tiny_llama has source=config but no model.arch"


def test_check_rejects_data_without_sources():
    with pytest.raises(ConfigError, match=r"data=tiny lists no sources"):
        compose(["recipe=tiny", "data.sources=[]"])


def test_check_accepts_the_composed_default():
    check(compose(["recipe=tiny"]))  # no exception: the baseline the conflicts above depart from


# -- the entry points ---------------------------------------------------------------------------------

SMALL = ["recipe=tiny", "data.sources.0.limit=8", "data.max_seq_len=256", "train.max_steps=2", "train.save_steps=2"]


def tooltrain_command() -> list[str]:
    script = Path(sys.executable).parent / "tooltrain"
    if not script.exists():
        pytest.skip("the tooltrain console script is not installed next to this interpreter")
    return [str(script)]


def launch(engine, command: list[str]) -> subprocess.CompletedProcess:
    result = subprocess.run(
        command, cwd=REPO_ROOT, env=engine.env, capture_output=True, text=True, check=False, timeout=600
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    return result


def losses(run_dir: Path) -> list[tuple[int, float]]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [(row["step"], row["loss"]) for row in rows if "loss" in row]


@pytest.mark.slow
def test_tooltrain_train_and_python_dash_m_train_run_the_same_command(engine, tmp_path):
    via_module = launch(engine, [sys.executable, "-m", "train", "train", *SMALL, f"output_dir={tmp_path}/module"])
    via_script = launch(engine, [*tooltrain_command(), "train", *SMALL, f"output_dir={tmp_path}/script"])
    assert [step for step, _ in losses(tmp_path / "module")] == [1, 2]
    assert losses(tmp_path / "module") == losses(tmp_path / "script")
    for result, name in ((via_module, "module"), (via_script, "script")):
        assert "tooltrain: run completed after 2 steps" in result.stdout
        assert str((tmp_path / name / "final").resolve()) in result.stdout


@pytest.mark.slow
def test_a_multirun_sweep_gives_each_job_its_own_run_directory(engine, tmp_path):
    out = tmp_path / "sweep"
    launch(engine, [*tooltrain_command(), "train", "-m", *SMALL, "train.max_steps=1", "seed=1,2", f"output_dir={out}"])
    jobs = sorted(p.name for p in Path(f"{out}-sweep").iterdir() if p.is_dir())
    assert jobs == ["0", "1"]
    for job, seed in (("0", 1), ("1", 2)):
        run_dir = Path(f"{out}-sweep") / job
        summary = json.loads((run_dir / "summary.json").read_text())
        assert (summary["status"], summary["steps"]) == ("completed", 1)
        assert summary["final"] == "final"  # relative to the run folder
        assert (run_dir / "final" / "adapter_model.safetensors").is_file()
        assert [step for step, _ in losses(run_dir)] == [1]
        resolved = (run_dir / "config.yaml").read_text()
        assert f"seed: {seed}\n" in resolved and f"output_dir: {run_dir}\n" in resolved
    assert losses(Path(f"{out}-sweep") / "0") != losses(Path(f"{out}-sweep") / "1")  # the seed reached each job
    assert not out.exists()  # nothing written to the unswept output_dir
    shutil.rmtree(f"{out}-sweep")
