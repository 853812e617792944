"""A non-editable install (``pip install .``) finds its configs: the wheel ships conf/ and recipes/ inside
the package as plain files (train/_conf), and ``train.engine.config`` looks there. It also ships the chat-template
files ``tooltrain export`` builds its templates from (train/formats/templates)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHECK = """
import json
from train.engine.config import CONF_DIR, compose
from train.formats import FORMATS, get_format
from train.formats.serving import chat_template
cfg = compose(["recipe=tiny"])
templates = sorted(name for name in FORMATS if "{%- set format_name" in chat_template(get_format(name)))
print(json.dumps({"conf": str(CONF_DIR), "link": CONF_DIR.is_symlink(), "model": cfg.model.name, "run": cfg.run_name,
                  "templates": templates}))
"""


@pytest.mark.slow
def test_a_wheel_ships_every_config_and_recipe_and_the_installed_package_composes_them(tmp_path):
    source = tmp_path / "source"  # the files a wheel is built from, copied so the build leaves the checkout clean
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for name in ("train", "conf", "recipes"):
        shutil.copytree(REPO / name, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", str(source), "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist")],
        check=True,
        cwd=tmp_path,
        timeout=300,
    )
    (wheel,) = (tmp_path / "dist").glob("tooltrain-*.whl")

    shipped = {name for name in zipfile.ZipFile(wheel).namelist() if name.startswith("train/_conf/")}
    groups = {
        f"train/_conf/{p.relative_to(REPO / 'conf')}"
        for p in (REPO / "conf").glob("*/*.yaml")
        if p.parent.name != "recipe"
    }
    recipes = {f"train/_conf/recipe/{p.name}" for p in (REPO / "recipes").glob("*.yaml")}
    primary = {f"train/_conf/{p.name}" for p in (REPO / "conf").glob("*.yaml")}  # train.yaml, retrieval.yaml
    assert {"train/_conf/train.yaml", "train/_conf/retrieval.yaml"} <= primary
    assert shipped == primary | groups | recipes
    # every chat template: the families' under formats/templates, the papers' variants beside their wing's format
    templates = {p.relative_to(REPO).as_posix() for p in (REPO / "train").rglob("*.jinja")}
    assert templates and templates <= set(zipfile.ZipFile(wheel).namelist())

    site = tmp_path / "site"
    subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", "--target", str(site), str(wheel)], check=True, timeout=300
    )
    env = {**os.environ, "PYTHONPATH": str(site)}  # the installed copy, not this checkout
    result = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    import json

    found = json.loads(result.stdout.strip().splitlines()[-1])
    from train.formats import FORMATS

    assert found == {
        "conf": str(site / "train" / "_conf"),
        "link": False,
        "model": "tiny_llama",
        "run": "tiny",
        "templates": sorted(FORMATS),
    }
