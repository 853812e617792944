"""#27 item 8 (c): the ITC split follows builder_args.split_seed (42), not the run's seed, so a run with another
seed never trains on an API that a prebuilt test.jsonl holds out."""

from __future__ import annotations

import pytest

from train.papers.itc.builder import ITCBuilder, ITCOptions
from train.schema import Conversation, Message, Tool, ToolCall


def conversations() -> list[Conversation]:
    convs = []
    for index in range(40):
        name = f"api_{index % 10}"
        convs.append(
            Conversation(
                id=f"c{index}",
                messages=[
                    Message(role="user", content=f"Please run the tool number {index} for me today."),
                    Message(role="assistant", content="", tool_calls=[ToolCall(name, {"x": index})]),
                ],
                tools=[Tool(name=name, description="d", parameters={"type": "object", "properties": {}})],
                meta={"language": "en"},
            )
        )
    return convs


def sides(seed: int, **args) -> dict:
    return ITCBuilder(ITCOptions.from_args({"split": "all", **args}), seed).build_sides(conversations())


def test_the_split_does_not_follow_the_run_seed():
    by_seed = {seed: sides(seed) for seed in (42, 7)}
    tests = {seed: sorted(c.id for c in built["test"]) for seed, built in by_seed.items()}
    assert tests[42] == tests[7]  # the same held-out tasks
    held = {api for c in by_seed[42]["test"] for api in c.meta["apis"]}
    assert not held & {api for c in by_seed[7]["train"] for api in c.meta["apis"]}  # no test API in seed 7's training
    assert [c.id for c in by_seed[42]["test"]] == [c.id for c in by_seed[7]["test"]]  # the same test order


def test_split_seed_moves_the_split():
    first = sorted(c.id for c in sides(42)["test"])
    assert sorted(c.id for c in sides(42, split_seed=3)["test"]) != first


def test_test_fraction_one_holds_out_everything():
    built = sides(42, test_fraction=1.0)
    assert built["train"] == [] and len(built["test"]) == 40
    with pytest.raises(ValueError, match="test_fraction"):
        ITCOptions.from_args({"test_fraction": 1.5})
