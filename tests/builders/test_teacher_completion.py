"""The teacher for base and Llama-2 models (issue 27 item 5): the HTTP teacher's plain-completion endpoint
(``/v1/completions``, against a local server), the HF teacher's ``completion`` prompt and Llama-2-Chat's template
(exact strings and ids), the ``completion`` setting, and stages routed to different teachers
(``train.teacher.routing``)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from train.teacher import (
    HFBackend,
    HttpBackend,
    StageParams,
    StageTeachers,
    Teacher,
    TeacherError,
    TeacherRequest,
    make_backend,
    routing,
)
from train.teacher.llama2 import llama2_ids, llama2_segments, llama2_text

SYSTEM = "You are a helpful assistant."

# ---------------------------------------------------------------- Llama-2-Chat's template


def test_llama2_one_turn_with_a_system_prompt_is_metas_exact_string():
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Which tool?\n"}]
    assert llama2_text(messages) == ("<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nWhich tool? [/INST]")


def test_llama2_without_a_system_prompt_and_with_earlier_turns():
    messages = [
        {"role": "user", "content": " hi "},
        {"role": "assistant", "content": "Hello. "},
        {"role": "user", "content": "Which tool?"},
    ]
    assert llama2_text(messages) == "<s>[INST] hi [/INST] Hello. </s><s>[INST] Which tool? [/INST]"
    system_first = [{"role": "system", "content": "S"}, *messages]
    assert llama2_segments(system_first) == [
        ("[INST] <<SYS>>\nS\n<</SYS>>\n\n hi [/INST] Hello. ", True),  # stripped as a whole, as Meta's and HF's
        ("[INST] Which tool? [/INST]", False),
    ]


@pytest.mark.parametrize(
    "roles",
    [["system"], ["assistant"], ["user", "user"], ["user", "assistant"], []],
)
def test_llama2_refuses_turns_out_of_order(roles):
    with pytest.raises(ValueError, match="llama2: "):
        llama2_segments([{"role": role, "content": "x"} for role in roles])


class CharTokenizer:
    """One id per character (ord + 10); BOS 1, EOS 2."""

    bos_token_id, eos_token_id = 1, 2

    def encode(self, text, add_special_tokens=True):
        assert add_special_tokens is False  # BOS and EOS are placed by the caller, never encoded from "<s>"
        return [ord(c) + 10 for c in text]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i - 10) for i in ids if i > 2)

    def convert_tokens_to_ids(self, token):
        return None


def test_llama2_ids_put_bos_before_each_segment_and_eos_after_each_answer():
    tok = CharTokenizer()
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    assert llama2_ids(messages, tok) == [
        1,
        *tok.encode("[INST] a [/INST] b ", add_special_tokens=False),
        2,
        1,
        *tok.encode("[INST] c [/INST]", add_special_tokens=False),
    ]


class FakeLM:
    def eval(self):
        return self


def hf(**settings) -> HFBackend:
    return HFBackend("base-folder", model=FakeLM(), tokenizer_object=CharTokenizer(), **settings)


def test_the_hf_teacher_prompts_llama2_chat_and_a_base_model_as_plain_text():
    request = TeacherRequest("s", SYSTEM, "Say hi")
    tok = CharTokenizer()
    chat = hf(chat_format="llama2")
    assert chat.prompt_ids(request) == [1, *tok.encode(llama2_text(request.messages())[3:], add_special_tokens=False)]
    assert chat.stop_ids == [2]  # Llama-2-Chat ends its answer with EOS
    base = hf(completion=True)
    assert base.prompt_ids(request) == [1, *tok.encode("Say hi", add_special_tokens=False)]  # no system for a base
    assert base.format is None and base.stop_ids == [2]


# ---------------------------------------------------------------- the HTTP teacher's /v1/completions


class FakeServer(BaseHTTPRequestHandler):
    """Answers /v1/completions with ``choices[0].text`` and /v1/chat/completions with a message; records requests."""

    script: ClassVar[list] = []
    seen: ClassVar[list] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"path": self.path, "body": body})
        payload = type(self).script.pop(0) if type(self).script else {"choices": [{"text": " curl x\n\nINS: more"}]}
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(payload).encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    FakeServer.script, FakeServer.seen = [], []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_a_completion_teacher_posts_the_prompt_to_v1_completions_and_reads_choices_text(server):
    backend = make_backend(
        {"kind": "http", "base_url": server, "model": "base-70b", "completion": "true", "timeout": 5}
    )
    assert isinstance(backend, HttpBackend) and backend.completion
    prompt = 'INS: A user says, "x"\nlat: 1\nAPI:'
    answer = backend.complete(TeacherRequest("toolverifier.call", SYSTEM, prompt, StageParams(0.0, 256)))
    assert answer == " curl x\n\nINS: more"
    assert FakeServer.seen == [
        {
            "path": "/v1/completions",
            "body": {"model": "base-70b", "prompt": prompt, "temperature": 0.0, "max_tokens": 256, "seed": 0},
        }
    ]


def test_a_sampled_completion_sends_top_p_and_a_chat_teacher_is_unchanged(server):
    base = make_backend({"kind": "http", "base_url": server, "model": "b", "completion": True, "timeout": 5})
    base.complete(TeacherRequest("s", None, "p", StageParams(0.7, 16, top_p=0.9)))
    FakeServer.script = [{"choices": [{"message": {"content": "chat answer"}}]}]
    chat = make_backend({"kind": "http", "base_url": server, "model": "c", "timeout": 5})
    assert chat.complete(TeacherRequest("s", SYSTEM, "q")) == "chat answer"
    assert [seen["path"] for seen in FakeServer.seen] == ["/v1/completions", "/v1/chat/completions"]
    assert FakeServer.seen[0]["body"] == {
        "model": "b",
        "prompt": "p",
        "temperature": 0.7,
        "max_tokens": 16,
        "seed": 0,
        "top_p": 0.9,
    }
    assert FakeServer.seen[1]["body"]["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "q"},
    ]


def test_a_completion_answer_without_text_is_a_teacher_error_naming_the_field(server):
    FakeServer.script = [{"choices": [{"message": {"content": "chat-shaped"}}]}]
    backend = HttpBackend(server, "b", timeout=5, retries=0, completion=True)
    with pytest.raises(TeacherError, match=r"/v1/completions answered without choices\[0\]\.text"):
        backend.complete(TeacherRequest("s", None, "p"))


def test_the_completion_setting_is_a_yes_or_no():
    with pytest.raises(ValueError, match="teacher 'http': completion: 'maybe' is not true or false"):
        make_backend({"kind": "http", "base_url": "http://x.invalid/v1", "model": "m", "completion": "maybe"})
    assert make_backend({"kind": "http", "base_url": "http://x.invalid/v1", "model": "m"}).completion is False


# ---------------------------------------------------------------- stages routed to different teachers


class Recording:
    """A backend that answers with its own name and records the stages it was asked."""

    def __init__(self, kind: str, model: str):
        self.kind, self.model, self.stages = kind, model, []

    def complete(self, request):
        self.stages.append(request.stage)
        return self.model


def test_each_stage_asks_its_routed_teacher_and_the_others_the_default():
    default, chat, base = (Teacher(Recording("http", name)) for name in ("one-model", "chat", "base"))
    teachers = StageTeachers(default, {"p.question": chat, "p.verify": chat, "p.call": base})
    answers = [teachers.ask(TeacherRequest(stage, None, "u")) for stage in ("p.question", "p.call", "p.other")]
    assert answers == ["chat", "base", "one-model"]
    assert (chat.backend.stages, base.backend.stages, default.backend.stages) == (
        ["p.question"],
        ["p.call"],
        ["p.other"],
    )
    report = teachers.report()
    assert (report["backend"], report["model"], report["asked"]) == ("http", "one-model, chat, base", 3)
    assert report["stages"] == {"p.call": "http base", "p.question": "http chat", "p.verify": "http chat"}


def test_equal_teacher_mappings_build_one_backend(monkeypatch):
    built = []

    def fake_make_backend(config, writers=None, version="v1"):
        built.append(dict(config))
        return Recording(config["kind"], config.get("model", "offline"))

    monkeypatch.setattr(routing, "make_backend", fake_make_backend)
    monkeypatch.setattr(routing, "default_cache", lambda kind: None)
    chat = {"kind": "http", "base_url": "http://c.invalid/v1", "model": "chat"}
    teachers = routing.stage_teachers({"kind": "offline"}, {"a": chat, "b": dict(chat), "c": {"kind": "offline"}})
    assert built == [{"kind": "offline"}, chat]  # one chat model for a and b; c is the default's teacher
    assert teachers.teacher_for("a") is teachers.teacher_for("b") and teachers.teacher_for("c") is teachers.default
