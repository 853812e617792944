"""A.3's structural check on built Meta-Tool samples (train.papers.metatool.verify): a sample that fails it is a
counted drop with its reason in the build report; a sample that passes is kept."""

from __future__ import annotations

import copy
import json

import pytest

from train.papers.metatool.builder import MetaToolBuilder, MetaToolOptions, open_world
from train.papers.metatool.verify import sample_problem
from train.schema import Conversation


@pytest.fixture
def weather(fixtures) -> Conversation:
    line = (fixtures / "builders" / "dialogues.jsonl").read_text(encoding="utf-8").splitlines()[0]
    conv = Conversation.from_dict(json.loads(line))
    assert conv.id == "weather"
    return conv


def meta_turn(conv: Conversation) -> int:
    return next(i for i, m in enumerate(conv.messages) if any(c.name == "meta_tool" for c in m.tool_calls))


def test_a_built_open_world_sample_passes(weather):
    assert sample_problem(open_world(weather).conversation) is None


def test_a_meta_tool_call_with_an_extra_parameter_fails(weather):
    bad = open_world(weather).conversation
    bad.messages[meta_turn(bad)].tool_calls[0].arguments["extra"] = "x"
    assert sample_problem(bad) == "fails A.3's structural check (meta_tool call)"


def test_a_meta_tool_result_that_is_not_a_tool_fails(weather):
    bad = open_world(weather).conversation
    bad.messages[meta_turn(bad) + 1].content = "found it"  # so the tool called next is defined nowhere
    assert sample_problem(bad) == "fails A.3's structural check (undefined-tool)"
    listed = open_world(weather, keep_invoked=True).conversation  # the tool is listed: the result alone is wrong
    listed.messages[meta_turn(listed) + 1].content = '{"description": "no name"}'
    assert sample_problem(listed) == "fails A.3's structural check (meta_tool result is not a tool's JSON)"


def test_a_call_missing_a_required_argument_fails(weather):
    bad = copy.deepcopy(weather)
    bad.messages[1].tool_calls[0].arguments = {"unit": "celsius"}  # get_weather requires city
    assert sample_problem(bad) == "fails A.3's structural check (arguments-schema)"


def test_the_builder_drops_a_failing_sample_with_its_reason_and_keeps_a_good_one(weather, monkeypatch):
    good, other = weather, Conversation.from_dict({**weather.to_dict(), "id": "weather-bad"})
    builder = MetaToolBuilder(MetaToolOptions(holdout_fraction=0.0, rewrite=False, embedder="hash-bow"), seed=3)
    built = MetaToolBuilder.sample

    def sample(self, conv, world):  # a stage gone wrong on one dialogue: its meta_tool call takes an extra key
        out = built(self, conv, "open" if conv.id == "weather-bad" else world)
        if conv.id == "weather-bad":
            out.messages[meta_turn(out)].tool_calls[0].arguments["extra"] = "x"
        return out

    monkeypatch.setattr(MetaToolBuilder, "sample", sample)
    dropped: list[str] = []
    kept = list(builder.build([good, other], on_drop=dropped.append))
    reason = "fails A.3's structural check (meta_tool call)"
    assert [c.id for c in kept] == ["weather"]
    assert dropped == [reason]
    assert builder.report.to_dict()["skipped"] == {reason: 1}
