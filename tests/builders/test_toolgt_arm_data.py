"""Which samples each ToolGT arm trains on (``arm_data``): ``paper`` (the default; §3.2, Table 3) trains each arm on
the samples its own reasoning kept, No-Thought on the template's kept set; ``shared`` trains all three on the
samples both the template's and the CoT reasoning kept."""

from __future__ import annotations

import pytest

from train.papers.toolgt import teacher as prompts
from train.papers.toolgt.builder import ToolGTBuilder, ToolGTOptions
from train.schema import Conversation, Message, Tool, ToolCall
from train.teacher import OfflineBackend, Teacher, TeacherRequest

WEATHER = Tool(
    "get_weather",
    "Weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CITIES = {"a": "Oslo", "b": "Rome", "c": "Lima"}  # a: the CoT reasoning fails; b: the detail reasoning fails


def corpus() -> list[Conversation]:
    return [
        Conversation(
            id=name,
            tools=[WEATHER],
            messages=[
                Message(role="user", content=f"Weather in {city}?"),
                Message(role="assistant", tool_calls=[ToolCall("get_weather", {"city": city})]),
            ],
        )
        for name, city in CITIES.items()
    ]


def failing(request: TeacherRequest) -> str:
    """The offline reasoning, but without a draft call (stage 2 then finds none) for a: cot and b: detail."""
    query, template = request.context["query"], request.context["template"]
    if (template == "cot" and "Oslo" in query) or (template == "detail" and "Rome" in query):
        return "<thinking>I cannot tell.</thinking>"
    return prompts.offline_reasoning(request)


def trained_ids(arm: str, arm_data: str | None, template: str = "detail") -> tuple[list[str], dict]:
    args = {"template": template, "arm": arm, **({"arm_data": arm_data} if arm_data else {})}
    teacher = Teacher(OfflineBackend({**prompts.OFFLINE_WRITERS, prompts.REASONING_STAGE: failing}))
    builder = ToolGTBuilder(ToolGTOptions.from_args(args), seed=0, teacher=teacher)
    return [sample.meta["source_id"] for sample in builder.build(corpus())], builder.report()


@pytest.mark.parametrize(
    ("arm", "ids", "verified"),
    [("template", ["a", "c"], ["detail"]), ("none", ["a", "c"], ["detail"]), ("cot", ["b", "c"], ["cot"])],
)
def test_by_default_each_arm_trains_on_its_own_reasonings_kept_set(arm, ids, verified):
    default, report = trained_ids(arm, None)
    assert default == ids and report["verified"] == verified
    assert trained_ids(arm, "paper")[0] == ids


@pytest.mark.parametrize("arm", ["none", "cot", "template"])
def test_shared_arm_data_trains_every_arm_on_the_samples_both_reasonings_kept(arm):
    ids, report = trained_ids(arm, "shared")
    assert ids == ["c"] and report["verified"] == ["detail", "cot"]
    assert report["stages"]["detail"]["stage2"] == {"dropped: no call": 1, "passed": 2}
    assert report["stages"]["cot"]["stage2"] == {"dropped: no call": 1, "passed": 1}  # asked only for a and c


def test_no_thought_data_varies_with_the_template_only():
    """Table 3's No-Thought row changes with the template: the CoT reasoning failing on a does not drop a."""
    assert trained_ids("none", "paper", template="simple")[0] == ["a", "b", "c"]  # simple fails on nothing
    assert trained_ids("none", "paper", template="detail")[0] == ["a", "c"]
    assert trained_ids("none", "shared", template="simple")[0] == ["b", "c"]  # shared: the CoT failure drops a


def test_the_arm_and_arm_data_are_in_each_samples_meta_and_no_thought_trains_on_the_call_alone():
    [first, _] = ToolGTBuilder(
        ToolGTOptions.from_args({"arm": "none"}),
        seed=0,
        teacher=Teacher(OfflineBackend({**prompts.OFFLINE_WRITERS, prompts.REASONING_STAGE: failing})),
    ).build(corpus())
    assert first.messages[2].content == '[get_weather(city="Oslo")]'
    assert (first.meta["arm"], first.meta["arm_data"], first.meta["verified"]) == ("none", "paper", {"detail": "exact"})
