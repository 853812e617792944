"""One small registry per concept (chat formats, source readers, scorers, data builders).

Each concept is registered once, by name, in its package's ``__init__``: either the object itself or a
``"module:attr"`` string that is imported on first use (so one entry's optional dependency never slows the
others). Wherever a name is accepted, ``module:attr`` is accepted too: the module is imported, the attribute
read and checked to be of the registry's kind, so a user plugs in their own without editing the package
(``model.chat_format=mypkg.formats:MyFormat``; ``docs/extending.md``). Nothing is evaluated: importlib only.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
TARGET = re.compile(rf"^({_DOTTED}):({_DOTTED})$")


def is_target(text: Any) -> bool:
    """Whether ``text`` is spelled ``module:attr`` (``mypkg.formats:MyFormat``)."""
    return isinstance(text, str) and TARGET.match(text) is not None


class Registry(Generic[T]):
    """Names -> objects of one kind. ``accepts(obj)`` says whether an object is of the kind;
    ``error`` is the exception an unknown or wrong name raises (the caller's own error type)."""

    def __init__(self, kind: str, plural: str, accepts: Callable[[Any], bool], error: type[Exception] = ValueError):
        self.kind, self.plural, self.accepts, self.error = kind, plural, accepts, error
        self._entries: dict[str, Any] = {}

    def register(self, name: str, target: Any = None) -> Any:
        """``register(name, obj_or_"module:attr")``, or ``@register(name)`` over a class or function."""
        if target is None:
            return lambda obj: self.register(name, obj)
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = target
        return target

    def names(self) -> list[str]:
        """The registered names, in registration order (help texts, choices, the README lists)."""
        return list(self._entries)

    def known(self, name: Any) -> bool:
        """Whether ``name`` is registered or spelled ``module:attr`` (checked when it is looked up)."""
        return name in self._entries or is_target(name)

    def get(self, name: str) -> T:
        """The object registered as ``name``, or the ``module:attr`` it names; ``error`` when there is none."""
        if name not in self._entries and not is_target(name):
            raise self.error(
                f"unknown {self.kind} {name!r}; valid {self.plural}: {', '.join(self._entries)} "
                "(or module:attr for your own)"
            )
        target = self._entries.get(name, name)
        obj = load(target, self.kind, self.error) if isinstance(target, str) else target
        if not self.accepts(obj):
            raise self.error(f"{name} is not a {self.kind} (got {obj!r}); see docs/extending.md")
        return obj

    def __iter__(self):  # the registered names, so ``list(REGISTRY)`` and ``", ".join(REGISTRY)`` read as before
        return iter(self.names())

    def __contains__(self, name: Any) -> bool:  # registered by name (``known`` also accepts module:attr)
        return name in self._entries

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"


def load(target: str, kind: str = "object", error: type[Exception] = ValueError) -> Any:
    """The attribute ``module:attr`` names (``attr`` may be dotted: ``Class.method``)."""
    match = TARGET.match(target)
    if match is None:
        raise error(f"{kind} {target!r}: expected module:attr")
    module_name, attr = match.groups()
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise error(f"{kind} {target!r}: cannot import {module_name} ({err})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise error(f"{kind} {target!r}: {module_name} has no {attr}")
        obj = getattr(obj, part)
    return obj


__all__ = ["TARGET", "Registry", "is_target", "load"]
