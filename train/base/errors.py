"""The user-error exception every layer may raise (a message for one ``error:`` line, never a traceback), and
``choice``, the plain name of an enum-typed config value.

They live at the bottom so that modules below the config (a model folder's inspection, ``train.engine.model_folder``;
the model, tracking and distributed setup that read ``choice(cfg.x)``) can use them without importing
``train.engine.config``, which imports them.
"""

from __future__ import annotations

from enum import Enum
from typing import Any


class ConfigError(ValueError):
    """A setting that cannot run: the message names the key, what it got and what would do."""


def choice(value: Any) -> str:
    """An enum-typed config value as its plain name (``Strategy.zero3`` -> "zero3"); a plain string stays."""
    return str(value.value if isinstance(value, Enum) else value)
