"""``model.chat_format=auto`` and ``template``, resolved when the config is composed.

``auto`` becomes the exact format of the model's family where its files name one (a tokenizer tooltrain builds, or
a folder's ``model_type`` and chat template, read as ``train.engine.model_folder`` reads them), and the fallback
``template`` (``train.formats.template``: the model's own chat template) otherwise; the choice is printed once and
recorded in the run's config, so a resumed run, export and ``eval run`` use the same format. The fallback renders
with ``model.tokenizer`` unless ``data.format_options.tokenizer`` names another.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from omegaconf import open_dict

from train.engine.distributed import World
from train.engine.model_folder import cached_snapshot, format_from, read_chat_template


def resolve_chat_format(cfg: Any) -> None:
    """Replace ``auto`` with the chosen format (printing which), and give ``template`` its tokenizer."""
    from train.formats import AUTO, FALLBACK, auto_choice

    if cfg.model.chat_format == AUTO:
        name = str(cfg.model.get("path") or cfg.model.tokenizer)
        chosen, line = auto_choice(exact_format(cfg.model), name)
        if World.from_env().is_main:  # every rank composes the config; the choice is said once
            print(line, file=sys.stderr)
        cfg.model.chat_format = chosen
    if cfg.model.chat_format == FALLBACK and not cfg.data.format_options.get("tokenizer"):
        with open_dict(cfg.data.format_options):  # a free-form dict, closed by struct mode like the rest
            cfg.data.format_options.tokenizer = str(cfg.model.tokenizer)


def exact_format(model: Any) -> str | None:
    """The exact format the model's files name, or None."""
    from train.formats import BUILT_TOKENIZER_FORMATS

    tokenizer = str(model.tokenizer)
    if tokenizer in BUILT_TOKENIZER_FORMATS:
        return BUILT_TOKENIZER_FORMATS[tokenizer]
    tokenizer_folder = _folder(tokenizer)
    model_folder = _folder(str(model.path)) if model.get("path") else None
    config = _config(model_folder) or _config(tokenizer_folder)
    model_type = str(config.get("model_type") or (model.arch_type if model.source == "config" else ""))
    template = read_chat_template(tokenizer_folder) if tokenizer_folder is not None else ""
    return format_from(model_type, template, config.get("vocab_size"))


def _folder(name: str) -> Path | None:
    local = Path(name).expanduser()
    return local if local.is_dir() else cached_snapshot(name)


def _config(folder: Path | None) -> dict[str, Any]:
    try:
        data = json.loads((folder / "config.json").read_text(encoding="utf-8")) if folder is not None else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
