"""The http teacher on the ``openai`` SDK (issue 28, item 8), against a scripted local endpoint
(``tests/teacher_stub.py``): the SDK's retries (a 429's ``Retry-After`` honoured, a 5xx's jittered wait, a client
error not retried), the read timeout, the key (or no ``Authorization`` at all), ``/completions`` for a base model,
a batch asked concurrently with a bounded worker count in order, cache hits that ask nothing and an answer cached
before the SDK still found."""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
import time

import pytest
from teacher_stub import StubServer

from train.papers.ptr.batching import can_prefetch
from train.teacher import (
    HttpBackend,
    ResponseCache,
    StageParams,
    Teacher,
    TeacherError,
    TeacherRequest,
    TeacherUnavailable,
    make_backend,
)


def question(user: str = "u", system: str | None = None) -> TeacherRequest:
    return TeacherRequest("s", system, user, StageParams(0.0, 16, 1))


def gaps(server: StubServer) -> list[float]:
    times = [r["at"] for r in server.requests]
    return [later - earlier for earlier, later in itertools.pairwise(times)]


def test_a_429_is_retried_after_the_seconds_its_retry_after_says():
    with StubServer({"status": 429, "headers": {"Retry-After": "1"}}, "fine") as server:
        backend = HttpBackend(server.url, "m", timeout=5, retries=2)
        assert backend.complete(question()) == "fine"
        [gap] = gaps(server)
        assert 1.0 <= gap < 3.0  # the server's second, not the SDK's own 0.5 s (the upper bound leaves room for load)
        assert backend.counts == {"attempts": 2, "retries": 1}
        assert [r["headers"]["x-stainless-retry-count"] for r in server.requests] == ["0", "1"]


def test_a_500_is_retried_after_a_jittered_wait_and_a_400_is_not():
    with StubServer(500, "after a 500") as server:
        backend = HttpBackend(server.url, "m", timeout=5, retries=1)
        assert backend.complete(question()) == "after a 500"
        [gap] = gaps(server)
        assert 0.375 <= gap < 1.5  # the SDK's first wait: 0.5 s less up to 25 % jitter (room for load above)
    with StubServer({"status": 503, "headers": {"retry-after-ms": "20"}}, 400, "never") as server:
        backend = HttpBackend(server.url, "m", timeout=5, retries=3, failures_in_a_row=2)
        with pytest.raises(TeacherError, match=rf"^HTTP 400 from {server.url}/chat/completions$"):
            backend.complete(question())
        assert len(server.requests) == 2 and gaps(server)[0] < 0.5  # the 503's 20 ms, then no retry after the 400
        assert backend.counts == {"attempts": 2, "retries": 1}


def test_spent_retries_and_a_slow_read_are_teacher_errors_then_the_endpoint_is_given_up_on():
    with StubServer({"status": 502, "headers": {"retry-after-ms": "1"}}) as server:
        backend = HttpBackend(server.url, "m", timeout=5, retries=2, failures_in_a_row=2)
        with pytest.raises(TeacherError, match=r"^HTTP 502 from "):
            backend.complete(question())
        with pytest.raises(TeacherUnavailable) as down:
            backend.complete(question())
        message = str(down.value)
        assert message.startswith(f"the http teacher {server.url}/chat/completions (model m) failed 2 questions")
        assert "tried 3 time(s)" in message and 'HTTP 502: \'{"error": {"message": "scripted 502"}}\'' in message
        assert len(server.requests) == 6
        with pytest.raises(TeacherUnavailable):  # refused at once, nothing sent
            backend.complete(question())
        assert len(server.requests) == 6
    with StubServer({"delay": 2.0}) as server:
        backend = HttpBackend(server.url, "m", timeout=0.5, retries=0)
        began = time.monotonic()
        with pytest.raises(TeacherError, match=r"completions: no answer within 0.5 s \(the timeout of each read\)"):
            backend.complete(question())
        assert time.monotonic() - began < 1.9  # cut before the 2 s answer


def test_the_key_comes_from_the_environment_and_without_one_no_authorization_is_sent(monkeypatch):
    monkeypatch.setenv("TEACHER_KEY", "sk-test")
    with StubServer("a") as server:
        HttpBackend(server.url, "m", api_key_env="TEACHER_KEY").complete(question())
        HttpBackend(server.url, "m").complete(question())
        auth = [r["headers"].get("authorization") for r in server.requests]
        assert auth == ["Bearer sk-test", None]
        assert server.requests[0]["body"] == {
            "model": "m",
            "messages": [{"role": "user", "content": "u"}],
            "temperature": 0.0,
            "max_tokens": 16,
            "seed": 1,
        }


def test_completion_mode_posts_the_prompt_to_completions_and_reads_choices_text():
    with StubServer(" curl x") as server:
        backend = make_backend({"kind": "http", "base_url": server.url, "model": "base", "completion": True})
        assert backend.complete(question("API:", system="ignored")) == " curl x"
        [request] = server.requests
        assert request["path"] == "/v1/completions"
        assert request["body"] == {"model": "base", "prompt": "API:", "temperature": 0.0, "max_tokens": 16, "seed": 1}


def echo(body: dict) -> dict:
    """Answer with the question's user prompt, a while later (so that questions overlap)."""
    return {"text": "re: " + body["messages"][-1]["content"], "delay": 0.3}


def test_a_batch_is_asked_concurrently_with_a_bounded_worker_count_in_order():
    with StubServer(echo) as server:
        backend = make_backend({"kind": "http", "base_url": server.url, "model": "m", "concurrency": 3})
        assert backend.concurrency == 3 and can_prefetch(backend)  # PTR's prefetch now asks http in batches
        answers = backend.ask_many([question(f"q{i}") for i in range(7)])
        assert answers == [f"re: q{i}" for i in range(7)]
        assert server.most_in_flight == 3  # three at once (each answer takes 0.3 s), never more
    # the default: 8 at once. Each answer waits until all 8 are in flight (a barrier, not a delay: on a loaded
    # machine an early answer could come back before the eighth request went out); fewer at once breaks it
    all_in = threading.Barrier(8, timeout=10)

    def together(body: dict) -> dict:
        all_in.wait()
        return {"text": "re: " + body["messages"][-1]["content"]}

    with StubServer(together) as server:
        backend = HttpBackend(server.url, "m")
        assert backend.ask_many([question(f"q{i}") for i in range(8)]) == [f"re: q{i}" for i in range(8)]
        assert server.most_in_flight == 8
    with pytest.raises(ValueError, match=r"concurrency \(0\) >= 1"):
        make_backend({"kind": "http", "base_url": "http://x.invalid/v1", "model": "m", "concurrency": 0})


def test_a_failed_question_in_a_batch_is_its_error_and_the_others_are_answered():
    def some_fail(body: dict) -> object:
        return 400 if body["messages"][-1]["content"] == "bad" else echo(body)

    with StubServer(some_fail) as server:
        teacher = Teacher(HttpBackend(server.url, "m", failures_in_a_row=5))
        first, failed, last = teacher.ask_many([question("a"), question("bad"), question("b")])
        assert (first, last) == ("re: a", "re: b")
        assert isinstance(failed, TeacherError) and str(failed).startswith("HTTP 400 from ")
        assert teacher.counts == {"asked": 3, "backend_calls": 3, "failures": 1}


def test_cache_hits_take_no_worker_and_ask_nothing(tmp_path):
    with StubServer(echo) as server:
        teacher = Teacher(HttpBackend(server.url, "m", concurrency=2), ResponseCache(tmp_path))
        assert teacher.ask(question("q1")) == "re: q1"
        batch = [question(f"q{i}") for i in range(4)] + [question("q2")]  # q2 twice: asked once
        assert teacher.ask_many(batch) == ["re: q0", "re: q1", "re: q2", "re: q3", "re: q2"]
        sent = sorted(r["body"]["messages"][-1]["content"] for r in server.requests)
        assert sent == ["q0", "q1", "q2", "q3"]  # q1 from the cache
        assert teacher.counts == {"asked": 6, "backend_calls": 4, "cache_hits": 1}
        again = Teacher(HttpBackend(server.url, "m"), ResponseCache(tmp_path))
        assert again.ask_many(batch) == ["re: q0", "re: q1", "re: q2", "re: q3", "re: q2"]
        assert again.ask(question("q3")) == "re: q3" and len(server.requests) == 4  # all from the cache
        assert again.counts == {"asked": 6, "cache_hits": 6}


# the canonical JSON of a key as the urllib teacher wrote it (tests/builders/test_toolgt_teacher.py has the same)
CANONICAL = (
    '{"backend":"http","model":"m","params":{"max_tokens":16,"seed":1,"temperature":0.0},'
    '"stage":"s","system":null,"user":"u"}'
)


def test_an_answer_cached_before_the_sdk_is_still_found(tmp_path):
    key = hashlib.sha256(CANONICAL.encode()).hexdigest()
    (tmp_path / key[:2]).mkdir()
    (tmp_path / key[:2] / f"{key}.json").write_text(json.dumps({"key": key, "stage": "s", "text": "from before"}))
    with StubServer("asked") as server:
        teacher = Teacher(HttpBackend(server.url, "m"), ResponseCache(tmp_path))
        assert teacher.ask(question()) == "from before"
        assert teacher.ask_many([question(), question("other")]) == ["from before", "asked"]
        assert len(server.requests) == 1 and server.requests[0]["body"]["messages"][0]["content"] == "other"
