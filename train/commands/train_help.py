"""``tooltrain train --help``: a short usage with the recipes, the config groups and three examples.

Hydra's own help dumps the whole composed config (140 lines that begin "entry is powered by Hydra"); a newcomer
wants what to type. The recipes and groups are read from ``conf/`` when asked, so the help never lists a recipe
that is not there: each recipe is described by the first sentence of its file's header comment, each group by
its options with the root config's default marked. The full config stays one flag away (``--cfg job``), and
Hydra's own options behind ``--hydra-help``.
"""

from __future__ import annotations

import re
from pathlib import Path

CONF_DIR = Path(__file__).resolve().parents[1] / "_conf"  # what Hydra reads (train.engine.config.CONF_DIR)
EXAMPLES = (
    # a source is a reader (train.sources: openai, sharegpt, xlam, toolace, glaive, canonical, ...) and its files
    ("your own data", "tooltrain train recipe=tiny data.sources.0.name=openai 'data.sources.0.inputs=[chats.jsonl]'"),
    ("your own model", "tooltrain train recipe=demo model.path=/models/Qwen2.5-7B-Instruct distributed=zero3"),
    ("a sweep", "tooltrain train -m recipe=toolgt_tiny toolgt.arm=none,cot,template"),
)
WIDTH = 118


def first_sentence(header: str) -> str:
    """The first sentence of a recipe's header comment, as one line (a full stop inside ``§5.1`` or ``e.g.`` does
    not end it: a sentence ends at ``. `` after a lowercase letter, a digit or a bracket)."""
    text = " ".join(line.lstrip("#").strip() for line in header.splitlines())
    return re.split(r"(?<=[a-z0-9)])\. ", text, maxsplit=1)[0].rstrip(".")


def recipe_lines(folder: Path) -> list[str]:
    """``  NAME  what it is`` for every recipe in ``folder/recipe``, cut to the help's width."""
    lines, names = [], sorted(path.stem for path in (folder / "recipe").glob("*.yaml"))
    width = max((len(name) for name in names), default=0)
    for name in names:
        header = []
        for line in (folder / "recipe" / f"{name}.yaml").read_text(encoding="utf-8").splitlines():
            if not line.startswith("#"):
                break
            if not line.startswith("# @package") and not line.lstrip("# ").startswith("tooltrain "):
                header.append(line)
        about = first_sentence("\n".join(header))
        line = f"  {name:<{width}}  {about}"
        lines.append(line if len(line) <= WIDTH else line[: WIDTH - 3].rstrip() + "...")
    return lines


def group_lines(folder: Path) -> list[str]:
    """``  GROUP  option, option (default), ...`` for each config group but ``recipe`` and Hydra's own."""
    defaults = dict(re.findall(r"^  - (\w+): (\w+)\s*$", (folder / "train.yaml").read_text(), flags=re.MULTILINE))
    lines = []
    groups = sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name not in ("recipe", "hydra", "schema"))
    width = max((len(group) for group in groups), default=0)
    for group in groups:
        options = sorted(path.stem for path in (folder / group).glob("*.yaml"))
        shown = [f"{option} (default)" if option == defaults.get(group) else option for option in options]
        text, indent = f"  {group:<{width}}  ", " " * (width + 4)
        for option in shown:
            if len(text) + len(option) + 2 > WIDTH:
                lines.append(text.rstrip())
                text = indent
            text += option + ", "
        lines.append(text.rstrip(", "))
    return lines


def train_help(folder: Path | None = None) -> str:
    folder = folder or CONF_DIR
    examples = [f"  {what}:\n    {command}" for what, command in EXAMPLES]
    return "\n".join(
        [
            "usage: tooltrain train [recipe=NAME] [GROUP=OPTION ...] [key=value ...]",
            "       tooltrain train -m [recipe=NAME] key=a,b ...     (a sweep: one run per combination)",
            "",
            "Trains a recipe: the root config (conf/train.yaml) with the recipe's choices and your overrides on top.",
            "A wrong key, choice or value fails before anything loads, with the valid ones listed.",
            "",
            "recipes (recipe=NAME):",
            *recipe_lines(folder),
            "",
            "config groups (GROUP=OPTION):",
            *group_lines(folder),
            "",
            "examples:",
            *examples,
            "",
            "more:",
            "  tooltrain train recipe=NAME --cfg job   the full config the run would use, every key and value",
            "  tooltrain train --hydra-help            Hydra's own flags (multirun, launchers, logging)",
            "  README.md, section 'Your own data and model'; docs/ for each recipe and paper",
        ]
    )


def wants_help(argv: list[str]) -> bool:
    """``tooltrain train --help`` / ``-h`` (Hydra's other flags, ``--cfg`` and ``--hydra-help``, stay Hydra's)."""
    return any(arg in ("--help", "-h") for arg in argv)


__all__ = ["EXAMPLES", "first_sentence", "group_lines", "recipe_lines", "train_help", "wants_help"]
