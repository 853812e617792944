"""``tooltrain data stats`` on the real files converted by ``tooltrain data convert``: every count is
checked against a count made here straight from the source files, without tooltrain's readers."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from train.cli import main

pytestmark = pytest.mark.shared_data  # and the shared_data fixture skips them when ../shared/data is absent


def convert_then_stats(capsys, tmp_path: Path, source: str, *inputs: Path) -> dict:
    out = tmp_path / f"{source}.jsonl"
    assert main(["data", "convert", source, *map(str, inputs), "-o", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert main(["data", "stats", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["records"], report["unreadable"]) == (int(first.split()[1].rstrip(",")), 0)
    assert first.endswith("rejected 0")
    return report["conversations"]


def test_bfcl_simple(shared_data, tmp_path, capsys):
    folder = shared_data / "bfcl_v2"
    questions = [json.loads(line) for line in (folder / "BFCL_v2_simple.json").open(encoding="utf-8")]
    answers = [json.loads(line) for line in (folder / "possible_answer" / "BFCL_v2_simple.json").open(encoding="utf-8")]
    stats = convert_then_stats(
        capsys, tmp_path, "bfcl", folder / "BFCL_v2_simple.json", folder / "possible_answer" / "BFCL_v2_simple.json"
    )
    user_turns = sum(len(q["question"]) for q in questions)
    calls = sum(len(a["ground_truth"]) for a in answers)
    assert (stats["conversations"], stats["tool_calls"], calls) == (len(questions), calls, 400)
    assert stats["messages_by_role"] == {"system": 0, "user": user_turns, "assistant": len(answers), "tool": 0}
    assert stats["distinct_tools"] == len({f["name"] for q in questions for f in q["function"]}) == 370
    assert stats["distinct_called_tools"] == len({name for a in answers for call in a["ground_truth"] for name in call})
    sizes = [len(q["function"]) for q in questions]
    assert stats["tools_per_conversation"] == {
        "min": min(sizes),
        "mean": round(sum(sizes) / len(sizes), 4),
        "max": max(sizes),
    }


def test_glaive_en_demo(shared_data, tmp_path, capsys):
    path = shared_data / "glaive_toolcall_demo" / "glaive_toolcall_en_demo.json"
    records = json.loads(path.read_text(encoding="utf-8"))
    stats = convert_then_stats(capsys, tmp_path, "glaive", path)
    turns = Counter(turn["from"] for record in records for turn in record["conversations"])
    tools = [json.loads(record["tools"]) for record in records]
    assert stats["conversations"] == len(records) == 300
    assert stats["messages_by_role"] == {
        "system": 0,
        "user": turns["human"],
        "tool": turns["observation"],
        "assistant": turns["gpt"] + turns["function_call"],
    }
    # each function_call turn of the demo holds one call (json object, not a list)
    assert all(
        isinstance(json.loads(t["value"]), dict)
        for r in records
        for t in r["conversations"]
        if t["from"] == "function_call"
    )
    assert (
        (stats["tool_calls"], stats["tool_results"], stats["parallel_turns"])
        == (turns["function_call"], turns["observation"], 0)
        == (211, 211, 0)
    )
    assert stats["conversations_without_tools"] == sum(1 for t in tools if not t) == 109
    assert stats["distinct_tools"] == len({tool["name"] for ts in tools for tool in ts})
    called = [r for r in records if any(t["from"] == "function_call" for t in r["conversations"])]
    assert stats["conversations_without_tool_calls"] == len(records) - len(called)


def tool_choices(text: str) -> list[str]:
    """The names a ToolSelect row offers: "NAME = description" lines between "Tool Choices:" and "###"."""
    block = text.split("Tool Choices:", 1)[1].split("###", 1)[0]
    return [line.split(" = ", 1)[0].strip() for line in block.strip().splitlines() if line.strip()]


def test_toolselect(shared_data, tmp_path, capsys):
    folder = shared_data / "toolselect_toolverifier"
    with (folder / "train.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    stats = convert_then_stats(capsys, tmp_path, "toolselect", folder / "train.csv", folder / "tools.csv")
    called = [name for row in rows for name in re.findall(r'CALLTOOL\["([^"]+)"\]', row["text"])]
    assert stats["conversations"] == len(rows) == 555
    assert stats["tool_calls"] == len(called) == 555
    assert stats["distinct_called_tools"] == len(set(called))
    assert stats["messages_by_role"] == {"system": 0, "user": len(rows), "assistant": len(rows), "tool": 0}
    offered = [tool_choices(row["text"]) for row in rows]
    sizes = [len(names) for names in offered]
    assert stats["distinct_tools"] == len({name for names in offered for name in names}) == 173
    assert stats["tools_per_conversation"] == {
        "min": min(sizes),
        "mean": round(sum(sizes) / len(sizes), 4),
        "max": max(sizes),
    }


def test_toolbench_four_tasks(shared_data, tmp_path, capsys):
    folder = shared_data / "toolbench_sambanova_toolverifier"
    cases = {
        task: len((folder / task / "test.jsonl").read_text(encoding="utf-8").splitlines())
        for task in ("booking", "cat", "home", "weather")
    }
    apis = json.loads((folder / "sambanova.json").read_text(encoding="utf-8"))["api_list"]
    stats = convert_then_stats(capsys, tmp_path, "toolbench", folder)
    assert stats["conversations"] == sum(cases.values()) == 420
    # the golds are programs (curl lines, API setters) kept in meta, not calls of the 17 tools: no assistant turn
    assert (stats["tool_calls"], stats["assistant_turns"], stats["messages_by_role"]["user"]) == (0, 0, 420)
    assert stats["tools_per_conversation"] == {"min": len(apis), "mean": len(apis), "max": len(apis)}
    assert stats["distinct_tools"] == len(apis) == 17


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_glaive_demo_tool_call_names_match_the_source(shared_data, tmp_path, capsys, lang):
    path = shared_data / "glaive_toolcall_demo" / f"glaive_toolcall_{lang}_demo.json"
    records = json.loads(path.read_text(encoding="utf-8"))
    stats = convert_then_stats(capsys, tmp_path, "glaive", path)
    calls = [t["value"] for r in records for t in r["conversations"] if t["from"] == "function_call"]
    names = {json.loads(value)["name"] for value in calls}
    assert stats["distinct_called_tools"] == len(names)
    assert stats["conversations"] == 300
