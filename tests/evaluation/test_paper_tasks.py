"""ITC, ToolBench and Nexus as generation tasks: scripted generations on the scorers' fixtures become the
scorers' prediction rows, with exact hand-computed scores (each task in its benchmark's module of
``train/evaluation/``: ``itc``, ``toolbench``, ``nexus``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from train.evaluation.generate import Generation
from train.evaluation.tasks import evaluate_generations, get_task, read_references, task_names
from train.schema import Conversation, ToolCall

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "evaluation"
FAILED = Generation(text=None, error="parse: broken")


def said(content: str | None = None, *calls: ToolCall) -> Generation:
    return Generation(text="(scripted)", content=content, tool_calls=list(calls))


def prepared(bench: str, **options):
    task = get_task(bench, options)
    conversations, rejected = read_references([FIXTURES / bench / "references.jsonl"], None, task)
    assert rejected == []
    return task, conversations, task.prepare(conversations).items


def test_itc_turns_parsed_calls_raw_answers_and_failures_into_its_rows():
    task, _, items = prepared("itc", answer="tool_calls")
    assert [(item.id, item.target) for item in items] == [("itc-en", 1), ("itc-zh", 1), ("itc-fr", 1)]
    raw = '{"Thought": "我将使用最新汇率接口。", "Action": "[latest(from=\'EUR\', to=\'USD,AUD\')]"}'
    generations = [
        said("I will translate.", ToolCall("translate1", {"text": "Hello, how are you?", "target_lang": "fr"})),
        said(raw),  # no parsed call, ITC's own answer: the scorer reads it (latest right, currencies missing)
        FAILED,  # FM fails; the French no-call gold has nothing to miss
    ]
    outcome = evaluate_generations(task, items, generations)
    assert [sorted(row) for row in outcome.predictions] == [
        ["content", "id", "tool_calls"],
        ["content", "id"],
        ["content", "id", "tool_calls"],
    ]
    assert outcome.predictions[1]["content"] == raw
    assert outcome.predictions[2]["tool_calls"] == "unparseable output (parse: broken)"
    # tools: predicted 1 + 1, gold 1 + 2 + 0, correct 2; parameters: 2 + 2 predicted, gold and correct
    assert outcome.metrics["overall"] == {"lm": 2 / 3, "fm": 2 / 3, "items": 3, "matching": "multiset"}
    assert outcome.metrics["micro"] == {
        "tool_p": 1.0,
        "tool_r": 2 / 3,
        "tool_f1": 0.8,
        "ti_p": 1.0,
        "ti_r": 1.0,
        "ti_f1": 1.0,
    }
    assert outcome.metrics["counts"]["errors"]["missing_tools"] == 1


def test_toolbench_programs_curl_lines_and_selected_tools():
    task, conversations, items = prepared("toolbench")
    assert [item.target for item in items] == [1] * 5  # a new turn after the user's request
    gold = {conv.id: conv.meta["completion"][0] for conv in conversations}
    generations = [
        said(gold["home/test-1"], ToolCall("home_search")),  # the gold program, the right tool
        said(gold["booking/test-0"].replace("Date(12, 25, 2022)", "Date(12, 26, 2022)"), ToolCall("booking")),
        said("Here you go:\n" + gold["weather/test-0"]),  # the curl line inside text; no tool selected
        FAILED,  # cat/test-0 (string comparison)
        said(gold["cat/test-8"], ToolCall("delete_image_from_favorites")),  # right request, wrong tool
    ]
    outcome = evaluate_generations(task, items, generations)
    assert outcome.predictions[0] == {"id": "home/test-1", "program": gold["home/test-1"], "tool": "home_search"}
    assert outcome.predictions[2] == {"id": "weather/test-0", "program": "Here you go:\n" + gold["weather/test-0"]}
    assert outcome.predictions[3] == {"id": "cat/test-0", "program": "unparseable output (parse: broken)"}
    verdicts = [(item["success"], item["f1"], item["tool_correct"]) for item in outcome.result["per_item"]]
    assert verdicts == [
        (True, 1.0, True),
        (False, 8 / 9, True),
        (True, 1.0, False),
        (False, 0.0, False),
        (True, 1.0, False),
    ]  # booking: 8 of its 9 fields (the return date differs)
    overall = outcome.metrics["overall"]
    assert (overall["success"], overall["success_rate"], overall["tool_accuracy"]) == (3, 0.6, 0.4)
    assert overall["unweighted_success_rate"] == (1 + 0 + 1 + 0.5) / 4
    assert overall["f1"] == pytest.approx((1 + 8 / 9 + 1 + 0 + 1) / 5, abs=1e-15)


def test_nexus_tool_calls_or_python_call_text():
    task, _, items = prepared("nexus")
    assert [item.target for item in items] == [1] * 6
    generations = [
        said("searchCPE(keywordSearch='Microsoft Exchange 2010', limit=2)"),  # text call, module prefix not needed
        said(None, ToolCall("emailrep_post", {"email": "bsheffield432@gmail.com"})),
        said("vt_get_domain_report('cloudflare.com')"),  # the required x_apikey is missing
        FAILED,
        said(""),  # no call at all
        said(None, ToolCall("hashtag", {"hashtag": "football", "raw": False})),  # raw=False is dropped, as gold's
    ]
    outcome = evaluate_generations(task, items, generations)
    assert outcome.predictions[0] == {
        "id": "cve_cpe_queries-0",
        "well_formed": True,
        "call": "searchCPE(keywordSearch='Microsoft Exchange 2010', limit=2)",
    }
    assert outcome.predictions[3] == {
        "id": "toolalpaca_queries-13-turns_2",
        "well_formed": False,
        "tool_calls": "unparseable output (parse: broken)",
    }
    assert outcome.metrics["well_formed_rate"] == 5 / 6  # the failed parse is the one answer not read
    errors = [(item["correct"], item["error"]) for item in outcome.result["per_item"]]
    assert errors == [
        (True, None),
        (True, None),
        (False, "vt_get_domain_report() missing required argument(s): 'x_apikey'"),
        (False, "tool_calls: expected a list, got str"),
        (False, "no call"),
        (True, None),
    ]
    assert outcome.metrics["tasks"]["toolllm"] == {"total": 2, "correct": 1, "accuracy": 0.5}
    assert (outcome.metrics["weighted_average"], outcome.metrics["unweighted_average"]) == (0.5, 0.5)
    toolgt = outcome.metrics["toolgt"]  # of ToolGT's 8 tasks, only cve_cpe and virustotal are V1 files
    assert toolgt["tasks"] == {
        "NVDLibrary": {"accuracy": 1.0, "correct": 1, "total": 1},
        "VirusTotal": {"accuracy": 0.0, "correct": 0, "total": 1},
    }
    # W weighs the two by ToolGT's task sizes (78, 151), U is their plain mean
    assert (toolgt["weighted_average"], toolgt["unweighted_average"]) == (78 / 229, 0.5)
    assert toolgt["missing"] == ["Places", "Climate", "OTX", "VT-nested", "VT-parallel", "CVECPE"]
    assert toolgt["note"].startswith("only NVDLibrary (cve_cpe) and VirusTotal (virustotal) of ToolGT's 8 Nexus")


def test_targets_and_unusable_references():
    request = Conversation.from_dict({"id": "q", "messages": [{"role": "user", "content": "hi"}]})
    assert get_task("toolbench").target(request) == 1
    assert get_task("nexus").prepare([request]).skipped == [{"id": "q", "reason": "no assistant message to score"}]
    skipped = get_task("itc").prepare([request]).skipped
    assert skipped == [{"id": "q", "reason": "messages: no assistant answer holds the gold Thought/Action"}]
    assert {"itc", "toolbench", "nexus"} <= set(task_names())


def test_toolbench_reads_its_own_folder(shared_data):
    task = get_task("toolbench")
    conversations, rejected = read_references([shared_data / "toolbench_sambanova_toolverifier"], None, task)
    assert (len(conversations), rejected) == (420, [])
    assert len(conversations[0].tools) == 17 and task.prepare(conversations[:1]).items[0].target == 1


ITC_TEXT_REFERENCE = {
    "id": "itc-text",
    "tools": [],
    "messages": [
        {"role": "system", "content": "You are an advanced AI assistant with expertise in: ..."},
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": 'json{"Thought": "I will check.", "Action": "[weather(city=\'Paris\')]"}'},
    ],
    "meta": {"language": "en", "task_type": "single"},
}


def test_itc_scores_the_text_the_model_wrote_by_default():
    """answer=text (the default): the row is the model's text; FM is that text parsing as the ITC answer, the
    calls are its Action. Calls a chat format parsed out of native call tags are not the ITC answer."""
    task = get_task("itc")
    items = task.prepare([Conversation.from_dict({**ITC_TEXT_REFERENCE, "id": f"t{i}"}) for i in range(5)]).items
    assert [item.target for item in items] == [2] * 5
    right = '{"Thought": "I will check.", "Action": "[weather(city=\'Paris\')]"}'
    tagged = '<tool_call>{"name": "weather", "arguments": {"city": "Paris"}}</tool_call>'
    generations = [
        said(right),
        Generation(text=tagged, content="", tool_calls=[ToolCall("weather", {"city": "Paris"})]),  # native calls
        Generation(text=right, content=None, error="parse: not a tool call"),  # the format failed, the text is ITC's
        said('{"Thought": "I will check.", "Action": "weather for Paris"}'),  # Action not a call list
        Generation(text=None, error="prompt: cannot render"),
    ]
    outcome = evaluate_generations(task, items, generations)
    assert outcome.predictions == [
        {"id": "t0", "content": right},
        {"id": "t1", "content": tagged},
        {"id": "t2", "content": right},
        {"id": "t3", "content": '{"Thought": "I will check.", "Action": "weather for Paris"}'},
        {"id": "t4", "content": None, "error": "prompt: cannot render"},
    ]
    rows = outcome.result["per_item"]
    assert [(row["format_ok"], row["correct"]) for row in rows] == [
        (True, True),
        (False, False),
        (True, True),
        (False, False),
        (False, False),
    ]
    assert rows[4]["error"] == "prompt: cannot render"
    assert outcome.metrics["overall"]["fm"] == 2 / 5 and outcome.metrics["macro"]["tool_f1"] == 2 / 5
    assert outcome.metrics["by_task_type"]["single"]["items"] == 5


def test_itc_task_options():
    from train.evaluation.tasks import TaskError

    assert get_task("itc", {"matching": "seal", "answer": "tool_calls", "languages": "en,zh"}).languages == ("en", "zh")
    assert get_task("itc").option_problems({"matching": "exact", "answer": "calls"}) == [
        "option 'answer' must be one of text, tool_calls, got 'calls'",
        "option 'matching' must be one of multiset, seal, got 'exact'",
    ]
    with pytest.raises(TaskError, match="option 'matching' must be one of multiset, seal, got 'exact'"):
        get_task("itc", {"matching": "exact"})
    with pytest.raises(TaskError, match="option 'languages': langid does not know language code"):
        get_task("itc", {"languages": "en,qq"})
    task = get_task("itc", {"matching": "seal"})
    items = task.prepare([Conversation.from_dict(ITC_TEXT_REFERENCE)]).items
    repeated = '{"Thought": "t", "Action": "[weather(city=\'Paris\'), weather(city=\'Paris\')]"}'
    outcome = evaluate_generations(task, items, [said(repeated)])
    assert outcome.metrics["overall"]["matching"] == "seal" and outcome.metrics["micro"]["tool_r"] == 2.0
