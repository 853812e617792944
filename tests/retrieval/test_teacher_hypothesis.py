"""meta_tool hypotheses from the configured teacher (``tooltrain eval retrieval --hypothesis teacher --teacher ...``):
the offline teacher's rule-based reading, and an OpenAI-compatible teacher answered by a local HTTP server (no
network), its answers checked by A.3's structure rule; a failed answer is a counted miss."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from train.cli import main
from train.papers.metatool.hypothesis import RuleTeacher, teacher_hypothesis
from train.papers.metatool.retrieve import ToolHypothesis
from train.papers.metatool.teacher import HYPOTHESIS_PROMPT, OfflineTeacher, hypothesis_prompt, make_teacher


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path / "cache"))


class Completions(BaseHTTPRequestHandler):
    """/v1/chat/completions answering from a script, recording each prompt."""

    script: ClassVar[list[str]] = []
    prompts: ClassVar[list[str]] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).prompts.append(body["messages"][0]["content"])
        answer = type(self).script.pop(0)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"choices": [{"message": {"role": "assistant", "content": answer}}]}).encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    Completions.script, Completions.prompts = [], []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Completions)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def meta_tool(description: str, params: list[str]) -> str:
    arguments = {"tool_description": description, "param_description": params}
    return json.dumps({"name": "meta_tool", "parameters": arguments})


def test_the_offline_teacher_answers_with_the_rule_based_reading():
    request = "Can you find a gif of a sunset on the beach?"
    answer = json.loads(OfflineTeacher(seed=3).hypothesis(request, key="q"))
    assert answer == {
        "name": "meta_tool",
        "parameters": {
            "tool_description": "Find a gif of a sunset on the beach.",
            "param_description": ["The sunset", "The beach"],
        },
    }
    assert teacher_hypothesis(request, OfflineTeacher(), "q") == RuleTeacher().hypothesis(request)


def test_the_prompt_names_the_request_and_the_meta_tool_definition():
    prompt = hypothesis_prompt("Will it  rain\\nin Paris?".replace("\\n", "\n"))
    assert prompt.startswith("A user asks: Will it rain in Paris?\nNone of your functions can help")
    assert '{"name": "meta_tool", "description": "Use this tool when no suitable tool' in prompt
    assert prompt.endswith(HYPOTHESIS_PROMPT.split("{META_TOOL}")[1])


def test_answers_that_are_not_meta_tool_calls_are_reasons(server):
    teacher = make_teacher({"kind": "http", "base_url": server, "model": "m", "timeout": 5}, seed=0)
    Completions.script = [
        "```json\n" + meta_tool("Get the weather", ["The city"]) + "\n```",
        "No idea.",
        json.dumps({"name": "meta_tool", "parameters": {"tool_description": "Weather"}}),
        json.dumps({"name": "ToolSearcher", "parameters": {"keywords": "weather"}}),
    ]
    assert teacher_hypothesis("rain?", teacher, "a") == ToolHypothesis("Get the weather", ("The city",))
    reasons = []
    for key in "bcd":
        with pytest.raises(ValueError) as raised:
            teacher_hypothesis("rain?", teacher, key)
        reasons.append(str(raised.value))
    assert reasons == [
        "the teacher's hypothesis is not JSON: Expecting value: line 1 column 1 (char 0)",
        "the teacher's hypothesis is not a meta_tool call: meta_tool needs param_description",
        "the teacher's hypothesis is not a meta_tool call: name is 'ToolSearcher', not 'meta_tool'",
    ]


def test_eval_retrieval_with_an_http_teacher(server, capsys, fixtures, tmp_path):
    # test split: q1 (get_traffic_report), q2 (search_recipes, book_table), q3 (convert_currency). The teacher
    # answers q1 and q3 with the gold tools' own texts (score 1: rank 1 under hash-bow) and q2 with prose.
    Completions.script = [
        meta_tool("Get the current traffic report", ["The city and state, e.g. Los Angeles, CA"]),
        "Sorry, I can only chat.",
        meta_tool("Convert an amount between currencies", ["The amount"]),
    ]
    queries = fixtures / "retrieval" / "tiny.jsonl"
    code = main(
        [
            "eval",
            "retrieval",
            "--method",
            "metatool",
            "--embedder",
            "hash-bow",
            "--queries",
            str(queries),
            "--split",
            "test",
            "--teacher",
            "http",
            "--teacher-base-url",
            server,
            "--teacher-model",
            "m",
            "--teacher-timeout",
            "5",
            "-o",
            str(tmp_path / "m.json"),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0
    assert out.splitlines() == [
        (
            "method metatool (teacher hypothesis, http teacher), embedder hash-bow, 3 queries, 4 gold tools, 2 "
            "rankings, 6 library tools, 1 teacher answers not a meta_tool call (their gold tools miss)"
        ),
        "alpha    HR@1    HR@3    HR@5",
        "  0.5  0.5000  0.5000  0.5000",  # q1 and q3 hit at rank 1; q2's two gold tools have no ranking
    ]
    not_json = "the teacher's hypothesis is not JSON: Expecting value: line 1 column 1 (char 0)"
    assert err == f"  no hypothesis for q2: {not_json}\n"
    queries_text = [json.loads(line)["query"] for line in queries.read_text().splitlines()[:3]]
    assert Completions.prompts == [hypothesis_prompt(text) for text in queries_text]
    summary = json.loads((tmp_path / "m.json").read_text())
    assert summary["hypothesis_failures"] == [{"id": "q2", "reason": not_json}]
