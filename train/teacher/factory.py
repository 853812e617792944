"""The one way from teacher settings to a teacher backend, and the one table of what those settings are.

``BACKEND_SETTINGS`` lists each backend kind and the settings it takes; ``SETTINGS`` gives each setting its type,
default and help. ``config_problem`` checks a ``{"kind": ..., ...settings}`` mapping against the table, ``make_backend``
builds the backend from it, and ``add_teacher_arguments`` / ``teacher_config`` are the command-line options drawn from
the same table. A recipe's teacher node (the data builders', ``eval.toolbench_verify``'s), ``tooltrain eval run
--verify``, ``eval retrieval``, ``data build`` and ``eval recommend``'s LLM all come through here, so a setting one
of them accepts (``retries``, say) the others accept, and one they refuse is refused everywhere with one message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from train.teacher.backends import HFBackend, HttpBackend, OfflineBackend, OfflineWriter


def boolean(text: str | bool) -> bool:
    """A yes/no setting from a command line or a config: true/false, yes/no, 1/0 (any case)."""
    if isinstance(text, bool):
        return text
    spelled = str(text).strip().lower()
    if spelled in ("true", "yes", "1"):
        return True
    if spelled in ("false", "no", "0"):
        return False
    raise ValueError(f"{text!r} is not true or false")


@dataclass(frozen=True)
class Setting:
    """One teacher setting: how a command line reads it, its default (the backend's own) and what it means."""

    type: Callable[[str], Any]
    default: Any
    help: str


SETTINGS: dict[str, Setting] = {
    "base_url": Setting(str, None, "http: the OpenAI-compatible base URL (…/v1)"),
    "model": Setting(str, None, "http: the model name"),
    "api_key_env": Setting(str, None, "http: the environment variable holding the API key"),
    "timeout": Setting(float, 60.0, "http: seconds the client waits to connect and for each read (60)"),
    "retries": Setting(int, 2, "http: the openai SDK's retries, for what may pass (5xx, 429, unreachable) (2)"),
    "max_time": Setting(
        float,
        None,
        "http: wall-clock seconds for one question, attempts and waits together (default: (retries + 1) "
        "x (timeout + 1 s) + 8 s a retry)",
    ),
    "concurrency": Setting(int, 8, "http: questions of a batch in flight at once (8)"),
    "path": Setting(str, None, "hf: the local model folder"),
    "chat_format": Setting(str, "chatml", "hf: the chat format to prompt it with (chatml; llama2: Llama-2-Chat's)"),
    "tokenizer": Setting(str, None, "hf: the tokenizer, when not the model folder's"),
    "completion": Setting(
        boolean, False, "http, hf: a base model: the user prompt alone as plain text (http: /completions) (false)"
    ),
}

# Each backend kind and the settings it takes from a config (offline takes none: its writers come from the caller).
BACKEND_SETTINGS: dict[str, tuple[str, ...]] = {
    "offline": (),
    "http": ("base_url", "model", "api_key_env", "timeout", "retries", "max_time", "concurrency", "completion"),
    "hf": ("path", "chat_format", "tokenizer", "completion"),
}


def config_problem(config: Mapping[str, Any]) -> str | None:
    """What is wrong with a teacher mapping (an unknown kind, a setting its kind does not take), naming the valid
    choices; ``None`` when the table accepts it."""
    kind = config.get("kind", "offline")
    if kind not in BACKEND_SETTINGS:
        return f"unknown teacher kind {kind!r}; valid: {', '.join(BACKEND_SETTINGS)}"
    unknown = sorted(set(config) - {"kind", *BACKEND_SETTINGS[kind]})
    if unknown:
        return f"teacher {kind!r}: unknown setting(s) {unknown}; valid: {', '.join(BACKEND_SETTINGS[kind]) or 'none'}"
    return None


def teacher_config_problem(config: Mapping[str, Any], who: str) -> str | None:
    """``config_problem`` for a builder's ``teacher`` mapping; ``who`` begins the message (``"<name> builder"``)."""
    problem = config_problem(config)
    return None if problem is None else f"{who}: {problem}"


def make_backend(
    config: Mapping[str, Any] | None,
    offline_writers: Mapping[str, OfflineWriter] | None = None,
    offline_version: str = "v1",
) -> OfflineBackend | HttpBackend | HFBackend:
    """``{"kind": "offline"|"http"|"hf", ...settings}`` -> a backend; ValueError for an unknown kind or key, or a
    missing or bad setting (said before anything is asked)."""
    settings = dict(config or {"kind": "offline"})
    problem = config_problem(settings)
    if problem is not None:
        raise ValueError(problem)
    kind = settings.pop("kind", "offline")
    if "completion" in settings:
        try:
            settings["completion"] = boolean(settings["completion"])
        except ValueError as err:
            raise ValueError(f"teacher {kind!r}: completion: {err}") from None
    if kind == "offline":
        return OfflineBackend(offline_writers, offline_version)
    if kind == "hf":
        try:
            return HFBackend(**settings)
        except TypeError as err:
            raise ValueError(f"teacher {kind!r}: {err}") from None
    try:
        return HttpBackend(**settings)
    except (TypeError, ValueError) as err:
        raise ValueError(f"teacher {kind!r}: {err}") from None


def select_teacher_settings(kind: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """``{"kind": kind}`` and the settings of ``settings`` that kind takes; the others are left out, and a setting
    ``settings`` does not hold keeps the backend's default."""
    return {"kind": kind, **{key: settings[key] for key in BACKEND_SETTINGS.get(kind, ()) if key in settings}}


def add_teacher_arguments(parser: Any) -> None:
    """``--teacher KIND`` and a ``--teacher-SETTING`` option for each setting of the table (``teacher_config`` reads
    them), for every command that asks a teacher."""
    group = parser.add_argument_group("teacher").add_argument
    group("--teacher", choices=tuple(BACKEND_SETTINGS), default="offline", help=", ".join(BACKEND_SETTINGS))
    for name, setting in SETTINGS.items():
        group("--teacher-" + name.replace("_", "-"), type=setting.type, default=setting.default, help=setting.help)


def teacher_config(args: Any) -> dict[str, Any]:
    """The ``make_backend`` config the ``add_teacher_arguments`` options describe. An option given (other than its
    default) that ``--teacher``'s kind does not take is a ValueError, the one a recipe's teacher node with that
    setting gets."""
    given = {name: getattr(args, f"teacher_{name}") for name in SETTINGS}
    config = select_teacher_settings(args.teacher, given)
    stray = {name: value for name, value in given.items() if name not in config and value != SETTINGS[name].default}
    problem = config_problem({**config, **stray})
    if problem is not None:
        raise ValueError(problem)
    return config


__all__ = [
    "BACKEND_SETTINGS",
    "SETTINGS",
    "Setting",
    "add_teacher_arguments",
    "config_problem",
    "make_backend",
    "select_teacher_settings",
    "teacher_config",
    "teacher_config_problem",
]
