"""A command line's Hydra overrides checked before Hydra runs them: one ``error:`` line with the valid keys or
choices, where Hydra itself prints a several-line report (and a hint about ``HYDRA_FULL_ERROR``) with no ``error:``.
Used by ``tooltrain train`` and ``tooltrain eval retrieval``'s Hydra form."""

from __future__ import annotations

import re

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from train.engine.config import CONF_DIR, register


def override_problem(config_name: str, argv: list[str]) -> str | None:
    """Why a command line's overrides do not compose (an unknown key, a value of the wrong type, a group option that
    does not exist, bad syntax), as one line with the valid keys or choices; None when they compose. Hydra's own
    report is several lines and no ``error:``, so verbs ask this first. Sweeps (``a=1,2``) and Hydra's own keys are
    left to Hydra; so is a command line carrying Hydra flags (``--cfg job``, ``--help``)."""
    if any(arg.startswith("-") and arg not in ("-m", "--multirun") for arg in argv):
        return None
    given = [arg for arg in argv if arg not in ("-m", "--multirun")]
    try:
        parsed = OverridesParser.create().parse_overrides(given)
    except HydraException as err:
        return f"cannot read the overrides {' '.join(given)}: {_first_line(err)}"
    plain = [o.input_line for o in parsed if not o.is_sweep_override() and not o.is_hydra_override()]
    register()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            hydra_compose(config_name, overrides=plain)
    except HydraException as err:
        return _composition_problem(config_name, plain, err)
    return None


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def _composition_problem(config_name: str, plain: list[str], err: BaseException) -> str:
    """Hydra's composition error as one line: its first line, the cause's, and what would be valid."""
    text = str(err)
    if "Available options in" in text:  # an unknown group option: Hydra lists the valid ones, one per line
        head, _, listing = text.partition("Available options in")
        group, _, rest = listing.partition(":")
        options = [line.strip() for line in rest.split("Config search path")[0].splitlines() if line.strip()]
        return f"{head.strip().splitlines()[0]}; valid in {group.strip()}: {', '.join(options)}"
    line = _first_line(err)
    missing = re.search(r"Could not load '([\w.]+)/([\w.]+)'", line)  # a list of options (tracking=[a,b])
    if missing and (CONF_DIR / missing.group(1)).is_dir():
        options = sorted(path.stem for path in (CONF_DIR / missing.group(1)).glob("*.yaml"))
        return f"{line.rstrip('.')}; valid in {missing.group(1)}: {', '.join(options)}"
    cause = err.__cause__
    if cause is None:
        return line
    line += f" ({_first_line(cause)})"
    full_key = getattr(cause, "full_key", None)
    if full_key and "not in" in str(cause):  # an unknown key: name the ones its section has
        parent = full_key.rpartition(".")[0]
        others = [o for o in plain if not o.lstrip("+~").startswith(full_key + "=")]
        try:
            with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
                base = hydra_compose(config_name, overrides=others)
            section = OmegaConf.select(base, parent) if parent else base
        except Exception:  # noqa: BLE001 - only the hint is lost
            section = None
        if isinstance(section, DictConfig):
            line += f"; {parent or 'the top level'} has: {', '.join(str(k) for k in section)}"
    return line
