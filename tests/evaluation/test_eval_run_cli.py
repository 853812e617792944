"""``tooltrain eval run``, the tasks behind it, and the held-out scorer (``tooltrain eval score heldout``).

The tasks are checked with scripted generations (exact prediction rows and verdicts); the command runs
the tiny recipe's model: a finished 2-step run (its adapter on its base model, its own eval split), the
named base model, and BFCL's own files through the bfcl reader.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from train.cli import main as cli_main
from train.evaluation.generate import Generation
from train.evaluation.tasks import EvalItem, evaluate_generations, flat_metrics, get_task, read_references
from train.schema import Conversation, ToolCall

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "evaluation"
HELDOUT = FIXTURES / "heldout"
BFCL_FILES = [FIXTURES / "eval_run" / name / "BFCL_v3_simple_python.json" for name in (".", "possible_answer")]


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---- the held-out scorer ------------------------------------------------------------------------


def test_heldout_scorer_table_and_issues(capsys):
    code, out, _ = cli(
        capsys,
        "eval",
        "score",
        "heldout",
        "--predictions",
        str(HELDOUT / "predictions.jsonl"),
        "--references",
        str(HELDOUT / "references.jsonl"),
    )
    assert code == 0
    # h1: the last call turn, right (key order, 1 == 1.0); h2: no call, right; h3: meta.turn picks a text turn, a call
    # is wrong; h4: names right, one argument wrong; h6: no prediction; h7: a parse error; h5 has no assistant turn.
    assert (
        out
        == f"""\
heldout: 6 items scored from {HELDOUT}/predictions.jsonl against {HELDOUT}/references.jsonl
overall           value
exact_match      0.3333
name_accuracy    0.5000
valid_call_rate  0.5000
correct               2
total                 6
parse_errors          1

by_kind  exact_match  name_accuracy  valid_call_rate  correct  total
call          0.2500         0.5000           0.5000        1      4
no_call       0.5000         0.5000                -        1      2

references without a prediction (scored wrong): 1
  {HELDOUT}/references.jsonl:6: id 'h6'
predictions without a reference (not scored): 1
  {HELDOUT}/predictions.jsonl:6: id 'zz'
references the scorer cannot use (not scored): 1
  {HELDOUT}/references.jsonl:5: id 'h5': no assistant message to score
"""
    )


def test_heldout_per_item_verdicts():
    from train.evaluation.heldout import score_heldout

    read = lambda path: [json.loads(line) for line in path.open(encoding="utf-8")]
    result = score_heldout(read(HELDOUT / "predictions.jsonl"), read(HELDOUT / "references.jsonl"))
    verdicts = {
        item["id"]: (item["kind"], item["exact"], item["names"], item["valid_call"], item["error"])
        for item in result["per_item"]
    }
    assert verdicts == {
        "h1": ("call", True, True, True, None),
        "h2": ("no_call", True, True, None, None),
        "h3": ("no_call", False, False, None, None),
        "h4": ("call", False, True, True, None),  # wrong arguments, but calls a tool runtime would run
        "h6": ("call", False, False, False, "missing prediction"),
        "h7": ("call", False, False, False, "parse: qwen2_5 tool call 0: missing </tool_call>"),
    }


def test_valid_call_rate_counts_calls_to_defined_tools_with_schema_valid_arguments():
    from train.evaluation.heldout import invalid_call_reason, score_heldout

    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
    call = {"id": "c0", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
    reference = {
        "tools": [tool],
        "messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "tool_calls": [call]}],
        "meta": {},
    }
    written = {
        "right": [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
        "wrong_city": [{"name": "get_weather", "arguments": {"city": "Rome"}}],  # valid, not exact
        "bad_type": [{"name": "get_weather", "arguments": {"city": 7}}],
        "missing_arg": [{"name": "get_weather", "arguments": {}}],
        "unknown_tool": [{"name": "get_forecast", "arguments": {"city": "Oslo"}}],
        "no_call": [],
    }
    result = score_heldout(
        [{"id": key, "content": None, "tool_calls": calls, "error": None} for key, calls in written.items()],
        [{"id": key, **reference} for key in written],
    )
    assert {item["id"]: item["valid_call"] for item in result["per_item"]} == {
        "right": True,
        "wrong_city": True,
        "bad_type": False,
        "missing_arg": False,
        "unknown_tool": False,
        "no_call": False,
    }
    assert result["overall"]["valid_call_rate"] == 2 / 6 and result["by_kind"]["no_call"]["valid_call_rate"] is None
    from train.evaluation.calls import Call

    assert invalid_call_reason([Call("get_weather", {"city": 7})], [tool]) == (
        "tool_calls[0].function.arguments.city: 7 is not of type 'string'"
    )
    assert invalid_call_reason([Call("get_forecast", {})], [tool]) == (
        "tool_calls[0].function.name: 'get_forecast' is not a defined tool (defined: get_weather)"
    )
    assert invalid_call_reason([Call("anything", {})], []) is None  # no tools to check against
    assert invalid_call_reason([], [tool]) == "no call written"


# ---- tasks: prompts from references, generations into scorer rows ---------------------------------


def generated(calls: list[ToolCall] | None = None, content: str | None = None, error: str | None = None) -> Generation:
    return Generation(text="(scripted)", content=content, tool_calls=calls or [], error=error)


def test_bfcl_task_reads_bfcls_own_files_and_scores_decoded_calls():
    task = get_task("bfcl")
    conversations, rejected = read_references(BFCL_FILES, None, task)  # not canonical: the bfcl reader
    assert rejected == [] and [c.id for c in conversations] == ["mini_0", "mini_1"]
    items = task.prepare(conversations).items
    assert [(item.id, item.target) for item in items] == [("mini_0", 1), ("mini_1", 1)]  # the reader's gold turn
    gold = [conv.messages[1].tool_calls for conv in conversations]
    outcome = evaluate_generations(task, items, [generated(gold[0]), generated(error="parse: broken")])
    assert outcome.predictions == [
        {
            "id": "mini_0",
            "result": [{"get_weather": {"city": "San Francisco", "unit": "celsius"}}],
            "well_formed": True,
        },
        {"id": "mini_1", "result": "parse: broken", "well_formed": False},  # BFCL's decode-failure form
    ]
    assert outcome.metrics == {
        "overall": {"accuracy": 0.5, "correct": 1, "total": 2},
        "by_category": {"simple_python": {"accuracy": 0.5, "correct": 1, "total": 2}},
        "well_formed_rate": 0.5,  # the answers the format read back
    }
    assert [item["error_type"] for item in outcome.result["per_item"]] == ["", "ast_decoder:decoder_failed"]
    assert flat_metrics(outcome.metrics, "eval/bfcl/") == {
        "eval/bfcl/accuracy": 0.5,
        "eval/bfcl/correct": 1,
        "eval/bfcl/total": 2,
        "eval/bfcl/by_category/simple_python/accuracy": 0.5,
        "eval/bfcl/by_category/simple_python/correct": 1,
        "eval/bfcl/by_category/simple_python/total": 2,
        "eval/bfcl/well_formed_rate": 0.5,
    }


def test_bfcl_questions_without_answers_get_a_new_turn_and_multi_turn_ones_are_skipped():
    task = get_task("bfcl")
    question = Conversation.from_dict(
        {
            "id": "irr_0",
            "messages": [{"role": "user", "content": "Hi"}],
            "meta": {"category": "irrelevance", "bfcl_functions": []},
        }
    )
    multi = Conversation.from_dict(
        {
            "id": "mt_0",
            "messages": [{"role": "user", "content": "Hi"}],
            "meta": {"category": "multi_turn_base", "bfcl_functions": [], "question_turns": [1]},
        }
    )
    prepared = task.prepare([question, multi])
    assert [(item.id, item.target) for item in prepared.items] == [("irr_0", 1)]
    reason = "not a single-turn BFCL question (multi-turn and agentic categories need BFCL's executors)"
    assert prepared.skipped == [{"id": "mt_0", "reason": reason}]
    outcome = evaluate_generations(task, prepared.items, [generated(content="I cannot help with that.")])
    assert outcome.predictions == [{"id": "irr_0", "result": [], "well_formed": True}]
    assert outcome.metrics["overall"] == {"accuracy": 1.0, "correct": 1, "total": 1}  # no call: right for irrelevance


def test_metabench_and_toolselect_score_a_failed_generation_as_a_malformed_prediction():
    call = {"id": "call_0", "type": "function", "function": {"name": "Book Review", "arguments": {}}}
    conv = Conversation.from_dict(
        {
            "id": "t1",
            "tools": [{"type": "function", "function": {"name": "Book Review"}}],
            "messages": [
                {"role": "user", "content": "Review Dune."},
                {"role": "assistant", "content": "Thought: books.", "tool_calls": [call]},
            ],
            "meta": {"gold_tool": "Book Review", "category": "single_call"},
        }
    )
    right, failed = generated([ToolCall(name="Book Review")]), generated(error="parse: bad")
    toolselect = get_task("toolselect")
    items = [EvalItem("t1", conv, 1)]
    malformed = "unparseable output (parse: bad)"
    assert toolselect.prediction(items[0], failed) == {"id": "t1", "content": None, "tool_calls": malformed}
    assert evaluate_generations(toolselect, items, [right]).metrics == {
        "overall": {"accuracy": 1.0, "correct": 1, "total": 1}
    }
    wrong = evaluate_generations(toolselect, items, [failed])
    assert wrong.metrics["overall"]["accuracy"] == 0.0
    assert wrong.result["per_item"][0]["error"] == "tool_calls: expected a list, got str"
    metabench = get_task("metabench")
    assert evaluate_generations(metabench, items, [right]).metrics["overall"]["p_acc"] == 1.0
    assert evaluate_generations(metabench, items, [failed]).result["per_item"][0]["error"] == (
        "malformed prediction: tool_calls: expected a list, got str"
    )


def test_references_that_are_not_conversations_are_listed(tmp_path):
    path = tmp_path / "refs.jsonl"
    path.write_text(
        '{"id": "c1", "messages": [{"role": "user", "content": "hi"}]}\n'
        '{"id": "q1", "query": "weather", "gold_tools": ["w"]}\n'
        '{"id": "c2", "messages": [{"role": "robot"}]}\nnot json\n'
    )
    conversations, rejected = read_references([path], None, get_task("heldout"))
    assert [c.id for c in conversations] == ["c1"]
    assert rejected == [
        {"location": f"{path}:2", "reason": "a tool_query, not a conversation"},
        {
            "location": f"{path}:3",
            "reason": "record.messages[0].role: expected one of system, user, assistant, tool, got 'robot'",
        },
        {"location": f"{path}:4", "reason": "invalid JSON at column 1: Expecting value"},
    ]


# ---- the command on the tiny recipe ---------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A finished 2-step run of the tiny recipe with a 20 % eval split, and its cache."""
    from train.engine.config import compose
    from train.engine.run import run

    root = tmp_path_factory.mktemp("eval_run")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TOOLTRAIN_CACHE", str(root / "cache"))
        result = run(
            compose(
                [
                    "recipe=tiny",
                    "data.eval_fraction=0.2",
                    "train.max_steps=2",
                    "train.save_steps=2",
                    f"output_dir={root / 'run'}",
                ]
            )
        )
    assert result.status == "completed"
    return root / "run", root / "cache"


def test_run_directory_on_its_own_eval_split_then_rescored_by_eval_score(capsys, tiny_run, tmp_path, monkeypatch):
    run_dir, cache = tiny_run
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(cache))
    (eval_file,) = cache.glob("datasets/tiny-*/eval_conversations.jsonl")
    split = [json.loads(line)["id"] for line in eval_file.open(encoding="utf-8")]
    assert split == [
        "glaive_sample-11",
        "glaive_sample-17",
        "glaive_sample-31",
        "glaive_sample-33",
        "glaive_sample-37",
        "glaive_sample-41",
        "glaive_sample-48",
        "glaive_sample-56",
    ]
    code, out, _ = cli(
        capsys,
        "eval",
        "run",
        "heldout",
        str(run_dir),
        "--limit",
        "3",
        "--max-new-tokens",
        "6",
        "-o",
        str(tmp_path / "m.json"),
        "--predictions",
        str(tmp_path / "p.jsonl"),
    )
    assert code == 0
    assert out.splitlines()[0] == f"heldout: 3 items, {run_dir} (final), chatml, hf, greedy, max 6 new tokens"
    assert "generation  prompts 3, prompt errors 0" in out
    report = json.loads((tmp_path / "m.json").read_text())
    assert (report["format"], report["metrics"]["overall"]["total"], report["generation"]["prompts"]) == (
        "chatml",
        3,
        3,
    )
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").open(encoding="utf-8")]
    assert [row["id"] for row in rows] == split[:3]
    assert all(set(row) == {"id", "content", "tool_calls", "error", "generation"} for row in rows)
    assert all(row["generation"]["new_tokens"] <= 6 and row["generation"]["prompt_tokens"] > 0 for row in rows)

    references = tmp_path / "refs.jsonl"
    references.write_text(
        "".join(eval_file.read_text(encoding="utf-8").splitlines(keepends=True)[:3]), encoding="utf-8"
    )
    code, _, _ = cli(
        capsys,
        "eval",
        "score",
        "heldout",
        "--predictions",
        str(tmp_path / "p.jsonl"),
        "--references",
        str(references),
        "-o",
        str(tmp_path / "rescored.json"),
    )
    assert code == 0
    assert json.loads((tmp_path / "rescored.json").read_text())["metrics"] == report["metrics"]


def test_the_same_data_through_eval_run_with_data_gives_the_same_predictions(capsys, tiny_run, tmp_path, monkeypatch):
    run_dir, cache = tiny_run
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(cache))
    (eval_file,) = cache.glob("datasets/tiny-*/eval_conversations.jsonl")
    for name, extra in (("split", []), ("data", ["--data", str(eval_file)])):
        assert (
            cli(
                capsys,
                "eval",
                "run",
                "heldout",
                str(run_dir),
                "--limit",
                "2",
                "--max-new-tokens",
                "4",
                "--predictions",
                str(tmp_path / f"{name}.jsonl"),
                *extra,
            )[0]
            == 0
        )
    assert (tmp_path / "split.jsonl").read_text() == (tmp_path / "data.jsonl").read_text()


def test_named_base_model_on_bfcls_own_files(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path / "cache"))
    code, out, _ = cli(
        capsys,
        "eval",
        "run",
        "bfcl",
        "tiny",
        "--data",
        *map(str, BFCL_FILES),
        "--max-new-tokens",
        "4",
        "-o",
        str(tmp_path / "m.json"),
    )
    assert code == 0
    assert out.splitlines()[0] == "bfcl: 2 items, tiny_llama, chatml, hf, greedy, max 4 new tokens"
    report = json.loads((tmp_path / "m.json").read_text())
    # a random model never writes a call: both simple_python questions are wrong
    assert report["metrics"] == {
        "overall": {"accuracy": 0.0, "correct": 0, "total": 2},
        "by_category": {"simple_python": {"accuracy": 0.0, "correct": 0, "total": 2}},
        "well_formed_rate": 1.0,
    }  # chatml reads text without a call as an answer


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["heldout", "nonexistent_model", "--data", str(HELDOUT / "references.jsonl")],
            "error: 'nonexistent_model' is not a directory, nor a model config (",
        ),
        (
            ["heldout", "tiny"],
            "error: give --data (only heldout on a run directory defaults to the run's eval split)\n",
        ),
        (
            ["heldout", "tiny", "--data", str(HELDOUT / "missing.jsonl")],
            f"error: {HELDOUT}/missing.jsonl: no such file\n",
        ),
        (
            ["metabench", "tiny", "--data", str(BFCL_FILES[0])],
            (
                f"error: {BFCL_FILES[0]}: not canonical conversations, and metabench has no reader of its own; "
                "convert with `tooltrain data convert` or pass --source\n"
            ),
        ),
        (
            ["heldout", "tiny", "--data", str(HELDOUT / "references.jsonl"), "--max-new-tokens", "0"],
            "error: --max-new-tokens, --batch-size and --limit must be >= 1\n",
        ),
        (
            ["metabench", "tiny", "--data", str(HELDOUT / "references.jsonl"), "--option", "beta=1"],
            "error: --option: metabench: unknown option 'beta' (valid: embedder, alpha, k)\n",
        ),
        (
            ["metabench", "tiny", "--data", str(HELDOUT / "references.jsonl"), "--option", "k=five"],
            "error: --option: k: expected int, got 'five'\n",
        ),
        (
            [
                "heldout",
                "tiny",
                "--data",
                str(HELDOUT / "references.jsonl"),
                "--format-option",
                "date_string=1 Jan 2025",
            ],
            "error: chat format 'chatml' has no option 'date_string'; valid options: answer_style\n",
        ),
        (
            ["tiny", "heldout", "--data", str(HELDOUT / "references.jsonl")],
            "error: BENCH comes first, as in tooltrain eval score BENCH: tooltrain eval run heldout tiny ...\n",
        ),
        (["nobench", "tiny"], "error: unknown benchmark 'nobench'; valid: heldout, "),
    ],
)
def test_unusable_inputs_exit_2_with_the_reason(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path / "cache"))
    code, out, err = cli(capsys, "eval", "run", *argv)
    assert (code, out) == (2, "")
    assert err.startswith(message)


def test_a_runs_format_options_are_the_evaluation_prompts_options():
    from train.engine.config import compose
    from train.engine.run_folder import format_options as run_format_options

    cfg = compose(["recipe=tiny", "model.chat_format=llama3_1", "+data.format_options.tools_in_user_message=false"])
    assert run_format_options(cfg) == {"tools_in_user_message": False}
    assert run_format_options(compose(["recipe=tiny"])) == {}
