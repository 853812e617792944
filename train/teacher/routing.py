"""Stages routed to different teachers: one ``ask`` in front of several models.

A pipeline whose stages want different models (ToolVerifier: a base model writes parameters and the call, a chat
model asks and answers the questions, ``train.papers.toolverifier.stages``) asks ``StageTeachers`` as it would ask
one ``Teacher``: each request goes to the teacher its stage is routed to, the others to the default. Each teacher is
built by ``make_backend`` from its own ``{"kind", ...settings}`` mapping; stages with the same mapping share one
backend (one local model loaded once, one endpoint's failure count) and every teacher shares the response cache of
its kind (``default_cache``): a cached answer is keyed by the backend's kind and model, so routing a stage elsewhere
never returns another model's answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from train.teacher.backends import OfflineWriter, TeacherRequest
from train.teacher.cache import Teacher, default_cache
from train.teacher.factory import make_backend

COUNTS = ("asked", "backend_calls", "cache_hits", "failures")


class StageTeachers:
    """``ask(request)``: the teacher of ``request.stage`` in ``routes``, else ``default``; ``report()``: the counts
    of all of them together and, per routed stage, which backend and model answered it."""

    def __init__(self, default: Teacher, routes: Mapping[str, Teacher] | None = None):
        self.default = default
        self.routes = dict(routes or {})

    def teacher_for(self, stage: str) -> Teacher:
        return self.routes.get(stage, self.default)

    def ask(self, request: TeacherRequest) -> str:
        return self.teacher_for(request.stage).ask(request)

    def teachers(self) -> list[Teacher]:
        """Each distinct teacher once, the default first."""
        seen: dict[int, Teacher] = {id(self.default): self.default}
        for teacher in self.routes.values():
            seen.setdefault(id(teacher), teacher)
        return list(seen.values())

    def report(self) -> dict[str, Any]:
        reports = [teacher.report() for teacher in self.teachers()]
        if len(reports) == 1:
            return reports[0]
        return {
            "backend": "+".join(dict.fromkeys(r["backend"] for r in reports)),
            "model": ", ".join(dict.fromkeys(r["model"] for r in reports)),
            **{key: sum(r[key] for r in reports) for key in COUNTS},
            "stages": {stage: f"{t.backend.kind} {t.backend.model}" for stage, t in sorted(self.routes.items())},
        }


def stage_teachers(
    default: Mapping[str, Any] | None,
    routes: Mapping[str, Mapping[str, Any]] | None = None,
    offline_writers: Mapping[str, OfflineWriter] | None = None,
    offline_version: str = "v1",
) -> StageTeachers:
    """``default``: the teacher mapping of every stage not in ``routes`` (stage name -> mapping). ValueError for a
    bad mapping (``make_backend``'s), before any model is loaded twice: equal mappings make one teacher."""
    built: dict[str, Teacher] = {}

    def teacher(config: Mapping[str, Any] | None) -> Teacher:
        config = dict(config or {"kind": "offline"})
        key = json.dumps(config, sort_keys=True, default=str)
        if key not in built:
            backend = make_backend(config, offline_writers, offline_version)
            built[key] = Teacher(backend, default_cache(backend.kind))
        return built[key]

    first = teacher(default)
    return StageTeachers(first, {stage: teacher(config) for stage, config in (routes or {}).items()})


__all__ = ["StageTeachers", "stage_teachers"]
