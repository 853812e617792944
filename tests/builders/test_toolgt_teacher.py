"""The shared teacher (train.teacher): the http backend's retries and failures as counted drops (a scripted local
endpoint, ``tests/teacher_stub.py``: no network), per-stage parameters in the request, and the cache key."""

from __future__ import annotations

import hashlib

import pytest
from teacher_stub import StubServer

from train.papers.toolgt import teacher as prompts
from train.papers.toolgt.builder import ToolGTBuilder, ToolGTOptions
from train.schema import Conversation, Message, Tool, ToolCall
from train.teacher import HttpBackend, StageParams, Teacher, TeacherError, TeacherRequest, cache_key, make_backend


# a retryable failure the SDK retries after a millisecond (the server's Retry-After), so the tests wait for nothing
def failing(status: int) -> dict:
    return {"status": status, "headers": {"retry-after-ms": "1"}}


def backend(server: StubServer, retries: int = 3) -> HttpBackend:
    return HttpBackend(server.url, "gpt-4o-mini", retries=retries)


def test_server_errors_are_retried_and_the_request_carries_the_stage_parameters():
    request = TeacherRequest("toolgt.call", "SYS", "USER", StageParams(temperature=0.2, max_tokens=64, seed=5))
    with StubServer(failing(503), failing(500), failing(429), "ok") as server:
        teacher = backend(server)
        assert teacher.complete(request) == "ok"
        assert len(server.requests) == 4 and teacher.counts == {"attempts": 4, "retries": 3}
        assert server.bodies()[0] == {
            "model": "gpt-4o-mini",
            "temperature": 0.2,
            "max_tokens": 64,
            "seed": 5,
            "messages": [{"role": "system", "content": "SYS"}, {"role": "user", "content": "USER"}],
        }


def test_a_client_error_is_not_retried_and_spent_retries_name_the_last_failure():
    with StubServer(401, "never") as server:
        with pytest.raises(TeacherError, match=rf"^HTTP 401 from {server.url}/chat/completions$"):
            backend(server).complete(TeacherRequest("s", None, "u"))
        assert len(server.requests) == 1
    with StubServer(failing(500), failing(429)) as server, pytest.raises(TeacherError, match=r"^HTTP 429 from"):
        backend(server, retries=1).complete(TeacherRequest("s", None, "u"))


def dialogue() -> Conversation:
    tool = Tool(
        "get_weather",
        "Weather for a city.",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
    return Conversation(
        id="w",
        tools=[tool],
        messages=[
            Message(role="user", content="Weather in Oslo?"),
            Message(role="assistant", tool_calls=[ToolCall("get_weather", {"city": "Oslo"}, "c0")]),
        ],
    )


def test_http_failures_in_a_build_become_counted_drops_and_answers_are_used_per_stage():
    reasoning = '<thinking>1. The weather tool fits.\n6. Draft: [get_weather(city="Oslo")]</thinking>'
    with StubServer(
        *[failing(500)] * 4,  # sample 1: stage 1 fails after its retries
        reasoning,
        '<function>[get_weather(city="Oslo")]</function>',  # sample 2, template
        reasoning,
        '<function>[get_weather(city="Oslo")]</function>',  # sample 2, cot
        "never asked",
    ) as server:
        build_with(server, reasoning)


def build_with(server: StubServer, reasoning: str) -> None:
    url = server.url
    options = ToolGTOptions.from_args(
        {"template": "detail", "arm_data": "shared", "reasoning_temperature": 0.9, "call_max_tokens": 99}
    )  # shared: the template's and the CoT reasoning are both asked for
    builder = ToolGTBuilder(options, seed=3, teacher=Teacher(backend(server)))
    drops: list[str] = []
    first, second = dialogue(), dialogue()
    second.id = "w2"
    kept = list(builder.build([first, second], drops.append))
    assert drops == [f"detail stage1: teacher failed: HTTP 500 from {url}/chat/completions"]
    assert [s.id for s in kept] == ["w2#1"] and kept[0].messages[2].content == (
        '<thinking>1. The weather tool fits.\n6. Draft: [get_weather(city="Oslo")]</thinking>\n'
        '[get_weather(city="Oslo")]'
    )
    assert builder.report()["stages"]["detail"]["stage1"] == {
        f"dropped: teacher failed: HTTP 500 from {url}/chat/completions": 1,
        "passed": 1,
    }
    stage1, stage2 = server.bodies()[4], server.bodies()[5]
    assert (stage1["temperature"], stage1["max_tokens"], stage1["seed"]) == (0.9, 1024, 3)
    assert (stage2["temperature"], stage2["max_tokens"]) == (0.0, 99)
    assert prompts.TEMPLATES["detail"] in stage1["messages"][0]["content"]
    assert prompts.TEMPLATES["detail"] not in stage2["messages"][0]["content"]  # stage 2 never sees the template
    assert (
        stage1["messages"][1]["content"] == "User request: Weather in Oslo?\nGround truth function calling(s):"
        '[get_weather(city="Oslo")]'
    )
    assert stage2["messages"][1]["content"].startswith("User request: Weather in Oslo?\nGiven Thinking Process")
    assert builder.teacher.counts["failures"] == 1 and len(server.requests) == 8


def test_the_cache_key_is_the_sha256_of_a_canonical_json():
    request = TeacherRequest("toolgt.judge", "S", "U", StageParams(0.0, 16, 1), context={"ignored": True})
    canonical = (
        '{"backend":"http","model":"m","params":{"max_tokens":16,"seed":1,"temperature":0.0},'
        '"stage":"toolgt.judge","system":"S","user":"U"}'
    )
    assert cache_key("http", "m", request) == hashlib.sha256(canonical.encode()).hexdigest()


def test_make_backend_checks_kind_and_settings():
    with pytest.raises(ValueError, match=r"unknown teacher kind 'gpt'; valid: offline, http, hf"):
        make_backend({"kind": "gpt"})
    with pytest.raises(ValueError, match=r"teacher 'offline': unknown setting\(s\) \['model'\]"):
        make_backend({"kind": "offline", "model": "x"})
    with pytest.raises(TeacherError, match="no writer for stage 'toolgt.call'"):
        make_backend(None).complete(TeacherRequest("toolgt.call", None, "u"))
