"""Teachers: the offline default, an OpenAI-compatible endpoint (a local server started here), a local HF model."""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from train.formats.tokenize import tokenize_prompt
from train.papers.metatool.builder import MetaToolBuilder, MetaToolOptions
from train.papers.metatool.teacher import (
    REASONING_PROMPT,
    REWRITE_PROMPT,
    CallTurn,
    HttpTeacher,
    OfflineTeacher,
    TeacherError,
    make_teacher,
    paraphrase,
    rewrite_prompt,
    transcript,
)
from train.schema import Conversation, Message, Tool, ToolCall

WEATHER = Tool(
    "get_weather",
    "Get the current weather for a city",
    {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city name"}},
        "required": ["city"],
    },
)


def weather_dialogue() -> Conversation:
    return Conversation(
        id="w",
        tools=[WEATHER],
        messages=[
            Message(role="user", content="How warm is it in Oslo?"),
            Message(role="assistant", tool_calls=[ToolCall("get_weather", {"city": "Oslo"}, "call_0")]),
            Message(role="tool", content='{"temp_c": 4}', tool_call_id="call_0", name="get_weather"),
            Message(role="assistant", content="It is 4°C in Oslo."),
        ],
    )


def test_the_paper_prompts_are_verbatim():
    assert REWRITE_PROMPT.startswith("Could you please help me rewrite the following json of func? Some modifications")
    assert REWRITE_PROMPT.endswith(
        "{ORIGINAL_FUNCTION}\nYour output should have only the json of this func and nothing else."
    )
    assert (
        "3. The reasoning should in three sentences: Briefly analyze the current state, select suitable tools "
        "and specifies parameters of tools." in REASONING_PROMPT
    )


def test_transcript_uses_the_paper_layout():
    turn = CallTurn("w", 1, weather_dialogue().messages[:1], [ToolCall("get_weather", {"city": "Oslo"})], {})
    assert (
        transcript(turn)
        == 'User: How warm is it in Oslo?\n\nAssistant: [{"name": "get_weather", "parameters": {"city": "Oslo"}}]'
    )


def test_offline_reasoning_is_three_sentences_naming_tool_and_parameters():
    turn = CallTurn("w", 1, weather_dialogue().messages[:1], [ToolCall("get_weather", {"city": "Oslo"})], {})
    text = OfflineTeacher(seed=0).reasoning(turn)
    assert text == (
        'You are asking me to help with this request: "How warm is it in Oslo?" To help you, I will invoke the '
        '"get_weather" function. I will call it with the parameter "city" set to "Oslo".'
    )
    assert text == OfflineTeacher(seed=0).reasoning(turn)


def test_offline_reasoning_for_parallel_calls_after_results_and_for_meta_tool():
    history = [Message(role="user", content="x"), Message(role="tool", content="{}")]
    turn = CallTurn("w", 3, history, [ToolCall("a", {"k": [1, 2]}), ToolCall("b", {})], {})
    assert OfflineTeacher(seed=0).reasoning(turn) == (
        "With the results I have now, I can continue with your request. "
        'To help you, I will invoke the "a" function and the "b" function. '
        'For call 1 ("a") I will use the parameter "k" set to [1, 2]; for call 2 ("b") I will use no parameters.'
    )
    meta = ToolCall("meta_tool", {"tool_description": "Get weather.", "param_description": ["The city"]})
    turn = CallTurn("w", 1, [Message(role="user", content="Weather in Oslo")], [meta], {})
    assert OfflineTeacher(seed=0).reasoning(turn) == (
        'You are asking me to help with this request: "Weather in Oslo". '
        "There is not a suitable function in the current list, so I will use the meta_tool function to search for an "
        "external function that can help you. I will set the parameters "
        'of the meta_tool function with the tool_description "Get weather" and the param_description ["The city"].'
    )


def test_offline_rewrite_is_seeded_by_key_and_attempt():
    original = {
        "name": "meta_tool",
        "parameters": {
            "tool_description": "Get the current weather for a city",
            "param_description": ["The city name"],
        },
    }
    teacher = OfflineTeacher(seed=0)
    first = teacher.rewrite(original, key="w/meta_0", attempt=0)
    assert first == OfflineTeacher(seed=0).rewrite(original, key="w/meta_0", attempt=0)
    answers = {teacher.rewrite(original, key="w/meta_0", attempt=a) for a in range(6)}
    assert len(answers) > 1  # a retry asks for another paraphrase
    rewritten = json.loads(first)
    assert set(rewritten) == {"name", "parameters"} and rewritten["name"] == "meta_tool"


def test_paraphrase_rules():
    # the leading verb gets a synonym (with its case), "search for" as a unit
    outputs = {paraphrase("Search for recipes based on ingredients", random.Random(s)) for s in range(40)}
    assert all(not o.startswith(("Search for", "Find for")) or o.startswith("Search for") for o in outputs)
    assert any(o.startswith("Look for recipes") for o in outputs) and any(o.startswith("Find recipes") for o in outputs)
    assert any("according to ingredients" in o for o in outputs)


# ---------------------------------------------------------------- the HTTP teacher against a local server


class FakeCompletions(BaseHTTPRequestHandler):
    """Answers /v1/chat/completions from a script of (status, content) pairs; records each request."""

    script: ClassVar[list] = []
    seen: ClassVar[list] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        status, content = type(self).script.pop(0) if type(self).script else (200, "fallback")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        payload = (
            {"choices": [{"message": {"role": "assistant", "content": content}}]} if status == 200 else {"error": "x"}
        )
        self.wfile.write(json.dumps(payload).encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    FakeCompletions.script, FakeCompletions.seen = [], []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeCompletions)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_http_teacher_sends_the_prompt_with_the_key_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("TEACHER_KEY", "sk-test")
    FakeCompletions.script = [(200, '{"name": "meta_tool", "parameters": {}}')]
    teacher = make_teacher(
        {"kind": "http", "base_url": server, "model": "m1", "api_key_env": "TEACHER_KEY", "timeout": 5}, seed=0
    )
    original = {"name": "meta_tool", "parameters": {"tool_description": "d", "param_description": ["p"]}}
    assert teacher.rewrite(original, key="k", attempt=0) == '{"name": "meta_tool", "parameters": {}}'
    [request] = FakeCompletions.seen
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer sk-test"
    assert request["body"]["model"] == "m1"
    assert request["body"]["messages"] == [{"role": "user", "content": rewrite_prompt(original)}]


def http_teacher(base_url: str, **settings) -> HttpTeacher:
    """The Meta-Tool teacher over an http backend, through the one factory every teacher is made by."""
    teacher = make_teacher({"kind": "http", "base_url": base_url, "model": "m", **settings}, seed=0)
    assert isinstance(teacher, HttpTeacher)
    return teacher


def test_http_teacher_retries_server_errors_but_not_client_errors(server):
    FakeCompletions.script = [(500, None), (503, None), (200, "ok")]
    assert http_teacher(server, retries=2, timeout=5).complete("hi") == "ok"
    FakeCompletions.script = [(400, None), (200, "never asked")]
    with pytest.raises(TeacherError, match=r"HTTP 400 from http://127.0.0.1:\d+/v1/chat/completions"):
        http_teacher(server, retries=2, timeout=5).complete("hi")
    assert len(FakeCompletions.seen) == 4


def test_http_teacher_failures_are_reasons():
    with pytest.raises(TeacherError, match="cannot reach http://127.0.0.1:9/chat/completions"):
        http_teacher("http://127.0.0.1:9", retries=0, timeout=2).complete("hi")
    with pytest.raises(TeacherError, match="environment variable NO_SUCH_KEY_VAR"):
        http_teacher("http://127.0.0.1:9", api_key_env="NO_SUCH_KEY_VAR").complete("hi")
    with pytest.raises(ValueError, match=r"^teacher 'http': unknown setting\(s\) \['modle'\]; valid: base_url, model"):
        make_teacher({"kind": "http", "base_url": "x", "modle": "m"}, seed=0)


def test_builder_with_an_http_teacher_keeps_its_verified_answers(server):
    rewrite = (
        '```json\n{"name": "meta_tool", "parameters": {"tool_description": "Look up the weather in a city", '
        '"param_description": ["Name of the city"]}}\n```'
    )
    FakeCompletions.script = [(200, rewrite), (200, "Reasoning for the meta call."), (200, "Reasoning for the call.")]
    options = MetaToolOptions(
        teacher={"kind": "http", "base_url": server, "model": "m", "timeout": 5},
        get_user_input=False,
        instruction=False,
    )
    builder = MetaToolBuilder(options, seed=0, similarity=lambda original, new: 0.95)
    conv = builder.sample(weather_dialogue(), "open")
    meta_turn, call_turn = conv.messages[1], conv.messages[3]
    assert meta_turn.content == "Reasoning for the meta call."
    assert meta_turn.tool_calls[0].arguments == {
        "tool_description": "Look up the weather in a city",
        "param_description": ["Name of the city"],
    }
    assert call_turn.content == "Reasoning for the call."
    prompts = [r["body"]["messages"][0]["content"] for r in FakeCompletions.seen]
    assert prompts[0].startswith("Could you please help me rewrite")
    assert prompts[2].endswith(REASONING_PROMPT.split("{INPUT_CONVS}")[1])
    assert '\n\nAssistant: [{"name": "get_weather", "parameters": {"city": "Oslo"}}]\nNote that:' in prompts[2]
    assert builder.report.counts["rewrites_kept"] == 1 and not builder.report.reasoning_fallbacks


def test_a_failing_teacher_falls_back_to_the_offline_reasoning_and_counts_it(server):
    FakeCompletions.script = [(400, None)] * 3
    options = MetaToolOptions(
        teacher={"kind": "http", "base_url": server, "model": "m", "timeout": 5, "retries": 0},
        get_user_input=False,
        instruction=False,
        rewrite=False,
    )
    builder = MetaToolBuilder(options, seed=0)
    conv = builder.sample(weather_dialogue(), "closed")
    turn = CallTurn("w", 1, weather_dialogue().messages[:1], weather_dialogue().messages[1].tool_calls, {})
    assert conv.messages[1].content == OfflineTeacher(0).reasoning(turn)
    assert dict(builder.report.reasoning_fallbacks) == {f"HTTP 400 from {server}/chat/completions": 1}


# ---------------------------------------------------------------- a local HF model


@pytest.mark.slow
def test_hf_teacher_generates_through_the_chat_format():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from train.papers.metatool.teacher import HFTeacher
    from train.teacher import HFBackend
    from train.tokenizers.tiny import build_tiny_chatml

    tokenizer = build_tiny_chatml()
    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=2048,
        )
    )
    backend = HFBackend("unused", chat_format="chatml", model=model, tokenizer_object=tokenizer)
    teacher = HFTeacher(backend, max_new_tokens=6)
    generated = []
    original_generate = model.generate
    model.generate = lambda *a, **k: generated.append(original_generate(*a, **k)) or generated[-1]
    text = teacher.complete("Say hi")
    prompt = tokenize_prompt(
        teacher.format, Conversation(id="t", messages=[Message(role="user", content="Say hi")]), 1, tokenizer
    )
    assert generated[0][0, : len(prompt)].tolist() == prompt  # prompted through the chat format
    assert 1 <= generated[0].shape[1] - len(prompt) <= 6 and isinstance(text, str)
    # a random model's rewrite is no JSON: the builder counts it and keeps the original call
    builder = MetaToolBuilder(
        MetaToolOptions(get_user_input=False, instruction=False, reasoning=False, rewrite_attempts=2),
        seed=0,
        teacher=teacher,
        similarity=lambda a, b: 1.0,
    )
    conv = builder.sample(weather_dialogue(), "open")
    assert conv.messages[1].tool_calls[0].arguments == {
        "tool_description": "Get the current weather for a city",
        "param_description": ["The city name"],
    }
    assert builder.report.counts["rewrites_dropped"] == 1 and sum(builder.report.rewrite_failures.values()) == 2
