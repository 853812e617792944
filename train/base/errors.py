"""The user-error exception every layer may raise: a message for one ``error:`` line, never a traceback.

It lives at the bottom so that modules below the config (a model folder's inspection, ``train.engine.model_folder``)
can refuse a setting without importing ``train.engine.config``, which imports them.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A setting that cannot run: the message names the key, what it got and what would do."""
