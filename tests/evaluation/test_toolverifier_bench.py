"""ToolVerifier on SambaNova ToolBench (seed 003, §3.1, §3.3, Tables 1-2): the paper's pooled averages, Table 1's rows
and Table 2 from one pass (scripted selector, offline teacher, real cases), the demonstrations (the weather xlsx,
leave-one-out that never shows a case its own gold), and ``tooltrain eval run toolbench MODEL --verify``."""

from __future__ import annotations

import json

import pytest

from train.cli import main as cli_main
from train.papers.toolverifier import teacher as tv
from train.papers.toolverifier.bench import (
    PAPER_TABLE_1,
    PAPER_TABLE_2,
    TASK_ORDER,
    format_tables,
    model_completer,
    paper_average,
    rows_for,
    verify_toolbench,
)
from train.papers.toolverifier.demos import (
    DemonstrationError,
    find_weather_xlsx,
    read_weather_xlsx,
    toolbench_demonstrations,
)
from train.papers.toolverifier.labels import paper_label
from train.papers.toolverifier.verify import VerifySwitches
from train.teacher import OfflineBackend, Teacher

TOOLBENCH = "toolbench_sambanova_toolverifier"

# Seed 003, Table 1 (ToolVerifier rows; columns Weather, Booking, Home, Cat as printed there) and Table 2.
SEED_TABLE_1 = {
    "none": ((76, 82.50, 85, 82), 81.43),  # 76 + 99 + 85 + 82 = 342 of 420
    "tool": ((84, 82.50, 85, 83), 83.57),  # 351
    "params": ((81, 84.17, 88, 96), 87.14),  # 366
    "tool,params": ((90, 84.17, 88, 97), 89.52),  # 376
}
SEED_TABLE_2 = {"without": ((82, 98.33, 100, 96), 94.28), "with": ((91, 98.33, 100, 97), 96.67)}


@pytest.fixture
def references(shared_data):
    from train.sources.toolbench import read

    return list(read([shared_data / TOOLBENCH]))


# ---------------------------------------------------------------- the paper's numbers


def test_the_paper_tables_are_the_seeds():
    assert TASK_ORDER == ("weather", "booking", "home", "cat")
    assert {key: (row[:4], row[4]) for key, row in PAPER_TABLE_1.items()} == SEED_TABLE_1
    assert {key: (row[:4], row[4]) for key, row in PAPER_TABLE_2.items()} == SEED_TABLE_2


@pytest.mark.parametrize("row", list(SEED_TABLE_1))
def test_table_1_average_is_the_rate_pooled_over_420_cases(row):
    tasks, average = SEED_TABLE_1[row]
    assert paper_average(tasks) == average


def test_table_2_pooled_and_the_papers_truncated_94_28():
    assert paper_average(SEED_TABLE_2["with"][0]) == 96.67  # 91 + 118 + 100 + 97 = 406 of 420
    assert paper_average(SEED_TABLE_2["without"][0]) == 94.29  # 396 of 420 = 94.2857: the paper prints 94.28


@pytest.mark.parametrize(
    ("verify", "rows"),
    [
        ("tool,params", ["none", "tool", "params", "tool,params"]),
        ("tool", ["none", "tool"]),
        ("params", ["none", "params"]),
        ("none", ["none"]),
    ],
)
def test_the_switches_choose_the_table_1_rows(verify, rows):
    assert rows_for(VerifySwitches.parse(verify)) == rows


# ---------------------------------------------------------------- one pass over real cases


def gold_selector(references, wrong_first: dict[str, str]):
    """The gold tool (the first candidate when it is not offered); for the cases in ``wrong_first`` (id -> tool) that
    tool first, the gold when the verification answer is appended (a second line) or the wrong tool is not offered."""
    by_instruction = {c.messages[0].content: c for c in references}
    asked = []

    def select(instruction, tools):
        case = by_instruction[instruction.split("\n")[0]]
        names = [t.name for t in tools]
        asked.append((case.id, len(names)))
        wrong = paper_label(wrong_first.get(case.id, ""))  # the tools are offered under the paper's labels
        if wrong in names and "\n" not in instruction:
            return wrong
        gold = paper_label(case.meta["gold_tool"])
        return gold if gold in names else names[0]

    return select, asked


def test_verify_toolbench_gives_table_1_and_table_2_from_one_pass(references):
    selector, asked = gold_selector(references, {"weather/test-1": "current_air_pollution"})
    teacher = Teacher(OfflineBackend(tv.OFFLINE_WRITERS, tv.OFFLINE_VERSION))
    metrics, traces = verify_toolbench(selector, teacher, references, VerifySwitches(), limit_per_task=2)
    assert metrics["items"] == 8 and metrics["items_per_task"] == {"booking": 2, "cat": 2, "home": 2, "weather": 2}
    assert metrics["tools_offered"] == [17]
    assert list(metrics["rows"]) == ["none", "tool", "params", "tool,params"]
    # Table 2: top-1 is wrong on weather/test-1 only; the verified choice between top-1 and top-2 is the gold
    without, with_ = metrics["selection"]["without"], metrics["selection"]["with"]
    assert without["tasks"]["weather"] == {"total": 2, "correct": 1, "rate": 0.5} and without["average"] == 7 / 8
    assert with_["tasks"]["weather"]["rate"] == 1.0 and with_["average"] == 1.0
    # Table 1: the offline teacher fills a weather demonstration's curl line with the values it reads ("latitude =
    # 81.6" in weather/test-1, not "(longitute, latitude) = (133.3, -56.7)" in test-0) and writes no Home/Booking
    # program: only weather/test-1 can succeed, and with the wrong top-1 only when the tool is verified
    none, tool = metrics["rows"]["none"], metrics["rows"]["tool"]
    assert none["tasks"]["weather"]["correct"] == 0 and tool["tasks"]["weather"]["correct"] == 1
    assert {task: cell["correct"] for task, cell in tool["tasks"].items() if task != "weather"} == {
        "booking": 0,
        "cat": 0,
        "home": 0,
    }
    assert none["average"] == 0 and tool["average"] == 1 / 8  # pooled over the 8 cases
    assert metrics["rows"]["tool,params"]["average"] == 1 / 8 and metrics["rows"]["params"]["average"] == 0
    # the selector ran once per case for all four rows: top-1 among 17, top-2 among 16, the verified pair
    assert sorted(n for _, n in asked) == sorted([17, 16, 2] * 8)
    # one trace row per case holding each row's trace and its verdicts
    assert [t["id"] for t in traces][:2] == ["booking/test-0", "booking/test-1"] and len(traces) == 8
    first = next(t for t in traces if t["id"] == "weather/test-1")
    assert list(first["rows"]) == ["none", "tool", "params", "tool,params"]
    assert first["rows"]["none"]["tool"] == "Current Air Pollution" and first["rows"]["none"]["success"] is False
    assert first["rows"]["tool"]["top2"] == "Forecast Air Pollution" and first["rows"]["tool"]["success"] is True
    assert first["rows"]["tool"]["question"] and first["rows"]["none"]["question"] is None
    assert json.loads(json.dumps(traces)) == traces  # JSON-ready


def test_tool_switch_off_asks_no_question_and_has_no_table_2_with(references):
    selector, asked = gold_selector(references, {"weather/test-1": "current_air_pollution"})
    teacher = Teacher(OfflineBackend(tv.OFFLINE_WRITERS, tv.OFFLINE_VERSION))
    metrics, traces = verify_toolbench(selector, teacher, references, VerifySwitches.parse("params"), limit_per_task=1)
    assert list(metrics["rows"]) == ["none", "params"] and list(metrics["selection"]) == ["without"]
    assert len(asked) == 4 and metrics["contrastive_questions"] == 0  # top-1 only, per case
    assert all(list(t["rows"]) == ["none", "params"] for t in traces)


def line(name: str, *cells: str) -> str:
    """A table line: the row name in 40 columns, each cell in 17, the last one unpadded."""
    return f"{name:<40}" + "".join(f"{cell:<17}" for cell in cells[:-1]) + cells[-1]


def test_format_tables_prints_table_1_and_2_beside_the_paper(references):
    selector, _ = gold_selector(references, {"weather/test-1": "current_air_pollution"})
    teacher = Teacher(OfflineBackend(tv.OFFLINE_WRITERS, tv.OFFLINE_VERSION))
    metrics, _ = verify_toolbench(selector, teacher, references, VerifySwitches.parse("tool"), limit_per_task=2)
    lines = format_tables(metrics).splitlines()
    assert lines[0] == (
        "ToolVerifier on SambaNova ToolBench (seed 003): 8 cases (weather 2, booking 2, home 2, cat 2), 17 tools "
        "offered per case, --verify tool"
    )
    assert lines[2:6] == [
        "Table 1: tool call success rate, % -- measured (paper, all 420 cases)",
        line("", "Weather", "Booking", "Home", "Cat", "Average"),
        line("without verification", "0.00 (76.00)", "0.00 (82.50)", "0.00 (85.00)", "0.00 (82.00)", "0.00 (81.43)"),
        line(
            "tool selection verification only",
            *("50.00 (84.00)", "0.00 (82.50)", "0.00 (85.00)", "0.00 (83.00)", "12.50 (83.57)"),
        ),
    ]
    assert lines[8:11] == [
        "Table 2: tool selection accuracy, % -- measured (paper)",
        line(
            "without tool verification",
            *("50.00 (82.00)", "100.00 (98.33)", "100.00 (100.00)", "100.00 (96.00)", "87.50 (94.28)"),
        ),
        line(
            "with tool verification",
            *("100.00 (91.00)", "100.00 (98.33)", "100.00 (100.00)", "100.00 (97.00)", "100.00 (96.67)"),
        ),
    ]
    assert any(line.startswith("demonstrations (§3.3): ") and "leave-one-out" in line for line in lines)


# ---------------------------------------------------------------- demonstrations


def test_the_weather_xlsx_gives_three_demonstrations_per_weather_tool(shared_data, references):
    xlsx = find_weather_xlsx([shared_data / TOOLBENCH])
    assert xlsx == shared_data / TOOLBENCH / "weather" / "Tool_Documentations_weather.xlsx"
    demos = read_weather_xlsx(xlsx, references[0].tools)
    assert sorted(demos) == sorted(t.name for t in references[0].tools[:9])  # the 9 weather tools
    assert {len(d) for d in demos.values()} == {3}
    first = demos["forecast_weather_city"][0]  # sheet API, row "Weather Forecast City"
    assert first.instruction.startswith("What's the weather forecast for the week ahead in Overland Park?")
    assert first.parameters == {"q": "overland park", "units": "metric", "mode": "json", "lang": "nl"}
    assert first.api == (
        "curl -X GET 'https://api.openweathermap.org/data/2.5/forecast?q=overland+park&appid={API_KEY}"
        "&units=metric&mode=json&lang=nl'"
    )


def test_a_bad_xlsx_is_an_error_naming_file_and_row(tmp_path, references):
    import openpyxl

    book = openpyxl.Workbook()
    book.active.title = "Other"
    book.save(tmp_path / "no_sheet.xlsx")
    with pytest.raises(DemonstrationError, match=r"no_sheet.xlsx: no sheet 'API' \(has Other\)"):
        read_weather_xlsx(tmp_path / "no_sheet.xlsx", references[0].tools)
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "API"
    sheet.append(["Name", "Description", "Instruction-1", "API-1", "Instruction-2", "API-2", "Instruction-3", "API-3"])
    sheet.append(["Weather on Mars", "?", "How is Mars?", "curl -X GET 'https://mars.invalid/'"])
    book.save(tmp_path / "unknown.xlsx")
    with pytest.raises(DemonstrationError, match=r"unknown.xlsx sheet API row 2: Name 'Weather on Mars' matches none"):
        read_weather_xlsx(tmp_path / "unknown.xlsx", references[0].tools)
    (tmp_path / "text.xlsx").write_text("not a workbook")
    with pytest.raises(DemonstrationError, match=r"text.xlsx: cannot read it as an xlsx workbook"):
        read_weather_xlsx(tmp_path / "text.xlsx", references[0].tools)


def test_leave_one_out_never_shows_a_case_its_own_gold(shared_data, references):
    demos = toolbench_demonstrations(references, find_weather_xlsx([shared_data / TOOLBENCH]))
    assert demos.unusable == []
    for case in references:
        gold, own = case.meta["gold_tool"], case.messages[0].content
        shown = demos(gold, case.id)
        assert len(shown) == 3, case.id
        assert own not in {d.instruction for d in shown}, case.id
    # 9 weather cases are word for word an xlsx demonstration of their gold tool: it is replaced, still 3 shown
    leaked = next(c for c in references if c.id == "weather/test-2")
    documented = {d.instruction for d in demos.documented[leaked.meta["gold_tool"]]}
    assert leaked.messages[0].content in documented
    shown = demos(leaked.meta["gold_tool"], leaked.id)
    assert len(shown) == 3 and len({d.instruction for d in shown} & documented) == 2


def test_leave_one_out_is_a_seeded_choice_among_the_other_cases(references):
    demos = toolbench_demonstrations(references)
    pool = {c.id for c in references if c.meta["gold_tool"] == "home_search"}
    first = demos("home_search", "home/test-0")
    assert first == demos("home_search", "home/test-0")  # deterministic
    assert first != demos("home_search", "home/test-1")  # chosen per case
    reseeded = toolbench_demonstrations(references, seed=1)
    assert first != reseeded("home_search", "home/test-0")
    instructions = {c.messages[0].content: c.id for c in references}
    assert {instructions[d.instruction] for d in first} <= pool - {"home/test-0"}
    # booking's parameters are the fields its gold program sets (the mock API's names are the tool's)
    booking = demos("booking", "booking/test-1")[0]
    assert booking.parameters["booking_type"] in ("trip tickets", "hotels", "both")
    assert booking.api.startswith("API.select_booking_type(")


# ---------------------------------------------------------------- the command


def cli(capsys, *argv):
    code = cli_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["toolbench", "tiny", "--verify", "tool,param"],
            "--verify 'tool,param': valid: tool,params, tool, params, none",
        ),
        (["toolbench", "tiny", "--verify", "both"], "--verify 'both': valid: tool,params, tool, params, none"),
        (
            ["nexus", "tiny", "--verify", "tool"],
            "--verify: ToolVerifier's self-verification is for toolbench, not nexus",
        ),
        (
            ["bfcl", "tiny", "--teacher", "http"],
            "--teacher: ToolVerifier's self-verification is for toolbench, not bfcl",
        ),
        (
            ["toolbench", "tiny", "--limit-per-task", "2"],
            "--limit-per-task need --verify (tool,params, tool, params, none)",
        ),
        (["toolbench", "tiny", "--verify", "tool", "--limit-per-task", "0"], "--limit-per-task must be >= 1"),
        (
            ["toolbench", "tiny", "--verify", "tool", "--limit", "3"],
            "--verify does not take --limit (use --limit-per-task)",
        ),
    ],
)
def test_bad_verify_options_exit_2_naming_the_valid_choices(capsys, tmp_path, argv, message):
    code, out, err = cli(capsys, "eval", "run", *argv, "--data", str(tmp_path), "-o", str(tmp_path / "m.json"))
    assert code == 2 and err.strip() == f"error: {message}" and out == ""
    assert list(tmp_path.iterdir()) == []


def test_eval_run_toolbench_verify_prints_both_tables_and_writes_metrics_and_traces(
    capsys, tmp_path, monkeypatch, shared_data, references
):
    from train.commands.eval import run as eval_run
    from train.papers.toolverifier import bench as toolverifier_bench

    gold = {c.messages[0].content: paper_label(c.meta["gold_tool"]) for c in references}

    def scripted_completer(model, tokenizer, max_new_tokens):  # the model's answer in ToolSelect's layout
        def complete(prompt):
            instruction = prompt.removeprefix("User: ").split("\n###\n")[0].split("\n")[0]
            return f'Thought: the tool for it.\nAct: CALLTOOL["{gold[instruction]}"]'

        return complete

    class Model:
        def to(self, device):
            return self

        def eval(self):
            return self

    monkeypatch.setattr(eval_run, "load", lambda *a: eval_run.LoadedModel(Model(), None, None, "scripted"))
    monkeypatch.setattr(toolverifier_bench, "model_completer", scripted_completer)
    metrics_file = tmp_path / "metrics.json"
    code, out, err = cli(
        capsys, "eval", "run", "toolbench", "scripted", "--data", str(shared_data / TOOLBENCH),
        "--verify", "tool,params", "--limit-per-task", "2", "-o", str(metrics_file),
    )  # fmt: skip
    assert code == 0, err
    assert "Table 1: tool call success rate" in out and "Table 2: tool selection accuracy" in out
    assert "tool verification+param verification" in out and "Tool_Documentations_weather.xlsx" in out
    report = json.loads(metrics_file.read_text())
    assert report["verify"] == "tool,params" and report["metrics"]["items"] == 8
    assert report["metrics"]["selection"]["with"]["average"] == 1.0
    assert report["metrics"]["demonstrations"]["documented"][0] == "current_air_pollution"
    traces = [json.loads(line) for line in (tmp_path / "metrics.traces.jsonl").read_text().splitlines()]
    assert len(traces) == 8 and all(list(t["rows"]) == ["none", "tool", "params", "tool,params"] for t in traces)


def test_model_completer_uses_the_kv_cache_and_stops_after_the_first_act():
    import torch

    from train.tokenizers.tiny import build_tiny_chatml

    tokenizer = build_tiny_chatml()
    answer = tokenizer.encode('Thought: it fits.\nAct: CALLTOOL["vote_up"]\nUser: and more', add_special_tokens=False)
    seen = {}

    class Model:  # writes ``answer`` token by token until a stopping criterion says stop
        def parameters(self):
            return iter([torch.zeros(1)])

        def generate(self, input_ids, attention_mask, generation_config, stopping_criteria):
            seen["config"], seen["prompt"] = generation_config, input_ids[0].tolist()
            ids = input_ids
            for token in answer:
                ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
                if all(criterion(ids, None) for criterion in stopping_criteria):
                    break
            return ids

    complete = model_completer(Model(), tokenizer, max_new_tokens=64)
    assert complete("User: hi\n###\n") == 'Thought: it fits.\nAct: CALLTOOL["vote_up"]'
    assert seen["config"].use_cache is True and seen["config"].do_sample is False  # a training config turns it off
    assert seen["prompt"] == tokenizer.encode("User: hi\n###\n", add_special_tokens=False)  # no BOS in tiny_chatml
