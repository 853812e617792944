"""``eval.toolbench_verify``: ToolVerifier's ToolBench self-verification as a run's last act (seed 003, issue 14
item 3): the key's compose-time checks, the 20 ToolBench cases the package ships, and the wiring in ``run(cfg)``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from train.engine.config import ConfigError, compose
from train.papers.toolverifier.labels import paper_label
from train.sources.toolbench import read

TOOLBENCH = Path(__file__).resolve().parents[1] / "train" / "assets" / "toolverifier_tiny" / "toolbench"


def test_the_tiny_recipe_verifies_5_cases_per_task_from_the_shipped_asset_with_the_offline_teacher():
    node = compose(["recipe=toolverifier_tiny"]).eval.toolbench_verify
    assert (node.cases_per_task, list(node.verify), dict(node.teacher), node.data) == (
        5,
        ["tool", "params"],
        {"kind": "offline"},
        "pkg://train/assets/toolverifier_tiny/toolbench",
    )
    assert not compose(["recipe=toolverifier"]).eval.toolbench_verify  # the full recipe documents it, off


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("eval.toolbench_verify.verify=[tool,param]", r"verify=\['tool', 'param'\]: .*valid: tool, params"),
        (
            "+eval.toolbench_verify.colour=red",
            (
                "eval.toolbench_verify.colour: unknown key; valid: cases_per_task, verify, teacher, backends, data, "
                "max_new_tokens"
            ),
        ),
        ("eval.toolbench_verify.cases_per_task=0", "cases_per_task must be an integer >= 1"),
        ("eval.toolbench_verify.max_new_tokens=0", "max_new_tokens must be an integer >= 1"),
        ("eval.toolbench_verify.teacher.kind=gpt", "teacher.kind='gpt': valid: offline, http, hf"),
        ("+eval.toolbench_verify.teacher.url=x", r"unknown setting\(s\) \['url'\] for kind 'offline'; valid: none"),
    ],
)
def test_a_bad_toolbench_verify_key_is_a_config_error_naming_the_valid_choices(override, message):
    with pytest.raises(ConfigError, match=message):
        compose(["recipe=toolverifier_tiny", override])


def test_the_http_teacher_and_all_cases_compose_for_the_full_recipe():
    cfg = compose(
        [
            "recipe=toolverifier",
            (
                "+eval.toolbench_verify={verify: [tool], cases_per_task: null, "
                'teacher: {kind: http, base_url: "http://localhost:8000/v1", model: m}}'
            ),
        ]
    )
    assert cfg.eval.toolbench_verify.teacher.kind == "http" and cfg.eval.toolbench_verify.cases_per_task is None


def test_the_shipped_toolbench_cases_are_5_per_task_with_all_17_tools_and_the_weather_xlsx():
    cases = list(read([TOOLBENCH]))
    assert all(not hasattr(case, "reason") for case in cases)  # no Rejected
    assert Counter(case.meta["task"] for case in cases) == {"booking": 5, "cat": 5, "home": 5, "weather": 5}
    assert {len(case.tools) for case in cases} == {17}
    assert [case.id for case in cases[:2]] == ["booking/test-0", "booking/test-1"]
    assert (TOOLBENCH / "weather" / "Tool_Documentations_weather.xlsx").is_file()
    assert sum(path.stat().st_size for path in TOOLBENCH.rglob("*") if path.is_file()) < 150_000


def test_the_shipped_cases_are_the_first_rows_of_the_shared_data_byte_for_byte(shared_data):
    source = shared_data / "toolbench_sambanova_toolverifier"
    assert (TOOLBENCH / "sambanova.json").read_bytes() == (source / "sambanova.json").read_bytes()
    for task in ("booking", "cat", "home", "weather"):
        for name in ("test.jsonl", "test.csv"):
            shipped = (TOOLBENCH / task / name).read_bytes()
            assert (source / task / name).read_bytes().startswith(shipped), (task, name)


def gold_selector():
    """Scripted: picks each case's gold tool (looked up by its instruction), so Table 2 "without" is 100%."""
    gold = {case.messages[0].content: paper_label(case.meta["gold_tool"]) for case in read([TOOLBENCH])}
    return lambda instruction, tools: gold[instruction]


TINY_RUN = [
    "recipe=toolverifier_tiny",
    "model=tiny_llama",
    "model.chat_format=toolselect_text",
    "data.sources.0.limit=8",
    "data.max_seq_len=512",
    "data.overlong=truncate",
    "data.format_options.eos_token='<|im_end|>'",
    "train.max_steps=1",
    "optim.warmup_ratio=0",  # one step: warmup would leave its lr at 0 and lora_B at zero
    "train.save_steps=100",
    "eval.at_start=false",
    "eval.benchmarks.0.limit=1",
    "eval.benchmarks.0.max_new_tokens=2",
    "eval.toolbench_verify.cases_per_task=1",
    "eval.toolbench_verify.max_new_tokens=4",
]


def test_a_completed_run_verifies_on_toolbench_and_writes_summary_traces_and_tables(
    tooltrain_cache, tmp_path, monkeypatch, capsys
):
    import train.papers.toolverifier.verify as pipeline
    from train.engine.run import run

    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tooltrain_cache))
    monkeypatch.setattr(pipeline, "text_selector", lambda complete: gold_selector())
    out = tmp_path / "run"
    result = run(compose([*TINY_RUN, f"output_dir={out}"]))
    assert result.status == "completed"
    verified = json.loads((out / "summary.json").read_text())["toolbench_verify"]
    assert (verified["cases_per_task"], verified["verify"], verified["teacher"]) == (1, "tool,params", "offline")
    metrics = verified["metrics"]
    assert sorted(metrics["rows"]) == ["none", "params", "tool", "tool,params"]
    assert {task: cell["total"] for task, cell in metrics["rows"]["none"]["tasks"].items()} == {
        "booking": 1,
        "cat": 1,
        "home": 1,
        "weather": 1,
    }
    assert metrics["selection"]["without"]["average"] == 1.0  # the scripted selector always picks the gold
    traces = [json.loads(line) for line in (out / verified["traces"]).read_text().splitlines()]
    assert [row["id"] for row in traces] == ["booking/test-0", "cat/test-0", "home/test-0", "weather/test-0"]
    assert all(set(row["rows"]) == {"none", "tool", "params", "tool,params"} for row in traces)
    assert [row["rows"]["none"]["tool_correct"] for row in traces] == [True] * 4
    printed = capsys.readouterr().out
    # the step prints Table 2; Table 1 is the paper's table, printed once, last, by the end-of-run summary
    assert "Table 2: tool selection accuracy" in printed and "Table 1: tool call success rate" not in printed
    assert "without tool verification" in printed and "100.00" in printed
    from train.engine.summary import format_summary

    summary = json.loads((out / "summary.json").read_text())
    assert summary["paper_tables"]["toolverifier"]["title"].startswith("ToolVerifier Table 1: tool call success rate")
    notes = summary["paper_tables"]["toolverifier"]["notes"]
    closing = format_summary(summary, [], out).splitlines()
    assert closing[-len(notes) :] == [f"  {note}" for note in notes]  # the summary ends with the table
    assert closing[-len(notes) - 1].startswith("  this run (tool verification+param verification)")
    assert f"4 case traces in {out / 'toolbench_verify.traces.jsonl'}" in printed


def test_the_trained_tiny_model_itself_is_the_selector_when_nothing_is_scripted(tooltrain_cache, tmp_path, monkeypatch):
    from train.engine.run import run

    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tooltrain_cache))
    out = tmp_path / "run"
    run(compose([*TINY_RUN, "eval.toolbench_verify.verify=[]", f"output_dir={out}"]))
    verified = json.loads((out / "summary.json").read_text())["toolbench_verify"]
    assert verified["verify"] == "none" and sorted(verified["metrics"]["rows"]) == ["none"]
    traces = [json.loads(line) for line in (out / "toolbench_verify.traces.jsonl").read_text().splitlines()]
    assert len(traces) == 4  # 4 new tokens of a random model: whatever it chose, each case has its trace


def test_a_missing_toolbench_folder_fails_before_any_training(tmp_path):
    from train.engine.run_dir import RunSetupError, check_inputs

    cfg = compose(["recipe=toolverifier_tiny", f"eval.toolbench_verify.data={tmp_path / 'nowhere'}"])
    with pytest.raises(RunSetupError, match=r"eval.toolbench_verify.data: .*nowhere: "):
        check_inputs(cfg)


def test_on_several_ranks_the_summary_says_why_and_names_the_command(tmp_path, capsys):
    from train.papers.toolverifier.after_training import verify_after_training

    node = {"cases_per_task": 5, "verify": ["tool"]}
    verified = verify_after_training(node, None, None, tmp_path, world_size=16)
    command = (
        f"tooltrain eval run toolbench {tmp_path} --data pkg://train/assets/toolverifier_tiny/toolbench --verify tool"
    )
    assert verified == {
        "skipped": f"not run on 16 ranks (one sequential pass over a sharded model); run it on the "
        f"saved model: {command}"
    }
    assert command in capsys.readouterr().out
    assert not (tmp_path / "toolbench_verify.traces.jsonl").exists()


def test_unreadable_toolbench_data_is_an_error_line_in_the_summary_not_a_traceback(tmp_path, capsys):
    from train.papers.toolverifier.after_training import verify_after_training

    (tmp_path / "empty").mkdir()
    verified = verify_after_training({"data": str(tmp_path / "empty")}, None, None, tmp_path, 1, gold_selector())
    assert "no task folder with a test.jsonl" in verified["error"]
    assert capsys.readouterr().out.startswith("error: eval.toolbench_verify: ")
