"""The chat format a verb renders with, shared by ``data render``, ``bench render`` and ``bench train`` (a verb never
imports another): tooltrain's format and tokenizer by name (``load_format_and_tokenizer``), and trl's chat template
for the same format, the reference the benchmarks compare against (``reference_for``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from train.formats.base import ChatFormat

# format -> trl template file (trl/chat_templates/)
TRL_TEMPLATES = {
    "llama3_1": "llama3_1.jinja",
    "qwen2_5": "qwen2_5_training.jinja",
    "chatml": "qwen2_5_training.jinja",
}
GENERATION_MARKER = re.compile(r"{%-?\s*generation\s*-?%}")


@dataclass
class Reference:
    label: str  # what the table calls it
    template: str
    masks: bool  # the template marks assistant output


def reference_for(format_name: str, tokenizer: Any) -> Reference | None:
    if format_name in TRL_TEMPLATES:
        name = TRL_TEMPLATES[format_name]
        template = (resources.files("trl") / "chat_templates" / name).read_text(encoding="utf-8")
        label = f"trl {name}"
    elif getattr(tokenizer, "chat_template", None):
        template, label = tokenizer.chat_template, "tokenizer's chat template"
    else:
        return None
    return Reference(label, template, bool(GENERATION_MARKER.search(template)))


def load_format_and_tokenizer(
    format_name: str, tokenizer_name: str | None, option_specs: Iterable[str] = ()
) -> tuple[ChatFormat, Any]:
    """Both, or a ValueError whose message is the whole explanation. ``option_specs``: KEY=VALUE strings."""
    from train.formats import get_format, parse_format_option
    from train.models import ModelFetchError
    from train.tokenizers import BUILDERS, load_tokenizer

    try:
        fmt = get_format(format_name, dict(parse_format_option(format_name, spec) for spec in option_specs))
    except ImportError as err:
        raise ValueError(f"chat format {format_name!r} is not available: {err}") from None
    name = tokenizer_name or fmt.default_tokenizer
    choices = f"a tooltrain tokenizer ({', '.join(BUILDERS)}) or a tokenizer folder"
    if name not in BUILDERS and name.startswith(("/", ".", "~")) and not Path(name).expanduser().is_dir():
        raise ValueError(f"tokenizer {name!r} is not a folder; expected {choices}")
    target = str(Path(name).expanduser()) if name.startswith("~") else name
    try:
        return fmt, load_tokenizer(target)
    except ModelFetchError as err:
        raise ValueError(str(err)) from None
    except (OSError, ValueError, ImportError) as err:
        raise ValueError(f"cannot load tokenizer {name!r} (expected {choices}): {err}") from None
