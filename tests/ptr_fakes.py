"""Test doubles for PTR: an embedder that places each known text at an angle on the unit circle (cosines by hand),
and a teacher that answers from a script (or fails)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from train.teacher.backends import OfflineBackend, TeacherError, TeacherRequest
from train.teacher.cache import Teacher


class AngleEmbedder:
    """Text -> (cos θ, sin θ) for a θ in degrees given per text; an unknown text is an error (nothing unexpected
    is embedded). The cosine of two texts is cos(θ1 - θ2): the nearest is the smallest angle apart."""

    name = "angles"

    def __init__(self, angles: Mapping[str, float]):
        self.angles = dict(angles)
        self.calls: list[list[str]] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rads = [math.radians(self.angles[t]) for t in texts]
        return np.array([[math.cos(r), math.sin(r)] for r in rads], dtype=np.float32)


def scripted_teacher(requirements: Callable[[str], str], match: Callable[[str, dict], str]) -> Teacher:
    """A teacher whose D.1 answer is ``requirements(query)`` and D.2 answer ``match(requirement, tools)``; an
    answer that is a ``TeacherError`` is raised (the backend failed)."""

    def answer(value):
        if isinstance(value, TeacherError):
            raise value
        return value

    def d1(request: TeacherRequest) -> str:
        return answer(requirements(request.context["query"]))

    def d2(request: TeacherRequest) -> str:
        return answer(match(request.context["requirement"], dict(request.context["tools"])))

    return Teacher(OfflineBackend({"ptr.requirements": d1, "ptr.match": d2}, "scripted"))
