"""Chat formats, one module per model family. ``get_format(name, options)`` returns a ready instance.

``FORMATS`` is the one list of the exact ones (``train.registry``): a name, or ``module:attr`` naming a ``ChatFormat``
subclass of your own (``model.chat_format=mypkg.formats:MyFormat``, ``docs/extending.md``). ``template``
(``FALLBACK``) is any other model's own chat template (``train.formats.template``); ``auto_choice`` says which
``model.chat_format=auto`` runs.

A format's options are the keyword arguments of its constructor (``Llama31Format(tools_in_user_message=False,
date_string=...)``); ``format_options(name)`` lists them with their defaults, and ``check_format_options``
says what is wrong with a set of them (unknown names, with the valid ones listed; values of the wrong type)
without building anything, so configs can be checked at compose time.
"""

from __future__ import annotations

import inspect
from typing import Any

from train.formats.base import ChatFormat, MaskPolicy, Segment, mask_segments
from train.formats.tokenize import Tokenized
from train.registry import Registry

FORMATS: Registry[type[ChatFormat]] = Registry(
    "chat format", "formats", lambda obj: isinstance(obj, type) and issubclass(obj, ChatFormat)
)
# imported on first use
FORMATS.register("llama3_1", "train.formats.llama3:Llama31Format")
FORMATS.register("llama3_1_metatool", "train.papers.metatool.format:Llama31MetaToolFormat")
FORMATS.register("llama4", "train.formats.llama4:Llama4Format")
FORMATS.register("qwen2_5", "train.formats.qwen2_5:Qwen25Format")
FORMATS.register("qwen3", "train.formats.qwen3:Qwen3Format")  # thinking, non_thinking, instruct_2507 (issue 17)
FORMATS.register("mistral_v3", "train.formats.mistral:MistralV3Format")
FORMATS.register("mistral_nemo", "train.formats.mistral:MistralNemoFormat")
FORMATS.register("mistral_v7", "train.formats.mistral_v7:MistralV7Format")
FORMATS.register("chatml", "train.formats.chatml:ChatMLFormat")
FORMATS.register("deepseek_coder", "train.formats.deepseek_coder:DeepSeekCoderFormat")
FORMATS.register("deepseek_v3", "train.formats.deepseek_v3:DeepSeekV3Format")
FORMATS.register("toolselect_text", "train.papers.toolverifier.format:ToolSelectTextFormat")
FORMATS.register("harmony", "train.formats.harmony:HarmonyFormat")  # gpt-oss


AUTO = "auto"  # model.chat_format=auto: the exact format of the model's family, else "template"
# Any other causal LM: its own tokenizer's chat template, masks read off the rendering (train.formats.template). Not
# in FORMATS, the exact formats (each checked against its family's official template, listed in the README).
FALLBACK = "template"
FALLBACK_CLASS = "train.formats.template:TemplateFormat"
# tooltrain's built tokenizers (train.tokenizers.BUILDERS) -> the exact format their family writes (conf/model pairs)
BUILT_TOKENIZER_FORMATS = {
    "llama3": "llama3_1",
    "llama4": "llama4",
    "qwen2_5": "qwen2_5",
    "qwen3": "qwen3",
    "mistral_v3": "mistral_v3",
    "mistral_tekken": "mistral_nemo",
    "mistral_v7": "mistral_v7",
    "smollm2": "chatml",
    "tiny_chatml": "chatml",
    "o200k_harmony": "harmony",
}


def auto_choice(exact: str | None, model: str) -> tuple[str, str]:
    """(the format ``model.chat_format=auto`` runs ``model`` with, the line that says so): ``exact``, the exact format
    the model's files name (None when they name none), or the fallback rendering with the model's own template."""
    exact_names = ", ".join(FORMATS)
    if exact is not None:
        return exact, f"model.chat_format=auto: {model} is a {exact} model: the exact format {exact!r}"
    return FALLBACK, (
        f"model.chat_format=auto: {model} is none of the families of tooltrain's exact formats ({exact_names}): "
        f"using {FALLBACK!r}, which renders with the model's own chat template (masks read off its rendering and "
        "checked); parity with the official template is certified only for the exact formats"
    )


def format_class(name: str | type[ChatFormat]) -> type[ChatFormat]:
    """The format class ``name`` (registered, or ``module:attr``) names; ValueError listing the valid names. A
    class is its own (a format built from ``module:attr`` knows its class, not the string that named it)."""
    if isinstance(name, type):
        return name
    return FORMATS.get(FALLBACK_CLASS if name == FALLBACK else name)  # module:attr, as the registry's own names


def known_format(name: str) -> bool:
    """Whether ``name`` names a format: an exact one (or ``module:attr``), or the fallback."""
    return name == FALLBACK or FORMATS.known(name)


def variants_of(name: str) -> list[str]:
    """The registered formats that are layouts of format ``name`` (their class's ``variant_of``)."""
    return [variant for variant in FORMATS if format_class(variant).variant_of == name]


def format_options(name: str | type[ChatFormat]) -> dict[str, Any]:
    """The options a format accepts (its constructor's keyword arguments) and their defaults."""
    init = format_class(name).__init__
    if init is object.__init__:
        return {}
    parameters = list(inspect.signature(init).parameters.values())[1:]  # without self
    return {p.name: p.default for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def check_format_options(name: str, options: dict[str, Any]) -> list[str]:
    """What is wrong with ``options`` for format ``name``: one message per problem, [] when none."""
    accepted = format_options(name)
    problems = []
    for key, value in options.items():
        if key not in accepted:
            valid = f"valid options: {', '.join(sorted(accepted))}" if accepted else "it takes no options"
            problems.append(f"chat format {name!r} has no option {key!r}; {valid}")
            continue
        default = accepted[key]
        choices = format_class(name).OPTION_CHOICES.get(key)
        if choices is not None and value not in choices:
            problems.append(f"chat format {name!r} option {key!r} must be one of {', '.join(choices)}, got {value!r}")
        elif default is not None and not _same_kind(value, default):
            problems.append(f"chat format {name!r} option {key!r} must be a {type(default).__name__}, got {value!r}")
    return problems


def _same_kind(value: Any, default: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):  # a bool is an int in Python: keep them apart
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, (int, float)):
        return isinstance(value, (int, float)) and (isinstance(default, float) or isinstance(value, int))
    return isinstance(value, type(default))


def parse_format_option(name: str, spec: str) -> tuple[str, Any]:
    """``KEY=VALUE`` from a command line -> (key, value typed as the option's default)."""
    key, sep, text = spec.partition("=")
    if not sep:
        raise ValueError(f"expected KEY=VALUE for a format option, got {spec!r}")
    default = format_options(name).get(key)
    if isinstance(default, bool):
        lowered = text.strip().lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(f"chat format {name!r} option {key!r} must be true or false, got {text!r}")
        return key, lowered in ("true", "1", "yes")
    if isinstance(default, (int, float)):
        try:
            return key, type(default)(text)
        except ValueError:
            kind = type(default).__name__
            raise ValueError(f"chat format {name!r} option {key!r} must be a {kind}, got {text!r}") from None
    return key, text  # unknown keys are refused, with the valid ones, by check_format_options


def get_format(name: str, options: dict[str, Any] | None = None) -> ChatFormat:
    cls = format_class(name)
    options = dict(options or {})
    problems = check_format_options(name, options)
    if problems:
        raise ValueError("; ".join(problems))
    return cls(**options)


__all__ = [
    "AUTO",
    "BUILT_TOKENIZER_FORMATS",
    "FALLBACK",
    "FORMATS",
    "ChatFormat",
    "MaskPolicy",
    "Segment",
    "Tokenized",
    "auto_choice",
    "check_format_options",
    "format_class",
    "format_options",
    "get_format",
    "known_format",
    "mask_segments",
    "parse_format_option",
    "variants_of",
]
