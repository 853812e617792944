"""The chat format and tokenizer a verb renders with, by the names a user gives (``--format``, ``--tokenizer``):
shared by ``data render``, ``bench render`` and ``bench data`` (two groups, so it sits above both; a verb never
imports another). trl's template for the same format, the reference the benchmarks compare against, is
``train.data.bench_render.reference_for``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from train.formats.base import ChatFormat


def tokenizer_target(fmt: ChatFormat, tokenizer_name: str | None) -> str:
    """What ``load_tokenizer`` loads for ``--tokenizer`` (the format's default when not given; ``~`` expanded)."""
    name = tokenizer_name or fmt.default_tokenizer
    return str(Path(name).expanduser()) if name.startswith("~") else name


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
    try:
        return fmt, load_tokenizer(tokenizer_target(fmt, tokenizer_name))
    except ModelFetchError as err:
        raise ValueError(str(err)) from None
    except (OSError, ValueError, ImportError) as err:
        raise ValueError(f"cannot load tokenizer {name!r} (expected {choices}): {err}") from None
