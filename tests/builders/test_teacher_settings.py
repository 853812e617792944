"""One teacher factory, one settings table (issue 25, item 4): a recipe's teacher node (``data.builder_args.teacher``
of the toolgt, itc and metatool builders) and ``tooltrain eval run --verify``'s ``--teacher-*`` options accept the same
settings and refuse the same ones with the same message, and a setting such as ``retries`` reaches the backend
either way (``train.teacher.factory``: ``BACKEND_SETTINGS``, ``make_backend``, ``add_teacher_arguments``).
"""

from __future__ import annotations

import argparse

import pytest
from teacher_stub import StubServer

import train.teacher
import train.teacher.routing
from train.builders import make_args
from train.commands.eval import run as eval_run
from train.papers.metatool.teacher import HttpTeacher, make_teacher
from train.papers.toolverifier.verbs import run_verify
from train.teacher import BACKEND_SETTINGS, SETTINGS, TeacherError, TeacherRequest, teacher_config

RECIPE_BUILDERS = ("toolgt", "itc", "metatool")
URL = "http://teacher.invalid/v1"
# every setting of every kind, each other than its default
CONFIGS = [
    {"kind": "offline"},
    {
        "kind": "http",
        "base_url": URL,
        "model": "m",
        "api_key_env": "KEY",
        "timeout": 5.0,
        "retries": 5,
        "max_time": 30.0,
        "concurrency": 4,
        "completion": True,
    },
    {"kind": "hf", "path": "folder", "chat_format": "llama3_1", "tokenizer": "tok", "completion": True},
]


def recipe_problem(builder: str, teacher: dict) -> str | None:
    """What a recipe's ``data.builder_args.teacher`` gets from the builder's check (None: accepted)."""
    try:
        make_args(builder, {"teacher": teacher})
    except ValueError as err:
        return str(err)
    return None


def argv_of(config: dict) -> list[str]:
    """``config`` as ``--teacher KIND --teacher-SETTING VALUE ...``."""
    argv = ["--teacher", config["kind"]]
    for key, value in config.items():
        if key != "kind":
            argv += ["--teacher-" + key.replace("_", "-"), str(value)]
    return argv


def verify_args(*teacher_argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    eval_run.add_arguments(parser)
    return parser.parse_args(["toolbench", "tiny", "--data", "toolbench", "--verify", "tool,params", *teacher_argv])


def test_the_configs_here_cover_every_setting_of_the_table():
    assert {kind: tuple(c) for kind, c in ((c["kind"], [k for k in c if k != "kind"]) for c in CONFIGS)} == {
        kind: settings for kind, settings in BACKEND_SETTINGS.items()
    }
    for config in CONFIGS:
        assert all(value != SETTINGS[key].default for key, value in config.items() if key != "kind")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c["kind"])
def test_every_setting_a_recipe_teacher_takes_eval_run_verify_takes(config):
    for builder in RECIPE_BUILDERS:
        assert recipe_problem(builder, config) is None, builder
    args = verify_args(*argv_of(config))
    assert run_verify.problem(args) is None
    assert teacher_config(args) == config  # the same mapping the recipe gives make_backend


@pytest.mark.parametrize(
    ("config", "option"),
    [
        ({"kind": "http", "base_url": URL, "model": "m", "timeout": 9.0, "path": "folder"}, "--teacher-path"),
        ({"kind": "hf", "path": "folder", "retries": 3}, "--teacher-retries"),
        ({"kind": "offline", "model": "m"}, "--teacher-model"),
    ],
)
def test_a_setting_a_recipe_teacher_refuses_eval_run_verify_refuses_with_the_same_message(config, option):
    kind, setting = config["kind"], next(key for key in config if option == "--teacher-" + key.replace("_", "-"))
    valid = ", ".join(BACKEND_SETTINGS[kind]) or "none"
    message = f"teacher {kind!r}: unknown setting(s) [{setting!r}]; valid: {valid}"
    for builder in RECIPE_BUILDERS:
        assert recipe_problem(builder, config) == f"{builder} builder: {message}"
    with pytest.raises(ValueError) as refused:
        teacher_config(verify_args(*argv_of(config)))
    assert str(refused.value) == message


def test_a_setting_in_no_table_is_refused_by_both():
    config = {"kind": "http", "base_url": URL, "model": "m", "temperature": 0.2}
    for builder in RECIPE_BUILDERS:
        refused = recipe_problem(builder, config)
        assert refused.endswith("unknown setting(s) ['temperature']; valid: " + ", ".join(BACKEND_SETTINGS["http"]))
    with pytest.raises(SystemExit):
        verify_args("--teacher", "http", "--teacher-temperature", "0.2")


def attempts_of(backend) -> int:
    """The attempts ``backend`` makes at a question its endpoint (a local one, put in place of the configured one)
    answers with a 503 each time, asking to be retried after a millisecond."""
    with StubServer({"status": 503, "headers": {"retry-after-ms": "1"}}) as server:
        backend.base_url, backend.url = server.url, server.url + "/chat/completions"
        with pytest.raises(TeacherError):
            backend.complete(TeacherRequest("s", None, "hi"))
        return len(server.requests)


def test_retries_reach_the_backend_from_eval_run_verify(monkeypatch):
    built = []

    def teacher(backend, cache=None):  # what run_verify builds its teacher from; stop there
        built.append(backend)
        raise ValueError("stop: the teacher is built")

    monkeypatch.setattr(train.teacher.routing, "Teacher", teacher)  # the stages' teachers are built there
    args = verify_args(*argv_of({"kind": "http", "base_url": URL, "model": "m", "retries": 4, "concurrency": 2}))

    def selector_model():
        pytest.fail("the selector is loaded after the teacher")

    assert run_verify.run(args, selector_model, eval_run.read_paths(args)) == 2
    [backend] = built
    assert (backend.retries, backend.concurrency) == (4, 2)
    assert attempts_of(backend) == 5


def test_retries_reach_the_backend_from_a_recipe_teacher():
    from train.papers.toolgt.builder import ToolGTBuilder

    teacher = {"kind": "http", "base_url": URL, "model": "m", "retries": 4}
    builder = ToolGTBuilder(make_args("toolgt", {"teacher": teacher}), seed=0)
    assert attempts_of(builder.teacher.backend) == 5
    metatool = make_teacher(teacher, seed=0)  # the Meta-Tool teacher: the same factory under its prompts
    assert isinstance(metatool, HttpTeacher) and attempts_of(metatool.backend) == 5
