"""ToolVerifier's stages routed to the paper's three models (seed 003, §2.2-2.3, A.6.4-A.6.7; issue 27 item 5):
which backend answers which stage, the exact completion prompt (A.6.7, ending ``API:``) and the chat selector's
(A.6.6), a base model's run-on call cut at ``INS:``, the selector choices (trained, gold, served) and the checks of
``backends`` in a recipe and on ``eval run --verify``'s command line."""

from __future__ import annotations

import argparse
import json

import pytest

from train.papers.toolverifier import stages
from train.papers.toolverifier import teacher as tv
from train.papers.toolverifier.verify import ToolVerifier, VerifySwitches
from train.schema import Conversation, Message, Tool
from train.teacher import routing

PARAMS = {
    "type": "object",
    "properties": {
        "lat": {"type": "string", "description": "latitude"},
        "lon": {"type": "string", "description": "longitude"},
    },
}
TOOLS = [
    Tool(name="Current Weather", description="Current weather at a place.", parameters=PARAMS),
    Tool(name="Forecast Weather", description="Weather forecast at a place.", parameters=PARAMS),
]
DEMO = tv.Demonstration(
    "Weather at latitude = 1.5, longitute = 2.5", {"lat": "1.5", "lon": "2.5"}, "curl 'w?lat=1.5&lon=2.5'"
)
CHAT = {"kind": "http", "base_url": "http://chat.invalid/v1", "model": "Llama-2-70b-chat-hf"}
BASE = {"kind": "http", "base_url": "http://base.invalid/v1", "model": "Llama-2-70b-hf", "completion": True}
PAPER_ROUTING = {
    "question": CHAT,
    "answer": CHAT,
    "verify": CHAT,
    "params": BASE,
    "params_sampled": BASE,
    "call": BASE,
}


class Recording:
    """A backend answering as the offline writers do, recording the stages it was asked."""

    def __init__(self, config):
        self.kind, self.model, self.stages = config["kind"], config.get("model", "offline"), []

    def complete(self, request):
        self.stages.append(request.stage)
        text = tv.OFFLINE_WRITERS[request.stage](request)
        return text + '\n\nINS: A user says, "next"' if request.stage == tv.CALL_STAGE else text


@pytest.fixture
def recorded(monkeypatch):
    """``make_backend`` -> ``Recording`` backends, by model name."""
    backends: dict[str, Recording] = {}

    def make(config, writers=None, version="v1"):
        return backends.setdefault(config.get("model", "offline"), Recording(config))

    monkeypatch.setattr(routing, "make_backend", make)
    monkeypatch.setattr(routing, "default_cache", lambda kind: None)
    return backends


def test_the_paper_routing_sends_each_stage_to_its_model(recorded):
    teachers = stages.make_teachers({"kind": "offline"}, PAPER_ROUTING)
    verifier = ToolVerifier(lambda instruction, tools: tools[0].name, teachers, VerifySwitches(), lambda t, i: [DEMO])
    trace = verifier.run("c1", "Weather now at lat = 3, lon = 4", TOOLS)
    assert recorded["Llama-2-70b-chat-hf"].stages[:2] == [tv.QUESTION_STAGE, tv.ANSWER_STAGE]
    assert set(recorded["Llama-2-70b-chat-hf"].stages) <= {tv.QUESTION_STAGE, tv.ANSWER_STAGE, tv.VERIFY_STAGE}
    assert recorded["Llama-2-70b-hf"].stages == [tv.PARAMS_STAGE, tv.SAMPLED_PARAMS_STAGE, tv.CALL_STAGE]
    assert recorded["offline"].stages == []  # every stage routed: the default teacher is asked nothing
    assert trace.call == "curl 'w?lat=3&lon=4'"  # the base model's run-on into the next INS: is cut
    report = teachers.report()
    assert report["stages"][tv.CALL_STAGE] == "http Llama-2-70b-hf"
    assert report["stages"][tv.QUESTION_STAGE] == "http Llama-2-70b-chat-hf"


def test_without_backends_every_stage_asks_the_one_teacher(recorded):
    teachers = stages.make_teachers({"kind": "offline"}, {})
    ToolVerifier(lambda instruction, tools: tools[0].name, teachers).run("c1", "lat = 3", TOOLS)
    assert list(recorded) == ["offline"] and tv.CALL_STAGE in recorded["offline"].stages
    assert "stages" not in teachers.report()  # one teacher: its own report, as before


def test_the_call_prompt_is_a6_7s_completion_ending_in_api():
    head = "Tool: Current Weather - Current weather at a place.\nlat (string): latitude\nlon (string): longitude"
    prompt = tv.call_prompt(head, 'How is it at "3", "4"?', ["lat", "lon"], {"lat": "3", "lon": None}, [DEMO])
    assert prompt == (
        "Tool: Current Weather - Current weather at a place.\nlat (string): latitude\nlon (string): longitude\n\n"
        'INS: A user says, "Weather at latitude = 1.5, longitute = 2.5"\nlat: 1.5\nlon: 2.5\n'
        "API: curl 'w?lat=1.5&lon=2.5'\n\n"
        'INS: A user says, "How is it at "3", "4"?"\nlat: 3\nlon: none\nAPI:'
    )
    assert tv.read_call(" curl 'a'\n\nINS: A user says, \"b\"\nlat: 1\nAPI: curl 'b'") == "curl 'a'"


def test_the_chat_selector_asks_a6_6_and_reads_a_name_back():
    asked = []
    select = stages.chat_selector(lambda user: asked.append(user) or 'The tool is "Forecast Weather".')
    assert select("Rain tomorrow?", TOOLS) == "Forecast Weather"
    assert asked == [
        "Here are the list of available tools:\n"  # noqa: ISC004 - one prompt
        "Current Weather = Current weather at a place.\nForecast Weather = Weather forecast at a place.\n"
        'A user said, "Rain tomorrow?"\n'
        "What tool to use for the above instruction? Respond with just the name of the tool"
    ]
    names = [tool.name for tool in TOOLS]
    assert stages.read_tool_name(" current weather.", names) == "Current Weather"
    assert stages.read_tool_name("I cannot tell", names) == ""


def case(case_id: str, instruction: str, gold: str) -> Conversation:
    return Conversation(id=case_id, messages=[Message(role="user", content=instruction)], meta={"gold_tool": gold})


def test_the_selector_is_the_trained_model_gold_or_a_served_one(monkeypatch, tmp_path):
    import train.teacher

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # a served selector's answers are cached: not in ~/.cache

    loaded = []
    trained = stages.make_selector({}, lambda: loaded.append(1) or "the trained selector", [], 8)
    assert (trained, loaded) == ("the trained selector", [1])
    refs = [case("a", "Rain tomorrow?", "forecast_weather"), case("b", "Now?", "current_weather")]
    gold = stages.make_selector({"selector": "gold"}, lambda: pytest.fail("MODEL loaded"), refs, 8)
    assert (gold("Rain tomorrow?", TOOLS), gold("Now?", TOOLS), gold("Unknown", TOOLS)) == (
        "Forecast Weather",
        "Current Weather",
        "",
    )
    with pytest.raises(ValueError, match="instruction has two gold tools"):
        stages.gold_selector([*refs, case("c", "Now?", "forecast_weather")])

    asked = []

    class Served:
        kind, model = "http", "selector-70b"

        def __init__(self, completion):
            self.completion = completion

        def complete(self, request):
            asked.append(request)
            return 'Thought: it is now.\nAct: CALLTOOL["Current Weather"]' if self.completion else "Current Weather"

    for completion in (True, False):
        monkeypatch.setattr(train.teacher, "make_backend", lambda config, c=completion: Served(c))
        served = stages.make_selector({"selector": {**BASE, "completion": completion}}, pytest.fail, [], 64)
        assert served("Now?", TOOLS) == "Current Weather"
    completion_request, chat_request = asked
    assert completion_request.system is None and completion_request.user.startswith("User: Now?\n###\nTool Choices:")
    assert chat_request.system == tv.SYSTEM and chat_request.user.startswith("Here are the list of available tools:")
    assert completion_request.params.max_tokens == 64 and completion_request.stage == "toolverifier.select"


@pytest.mark.parametrize(
    ("backends", "verify", "message"),
    [
        ({"colour": CHAT}, [], "--backends.colour: unknown stage; valid: selector, question, answer, params"),
        ({"selector": "gold"}, ["tool"], "selector=gold gives the tool: nothing to verify"),
        ({"selector": {"kind": "offline"}}, [], "the offline teacher cannot select a tool"),
        ({"selector": "best"}, [], "selector='best': valid: trained | gold | a teacher mapping"),
        ({"call": "base"}, [], "--backends.call='base': valid: a teacher mapping"),
        ({"verify": {**CHAT, "path": "x"}}, [], r"unknown setting(s) ['path']"),
    ],
)
def test_a_bad_backends_mapping_names_what_is_valid(backends, verify, message):
    problems = stages.backends_problems(backends, "--backends", verify)
    assert len(problems) == 1 and message in problems[0]
    assert stages.backends_problems({"selector": "gold", **PAPER_ROUTING}, "--backends", ["params"]) == []


def test_a_recipe_routes_stages_under_eval_toolbench_verify_backends():
    from train.papers.toolverifier.after_training import settings_of, toolbench_verify_problems

    routed = {"selector": "gold", "call": BASE}
    assert toolbench_verify_problems({"verify": ["params"], "backends": routed}) == []
    assert settings_of({})["backends"] == {}  # the default: one teacher for every stage, the trained selector
    [problem] = toolbench_verify_problems({"backends": routed})  # verify defaults to [tool, params]
    assert problem.startswith("eval.toolbench_verify.backends.selector=gold gives the tool: nothing to verify")


def verify_args(*argv: str) -> argparse.Namespace:
    from train.commands.eval import run as eval_run

    parser = argparse.ArgumentParser()
    eval_run.add_arguments(parser)
    return parser.parse_args(["toolbench", "tiny", "--data", "toolbench", *argv])


def test_eval_run_verify_takes_the_same_routing_as_json_or_a_file(tmp_path):
    from train.papers.toolverifier.verbs import run_verify

    routing_file = tmp_path / "routing.yaml"
    routing_file.write_text("selector: gold\ncall: {kind: http, base_url: 'http://b/v1', model: b, completion: true}\n")
    assert run_verify.problem(verify_args("--verify", "params", "--backends", str(routing_file))) is None
    assert stages.read_backends(str(routing_file))["call"]["completion"] is True
    assert run_verify.problem(verify_args("--verify", "params", "--backends", json.dumps(PAPER_ROUTING))) is None
    refused = run_verify.problem(verify_args("--verify", "tool", "--backends", '{"selector": "gold"}'))
    assert "selector=gold gives the tool" in refused
    assert "neither a JSON object nor a file" in run_verify.problem(verify_args("--verify", "none", "--backends", "x"))
    assert (
        run_verify.problem(verify_args("--backends", "{}"))
        == "--backends need --verify (tool,params, tool, params, none)"
    )
