"""The teacher's ``top_p`` (ToolVerifier A.6: "top-p sampling ... temperature 0.7"): the HTTP backend sends it, the HF
backend samples with it, the offline backend ignores it, and it is part of the cache key only when set, so an answer
cached before the field existed is still found for ``top_p=None``."""

from __future__ import annotations

import hashlib
import json

from teacher_stub import StubServer

from train.papers.toolverifier import teacher as tv
from train.teacher import (
    HFBackend,
    HttpBackend,
    OfflineBackend,
    ResponseCache,
    StageParams,
    Teacher,
    TeacherRequest,
    cache_key,
)

# The cache key's canonical JSON as it was written before StageParams had top_p (tests/builders/test_toolgt_teacher).
OLD_CANONICAL = (
    '{"backend":"http","model":"m","params":{"max_tokens":16,"seed":1,"temperature":0.7},'
    '"stage":"toolgt.judge","system":"S","user":"U"}'
)


def request(top_p: float | None) -> TeacherRequest:
    return TeacherRequest("toolgt.judge", "S", "U", StageParams(0.7, 16, 1, top_p=top_p))


def test_top_p_is_in_the_cache_key_only_when_set():
    old = hashlib.sha256(OLD_CANONICAL.encode()).hexdigest()
    assert cache_key("http", "m", request(None)) == old
    with_p = OLD_CANONICAL.replace('"temperature":0.7}', '"temperature":0.7,"top_p":0.9}')
    assert cache_key("http", "m", request(0.9)) == hashlib.sha256(with_p.encode()).hexdigest()
    assert len({cache_key("http", "m", request(p)) for p in (None, 0.9, 0.95)}) == 3
    assert request(None).digest() != request(0.9).digest()


def test_an_answer_cached_before_top_p_existed_is_found_for_top_p_none(tmp_path):
    # written as the cache wrote it before the field: the file named by the old key, the key inside
    old = hashlib.sha256(OLD_CANONICAL.encode()).hexdigest()
    (tmp_path / old[:2]).mkdir()
    (tmp_path / old[:2] / f"{old}.json").write_text(json.dumps({"key": old, "stage": "toolgt.judge", "text": "old"}))

    class Unreachable:
        kind, model = "http", "m"

        def complete(self, request):
            return "asked"

    teacher = Teacher(Unreachable(), ResponseCache(tmp_path))
    assert teacher.ask(request(None)) == "old"
    assert teacher.ask(request(0.9)) == "asked"  # another question: not the old answer
    assert teacher.counts["cache_hits"] == 1 and teacher.counts["backend_calls"] == 1


def test_the_http_backend_sends_top_p_when_set_and_not_otherwise():
    with StubServer("ok") as server:
        backend = HttpBackend(server.url, "m")
        backend.complete(request(0.9))
        backend.complete(request(None))
        bodies = server.bodies()
    assert bodies[0]["top_p"] == 0.9 and bodies[0]["temperature"] == 0.7
    assert "top_p" not in bodies[1]


def test_the_hf_backend_samples_with_top_p_and_greedy_ignores_it():
    import torch

    from train.tokenizers.tiny import build_tiny_chatml

    tokenizer = build_tiny_chatml()
    calls = []

    class Model:
        def eval(self):
            return self

        def generate(self, ids, **kwargs):
            calls.append(kwargs)
            return torch.cat([ids, torch.tensor([[tokenizer.convert_tokens_to_ids("<|im_end|>")]])], dim=1)

    backend = HFBackend("unused", "chatml", model=Model(), tokenizer_object=tokenizer)
    backend.complete(request(0.9))
    backend.complete(TeacherRequest("s", None, "U", StageParams(0.0, 16, top_p=0.9)))
    backend.complete(request(None))
    assert calls[0]["do_sample"] is True and calls[0]["top_p"] == 0.9 and calls[0]["temperature"] == 0.7
    assert calls[1]["do_sample"] is False and "top_p" not in calls[1]  # greedy: top-p plays no part
    assert calls[2]["do_sample"] is True and "top_p" not in calls[2]


def test_the_offline_backend_ignores_top_p_and_toolverifier_samples_with_it():
    seen = []
    backend = OfflineBackend({"s": lambda r: seen.append(r.params.top_p) or "same"})
    assert backend.complete(TeacherRequest("s", None, "U", tv.SAMPLED)) == "same"
    assert seen == [0.9]
    assert (tv.SAMPLED.temperature, tv.SAMPLED.top_p) == (0.7, 0.9) and tv.GREEDY.top_p is None
