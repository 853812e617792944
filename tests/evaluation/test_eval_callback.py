"""The evaluation callback: when it runs, what it logs, that it never changes training, and that it
works across ranks (ZeRO-3 and DDP on 2 CPU ranks) and across a resume.

Training runs use the tiny recipe with a 20 % eval split (8 held-out conversations, the first 3 of
them evaluated, 8 new tokens), LoRA dropout 0, a checkpoint every 2 steps and an eval every 2 steps.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from train.engine import distributed
from train.engine.config import ConfigError, compose

REPO = Path(__file__).resolve().parents[2]
OVERRIDES = [
    "recipe=tiny",
    "data.eval_fraction=0.2",
    "peft.dropout=0",
    "train.save_steps=2",
]
EVAL = ["eval=heldout", "eval.every_steps=2", "eval.benchmarks.0.limit=3", "eval.benchmarks.0.max_new_tokens=8"]
HELDOUT_KEYS = {
    "exact_match",
    "name_accuracy",
    "valid_call_rate",
    "correct",
    "total",
    "parse_errors",
    "by_kind/call/exact_match",
    "by_kind/call/name_accuracy",
    "by_kind/call/valid_call_rate",
    "by_kind/call/correct",
    "by_kind/call/total",
    "by_kind/no_call/exact_match",
    "by_kind/no_call/name_accuracy",
    "by_kind/no_call/correct",
    "by_kind/no_call/total",
}


def metrics(run_dir: Path) -> list[dict]:
    from train.engine.report import read_metrics

    return read_metrics(run_dir / "metrics.jsonl")


def losses(run_dir: Path) -> dict[int, tuple[float, float]]:
    return {row["step"]: (row["loss"], row["grad_norm"]) for row in metrics(run_dir) if "loss" in row}


def eval_rows(run_dir: Path) -> dict[int, dict]:
    rows = [row for row in metrics(run_dir) if any(key.startswith("eval/") for key in row)]
    assert len({row["step"] for row in rows}) == len(rows), "an eval logged twice at one step"
    return {row["step"]: {k: v for k, v in row.items() if k.startswith("eval/")} for row in rows}


# ---- distributed helpers and small pieces -------------------------------------------------------


def test_shards_are_even_so_every_rank_makes_the_same_generate_calls():
    items = ["a", "b", "c", "d", "e"]
    assert distributed.shard_evenly(items, 0, 2) == [(0, "a"), (2, "c"), (4, "e")]
    assert distributed.shard_evenly(items, 1, 2) == [(1, "b"), (3, "d"), (None, "a")]  # padding, thrown away
    assert distributed.shard_evenly(["a"], 2, 3) == [(None, "a")]
    assert distributed.shard_evenly([], 0, 2) == []
    shares = [distributed.shard_evenly(items, rank, 3) for rank in range(3)]
    assert [len(share) for share in shares] == [2, 2, 2]
    # what gather_shards does with every rank's pairs: index order, padding dropped
    assert distributed.gather_shards([pair for share in shares for pair in share]) == items


def test_only_sharded_weights_need_lock_step_generation():
    two, one = distributed.World(0, 0, 2, 2, 0), distributed.World(0, 0, 1, 1, 0)
    strategies = ("single", "ddp", "zero2", "zero3", "zero3_offload", "fsdp2")
    decisions = {strategy: distributed.generation_needs_sync(strategy, two) for strategy in strategies}
    assert decisions == {
        "single": False,
        "ddp": False,
        "zero2": False,
        "zero3": True,
        "zero3_offload": True,
        "fsdp2": True,
    }
    assert distributed.generation_needs_sync("zero3", one) is False


def test_rng_states_and_module_modes_are_restored():
    import numpy as np
    import torch

    from train.engine.eval_callback import inference_mode_of, preserved_rng

    torch.manual_seed(3), np.random.seed(3), random.seed(3)
    expected = (torch.rand(2).tolist(), np.random.rand(2).tolist(), random.random())
    torch.manual_seed(3), np.random.seed(3), random.seed(3)
    with preserved_rng():
        torch.rand(5), np.random.rand(5), random.random()
    assert (torch.rand(2).tolist(), np.random.rand(2).tolist(), random.random()) == expected

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5)).train()
    model[0].eval()  # a module deliberately kept in eval mode stays so
    with inference_mode_of(model):
        assert not any(module.training for module in model.modules()) and not torch.is_grad_enabled()
    assert [module.training for module in model.modules()] == [True, False, True] and torch.is_grad_enabled()


def test_evaluation_is_due_every_n_steps_and_at_the_end():
    from train.engine.eval_callback import GenerationEval

    def steps(every: int, at_end: bool) -> list[int]:
        callback = GenerationEval.__new__(GenerationEval)
        callback.every_steps, callback.at_end = every, at_end
        return [step for step in range(1, 6) if callback.due(step, 5)]

    assert steps(2, True) == [2, 4, 5]
    assert steps(2, False) == [2, 4]
    assert steps(0, True) == [5]


def test_eval_configs_are_checked_when_composed():
    cfg = compose(["recipe=tiny", "eval=heldout", "data.eval_fraction=0.2"])
    assert [(b.name, b.data, b.limit) for b in cfg.eval.benchmarks] == [("heldout", None, 32)]
    problems = [
        (
            ["eval=heldout"],
            (
                "eval.benchmarks.0 (heldout): evaluates the run's eval split, but data.eval_fraction is 0; set "
                "data.eval_fraction > 0"
            ),
        ),
        (
            ["eval=heldout", "data.eval_fraction=0.2", "eval.benchmarks.0.name=nope"],
            (
                "eval.benchmarks.0 (nope): unknown benchmark; valid: heldout, metabench, toolselect, bfcl, "
                "bfcl_multi_turn, itc, toolbench, nexus"
            ),
        ),
        (
            ["eval=heldout", "data.eval_fraction=0.2", "eval.benchmarks.0.name=bfcl"],
            "eval.benchmarks.0 (bfcl): needs data (only heldout defaults to the run's eval split)",
        ),
    ]
    for overrides, message in problems:
        with pytest.raises(ConfigError) as raised:
            compose(["recipe=tiny", *overrides])
        assert f"  - {message}" in str(raised.value).splitlines()


# slow tier: composes every recipe twice; test_config composes every recipe, and the heldout eval's checks run on
# recipe=tiny in the default tier (the test above)
@pytest.mark.slow
def test_every_recipe_composes_with_and_without_the_heldout_eval():
    recipes = sorted(path.stem for path in (REPO / "recipes").glob("*.yaml"))
    assert "tiny" in recipes
    for recipe in recipes:
        compose([f"recipe={recipe}"])
        held_out = compose([f"recipe={recipe}", "eval=heldout", "data.eval_fraction=0.1"])
        assert [bench.name for bench in held_out.eval.benchmarks] == ["heldout"]
    assert compose(["recipe=tiny"]).eval.benchmarks == []


# ---- training with evaluation, one process ------------------------------------------------------


def train_in_process(out: Path, cache: Path, *extra: str):
    import torch

    from train.engine.run import run

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("TOOLTRAIN_CACHE", str(cache))
            return run(compose([*OVERRIDES, f"output_dir={out}", *extra]))
    finally:
        torch.set_num_threads(threads)


def test_eval_logs_at_its_steps_and_leaves_every_training_loss_unchanged(tmp_path):
    with_eval = train_in_process(tmp_path / "eval", tmp_path / "cache", "train.max_steps=5", *EVAL)
    without = train_in_process(tmp_path / "plain", tmp_path / "cache", "train.max_steps=5")
    assert with_eval.status == without.status == "completed"
    # same losses and gradient norms at every step, every step logged once (an eval step too)
    assert losses(tmp_path / "eval") == losses(tmp_path / "plain") and sorted(losses(tmp_path / "eval")) == [
        1,
        2,
        3,
        4,
        5,
    ]
    logged = eval_rows(tmp_path / "eval")
    assert sorted(logged) == [2, 4, 5]  # every 2 steps, and at the end
    assert all(set(row) == {f"eval/heldout/{key}" for key in HELDOUT_KEYS} for row in logged.values())
    assert all(row["eval/heldout/total"] == 3 for row in logged.values())
    assert eval_rows(tmp_path / "plain") == {}
    written = sorted(path.name for path in (tmp_path / "eval" / "eval_predictions").iterdir())
    assert written == ["heldout-step2.jsonl", "heldout-step4.jsonl", "heldout-step5.jsonl"]
    rows = [json.loads(line) for line in (tmp_path / "eval" / "eval_predictions" / "heldout-step5.jsonl").open()]
    assert [row["id"] for row in rows] == ["glaive_sample-11", "glaive_sample-17", "glaive_sample-31"]
    assert all(row["generation"]["new_tokens"] <= 8 for row in rows)


# ---- two ranks, ZeRO-3, and a resume --------------------------------------------------------------


def launch(
    out: Path, cache: Path, ranks: int = 2, strategy: str = "zero3", steps: int = 6
) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "TOOLTRAIN_CACHE": str(cache),
        "TORCH_EXTENSIONS_DIR": str(cache / "torch_extensions"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}"]
    command = [
        *launcher,
        "-m",
        "train",
        "train",
        *OVERRIDES,
        *EVAL,
        f"distributed={strategy}",
        f"train.max_steps={steps}",
        f"output_dir={out}",
    ]
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    return result


@pytest.mark.slow
def test_zero3_on_two_ranks_logs_eval_and_a_resumed_run_logs_the_same(tmp_path):
    reference = tmp_path / "reference"
    launch(reference, tmp_path / "cache")
    logged = eval_rows(reference)
    assert sorted(logged) == [2, 4, 6]  # rank 0 wrote each eval once, from all ranks' generations
    assert all(row["eval/heldout/total"] == 3 for row in logged.values())  # 3 prompts on 2 ranks: one padded
    assert sorted(losses(reference)) == [1, 2, 3, 4, 5, 6]

    resumed = tmp_path / "resumed"  # as a kill after step 4 would leave the run
    shutil.copytree(reference, resumed)
    after_step_4 = ["checkpoint-6", "final", "summary.json", "eval_predictions/heldout-step6.jsonl"]
    for path in (resumed / name for name in after_step_4):
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    result = launch(resumed, tmp_path / "cache")
    assert "resuming from checkpoint-4" in result.stdout
    assert eval_rows(resumed) == logged
    assert losses(resumed) == losses(reference)
    step6 = "eval_predictions/heldout-step6.jsonl"
    assert (resumed / step6).read_text() == (reference / step6).read_text()


@pytest.mark.slow
def test_ddp_on_two_ranks_shards_the_eval_rows_and_gathers_them(tmp_path):
    """DDP replicates the weights, so generation runs without lock-step (generation_needs_sync is False); the
    3 prompts are split 2 + 1 (+1 padding) and every generation is gathered before scoring. One 2-step run."""
    out = tmp_path / "ddp"
    launch(out, tmp_path / "cache", strategy="ddp", steps=2)
    logged = eval_rows(out)
    assert sorted(logged) == [2]
    assert set(logged[2]) == {f"eval/heldout/{key}" for key in HELDOUT_KEYS} and logged[2]["eval/heldout/total"] == 3
    rows = [json.loads(line) for line in (out / "eval_predictions" / "heldout-step2.jsonl").open()]
    assert [row["id"] for row in rows] == ["glaive_sample-11", "glaive_sample-17", "glaive_sample-31"]
    assert all(row["generation"]["new_tokens"] <= 8 for row in rows)


# ---- before/after: the step-0 evaluation ------------------------------------------------------------


def base_model_evaluation(cfg, cache: Path) -> tuple[list[dict], dict]:
    """What the base model (built as run() builds it, same seed, no adapter) writes for the run's eval items."""
    import torch
    from omegaconf import OmegaConf

    from train.data.dataset import build_dataset
    from train.engine.eval_callback import build_eval_callback
    from train.engine.model import build_model
    from train.tokenizers import load_tokenizer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("TOOLTRAIN_CACHE", str(cache))
            tokenizer = load_tokenizer(cfg.model.tokenizer)
            data_cfg = OmegaConf.to_container(cfg.data, resolve=True, enum_to_str=True)
            built = build_dataset(data_cfg, cfg.model.chat_format, tokenizer, cache / "datasets")
            base = build_model(cfg.model, len(tokenizer), torch.float32, "sdpa", seed=cfg.seed)
            callback = build_eval_callback(cfg, built, tokenizer, distributed.World(0, 0, 1, 1, 0), log=lambda _: None)
            callback.predictions_dir = cache / "base_predictions"
            metrics = callback.evaluate(base, 0, write=True)
            rows = [json.loads(line) for line in (cache / "base_predictions" / "heldout-step0.jsonl").open()]
    finally:
        torch.set_num_threads(threads)
    return rows, metrics


def test_the_step_0_evaluation_of_a_lora_run_is_the_base_models(tmp_path):
    """LoRA starts with lora_B = 0, so the model evaluated before the first step writes exactly what the base
    model writes: the "before" of the demo's before/after comes from the run itself, at no extra model load."""
    at_start = [*EVAL, "eval.every_steps=0", "eval.at_start=true", "eval.benchmarks.0.max_new_tokens=16"]
    result = train_in_process(tmp_path / "run", tmp_path / "cache", "train.max_steps=2", *at_start)
    assert result.status == "completed"
    logged = eval_rows(tmp_path / "run")
    assert sorted(logged) == [0, 2]  # before the first step, and at the end
    before = result.summary["eval"]["heldout"]["before"]
    assert before == {
        "step": 0,
        **{key.removeprefix("eval/heldout/"): value for key, value in logged[0].items() if key.count("/") == 2},
    }

    cfg = compose([*OVERRIDES, f"output_dir={tmp_path / 'run'}", "train.max_steps=2", *at_start])
    base_rows, base_metrics = base_model_evaluation(cfg, tmp_path / "cache")
    step0 = [json.loads(line) for line in (tmp_path / "run" / "eval_predictions" / "heldout-step0.jsonl").open()]
    assert [row["generation"]["text"] for row in step0] == [row["generation"]["text"] for row in base_rows]
    assert step0 == base_rows and logged[0] == base_metrics
    assert any(row["generation"]["new_tokens"] > 1 for row in step0)  # a real comparison: text was generated


def test_an_evaluations_time_is_kept_out_of_training_tokens_per_s(monkeypatch):
    """The step-0 evaluation runs after the throughput clock starts (and the last one inside the last step):
    step 1's tokens/s counted minutes of generation as training time."""
    from types import SimpleNamespace

    import torch

    from train.engine import callbacks
    from train.engine.eval_callback import GenerationEval

    # the clock at: training begins, the evaluation begins, it ends (60 s later), the first step is logged (10 s later)
    ticks = iter([100.0, 100.0, 160.0, 170.0])
    monkeypatch.setattr(callbacks.time, "perf_counter", lambda: next(ticks))
    meter = callbacks.TokenMeter()
    throughput = callbacks.Throughput(meter, None, None, 1)
    throughput.on_train_begin(None, None, None)
    spent: list[float] = []
    evaluation = GenerationEval(
        {},
        None,
        SimpleNamespace(pad_token_id=0),
        log=lambda _: None,
        world=distributed.World(0, 0, 1, 1, 0),
        synced_gpus=False,
        exclude_time=lambda seconds: (spent.append(seconds), throughput.exclude(seconds)),
    )
    evaluation.evaluate(torch.nn.Linear(2, 2), 0)
    assert spent == [60.0]
    meter.real, meter.slots = 1000, 1024
    logs = {"loss": 1.0}
    throughput.on_log(None, None, None, logs=logs)
    assert logs["tokens_per_s_per_device"] == 100.0  # 1000 tokens in 10 s of training, not in 70 s


def test_the_itc_benchmark_logs_every_metric_under_a_readable_name(monkeypatch):
    """The callback logs each numeric leaf of the ITC metrics as eval/itc/<block>/<metric>: LM, FM, micro and
    macro P/R/F1, by language, the non-English block, by task type, the Table 4 counts and shares."""
    from types import SimpleNamespace

    import torch

    from train.engine import eval_callback as callback
    from train.evaluation.generate import Generation
    from train.evaluation.tasks import get_task
    from train.schema import Conversation

    def reference(item_id: str, language: str, task_type: str) -> Conversation:
        answer = '{"Thought": "t", "Action": "[f(a=1)]"}'
        return Conversation.from_dict({
            "id": item_id, "tools": [],
            "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": answer}],
            "meta": {"language": language, "task_type": task_type},
        })  # fmt: skip

    task = get_task("itc")
    items = task.prepare([reference("a", "en", "single"), reference("b", "zh", "parallel")]).items
    written = ['{"Thought": "t", "Action": "[f(a=1)]"}', "not an answer"]
    monkeypatch.setattr(callback, "HFBackend", lambda *args, **kwargs: None)
    monkeypatch.setattr(
        callback, "generate", lambda prompts, *rest: [Generation(text=w, content=w) for w in written[: len(prompts)]]
    )
    logged: list[dict] = []
    evaluation = callback.GenerationEval(
        {"itc": callback.Benchmark(task, items, 16)},
        None,
        SimpleNamespace(pad_token_id=0),
        log=logged.append,
        world=distributed.World(0, 0, 1, 1, 0),
        synced_gpus=False,
    )
    metrics = evaluation.evaluate(torch.nn.Linear(2, 2), 3)
    prf = ("tool_p", "tool_r", "tool_f1", "ti_p", "ti_r", "ti_f1")
    block = ("items", "lm", "fm", *(f"{avg}/{key}" for avg in ("micro", "macro") for key in prf))
    expected = {
        "items", "lm", "fm",
        *(f"{avg}/{key}" for avg in ("micro", "macro") for key in prf),
        *(f"by_language/{lang}/{key}" for lang in ("en", "zh") for key in block),
        *(f"non_english/{key}" for key in block),
        *(f"by_task_type/{kind}/{key}" for kind in ("parallel", "single") for key in block),
        *(f"counts/{side}/{key}" for side in ("tools", "params") for key in ("predicted", "gold", "correct")),
        *(f"counts/errors/{key}" for key in ("hallucinated_tools", "missing_tools", "extra_tools")),
        *(f"counts/errors/{key}" for key in ("incorrect_params", "missing_params", "extra_params")),
        "error_shares/selection/missing_tools", "error_shares/selection/hallucinated_tools",
        "error_shares/selection/extra_tools",
    }  # fmt: skip
    assert set(metrics) == {f"eval/itc/{key}" for key in expected}  # invocation shares: no error, null, not logged
    assert metrics["eval/itc/fm"] == 0.5 and metrics["eval/itc/macro/ti_f1"] == 0.5
    assert metrics["eval/itc/by_language/zh/macro/tool_r"] == 0.0 and metrics["eval/itc/micro/tool_r"] == 0.5
    assert metrics["eval/itc/error_shares/selection/missing_tools"] == 1.0


def test_an_eval_benchmark_file_without_conversations_is_refused_naming_it(tmp_path):
    """In process, what tests/engine/test_train_errors.py (slow tier) sees as the run's one `error: eval: ...` line."""
    from train.engine.eval_callback import load_benchmarks
    from train.evaluation.tasks import TaskError

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    cfg = compose(["recipe=tiny", "eval=heldout", f"eval.benchmarks.0.data={empty}"])
    with pytest.raises(TaskError) as refused:
        load_benchmarks(cfg.eval, [])
    assert str(refused.value).startswith(f"{empty}: not canonical conversations, and heldout has no reader of its own")
