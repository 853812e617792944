"""The toolgt builder (seed 004 §2.3) on real data: the shipped glaive sample and toolace_tiny."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from train.base.pysyntax import parse_call_list
from train.builders import BUILDERS, make_args, parse_args
from train.cli import main
from train.papers.toolgt import teacher as prompts
from train.papers.toolgt.builder import ToolGTBuilder, ToolGTOptions, build
from train.papers.toolgt.checks import equivalent, leaks
from train.schema import Conversation, Tool, ToolCall
from train.sources import get_reader
from train.teacher import OfflineBackend, ResponseCache, Teacher, TeacherRequest

ASSETS = Path(__file__).resolve().parents[2] / "train" / "assets"
INPUTS = [f"toolace:{ASSETS}/metatool_tiny/toolace_tiny.json", f"glaive:{ASSETS}/demo/glaive_sample.json"]


def real_conversations() -> list[Conversation]:
    toolace = list(get_reader("toolace")([ASSETS / "metatool_tiny" / "toolace_tiny.json"]))
    glaive = list(get_reader("glaive")([ASSETS / "demo" / "glaive_sample.json"]))
    return [c for c in [*toolace, *glaive] if isinstance(c, Conversation)]


def gold_of(sample: Conversation) -> list[ToolCall]:
    return [ToolCall(c["name"], c["arguments"]) for c in sample.meta["gold_calls"]]


def offline_teacher(writers: dict | None = None) -> Teacher:
    return Teacher(OfflineBackend({**prompts.OFFLINE_WRITERS, **(writers or {})}, prompts.OFFLINE_VERSION))


def test_every_kept_sample_regenerates_its_gold_from_its_reasoning_under_the_offline_teacher():
    conversations = real_conversations()
    for template in ("detail", "simple", "claude", "cot"):
        samples = list(build(conversations, seed=0, template=template))
        # every call turn of the 72 conversations and their 28 text answers with tools (25 have neither)
        assert len(samples) == 53 + 28
        for sample in samples:
            system, user, assistant = sample.messages
            assert system.content == prompts.train_system_prompt(sample.tools) and user.role == "user"
            assert not assistant.tool_calls and "tool_calls" not in assistant.to_dict()
            gold = gold_of(sample)
            if not gold:  # a relevance sample: its own test (tests/builders/test_toolgt_relevance.py)
                continue
            reasoning, _, answer = assistant.content.partition("</thinking>\n")
            assert reasoning.startswith("<thinking>") and answer == prompts.call_list_text(gold)  # trains on gold
            assert not leaks(reasoning)
            request = TeacherRequest(
                prompts.CALL_STAGE,
                None,
                "",
                context={"query": user.content, "tools": sample.tools, "reasoning": reasoning[len("<thinking>") :]},
            )
            regenerated = prompts.offline_call(request)
            assert regenerated.startswith("<function>[") and regenerated.endswith("]</function>")
            calls = parse_call_list(regenerated[len("<function>") : -len("</function>")], lenient=True)
            assert equivalent(calls, gold, {t.name: t for t in sample.tools})
            assert sample.meta["template"] == template and sample.meta["arm"] == "template"


def test_detail_reasoning_has_seven_numbered_steps_with_the_draft_in_step_six():
    sample = next(build(real_conversations(), seed=0, template="detail"))
    reasoning = sample.messages[2].content.split("</thinking>")[0].removeprefix("<thinking>")
    lines = reasoning.split("\n")
    assert [line.split(".")[0] for line in lines] == ["1", "2", "3", "4", "5", "6", "7"]
    assert lines[5] == '6. Draft of the function call(s): [Weather Forecast API(city="Lisbon", days=3)]'
    assert sample.messages[1].content == "What will the weather be like in Lisbon over the next 3 days?"


def test_with_shared_arm_data_the_arms_share_the_kept_query_set_and_differ_only_in_the_reasoning():
    conversations = real_conversations()

    def no_cot_draft(request: TeacherRequest) -> str:  # the CoT reasoning for Lisbon loses its draft call
        text = prompts.offline_reasoning(request)
        if request.context["template"] == "cot" and "Lisbon" in request.context["query"]:
            return text.split("\n")[0] + "</thinking>"
        return text

    arms = {}
    for arm in ("none", "cot", "template"):
        builder = ToolGTBuilder(
            ToolGTOptions.from_args({"template": "simple", "arm": arm, "arm_data": "shared"}),
            seed=0,
            teacher=offline_teacher({prompts.REASONING_STAGE: no_cot_draft}),
        )
        arms[arm] = {s.id: s for s in builder.build(conversations)}
        assert builder.report()["stages"]["cot"]["stage2"] == {"dropped: no call": 1, "passed": 80}
    assert set(arms["none"]) == set(arms["cot"]) == set(arms["template"])
    assert len(arms["none"]) == 80 and "toolace_tiny-0#2" not in arms["none"]
    for sample_id, sample in arms["none"].items():
        answer = prompts.call_list_text(gold_of(sample))
        assert sample.messages[2].content == answer  # No-Thought: the call alone
        assert arms["cot"][sample_id].messages[2].content.startswith("<thinking>Let me think step by step.")
        assert arms["template"][sample_id].messages[2].content.startswith("<thinking>First, the appropriate tool")
        assert arms["cot"][sample_id].messages[2].content.endswith("</thinking>\n" + answer)
        assert arms["template"][sample_id].messages[:2] == sample.messages[:2]


def test_the_arm_and_template_spelling_from_the_cli_and_the_checks():
    assert parse_args("toolgt", ["arm=none", "template=claude", "judge=false", "teacher.kind=offline"]) == {
        "arm": "none",
        "template": "claude",
        "judge": False,
        "teacher": {"kind": "offline"},
    }
    assert make_args("toolgt", {"arm": "cot"}).verified_templates() == ("cot",)  # arm_data=paper
    assert make_args("toolgt", {"arm": "cot", "arm_data": "shared"}).verified_templates() == ("detail", "cot")
    with pytest.raises(ValueError, match=r"unknown arm_data 'both'; valid: paper, shared"):
        make_args("toolgt", {"arm_data": "both"})
    with pytest.raises(ValueError, match=r"unknown template 'none'.*No-Thought is arm=none"):
        make_args("toolgt", {"template": "none"})
    with pytest.raises(ValueError, match=r"unknown arm 'nothought'; valid: none, cot, template"):
        make_args("toolgt", {"arm": "nothought"})
    with pytest.raises(ValueError, match=r"teacher 'http': unknown setting\(s\) \['modle'\]"):
        make_args("toolgt", {"teacher": {"kind": "http", "modle": "m"}})
    assert BUILDERS.get("toolgt").args is ToolGTOptions


def run_cli(out: Path, *args: str) -> int:
    return main(["data", "build", "toolgt", *INPUTS, *args, "--out-dir", str(out), "--seed", "7"])


def test_a_rebuild_is_byte_identical_and_the_report_counts_every_sample(tmp_path, capsys):
    assert run_cli(tmp_path / "a", "template=claude") == 0
    assert run_cli(tmp_path / "b", "template=claude") == 0
    for name in ("train.jsonl", "report.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert (report["read"], report["samples"], report["kept"]) == (72, 81, 81)
    assert report["relevance"] == {"samples": 28, "kept": 28} and report["verified"] == ["claude"]
    assert report["dropped"] == {"split: no tools and no call turn": 25} and report["decontamination"] == "not checked"
    assert report["stages"] == {"claude": {"stage1": {"passed": 81}, "stage2": {"passed": 81}, "stage3": {"exact": 81}}}
    assert "decontamination (tooltrain's own addition, not the paper's): not checked" in capsys.readouterr().out


def test_the_cache_makes_a_second_build_ask_the_backend_nothing_and_a_crashed_build_resumes(tmp_path):
    conversations = real_conversations()
    options = ToolGTOptions.from_args({"template": "detail", "arm_data": "shared"})

    class Crashing(OfflineBackend):
        def __init__(self, crash_after: int | None):
            super().__init__(prompts.OFFLINE_WRITERS, prompts.OFFLINE_VERSION)
            self.calls, self.crash_after = 0, crash_after

        def complete(self, request):
            if self.crash_after is not None and self.calls == self.crash_after:
                raise KeyboardInterrupt  # the build dies mid-way
            self.calls += 1
            return super().complete(request)

    cache = ResponseCache(tmp_path / "cache")
    with pytest.raises(KeyboardInterrupt):
        list(ToolGTBuilder(options, 0, Teacher(Crashing(30), cache)).build(conversations))
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 30 and not list((tmp_path / "cache").rglob("*.tmp"))
    resumed = Crashing(None)
    first = [s.to_dict() for s in ToolGTBuilder(options, 0, Teacher(resumed, cache)).build(conversations)]
    assert resumed.calls == 81 * 4 - 30  # 4 questions a sample (detail and cot: stages 1-2), 30 already answered
    again = Crashing(None)
    teacher = Teacher(again, cache)
    second = [s.to_dict() for s in ToolGTBuilder(options, 0, teacher).build(conversations)]
    assert again.calls == 0 and teacher.counts["cache_hits"] == 81 * 4 and second == first
    uncached = [s.to_dict() for s in build(conversations, seed=0, template="detail", arm_data="shared")]
    assert uncached == first


def test_a_cache_file_that_is_not_an_answer_is_asked_again(tmp_path):
    cache = ResponseCache(tmp_path)
    request = TeacherRequest("s", "sys", "user")
    teacher = Teacher(OfflineBackend({"s": lambda r: "fresh"}), cache)
    assert teacher.ask(request) == "fresh" and teacher.counts["backend_calls"] == 1
    [path] = list(tmp_path.rglob("*.json"))
    path.write_text("{not json", encoding="utf-8")
    assert teacher.ask(request) == "fresh" and teacher.counts["backend_calls"] == 2
    assert teacher.ask(replace(request, params=replace(request.params, temperature=0.5))) == "fresh"
    assert teacher.counts["backend_calls"] == 3  # other parameters: another question


def test_decontamination_drops_and_counts_samples_matching_an_eval_item(tmp_path):
    bfcl = tmp_path / "bfcl"
    (bfcl / "possible_answer").mkdir(parents=True)
    functions = [{"name": "x", "description": "", "parameters": {"type": "dict", "properties": {}}}]
    (bfcl / "BFCL_v2_simple.json").write_text(
        json.dumps(
            {
                "id": "simple_0",
                "question": [
                    [{"role": "user", "content": "what will the weather be like in LISBON over the next 3 days"}]
                ],
                "function": functions,
            }
        )
        + "\n"
        + json.dumps(
            {
                "id": "simple_1",
                "question": [[{"role": "user", "content": "unrelated"}]],
                "function": [
                    {
                        "name": "get_timezone",
                        "description": "",
                        "parameters": {"type": "dict", "properties": {"city": {"type": "string"}}},
                    }
                ],
            }
        )
        + "\n",
        encoding="utf-8",
    )
    (bfcl / "possible_answer" / "BFCL_v2_simple.json").write_text(
        json.dumps({"id": "simple_0", "ground_truth": [{"x": {}}]})
        + "\n"
        + json.dumps(
            {
                "id": "simple_1",
                "ground_truth": [{"get_timezone": {"city": ["Nairobi"]}}, {"get_timezone": {"city": ["Sydney"]}}],
            }
        )
        + "\n",
        encoding="utf-8",
    )
    assert run_cli(tmp_path / "out", f"decontaminate=bfcl:{bfcl}") == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["decontamination"] == {
        "origin": "tooltrain's own addition, not the paper's",
        "checked": [f"bfcl:{bfcl}"],
        "eval_items": 2,
        "eval_rejected": 0,
        "matched": {"query": 1, "calls": 1},
    }
    assert report["kept"] == 81 - 2 and report["dropped"]["decontaminated: query match an eval item"] == 1
    assert report["dropped"]["decontaminated: calls match an eval item"] == 1  # Sydney + Nairobi, in any order
    assert main(["data", "build", "toolgt", *INPUTS, "decontaminate=squad:/x", "--out-dir", str(tmp_path / "e")]) == 2


def test_the_shipped_samples_do_not_match_bfcl_v2_or_nexus(shared_data, tmp_path):
    spec = f"bfcl:{shared_data}/bfcl_v2,nexus:{shared_data}/nexusraven_v1_eval"
    assert run_cli(tmp_path / "out", f"decontaminate={spec}") == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["decontamination"]["matched"] == {"query": 0, "calls": 0}
    assert report["decontamination"]["eval_items"] == 4621 and report["kept"] == 81


# ---------------------------------------------------------------- stage 3 and the filters, by hand

WEATHER = Tool(
    "get_weather",
    "",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "default": "celsius"},
            "days": {"type": "integer"},
        },
        "required": ["city"],
    },
)


@pytest.mark.parametrize(
    ("candidate", "same"),
    [
        ('[get_weather(unit="celsius", city="Oslo", days=3)]', True),  # optional argument at its default
        ('[get_weather(city="Oslo")]', False),  # an argument of the gold missing
        ('[get_weather(days=3.0, city="Oslo")]', True),  # order of arguments; 3 == 3.0
        ('[get_weather("Oslo")]', False),  # positional: named by the schema's order, but days is missing
        ('[get_weather("Oslo", "celsius", 3)]', True),
        ('[get_weather(city="Oslo", unit="fahrenheit", days=3)]', False),  # an optional argument NOT at its default
        ('[get_weather(city="oslo", days=3)]', False),  # strings compare exactly
        ('[get_weather(city="Oslo", days=True)]', False),  # True is not 1
        ('[get_weather(city="Oslo", days=3), get_weather(city="Oslo", days=3)]', False),  # another number of calls
        ('[get_weather("Oslo", city="Oslo", days=3)]', False),  # one argument given twice
    ],
)
def test_ast_equivalence_rules(candidate, same):
    gold = [ToolCall("get_weather", {"city": "Oslo", "days": 3})]
    assert equivalent(parse_call_list(candidate), gold, {"get_weather": WEATHER}) is same


def test_parallel_calls_are_equivalent_in_any_order():
    gold = [ToolCall("get_weather", {"city": "Oslo"}), ToolCall("get_weather", {"city": "Rome"})]
    candidate = parse_call_list('[get_weather(city="Rome"), get_weather(city="Oslo", unit="celsius")]')
    assert equivalent(candidate, gold, {"get_weather": WEATHER})


def one_sample() -> list[Conversation]:
    return [c for c in real_conversations() if c.id == "toolace_tiny-0"]


def verify_with(writers: dict, judge: bool = True) -> tuple[list[Conversation], dict]:
    builder = ToolGTBuilder(ToolGTOptions.from_args({"template": "cot", "judge": judge}), 0, offline_teacher(writers))
    drops: list[str] = []
    kept = list(builder.build(one_sample(), drops.append))
    return kept, {"report": builder.report(), "drops": drops}


@pytest.mark.parametrize(
    ("phrase", "found"), [("the GROUND TRUTH says", "ground truth"), ("So The Answer Is", "the answer is")]
)
def test_reasoning_that_leaks_the_answer_is_dropped(phrase, found):
    def leaky(request):
        return prompts.offline_reasoning(request).replace("Let me think step by step.", phrase)

    kept, seen = verify_with({prompts.REASONING_STAGE: leaky})
    assert kept == [] and seen["drops"] == [f"cot stage1: leaks the answer ({found!r})"]
    assert seen["report"]["stages"]["cot"]["stage1"] == {f"dropped: leaks the answer ({found!r})": 1}


def test_a_different_call_goes_to_the_judge_and_the_sample_trains_on_the_gold():
    def other_city(request):
        return '<function>[Weather Forecast API(city="Porto", days=3)]</function>'

    kept, seen = verify_with({prompts.CALL_STAGE: other_city})  # the offline judge: TOTALLY INCORRECT
    assert kept == [] and seen["drops"] == ["cot stage3: judge says TOTALLY INCORRECT"]
    assert seen["report"]["stages"]["cot"]["stage3"] == {"dropped: judge says TOTALLY INCORRECT": 1}
    kept, seen = verify_with(
        {prompts.CALL_STAGE: other_city, prompts.JUDGE_STAGE: lambda r: "CAN REPLACE GROUND TRUTH"}
    )
    assert [s.meta["verified"] for s in kept] == [{"cot": "judge"}]
    assert kept[0].messages[2].content.endswith('\n[Weather Forecast API(city="Lisbon", days=3)]')  # the gold
    kept, seen = verify_with({prompts.CALL_STAGE: other_city}, judge=False)
    assert seen["drops"] == ["cot stage3: differs from the gold (no judge)"]


def test_stage_two_failures_are_counted_drops():
    kept, seen = verify_with({prompts.CALL_STAGE: lambda r: "I would call the weather API."})
    assert kept == [] and seen["drops"] == ["cot stage2: no <function> block"]
    kept, seen = verify_with({prompts.CALL_STAGE: lambda r: "<function>[Weather(</function>"})
    assert seen["drops"] == ["cot stage2: no readable call list"]
    kept, seen = verify_with({prompts.REASONING_STAGE: lambda r: "<thinking>I cannot tell.</thinking>"})
    assert seen["drops"] == ["cot stage2: no call"]  # no draft in the reasoning: the offline stage 2 finds no call
    kept, seen = verify_with({prompts.REASONING_STAGE: lambda r: "no tags"})
    assert seen["drops"] == ["cot stage1: no <thinking> block"]


def test_the_recipe_path_reports_each_conversation_without_a_sample_once():
    conversations = real_conversations()
    drops: list[str] = []
    samples = list(build(conversations, seed=0, on_drop=drops.append))
    assert drops == ["split: no tools and no call turn"] * 25  # glaive's chats without functions
    assert len({s.meta["source_id"] for s in samples}) + len(drops) == len(conversations) == 72


@pytest.mark.parametrize("family", ["chatml", "qwen2_5", "llama3_1", "mistral_v3"])
def test_a_built_sample_trains_and_evaluates_under_the_one_table_11_prompt(family):
    """The builder's samples and answer_style=toolgt_text agree: the sample's system message is the prompt the
    format composes for the same tools at eval time, so it renders once, as given, and train and eval prompts match."""
    from train.formats import get_format
    from train.formats.text_answers import PROMPT_OPENING as TOOLGT_PROMPT_OPENING
    from train.formats.text_answers import text_system_prompt as toolgt_system_prompt

    fmt = get_format(family, {"answer_style": "toolgt_text"})
    sample = next(iter(build(real_conversations(), seed=0, template="detail")))
    assert sample.messages[0].content == toolgt_system_prompt(sample.tools)
    text = fmt.render_text(sample)
    assert text.count(TOOLGT_PROMPT_OPENING) == 1 and sample.messages[0].content in text
    question = replace(sample, messages=sample.messages[1:2])  # the eval view: tools and a question, no prompt
    prompt = "".join(segment.text for segment in fmt.render_prompt(question, 1))
    assert toolgt_system_prompt(sample.tools) in prompt
