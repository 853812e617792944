"""``tooltrain train --help`` is a short usage (recipes, config groups, three examples), not Hydra's config dump; the
examples it prints compose, and what it lists is read from conf/ (never a recipe that is not there)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from train.cli import main
from train.commands.train_help import CONF_DIR, EXAMPLES, first_sentence, group_lines, recipe_lines, train_help


def test_the_help_is_a_usage_with_every_recipe_and_group_not_the_config(capsys):
    assert main(["train", "--help"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("usage: tooltrain train [recipe=NAME]")
    assert "powered by Hydra" not in printed and "run_name: default" not in printed
    recipes = sorted(path.stem for path in (CONF_DIR / "recipe").glob("*.yaml"))
    listed = [line.split()[0] for line in recipe_lines(CONF_DIR)]
    assert listed == recipes and "toolgt_tiny" in listed
    assert all(len(line) <= 118 for line in printed.splitlines())
    assert "  tooltrain train recipe=NAME --cfg job" in printed
    assert main(["train", "-h"]) == 0 and capsys.readouterr().out == printed


def test_a_groups_line_lists_its_options_with_the_root_configs_default_marked(tmp_path):
    (tmp_path / "recipe").mkdir()
    (tmp_path / "recipe" / "mine.yaml").write_text(
        "# @package _global_\n# My recipe (seed 9, §5.1): LoRA on a thing. Second sentence.\n"
        "#   tooltrain train recipe=mine\ndefaults: []\n"
    )
    for group, options in (("model", ("big", "small")), ("peft", ("lora", "none"))):
        (tmp_path / group).mkdir()
        for option in options:
            (tmp_path / group / f"{option}.yaml").write_text("{}\n")
    (tmp_path / "train.yaml").write_text("defaults:\n  - schema\n  - model: small\n  - peft: lora\n")
    assert group_lines(tmp_path) == ["  model  big, small (default)", "  peft   lora (default), none"]
    assert recipe_lines(tmp_path) == ["  mine  My recipe (seed 9, §5.1): LoRA on a thing"]
    assert "recipes (recipe=NAME):\n  mine  My recipe" in train_help(tmp_path)


def test_a_sentence_ends_at_a_full_stop_after_a_word_not_inside_a_section_number():
    assert first_sentence("# ITC (seed 002, §5.1): LoRA, 3 epochs. More") == "ITC (seed 002, §5.1): LoRA, 3 epochs"
    assert first_sentence("# Two lines\n# joined. Rest") == "Two lines joined"


@pytest.mark.parametrize(("what", "command"), EXAMPLES)
def test_every_example_composes(what, command, tmp_path):
    from train.engine.config import compose

    words = shlex.split(command)
    assert words[:2] == ["tooltrain", "train"]
    overrides = [word for word in words[2:] if word != "-m" and "model.path=" not in word]
    overrides = [word.replace("=none,cot,template", "=cot") for word in overrides]  # one job of the sweep
    cfg = compose(overrides)
    assert Path(str(cfg.output_dir)).name == cfg.run_name
