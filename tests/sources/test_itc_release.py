"""The ITC release's rows, passed through as text (#27 item 7): the reader keeps the release's own Thoughts,
fills Fig. 17's {api_list} with the Fig. 4 records (url, method kept), and the builder's source=release neither
rewrites nor re-splits them."""

from __future__ import annotations

import json

import pytest

from train.base.records import Rejected
from train.papers.itc.builder import build
from train.sources.itc_release import read

SYSTEM = "You are an AI assistant ...\nBelow is the list of functions you can invoke (in JSON format):\n{api_list}"
RECORD = {
    "tool_name": "Google Translate",
    "tool_description": "Translate text.",
    "home_url": "https://rapidapi.com/x",
    "country": "Global",
    "api_list": [{"name": "translate1", "url": "https://google-translate.p.rapidapi.com/", "description": "t",
                  "method": "GET", "required_parameters": [{"name": "text", "type": "string", "description": ""}],
                  "optional_parameters": []}],
}  # fmt: skip
FR = 'json{"Thought": "Je vais traduire.", "Action": "[Google Translate(text=\'Bonjour\', target_lang=\'en\')]"}'
SAMPLES = [
    {"id": "a", "system": SYSTEM, "language": "fr", "split": "train",
     "conversations": [{"from": "user", "value": "Traduis Bonjour."}, {"from": "assistant", "value": FR}]},
    {"id": "b", "system": SYSTEM, "language": "en", "split": "test",
     "conversations": [{"from": "user", "value": "Translate hi."},
                       {"from": "assistant", "value": 'json{"Thought": "t", "Action": "[translate1(text=\'hi\')]"}'},
                       {"role": "Tool", "content": {"code": 200}},
                       {"from": "assistant", "value": 'json{"Thought": "done", "Action": "[]"}'}]},
    {"id": "c", "system": SYSTEM,
     "conversations": [{"from": "user", "value": "x"}, {"from": "assistant", "value": "hi"}]},
]  # fmt: skip


@pytest.fixture()
def rows(tmp_path):
    samples, apis = tmp_path / "train.json", tmp_path / "apis.json"
    samples.write_text(json.dumps(SAMPLES), encoding="utf-8")
    apis.write_text(json.dumps([RECORD]), encoding="utf-8")
    return list(read([samples, apis]))


def test_rows_pass_through_as_released(rows):
    first, second, third = rows
    assert first.messages[2].content == FR  # the release's own (French) Thought, untouched
    system = first.messages[0].content
    assert "{api_list}" not in system and json.dumps([RECORD], ensure_ascii=False) in system  # url, method kept
    assert first.meta["apis"] == ["Google Translate", "translate1"] and first.meta["turn"] == 2
    assert (first.meta["task_type"], first.meta["language"], first.meta["source"]) == ("single", "fr", "itc_release")
    assert first.tools == []
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "user", "assistant"]
    assert second.messages[3].content == '{"code":200}' and second.meta["turn"] == 4
    assert second.meta["task_type"] == "single"  # one answer with calls; the last answer is []
    assert isinstance(third, Rejected) and "json" in third.reason


def test_builder_release_mode_keeps_the_release_split_and_filters_languages(rows):
    convs = [row for row in rows if not isinstance(row, Rejected)]
    dropped: list[str] = []
    train = list(build(convs, seed=7, on_drop=dropped.append, source="release", split="train"))
    assert [c.id for c in train] == ["a"] and train[0].messages == convs[0].messages
    assert dropped == ["the release puts it in test, not train"]
    assert [c.id for c in build(convs, seed=7, source="release", split="test")] == ["b"]
    english = list(build(convs, seed=7, on_drop=dropped.append, source="release", split="train", languages="en"))
    assert english == [] and any(reason.startswith("language fr not in") for reason in dropped)


def test_builder_release_mode_refuses_other_rows():
    from train.schema import Conversation, Message

    other = Conversation(id="g", messages=[Message(role="user", content="hi")], tools=[], meta={"source": "glaive"})
    with pytest.raises(ValueError, match="itc_release"):
        list(build([other], seed=1, source="release"))
