"""The prompted teacher data builders ask: one interface (system + user prompt, per-stage parameters -> text),
three backends (``offline`` deterministic writers, an OpenAI-compatible ``http`` endpoint, a local ``hf`` model:
``train.teacher.backends``), an on-disk response cache with counts in front (``train.teacher.cache``), and the
ToolGT questions with their offline answers (``train.papers.toolgt.teacher``). The Meta-Tool teacher
(``train.papers.metatool.teacher``) asks its prompts through the same http and hf backends.
"""

from train.teacher.backends import (
    BACKEND_SETTINGS,
    HFBackend,
    HttpBackend,
    OfflineBackend,
    StageParams,
    TeacherError,
    TeacherRequest,
    TeacherUnavailable,
    make_backend,
    teacher_config_problem,
)
from train.teacher.cache import ResponseCache, Teacher, cache_key, default_cache

__all__ = [
    "BACKEND_SETTINGS",
    "HFBackend",
    "HttpBackend",
    "OfflineBackend",
    "ResponseCache",
    "StageParams",
    "Teacher",
    "TeacherError",
    "TeacherRequest",
    "TeacherUnavailable",
    "cache_key",
    "default_cache",
    "make_backend",
    "teacher_config_problem",
]
