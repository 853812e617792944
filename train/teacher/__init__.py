"""The prompted teacher data builders and evaluations ask: one interface (system + user prompt, per-stage parameters
-> text), three backends (``offline`` deterministic writers a paper's wing supplies, an OpenAI-compatible ``http``
endpoint, a local ``hf`` model: ``train.teacher.backends``), the one table of their settings and the one factory that
builds them (``train.teacher.factory``), an on-disk response cache with counts in front (``train.teacher.cache``),
stages routed to different teachers (``train.teacher.routing``) and Llama-2-Chat's prompt (``train.teacher.llama2``).
Each paper's prompts and offline writers live in its wing (``train/papers/<paper>/teacher.py``).
"""

from train.teacher.backends import (
    HFBackend,
    HttpBackend,
    OfflineBackend,
    StageParams,
    TeacherError,
    TeacherRequest,
    TeacherUnavailable,
)
from train.teacher.cache import ResponseCache, Teacher, cache_key, default_cache
from train.teacher.factory import (
    BACKEND_SETTINGS,
    SETTINGS,
    add_teacher_arguments,
    config_problem,
    make_backend,
    select_teacher_settings,
    teacher_config,
    teacher_config_problem,
)
from train.teacher.routing import StageTeachers, stage_teachers

__all__ = [
    "BACKEND_SETTINGS",
    "SETTINGS",
    "HFBackend",
    "HttpBackend",
    "OfflineBackend",
    "ResponseCache",
    "StageParams",
    "StageTeachers",
    "Teacher",
    "TeacherError",
    "TeacherRequest",
    "TeacherUnavailable",
    "add_teacher_arguments",
    "cache_key",
    "config_problem",
    "default_cache",
    "make_backend",
    "select_teacher_settings",
    "stage_teachers",
    "teacher_config",
    "teacher_config_problem",
]
