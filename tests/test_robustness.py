"""Hostile input through the real CLI: ``data validate``, ``data convert openai`` and ``data stats``
on ``broken.jsonl`` must count every line and never raise.

``broken.jsonl`` is built here (``BROKEN`` lists each line with the problem codes ``data validate``
must report for it); run ``python tests/test_robustness.py OUT.jsonl`` to write a copy by hand.
It is generated rather than committed because it holds a 5 MB line.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from train.cli import main

PARAMS = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": PARAMS}}


def call(call_id: str | None = "a", name: str = "get_weather", arguments: Any = None) -> dict:
    out: dict[str, Any] = {
        "type": "function",
        "function": {"name": name, "arguments": {"city": "Paris"} if arguments is None else arguments},
    }
    if call_id is not None:
        out["id"] = call_id
    return out


USER = {"role": "user", "content": "Weather in Paris?"}
REPLY = {"role": "assistant", "content": "Sunny."}


def turn(*calls: dict) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def result(call_id: str | None = "a", name: str = "get_weather") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": "sunny"}


def conv(rid: str, *messages: dict, tools: list | None = None) -> dict:
    return {"id": rid, "tools": [TOOL] if tools is None else tools, "messages": list(messages), "meta": {}}


def line(value: Any, ascii_only: bool = False) -> bytes:
    # ascii_only writes a lone surrogate as the escape "\\ud83d", which json.loads accepts
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"x": [value]}
    return value


GOOD = conv("good", USER, turn(call()), result(), REPLY)
DEEP = 10_000

# (label, line bytes, codes data validate reports for it); b"" lines are blank, not records.
BROKEN: list[tuple[str, bytes, list[str]]] = [
    ("valid conversation", line(GOOD), []),
    ("valid tool query", line({"id": "q", "query": "Book a table", "gold_tools": ["OpenTable"]}), []),
    ("valid tool library", line({"id": "lib", "tools": [TOOL]}), []),
    (
        "undefined tool",
        line(conv("undef", USER, turn(call(name="get_time", arguments={})), result(name="get_time"), REPLY)),
        ["undefined-tool"],
    ),
    (
        "arguments violate the schema",
        line(conv("args", USER, turn(call(arguments={"days": "3"})), result(), REPLY)),
        ["arguments-schema", "arguments-schema"],
    ),
    (
        "parameters not a JSON Schema",
        line(
            conv(
                "schema",
                USER,
                REPLY,
                tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "dict"}}}],
            )
        ),
        ["invalid-tool-schema"],
    ),
    ("duplicate tool", line(conv("dup-tool", USER, REPLY, tools=[TOOL, TOOL])), ["duplicate-tool"]),
    (
        "orphan tool result",
        line(conv("orphan", USER, turn(call()), result(), result("zzz"), REPLY)),
        ["orphan-tool-result"],
    ),
    ("unanswered call", line(conv("unanswered", USER, turn(call()), USER, REPLY)), ["unanswered-call"]),
    ("system not first", line(conv("order", USER, {"role": "system", "content": "late"}, REPLY)), ["role-order"]),
    ("no user message", line(conv("no-user", {"role": "system", "content": "s"}, REPLY)), ["role-order"]),
    ("consecutive user", line(conv("users", USER, USER, REPLY)), ["consecutive-user"]),
    ("empty assistant", line(conv("empty", USER, {"role": "assistant", "content": "  "})), ["empty-assistant"]),
    (
        "duplicate call id",
        line(conv("dup-id", USER, turn(call(), call()), result(), result(), REPLY)),
        ["duplicate-call-id"],
    ),
    (
        "lone surrogate",
        line(conv("surrogate", {"role": "user", "content": "half \ud83d"}, REPLY), ascii_only=True),
        ["text-encoding"],
    ),
    (
        "lone surrogate as raw bytes",
        line(conv("cesu", {"role": "user", "content": "half \ud83d"}, REPLY)),
        ["not-utf8"],
    ),
    (
        "NUL character",
        line(conv("nul", USER, turn(call(arguments={"city": "Pa\x00ris"})), result(), REPLY)),
        ["text-encoding"],
    ),
    (
        "replacement character",
        line(conv("fffd", {"role": "user", "content": "caf\ufffd"}, REPLY)),
        ["replacement-char"],
    ),
    (
        "result names another tool",
        line(conv("mismatch", USER, turn(call()), result(name="get_time"), REPLY)),
        ["result-name-mismatch"],
    ),
    ("empty query", line({"id": "q-empty", "query": "", "gold_tools": ["OpenTable"]}), ["empty-query"]),
    ("truncated record", line(GOOD)[:60], ["unreadable-line"]),
    (
        "truncated inside a string",
        b'{"id": "t2", "messages": [{"role": "user", "content": "unterminated',
        ["unreadable-line"],
    ),
    ("NaN", b'{"id": "nan", "messages": [], "meta": {"score": NaN}}', ["unreadable-line"]),
    (
        "integer past the digit limit",
        b'{"id": "big", "messages": [], "meta": {"n": ' + b"9" * 5000 + b"}}",
        ["unreadable-line"],
    ),
    ("BOM in the middle of the file", "\ufeff".encode() + line(GOOD), ["unreadable-line"]),
    ("deeply nested line", b"[" * DEEP + b"]" * DEEP, ["unreadable-line"]),
    (
        "deeply nested arguments",
        b'{"id": "deep", "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"type": '
        b'"function", "function": {"name": "get_weather", "arguments": '
        + b'{"x": ' * DEEP
        + b"1"
        + b"}" * DEEP
        + b"}}]}]}",
        ["unreadable-line"],
    ),
    (
        "arguments nested 400 deep (parseable)",
        line(conv("deep-ok", USER, turn(call(arguments={"city": "Paris", "x": nested(400)})), result(), REPLY)),
        [],
    ),
    ("not UTF-8", b'{"id": "latin1", "messages": [{"role": "user", "content": "caf\xe9"}]}', ["not-utf8"]),
    ("blank line", b"", []),
    ("whitespace line", b"   \t", []),
    ("JSON array", b"[1, 2, 3]", ["schema"]),
    ("JSON number", b"42", ["schema"]),
    ("JSON null", b"null", ["schema"]),
    ("JSON string", b'"messages"', ["schema"]),
    ("bool messages", line({"id": "w1", "messages": True}), ["schema"]),
    ("bool message", line({"id": "w2", "messages": [True]}), ["schema"]),
    ("int content", line({"id": "w3", "messages": [{"role": "user", "content": 7}]}), ["schema"]),
    (
        "tool calls on a user message",
        line({"id": "w4", "messages": [{"role": "user", "content": "x", "tool_calls": [call()]}]}),
        ["schema"],
    ),
    ("string arguments", line(conv("w5", USER, turn(call(arguments='{"city": "Paris"}')))), ["schema"]),
    (
        "bool parameters",
        line(conv("w6", USER, tools=[{"type": "function", "function": {"name": "f", "parameters": True}}])),
        ["schema"],
    ),
    ("unknown key", line({**GOOD, "id": "w7", "extra": 1}), ["schema"]),
    ("list meta", line({**GOOD, "id": "w8", "meta": ["a"]}), ["schema"]),
    ("int id", line({**GOOD, "id": 8}), ["schema"]),
    ("5 MB string", line(conv("huge", {"role": "user", "content": "x" * 5_000_000}, REPLY)), []),
    (
        "5 MB wrong-typed argument",
        line(conv("huge-arg", USER, turn(call(arguments={"city": "Paris", "days": "9" * 5_000_000})), result(), REPLY)),
        ["arguments-schema"],
    ),
]


def write_broken(path: Path) -> Path:
    path.write_bytes(b"".join(raw + b"\n" for _, raw, _ in BROKEN))
    return path


RECORDS = sum(1 for _, raw, _ in BROKEN if raw.strip())  # blank lines are not records
UNREADABLE = sum(1 for _, _, codes in BROKEN if set(codes) & {"not-utf8", "unreadable-line", "schema"})


@pytest.fixture(scope="module")
def broken(tmp_path_factory) -> Path:
    return write_broken(tmp_path_factory.mktemp("validate") / "broken.jsonl")


def test_validate_reports_every_line_exactly(broken, capsys):
    assert main(["data", "validate", str(broken), "--json", "--max-report", "1000"]) == 1
    document = json.loads(capsys.readouterr().out)
    by_line: dict[int, list[str]] = {}
    for report in document["reports"]:
        by_line.setdefault(report["line"], []).append(report["code"])
    expected = {n: codes for n, (_, _, codes) in enumerate(BROKEN, start=1) if codes}
    assert by_line == expected
    assert document["more"] == 0
    summary = document["summary"]
    assert (
        summary["records"],
        summary["valid"],
        summary["with_errors"],
        summary["with_warnings"],
        summary["blank_lines"],
    ) == (44, 9, 35, 4, 2)
    counts = {(p["severity"], p["code"]): p["count"] for p in summary["problems"]}
    assert counts == {
        ("error", "undefined-tool"): 1,
        ("error", "arguments-schema"): 3,
        ("error", "invalid-tool-schema"): 1,
        ("error", "duplicate-tool"): 1,
        ("error", "orphan-tool-result"): 1,
        ("warning", "unanswered-call"): 1,
        ("error", "role-order"): 2,
        ("warning", "consecutive-user"): 1,
        ("error", "empty-assistant"): 1,
        ("error", "duplicate-call-id"): 1,
        ("error", "text-encoding"): 2,
        ("warning", "replacement-char"): 1,
        ("warning", "result-name-mismatch"): 1,
        ("error", "empty-query"): 1,
        ("error", "unreadable-line"): 7,
        ("error", "not-utf8"): 2,
        ("error", "schema"): 13,
    }
    assert RECORDS == 44 and UNREADABLE == 22


def test_validate_text_report_on_broken_input(broken, capsys):
    assert main(["data", "validate", str(broken), "--max-report", "3", "--strict"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == [
        (
            f"{broken}:4 id=undef error undefined-tool at messages[1].tool_calls[0].function.name: 'get_time' is not "
            "a defined tool (defined: get_weather)"
        ),
        (
            f"{broken}:5 id=args error arguments-schema at messages[1].tool_calls[0].function.arguments: 'city' is a "
            "required property"
        ),
        (
            f"{broken}:5 id=args error arguments-schema at messages[1].tool_calls[0].function.arguments.days: '3' is "
            "not of type 'integer'"
        ),
        "... and 37 more",
    ]
    assert [line.split() for line in out[4:8]] == [
        ["records", "read", "44"],
        ["valid", "5"],
        ["with", "errors", "39"],
        ["with", "warnings", "0"],
    ]


def test_validate_report_lines_for_the_nastiest_lines(broken, capsys):
    main(["data", "validate", str(broken), "--max-report", "1000"])
    out = capsys.readouterr().out
    line_of = {label: n for n, (label, _, _) in enumerate(BROKEN, start=1)}
    for label, tail in [
        ("deeply nested line", "id=? error unreadable-line at line: invalid JSON: nested too deeply"),
        ("not UTF-8", "id=? error not-utf8 at line: not UTF-8 at byte 62"),
        ("NaN", "id=? error unreadable-line at line: invalid JSON: non-standard JSON constant NaN"),
        ("JSON array", "id=? error schema at record: expected dict, got list"),
        (
            "lone surrogate",
            "id=surrogate error text-encoding at messages[0].content: lone surrogate U+D83D at character 5",
        ),
        (
            "string arguments",
            (
                "id=w5 error schema at messages[1].tool_calls[0].function.arguments: arguments must be an object, not "
                "a JSON string"
            ),
        ),
    ]:
        assert f"{broken}:{line_of[label]} {tail}\n" in out
    huge = next(x for x in out.splitlines() if "id=huge-arg" in x)
    assert len(huge) < 400 and huge.endswith("... (5000027 chars)")


def test_convert_openai_counts_every_record(broken, tmp_path, capsys):
    if importlib.util.find_spec("train.sources.openai") is None:
        pytest.skip("train.sources.openai not written yet")
    out_path = tmp_path / "out.jsonl"
    assert main(["data", "convert", "openai", str(broken), "-o", str(out_path), "--validate"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    read, written, rejected = (int(part.split()[-1]) for part in first.split(", "))
    assert read == RECORDS == written + rejected
    assert len(out_path.read_text(encoding="utf-8").splitlines()) == written
    assert len((tmp_path / "out.rejects.jsonl").read_text(encoding="utf-8").splitlines()) == rejected
    # with --validate, convert rejects error-level problems, so what it wrote validates cleanly
    assert main(["data", "validate", str(out_path)]) == 0


def test_stats_counts_every_record(broken, capsys):
    if importlib.util.find_spec("train.commands.data.stats") is None:
        pytest.skip("train.commands.data.stats not written yet")
    assert main(["data", "stats", str(broken), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["records"] == RECORDS
    # stats reads lines as validate does, and a lone surrogate is text no record may hold: unreadable there too
    # (validate reports it as text-encoding, with its path, rather than as an unreadable line)
    assert document["unreadable"] == UNREADABLE + 1


if __name__ == "__main__":
    print(write_broken(Path(sys.argv[1] if len(sys.argv) > 1 else "broken.jsonl")))
