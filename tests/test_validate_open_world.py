"""One open-world rule, one refusal rule (issue 25, item 4): ``tooltrain data validate`` and the training build
(``train.data.dataset.build_rows``: validate, render, tokenize) accept the same open-world records and refuse the
others for the same reason, the first error ``data validate`` reports (``train.validate.refusal``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from train.cli import main
from train.data.dataset import BuildReport, build_rows
from train.formats import get_format
from train.schema import Conversation
from train.tokenizers import load_tokenizer
from train.validate import RETRIEVAL_TOOL_NAME, check_conversation, refusal

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
META_PARAMS = {"type": "object", "properties": {"tool_description": {"type": "string"}}}


def open_world(rid: str, returned: object, call: str = "get_weather", arguments: dict | None = None) -> dict:
    """Only the retrieval tool is listed; its result returns ``returned``; the assistant then calls ``call``."""
    return {
        "id": rid,
        "tools": [{"type": "function", "function": {"name": RETRIEVAL_TOOL_NAME, "parameters": META_PARAMS}}],
        "messages": [
            {"role": "user", "content": "Rain in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "m0",
                        "type": "function",
                        "function": {"name": RETRIEVAL_TOOL_NAME, "arguments": {"tool_description": "weather"}},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "m0", "content": json.dumps(returned)},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c0",
                        "type": "function",
                        "function": {"name": call, "arguments": {"city": "Paris"} if arguments is None else arguments},
                    }
                ],
            },
        ],
    }


RECORDS = [
    open_world("retrieved", WEATHER),  # defined by retrieval: valid
    open_world("retrieved-in-a-list", [{"results": [WEATHER]}]),  # the executor's layout: valid
    open_world("calls-a-ghost", WEATHER, call="ghost"),  # nothing defines it: undefined-tool
    open_world("bad-arguments", WEATHER, arguments={"town": "Paris"}),  # against the retrieved schema
    open_world("bad-retrieved-schema", {**WEATHER, "parameters": {"type": "string"}}),  # invalid-tool-schema
    {**open_world("not-a-retrieval-result", WEATHER), "tools": []},  # no retrieval tool listed: undefined twice
]


@pytest.fixture(scope="module")
def tiny():
    return load_tokenizer("tiny_chatml")


def first_errors_of_data_validate(path: Path, capsys) -> dict[str, str | None]:
    """Each record's first error as ``data validate --json`` reports it (None: the record is valid)."""
    capsys.readouterr()
    main(["data", "validate", str(path), "--json", "--max-report", "1000"])
    report = json.loads(capsys.readouterr().out)
    first: dict[str, str | None] = {record["id"]: None for record in RECORDS}
    for problem in report["reports"]:
        if problem["severity"] == "error" and first[problem["id"]] is None:
            first[problem["id"]] = f"{problem['code']} at {problem['where']}: {problem['message']}"
    return first


def test_data_validate_and_the_training_build_accept_and_refuse_the_same_open_world_records(tmp_path, capsys, tiny):
    path = tmp_path / "open_world.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    by_validate = first_errors_of_data_validate(path, capsys)
    assert {rid for rid, error in by_validate.items() if error is None} == {"retrieved", "retrieved-in-a-list"}
    assert by_validate["calls-a-ghost"].startswith("undefined-tool at messages[3].tool_calls[0].function.name")
    assert by_validate["bad-arguments"].startswith("arguments-schema at messages[3].tool_calls[0].function.arguments")
    assert by_validate["bad-retrieved-schema"].startswith(
        f"invalid-tool-schema at messages[2].content: 'get_weather' (returned by the {RETRIEVAL_TOOL_NAME} result"
    )

    convs = [Conversation.from_dict(r) for r in RECORDS]
    report = BuildReport()
    cfg = {"max_seq_len": 4096, "overlong": "drop", "eval_fraction": 0.0}
    split = build_rows(convs, get_format("chatml"), tiny, cfg, report)
    assert [row["id"] for row in split.train] == ["retrieved", "retrieved-in-a-list"]
    assert report.invalid == 4 and report.unrenderable == 0
    # the build's reasons are data validate's first errors, as the report groups them (numbers as N)
    expected = {}
    for error in by_validate.values():
        if error is not None:
            key = f"invalid: {re.sub(r'[0-9]+', 'N', error)[:160]}"
            expected[key] = expected.get(key, 0) + 1
    assert report.reasons == expected
    for conv in convs:  # the one refusal rule the build applies
        problem = refusal(conv)
        assert (str(problem) if problem else None) == by_validate[conv.id]
        assert problem == next((p for p in check_conversation(conv) if p.severity == "error"), None)


def test_the_retrieval_tool_validation_knows_is_the_one_the_metatool_wing_defines():
    from train.papers.metatool.special import META_TOOL

    assert META_TOOL.name == RETRIEVAL_TOOL_NAME
