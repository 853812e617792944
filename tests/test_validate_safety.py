"""Validation that agrees with training, ends and stays on this machine (issue 24, items 4, 9, 10 and 17).

* item 4: ``data validate`` and the training build apply one rule for Meta-Tool open-world dialogues (a tool a
  meta_tool result returned is defined): ``check_conversation`` applies it itself.
* item 9: a tool's ``pattern`` with catastrophic backtracking cannot stall a record: pattern matching has a
  per-record time budget, and a record that runs out of it is rejected naming the tool, parameter and pattern.
* item 10: an input that is not a regular file (a device, a FIFO) is one ``error:`` line, not an endless read.
* item 17: a ``$ref`` outside the schema is never fetched; the record is rejected saying why.

Every test that could hang on the old code runs its command in a subprocess with a timeout.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import ClassVar

import pytest

from train.cli import main
from train.papers.metatool.special import with_retrieved_tools
from train.schema import Conversation
from train.validate import check_conversation

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
BOUND_S = 120  # far above what these commands take (seconds); the old code never ended


def bounded(*argv: str) -> subprocess.CompletedProcess:
    """``python ARGV...`` from the repository root; TimeoutExpired (a failure) past ``BOUND_S``."""
    return subprocess.run(
        [sys.executable, *argv], check=False, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=BOUND_S
    )


def tooltrain(*args: str) -> subprocess.CompletedProcess:
    return bounded("-m", "train", *args)


def record(rid: str, parameters: dict, arguments: dict, name: str = "check") -> dict:
    return {
        "id": rid,
        "tools": [{"type": "function", "function": {"name": name, "description": "d", "parameters": parameters}}],
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}],
            },
        ],
    }


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def errors(conv: dict | Conversation) -> list[tuple[str, str, str]]:
    conv = conv if isinstance(conv, Conversation) else Conversation.from_dict(conv)
    return [(p.code, p.where, p.message) for p in check_conversation(conv) if p.severity == "error"]


# ------------------------------------------------------------------ item 4: one open-world rule


def test_data_validate_accepts_exactly_what_the_metatool_training_build_accepts(tmp_path, fixtures, capsys):
    out = tmp_path / "built"
    inputs = [str(fixtures / "builders" / "dialogues.jsonl"), "glaive:train/assets/demo/glaive_sample.json"]
    options = ["holdout_fraction=0.2", "embedder=hash-bow", "pool_size=10", "--seed", "7"]
    assert main(["data", "build", "metatool", *inputs, *options, "--out-dir", str(out)]) == 0
    lines = (out / "train.jsonl").read_text(encoding="utf-8").splitlines()
    convs = [Conversation.from_dict(json.loads(line)) for line in lines]
    # the rule matters here: open-world dialogues call tools only their meta_tool results define
    assert sum(len(with_retrieved_tools(c).tools) > len(c.tools) for c in convs) >= 10
    # one more dialogue calling a tool that nothing defines: both must refuse it
    bad = json.loads(lines[0])
    bad["id"] = "calls-a-ghost"
    bad["messages"] += [
        {"role": "user", "content": "and now?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "ghost", "arguments": {}}}],
        },
    ]
    data = write_jsonl(tmp_path / "train_plus.jsonl", [*map(json.loads, lines), bad])
    capsys.readouterr()
    assert main(["data", "validate", str(data), "--json", "--max-report", "1000"]) == 1
    report = json.loads(capsys.readouterr().out)
    refused_by_validate = {r["id"] for r in report["reports"] if r["severity"] == "error"}
    # what the training build keeps (train/data/dataset.py: errors of check_conversation(with_retrieved_tools(conv)))
    everything = [*convs, Conversation.from_dict(bad)]
    refused_by_build = {
        c.id for c in everything if any(p.severity == "error" for p in check_conversation(with_retrieved_tools(c)))
    }
    assert refused_by_validate == refused_by_build == {"calls-a-ghost"}
    assert (report["summary"]["records"], report["summary"]["valid"]) == (len(lines) + 1, len(lines))
    for conv in everything:  # the build's view and the record itself are checked alike
        assert check_conversation(with_retrieved_tools(conv)) == check_conversation(conv)


def meta_dialogue(returned: dict) -> dict:
    """A user asks, the assistant calls meta_tool, the result returns ``returned``, the assistant calls it."""
    meta_params = {"type": "object", "properties": {"tool_description": {"type": "string"}}}
    return {
        "id": "open",
        "tools": [{"type": "function", "function": {"name": "meta_tool", "parameters": meta_params}}],
        "messages": [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "m0",
                        "type": "function",
                        "function": {"name": "meta_tool", "arguments": {"tool_description": "weather"}},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "m0", "name": "meta_tool", "content": json.dumps([returned])},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": 3}}}],
            },
        ],
    }


def test_a_retrieved_tool_is_checked_like_a_listed_one_and_placed_at_its_result():
    good = {"type": "object", "properties": {"city": {"type": "string"}}}
    conv = meta_dialogue({"name": "get_weather", "description": "w", "parameters": good})
    assert errors(conv) == [
        ("arguments-schema", "messages[3].tool_calls[0].function.arguments.city", "3 is not of type 'string'")
    ]
    broken = meta_dialogue({"name": "get_weather", "description": "w", "parameters": {"type": "dict"}})
    [(code, where, message)] = errors(broken)
    assert (code, where) == ("invalid-tool-schema", "messages[2].content")
    assert message.startswith("'get_weather' (returned by the meta_tool result at messages[2]): not a valid JSON")
    # a result not linked to a meta_tool call defines nothing
    unlinked = meta_dialogue({"name": "get_weather", "parameters": good})
    unlinked["messages"][2]["tool_call_id"] = "other"
    assert [e[0] for e in errors(unlinked)] == ["undefined-tool", "orphan-tool-result"]


# ------------------------------------------------------------------ item 9: bounded pattern matching

EVIL = "^(a|a)*$"  # exponential in Python's re and in regex alike
NESTED = "^(a+)+$"  # the example: exponential in re (regex optimises it away)
SUBJECT = "a" * 40 + "b"


def test_a_catastrophic_pattern_is_a_counted_reject_and_validation_ends(tmp_path):
    evil = {"type": "object", "properties": {"code": {"type": "string", "pattern": EVIL}}}
    nested = {"type": "object", "properties": {"code": {"type": "string", "pattern": NESTED}}}
    keys = {"type": "object", "patternProperties": {EVIL: {"type": "string"}}, "additionalProperties": False}
    good = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[a-z]+$"}}}
    data = write_jsonl(
        tmp_path / "evil.jsonl",
        [
            record("evil", evil, {"code": SUBJECT}),
            record("nested", nested, {"code": SUBJECT}),
            record("keys", keys, {SUBJECT: "x"}),
            record("good", good, {"code": "abc"}),
        ],
    )
    start = time.monotonic()
    result = tooltrain("data", "validate", str(data), "--json")
    assert time.monotonic() - start < 60
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert (report["summary"]["records"], report["summary"]["valid"], report["summary"]["with_errors"]) == (4, 1, 3)
    by_id = {r["id"]: r for r in report["reports"]}
    assert by_id["evil"]["code"] == "pattern-timeout"
    assert by_id["evil"]["where"] == "messages[1].tool_calls[0].function.arguments.code"
    assert by_id["evil"]["message"].startswith(f"'check': checking code against pattern {EVIL!r} ran out of the")
    assert (by_id["nested"]["code"], by_id["nested"]["message"]) == (
        "arguments-schema",
        f"{SUBJECT!r} does not match {NESTED!r}",
    )
    assert by_id["keys"]["code"] == "pattern-timeout"
    assert by_id["keys"]["where"] == "messages[1].tool_calls[0].function.arguments"


def test_the_training_builds_check_ends_on_a_catastrophic_pattern(tmp_path):
    # train/data/dataset.py refuses a conversation with check_conversation(with_retrieved_tools(conv)): same budget
    params = {"type": "object", "properties": {"code": {"type": "string", "pattern": EVIL}}}
    data = write_jsonl(tmp_path / "one.jsonl", [record("evil", params, {"code": SUBJECT})])
    script = (
        "import json, sys\n"
        "from train.schema import Conversation\n"
        "from train.papers.metatool.special import with_retrieved_tools\n"
        "from train.validate import check_conversation\n"
        "conv = Conversation.from_dict(json.loads(open(sys.argv[1]).read()))\n"
        "print(json.dumps([p.code for p in check_conversation(with_retrieved_tools(conv))]))\n"
    )
    result = bounded("-c", script, str(data))
    assert json.loads(result.stdout) == ["pattern-timeout"], result.stderr


def test_patterns_keep_their_meaning_and_other_problems_of_a_call_are_still_found():
    lookahead = {"type": "object", "properties": {"pw": {"type": "string", "pattern": r"^(?=.*\d)[a-z\d]{4,}$"}}}
    assert errors(record("r", lookahead, {"pw": "abc1"})) == []
    assert [e[0] for e in errors(record("r", lookahead, {"pw": "abcd"}))] == ["arguments-schema"]
    props = {
        "type": "object",
        "properties": {"id": {"type": "integer"}},
        "patternProperties": {"^x_": {"type": "string"}},
        "additionalProperties": False,
    }
    assert errors(record("r", props, {"id": 1, "x_a": "s"})) == []
    assert [(e[1], e[2]) for e in errors(record("r", props, {"id": 1, "x_a": 2, "y": 1}))] == [
        ("messages[1].tool_calls[0].function.arguments", "'y' does not match any of the regexes: '^x_'"),
        ("messages[1].tool_calls[0].function.arguments.x_a", "2 is not of type 'string'"),
    ]


def test_unevaluated_properties_beside_pattern_properties_is_refused_not_run_unbounded():
    params = {"type": "object", "patternProperties": {EVIL: {}}, "unevaluatedProperties": False}
    [(code, where, message)] = errors(record("r", params, {"a": 1}))  # SUBJECT as the key: re never ends
    assert (code, where) == ("invalid-tool-schema", "tools[0].function.parameters")
    assert "unevaluatedProperties with patternProperties is not supported" in message


# ------------------------------------------------------------------ item 10: devices and FIFOs


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe.jsonl"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("verb", [["data", "validate"], ["data", "stats"]])
def test_the_data_verbs_refuse_a_device_and_a_fifo(verb, fifo):
    for path, what in (("/dev/zero", "a character device"), (str(fifo), "a FIFO (named pipe)")):
        result = tooltrain(*verb, path)
        assert (result.returncode, result.stderr) == (2, f"error: {path}: is {what}, not a regular file\n")
        assert result.stdout == ""


def test_render_and_convert_refuse_a_device_and_a_fifo(tmp_path, fifo):
    out = tmp_path / "out.jsonl"
    result = tooltrain("data", "render", "/dev/zero", "--format", "chatml", "-o", str(out))
    assert (result.returncode, result.stderr) == (2, "error: /dev/zero: is a character device, not a regular file\n")
    for source in ("glaive", "xlam"):
        result = tooltrain("data", "convert", source, str(fifo), "-o", str(out))
        assert result.returncode == 2
        assert result.stderr.splitlines()[-1] == f"error: {fifo}: is a FIFO (named pipe), not a regular file"
    assert not out.exists()


def test_training_sources_refuse_a_fifo_and_a_device(fifo):
    # the training build reads data.sources through train.data.dataset.read_conversations
    script = (
        "import sys\n"
        "from train.data.dataset import BuildReport, read_conversations\n"
        "from train.sources import SourceError\n"
        "for name, path in (('glaive', sys.argv[1]), ('metatool', '/dev/zero'), ('bfcl', '/dev/zero')):\n"
        "    try:\n"
        "        list(read_conversations([{'name': name, 'inputs': [path, path][: 1 + (name != 'glaive')]}],"
        " BuildReport()))\n"
        "    except SourceError as err:\n"
        "        print(err)\n"
    )
    result = bounded("-c", script, str(fifo))
    assert result.stdout.splitlines() == [
        f"{fifo}: is a FIFO (named pipe), not a regular file",
        "/dev/zero: is a character device, not a regular file",
        "/dev/zero: is a character device, not a regular file",
    ], result.stderr


# ------------------------------------------------------------------ item 17: no remote $ref


class _Counting(http.server.BaseHTTPRequestHandler):
    requests: ClassVar[list[str]] = []

    def do_GET(self):
        type(self).requests.append(self.path)
        body = json.dumps({"type": "integer"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/schema+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def schema_server():
    _Counting.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/schema.json", _Counting.requests
    finally:
        server.shutdown()
        server.server_close()


def test_a_remote_ref_is_never_fetched_and_the_record_is_rejected(tmp_path, schema_server, capsys):
    url, requests = schema_server
    nested = {"type": "object", "properties": {"x": {"$ref": url}}}
    whole = {"$ref": url}
    data = write_jsonl(
        tmp_path / "refs.jsonl", [record("nested", nested, {"x": 1}), record("whole", whole, {"x": 1}, name="w")]
    )
    assert main(["data", "validate", str(data), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["summary"]["with_errors"] == 2
    problems = {(r["id"], r["code"], r["where"], r["message"]) for r in report["reports"]}
    reason = f"$ref {url!r} points outside the schema; only references inside it are resolved"
    assert problems == {
        ("nested", "invalid-tool-schema", "tools[0].function.parameters", f"'check': {reason}"),
        ("whole", "invalid-tool-schema", "tools[0].function.parameters", f"'w': {reason}"),
    }
    assert requests == []


def test_references_inside_the_schema_still_resolve(schema_server):
    url, requests = schema_server
    params = {
        "type": "object",
        "$defs": {"city": {"type": "string"}, "embedded": {"$id": "urn:tooltrain:day", "type": "integer"}},
        "properties": {"city": {"$ref": "#/$defs/city"}, "day": {"$ref": "urn:tooltrain:day"}},
        "default": {"$ref": url},  # a value, not a reference
    }
    assert errors(record("r", params, {"city": "Paris", "day": 3})) == []
    assert [e[1] for e in errors(record("r", params, {"city": 1, "day": "x"}))] == [
        "messages[1].tool_calls[0].function.arguments.city",
        "messages[1].tool_calls[0].function.arguments.day",
    ]
    assert requests == []
