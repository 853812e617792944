"""ToolVerifier's verification pipeline (seed 003, §2.2-2.3): each switch changes exactly its stage, the contrastive
question is asked once per ordered pair, only differing parameters are verified, "None" unsets, and Table 1's
pooled averages."""

from __future__ import annotations

import json

import pytest

from train.papers.toolverifier import teacher as tv
from train.papers.toolverifier.verify import (
    ROWS,
    ToolVerifier,
    VerifySwitches,
    pooled_rate,
    text_selector,
    write_traces,
)
from train.schema import Tool
from train.teacher import OfflineBackend, ResponseCache, Teacher, TeacherRequest

PARAMS = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "The city name"},
        "units": {"type": "string", "description": "metric or imperial"},
        "lang": {"type": "string", "description": "The answer's language"},
    },
}
TOOLS = [
    Tool(name="current_weather", description="Current weather in a city.", parameters=PARAMS),
    Tool(name="forecast_weather", description="Weather forecast for a city.", parameters=PARAMS),
    Tool(name="cat_images", description="Get favorite cat images.", parameters={"type": "object", "properties": {}}),
]


def scripted_selector(log: list):
    """Prefers current > forecast > cats ("prefer forecast" swaps the first two); an appended verification answer
    ending in "answer is: b" picks the second of the two candidates."""

    def select(instruction: str, tools: list[Tool]) -> str:
        log.append((instruction, [t.name for t in tools]))
        if instruction.rstrip().endswith("answer is: b"):
            return tools[1].name
        order = ["current_weather", "forecast_weather", "cat_images"]
        if "prefer forecast" in instruction:
            order[:2] = order[1::-1]
        return next(name for name in order if name in {t.name for t in tools})

    return select


def scripted_teacher(stages: list, cache: ResponseCache | None = None) -> Teacher:
    def record(stage, text):
        def write(request):
            stages.append(stage)
            return text(request) if callable(text) else text

        return write

    def verify(request):
        return "None" if '"lang"' in request.user else "[imperial]"

    writers = {
        tv.QUESTION_STAGE: record("question", "Now or later?"),
        tv.ANSWER_STAGE: record("answer", "Later. Therefore, the answer is: b"),
        tv.PARAMS_STAGE: record("params", "city: Paris\nunits: metric\nlang: none"),
        tv.SAMPLED_PARAMS_STAGE: record("params_sampled", "city: Paris\nunits: imperial\nlang: fr\nINS: x"),
        tv.VERIFY_STAGE: record("verify", verify),
        tv.CALL_STAGE: record("call", lambda r: f" CALL {sorted((k, v) for k, v in r.context['values'].items())}"),
    }
    return Teacher(OfflineBackend(writers, "scripted"), cache)


def run_one(switches: VerifySwitches, instruction: str = "Weather in Paris tomorrow"):
    stages, selections = [], []
    verifier = ToolVerifier(scripted_selector(selections), scripted_teacher(stages), switches)
    return verifier.run("weather/test-0", instruction, TOOLS), stages, selections


FULL_PARAMS = {"city": "Paris", "units": "imperial", "lang": None}
FEWSHOT = {"city": "Paris", "units": "metric", "lang": None}


def test_both_switches_on_give_the_full_trace():
    trace, stages, selections = run_one(VerifySwitches(tool=True, params=True))
    assert stages == ["question", "answer", "params", "params_sampled", "verify", "verify", "call"]
    assert (trace.top1, trace.top2, trace.tool) == ("current_weather", "forecast_weather", "forecast_weather")
    assert (trace.question, trace.answer) == ("Now or later?", "Later. Therefore, the answer is: b")
    # step 5: the answer is appended to the instruction and the selector re-selects among the top-2 only
    assert selections[-1] == (
        "Weather in Paris tomorrow\nLater. Therefore, the answer is: b",
        ["current_weather", "forecast_weather"],
    )
    assert trace.params_fewshot == FEWSHOT
    assert trace.params_sampled == {"city": "Paris", "units": "imperial", "lang": "fr"}
    assert set(trace.verdicts) == {"units", "lang"}  # city agrees: not verified
    assert trace.verdicts["units"]["verdict"] == "b" and trace.verdicts["lang"]["verdict"] == "none"
    assert trace.params == FULL_PARAMS  # "None" leaves lang unset although the sampled set had "fr"
    assert trace.call == "CALL [('city', 'Paris'), ('lang', None), ('units', 'imperial')]"
    assert trace.errors == []


def test_tool_switch_off_asks_no_question_and_keeps_top1_while_parameters_are_unchanged():
    on, _, _ = run_one(VerifySwitches(tool=True, params=True))
    trace, stages, selections = run_one(VerifySwitches(tool=False, params=True))
    assert stages == ["params", "params_sampled", "verify", "verify", "call"]
    assert len(selections) == 1 and (trace.top1, trace.tool) == ("current_weather", "current_weather")
    assert (trace.top2, trace.question, trace.answer) == (None, None, None)
    assert (trace.params_fewshot, trace.params_sampled, trace.verdicts, trace.params) == (
        on.params_fewshot,
        on.params_sampled,
        on.verdicts,
        on.params,
    )


def test_params_switch_off_makes_one_set_and_no_verification_while_tool_selection_is_unchanged():
    on, _, _ = run_one(VerifySwitches(tool=True, params=True))
    trace, stages, _ = run_one(VerifySwitches(tool=True, params=False))
    assert stages == ["question", "answer", "params", "call"]
    assert (trace.top1, trace.top2, trace.question, trace.answer, trace.tool) == (
        on.top1,
        on.top2,
        on.question,
        on.answer,
        on.tool,
    )
    assert (trace.params_sampled, trace.verdicts) == (None, {})
    assert trace.params == trace.params_fewshot == FEWSHOT


def test_both_switches_off_is_top1_with_the_first_parameter_set():
    trace, stages, selections = run_one(VerifySwitches(tool=False, params=False))
    assert stages == ["params", "call"] and len(selections) == 1
    assert (trace.tool, trace.params) == ("current_weather", FEWSHOT)


def test_the_contrastive_question_is_asked_once_per_ordered_pair(tmp_path):
    stages: list = []
    cache = ResponseCache(tmp_path / "cache")
    verifier = ToolVerifier(scripted_selector([]), scripted_teacher(stages, cache), VerifySwitches(params=False))
    for n, instruction in enumerate(["Paris now", "Rome now", "prefer forecast: Oslo", "prefer forecast: Bern"]):
        verifier.run(f"weather/test-{n}", instruction, TOOLS)
    assert stages.count("question") == 2  # (current, forecast) and (forecast, current)
    assert sorted(verifier.questions) == [
        ("current_weather", "forecast_weather"),
        ("forecast_weather", "current_weather"),
    ]
    assert stages.count("answer") == 4  # answers depend on the instruction: one per item

    again: list = []  # a new run reads the questions from the teacher's on-disk cache
    second = ToolVerifier(scripted_selector([]), scripted_teacher(again, cache), VerifySwitches(params=False))
    trace = second.run("weather/test-9", "Lima now", TOOLS)
    assert again.count("question") == 0 and trace.question == "Now or later?"


def test_parameters_that_agree_are_not_verified():
    stages: list = []
    teacher = scripted_teacher(stages)
    agreeing = "city: Paris\nunits: metric\nlang: none"
    teacher.backend.writers[tv.SAMPLED_PARAMS_STAGE] = lambda r: stages.append("params_sampled") or agreeing
    trace = ToolVerifier(scripted_selector([]), teacher, VerifySwitches(tool=False)).run("w/1", "Paris", TOOLS)
    assert "verify" not in stages and trace.verdicts == {} and trace.params == FEWSHOT


@pytest.mark.parametrize(
    ("response", "verdict", "value"),
    [
        ("[imperial]", "b", "imperial"),
        ("The user said it: [metric]", "a", "metric"),
        ("[b]", "b", "imperial"),
        ("None", "none", None),
        ("[None]", "none", None),
        ("I cannot tell.", "unreadable", None),
    ],
)
def test_read_verdict(response, verdict, value):
    assert tv.read_verdict(response, "metric", "imperial") == (verdict, value)


def test_an_unreadable_verdict_keeps_the_first_set_and_says_so():
    stages: list = []
    teacher = scripted_teacher(stages)
    teacher.backend.writers[tv.VERIFY_STAGE] = lambda r: "I cannot tell."
    trace = ToolVerifier(scripted_selector([]), teacher, VerifySwitches(tool=False)).run("w/1", "Paris", TOOLS)
    assert trace.params == FEWSHOT  # units stays "metric", lang stays unset (not the sampled "fr")
    assert [v["verdict"] for v in trace.verdicts.values()] == ["unreadable", "unreadable"]


def test_a_selector_outside_the_candidates_is_an_error_in_the_trace_not_a_crash():
    teacher = scripted_teacher([])
    trace = ToolVerifier(lambda i, t: "nope", teacher).run("w/1", "Paris", TOOLS)
    assert trace.tool is None and trace.call is None
    assert trace.errors == ["top-1: the selector chose 'nope', not one of the 3 candidates"]


def test_switches_parse():
    assert VerifySwitches.parse("tool,params") == VerifySwitches(True, True)
    assert VerifySwitches.parse("params") == VerifySwitches(False, True)
    assert VerifySwitches.parse("none") == VerifySwitches(False, False)
    with pytest.raises(ValueError, match="unknown verification stage"):
        VerifySwitches.parse("tool,prams")


def test_text_selector_prompts_in_toolselect_layout_and_parses_the_act():
    prompts = []

    def complete(prompt):
        prompts.append(prompt)
        return 'Thought: it asks for the forecast.\nAct: CALLTOOL["forecast_weather"]</s>User: more'

    assert text_selector(complete)("Rain tomorrow?", TOOLS[:2]) == "forecast_weather"
    assert prompts == [
        (
            "User: Rain tomorrow?\n###\nTool Choices: current_weather = Current weather in a city.\n"
            "forecast_weather = Weather forecast for a city.\n###\n"
        )
    ]
    assert text_selector(lambda p: "no act here")("x", TOOLS) == ""


def test_offline_teacher_runs_the_whole_pipeline_and_traces_write_as_json_lines(tmp_path):
    teacher = Teacher(OfflineBackend(tv.OFFLINE_WRITERS, tv.OFFLINE_VERSION))
    demo = tv.Demonstration("Weather in Rome", {"city": "Rome", "units": None, "lang": None}, "GET /w?city=Rome")
    verifier = ToolVerifier(scripted_selector([]), teacher, demonstrations=lambda tool, item: [demo])
    traces = [verifier.run(f"w/{n}", f"Forecast for city: Oslo, units = metric #{n}", TOOLS) for n in range(3)]
    for trace in traces:
        assert trace.errors == [] and trace.question and trace.answer
        assert trace.params["city"] == "Oslo" and trace.params["units"] == "metric"
        assert trace.call == "GET /w?city=Oslo"
    assert teacher.counts["asked"] > 0 and teacher.counts["failures"] == 0
    assert write_traces(traces, tmp_path / "traces.jsonl") == 3
    rows = [json.loads(line) for line in (tmp_path / "traces.jsonl").read_text().splitlines()]
    assert rows[0]["id"] == "w/0" and set(rows[0]) >= {"top1", "top2", "question", "answer", "verdicts", "call"}


# Table 1 (per task: Weather 100, Booking 120, Home 100, Cat 100 cases) -> the paper's pooled "Average".
TABLE_1 = {
    "without verification": ((76, 82.50, 85, 82), 81.43),
    "tool selection verification only": ((84, 82.50, 85, 83), 83.57),
    "param selection verification only": ((81, 84.17, 88, 96), 87.14),
    "tool verification + param verification": ((90, 84.17, 88, 97), 89.52),
}


@pytest.mark.parametrize("row", list(TABLE_1))
def test_table_1_pooled_average(row):
    (weather, booking, home, cat), average = TABLE_1[row]
    cells = {"weather": (weather, 100), "booking": (booking, 120), "home": (home, 100), "cat": (cat, 100)}
    assert pooled_rate(cells) == average


def test_offline_pipeline_on_real_toolbench_cases_feeds_the_scorer(shared_data):
    from train.evaluation.toolbench import score_toolbench
    from train.sources.toolbench import read

    cases = [c for c in read([shared_data / "toolbench_sambanova_toolverifier"]) if c.id.endswith(("-0", "-1", "-2"))]
    assert len(cases) == 12  # three per task
    gold = {c.id: c.meta["gold_tool"] for c in cases}
    current: list[str] = []

    def selector(instruction, tools):  # the gold when offered, else the first candidate
        names = [t.name for t in tools]
        return gold[current[-1]] if gold[current[-1]] in names else names[0]

    teacher = Teacher(OfflineBackend(tv.OFFLINE_WRITERS, tv.OFFLINE_VERSION))
    verifier = ToolVerifier(selector, teacher)
    traces = []
    for case in cases:
        current.append(case.id)
        traces.append(verifier.run(case.id, case.messages[0].content, case.tools))
    assert all(t.errors == [] and t.question and t.call for t in traces)
    assert teacher.counts["failures"] == 0
    assert len(verifier.questions) == len({(t.top1, t.top2) for t in traces})  # one question per ordered pair
    scores = score_toolbench([t.to_prediction() for t in traces], [c.to_dict() for c in cases])
    assert scores["overall"]["total"] == 12 and scores["overall"]["tool_accuracy"] == 1.0


def test_offline_parameter_writer_reads_values_after_a_word_the_name_begins():
    instruction = "What will be the air quality tomorrow where longitute is 167.4 and latitude is -19.2?"
    request = TeacherRequest(
        tv.PARAMS_STAGE, tv.SYSTEM, "-", tv.GREEDY, {"instruction": instruction, "names": ["lat", "lon", "appid"]}
    )
    text = tv.offline_params(request)
    assert text == "lat: -19.2\nlon: 167.4\nappid: none"
    assert tv.read_params(text, ["lat", "lon", "appid"]) == {"lat": "-19.2", "lon": "167.4", "appid": None}


def test_run_rows_gives_each_table_1_row_as_run_would_and_selects_once():
    stages, selections = [], []
    verifier = ToolVerifier(scripted_selector(selections), scripted_teacher(stages))
    rows = verifier.run_rows("weather/test-0", "Weather in Paris tomorrow", TOOLS)
    assert list(rows) == ["none", "tool", "params", "tool,params"]
    for key, switches in ROWS.items():
        alone, _, _ = run_one(switches)
        assert rows[key].to_dict() == alone.to_dict(), key
    assert len(selections) == 3  # top-1, top-2, verified: shared by the four rows
    # each prompt once: one question and answer; both parameter sets for each of the two tools; two verifications
    # (A.6.5's question names the parameter, not the tool: both tools' identical questions are one); four calls
    assert sorted(stages) == sorted(
        ["question", "answer"] + ["params", "params_sampled"] * 2 + ["verify"] * 2 + ["call"] * 4
    )
    assert verifier.switches == VerifySwitches() and verifier._memo is None  # run_rows leaves the verifier as it was
