"""One golden-loss smoke run per recipe, in the everyday tier (`.ci/run`): compose recipes/NAME.yaml (its
NAME_tiny variant where there is one), train a few steps of a tiny model on a few conversations in this
process, and compare the per-step losses with the ones recorded below, to 4 decimals (and the count of tokens that
carry loss, exactly).

A change that moves a recipe's data, chat format, masks, packing, model setup or optimizer moves its losses
and fails here within seconds; the slow tier (`.ci/run --all`) then runs the full-size checks. A recipe
without an entry in GOLDEN fails `test_every_recipe_has_a_golden_smoke_run`: add one by running the recipe's
smoke test with an empty ``losses`` list and recording what it prints, after checking the change is meant.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Few conversations, short rows, no evaluation (where the recipe allows): the recipe's own data builder, format and
# model setup, in seconds. The demo recipe's SmolLM2 is swapped for the tiny Llama (same ChatML format; the real
# model's run is tests/engine/test_demo.py, slow tier).
SMALL = ["data.overlong=truncate", "eval=none", "peft.dropout=0", "train.max_steps=3", "train.save_steps=100"]
GOLDEN: dict[str, dict] = {
    "demo": {
        # its before/after eval stays (the recipe sets it): 2 of 40 held-out conversations, 4 tokens each
        "overrides": [
            "model=tiny_llama",
            "data.sources.0.limit=40",
            "data.max_seq_len=256",
            "data.eval_fraction=0.2",
            "eval.benchmarks.0.limit=2",
            "eval.benchmarks.0.max_new_tokens=4",
            "train.global_batch_size=2",
            "train.micro_batch_size=1",
        ],
        "losses": [6.9457, 6.9469, 6.9451],
        "trained_tokens": 1230,
    },
    "itc_qwen2_5_7b": {
        # Qwen2.5-7B swapped for the tiny Llama (the recipe's qwen2_5 format and tokenizer stay), the user's corpus for
        # the glaive sample the package ships; the itc builder (offline teacher), LoRA and optimizer stay
        "overrides": [
            "model=tiny_llama",
            "model.chat_format=qwen2_5",
            "model.tokenizer=qwen2_5",
            "data.sources.0.inputs=[pkg://train/assets/demo/glaive_sample.json]",
            "data.max_seq_len=1024",
        ],
        "losses": [11.9434, 11.9333, 11.9407],
        "trained_tokens": 2004,
    },
    "itc_tiny": {
        # SmolLM2 swapped for the tiny Llama (same ChatML format), the English glaive sample for the 300; the zh
        # source, builder, LoRA and optimizer stay
        "overrides": [
            "model=tiny_llama",
            "data.sources.0.inputs=[pkg://train/assets/demo/glaive_sample.json]",
            "data.max_seq_len=1024",
        ],
        "losses": [6.9377, 6.937, 6.9374],
        "trained_tokens": 22874,
    },
    "mt_llama_tiny": {
        # its own 1,024-token rows: at 256 its tool-laden prompts would leave 64 of 70 dialogues nothing to train;
        # a row a step (the recipe's 2 doubled the 128k-vocabulary passes, 21 s of the default tier's time)
        "overrides": ["train.global_batch_size=1"],
        "losses": [11.7632, 11.7805, 11.781],
        "trained_tokens": 22418,
    },
    "toolgt_llama3_1_8b": {
        # the 7-14B model and its 8-GPU strategy swapped for the tiny Llama on one process, ToolACE for the shipped
        # toolace-layout sample; the recipe's format, tokenizer, builder (offline teacher), arm and optimizer stay
        "overrides": [
            "model=tiny_llama",
            "model.chat_format=llama3_1",
            "model.tokenizer=llama3",
            "distributed=single",
            "data.sources.0.inputs=[pkg://train/assets/metatool_tiny/toolace_tiny.json]",
            "toolgt.bfcl_dir=pkg://train/assets/metatool_tiny/bfcl",
            "toolgt.nexus_dir=pkg://train/assets/toolgt_tiny/nexus",
            "data.max_seq_len=1024",
            "train.micro_batch_size=1",
            "train.global_batch_size=2",
        ],
        "losses": [11.7649, 11.7564, 11.7633],
        "trained_tokens": 3888,
    },
    "toolgt_mistral_7b": {
        # the 7-14B model and its 8-GPU strategy swapped for the tiny Llama on one process, ToolACE for the shipped
        # toolace-layout sample; the recipe's format, tokenizer, builder (offline teacher), arm and optimizer stay
        "overrides": [
            "model=tiny_llama",
            "model.chat_format=mistral_v3",
            "model.tokenizer=mistral_v3",
            "distributed=single",
            "data.sources.0.inputs=[pkg://train/assets/metatool_tiny/toolace_tiny.json]",
            "toolgt.bfcl_dir=pkg://train/assets/metatool_tiny/bfcl",
            "toolgt.nexus_dir=pkg://train/assets/toolgt_tiny/nexus",
            "data.max_seq_len=1024",
            "train.micro_batch_size=1",
            "train.global_batch_size=2",
        ],
        "losses": [10.423, 10.4175, 10.4181],
        "trained_tokens": 4571,
    },
    "toolgt_nemo_12b": {
        # the 7-14B model and its 8-GPU strategy swapped for the tiny Llama on one process, ToolACE for the shipped
        # toolace-layout sample; the recipe's format, tokenizer, builder (offline teacher), arm and optimizer stay
        "overrides": [
            "model=tiny_llama",
            "model.chat_format=mistral_nemo",
            "model.tokenizer=mistral_tekken",
            "distributed=single",
            "data.sources.0.inputs=[pkg://train/assets/metatool_tiny/toolace_tiny.json]",
            "toolgt.bfcl_dir=pkg://train/assets/metatool_tiny/bfcl",
            "toolgt.nexus_dir=pkg://train/assets/toolgt_tiny/nexus",
            "data.max_seq_len=1024",
            "train.micro_batch_size=1",
            "train.global_batch_size=2",
        ],
        "losses": [11.7929, 11.7931, 11.7704],
        "trained_tokens": 4152,
    },
    "toolgt_qwen2_5_14b": {
        # the 7-14B model and its 8-GPU strategy swapped for the tiny Llama on one process, ToolACE for the shipped
        # toolace-layout sample; the recipe's format, tokenizer, builder (offline teacher), arm and optimizer stay
        "overrides": [
            "model=tiny_llama",
            "model.chat_format=qwen2_5",
            "model.tokenizer=qwen2_5",
            "distributed=single",
            "data.sources.0.inputs=[pkg://train/assets/metatool_tiny/toolace_tiny.json]",
            "toolgt.bfcl_dir=pkg://train/assets/metatool_tiny/bfcl",
            "toolgt.nexus_dir=pkg://train/assets/toolgt_tiny/nexus",
            "data.max_seq_len=1024",
            "train.micro_batch_size=1",
            "train.global_batch_size=2",
        ],
        "losses": [11.9228, 11.9148, 11.9267],
        "trained_tokens": 4013,
    },
    "toolgt_qwen3_8b": {
        # Qwen3-8B and 8-GPU ZeRO-2 swapped for the tiny Llama on one process, ToolACE for the shipped toolace-layout
        # sample; the recipe's qwen3 format (non_thinking, toolgt_text), tokenizer, builder, arm and optimizer stay
        "overrides": [
            "model=tiny_llama",
            "model.chat_format=qwen3",
            "model.tokenizer=qwen3",
            "distributed=single",
            "data.sources.0.inputs=[pkg://train/assets/metatool_tiny/toolace_tiny.json]",
            "toolgt.bfcl_dir=pkg://train/assets/metatool_tiny/bfcl",
            "toolgt.nexus_dir=pkg://train/assets/toolgt_tiny/nexus",
            "data.max_seq_len=1024",
            "train.micro_batch_size=1",
            "train.global_batch_size=2",
        ],
        "losses": [11.9327, 11.9068, 11.9421],
        "trained_tokens": 4013,  # as toolgt_qwen2_5_14b: the empty <think> block is prompt
    },
    "itc_qwen3_8b": {
        # Qwen3-8B swapped for the tiny Llama (the recipe's qwen3 format, non_thinking, and tokenizer stay), the
        # user's corpus for the glaive sample the package ships; the itc builder (offline teacher), LoRA, optimizer stay
        "overrides": [
            "model=tiny_llama",
            "model.chat_format=qwen3",
            "model.tokenizer=qwen3",
            "data.sources.0.inputs=[pkg://train/assets/demo/glaive_sample.json]",
            "data.max_seq_len=1024",
        ],
        "losses": [11.9486, 11.9479, 11.96],
        "trained_tokens": 2004,  # as itc_qwen2_5_7b
    },
    "toolgt_tiny": {
        # a row a step: its full fine-tuning of a 128k-vocabulary model took 15 s at the recipe's 2
        "overrides": ["data.max_seq_len=512", "train.global_batch_size=1"],
        # moved by #27 items 2-3: 81 samples (28 relevance samples answering []) where 53 were
        "losses": [11.7717, 11.7679, 11.7009],
        "trained_tokens": 12797,
    },
    "ptr_tiny": {
        # eval-only (PTR trains nothing, seed 001): stage 1's metrics on the shipped MetaTool sample, 2 seeds (means)
        "overrides": [],
        "recommend": {
            "recall_paper": 0.39375,
            "ndcg_paper": 0.580206,
            "tracc": 0.39375,
            "recall": 0.39375,
            "ndcg": 0.423451,
        },
    },
    "toolverifier_tiny": {
        # SmolLM2 swapped for the tiny Llama; the recipe's ToolSelect rows, builder (short notes) and
        # toolselect_text format stay, with the tiny tokenizer's own end token
        "overrides": [
            "model=tiny_llama",
            "model.chat_format=toolselect_text",
            "data.sources.0.limit=24",
            "data.max_seq_len=512",
            "data.format_options.eos_token='<|im_end|>'",
        ],
        "losses": [6.9482, 6.9421, 6.9414],
        "trained_tokens": 1925,
    },
    "dpo_tiny": {
        # TRL's DPOTrainer on the pairs of 16 glaive conversations (train.objective=dpo), a pair a step: step 1's loss
        # is log 2 (the policy is its reference); trained tokens are the pairs' chosen and rejected turns
        "overrides": [
            "data.sources.0.limit=16",
            "data.max_seq_len=512",
            "train.micro_batch_size=1",
            "train.global_batch_size=1",
        ],
        "losses": [0.6931, 0.6937, 0.6873],
        "trained_tokens": 881,
    },
    "grpo_tiny": {
        # TRL's GRPOTrainer on 2 rollouts of each glaive turn (train.objective=grpo), sampled token-in/token-out; the
        # digits reward (tests/grpo_fakes.py) gives the random model's groups a spread, so the losses move; trained
        # tokens are the sampled ones (TRL's mean rollout length x the rollouts of each step)
        "overrides": [
            "data.sources.0.limit=16",
            "data.max_seq_len=512",
            "grpo.rewards=[toolrl,tests.grpo_fakes:DIGITS]",
            "grpo.num_generations=2",
            "grpo.max_new_tokens=16",
            "train.micro_batch_size=2",
            "train.global_batch_size=4",
        ],
        "losses": [0.0, 0.0, 0.0],
        "rewards": [-2.9932, -0.9906, -0.9806],
        "trained_tokens": 192,
    },
    "grpo_smollm2": {
        # SmolLM2 swapped for the tiny Llama (the same ChatML format); the recipe's call-turn prompts, ToolRL reward and
        # GRPO knobs stay; its BFCL and held-out evaluations are off (bfcl-eval is a test reference, not a dependency)
        "overrides": [
            "model=tiny_llama",
            "data.sources.0.limit=24",
            "eval.benchmarks=[]",
            "grpo.max_new_tokens=16",
        ],
        "losses": [0.0, 0.0, 0.0],
        "rewards": [-3.0, -3.0, -3.0],  # the random model never calls: ToolRL's minimum
        "trained_tokens": 384,
    },
    "grpo_qwen3_8b": {
        # Qwen3-8B, 8 GPUs and vLLM swapped for the tiny Llama on one process with the Qwen3 tokenizer, sampling with
        # model.generate; the shipped glaive rows for xLAM's; the qwen3 format (thinking), rewards and GRPO knobs stay
        "overrides": [
            "model=tiny_llama",
            "model.chat_format=qwen3",
            "model.tokenizer=qwen3",
            "distributed=single",
            "grpo.vllm=off",
            "data.sources=[{name:glaive,inputs:[pkg://train/assets/demo/glaive_sample.json],limit:8}]",
            "data.max_seq_len=1024",
            "grpo.num_generations=2",
            "grpo.max_new_tokens=16",
            "train.micro_batch_size=2",
            "train.global_batch_size=4",
        ],
        "losses": [0.0, 0.0, 0.0],
        "rewards": [1.0, 1.0, 1.0],  # ToolRL: every answer to these text turns parses as text
        "trained_tokens": 192,
    },
    "tiny": {
        "overrides": ["data.sources.0.limit=16", "data.max_seq_len=256"],
        "losses": [6.951, 6.9485, 6.9345],
        "trained_tokens": 781,
    },
}
# Full-size recipes that also have a _tiny variant, smoke-tested in their own right: their data config, builder
# arguments, format and optimizer settings are not the _tiny one's.
GOLDEN_FULL_SIZE: dict[str, dict] = {
    "toolverifier": {
        # Llama-2-70B and 16-GPU ZeRO-3 swapped for the tiny Llama on one process with a Llama-2-like tokenizer
        # (mistral_v3: <s>, </s>), ToolSelect for the shipped rows; builder (Full Data), format, lr, weight decay stay
        "overrides": [
            "model=tiny_llama",
            "model.chat_format=toolselect_text",
            "model.tokenizer=mistral_v3",
            "distributed=single",
            "data.sources.0.inputs=[pkg://train/assets/toolverifier_tiny/train.csv.gz]",
            "data.sources.0.limit=24",
            "train.micro_batch_size=1",
            "train.global_batch_size=2",
        ],
        "losses": [10.4169, 10.4147, 10.4039],
        "trained_tokens": 6363,
    },
}


def smoke_recipes() -> list[str]:
    """Every recipe, as its `_tiny` variant where it has one (mt_llama -> mt_llama_tiny)."""
    names = {path.stem for path in (REPO / "recipes").glob("*.yaml")}
    return sorted(name for name in names if f"{name}_tiny" not in names)


def test_every_recipe_has_a_golden_smoke_run():
    assert smoke_recipes() == sorted(GOLDEN), "add the new recipe's smoke run to GOLDEN (see this file's docstring)"


# A full-size recipe whose pipeline its tiny sibling runs in the default tier (itc_tiny, toolgt_tiny): the variants
# differ only in format and tokenizer, whose renders the format parity tests pin, and test_recipe_toolgt composes
# each ToolGT recipe with Table 4's settings. Their golden runs (itc_qwen2_5_7b alone took 61 s on 2 cores: a real
# Qwen tokenizer and the langid pass) are in the slow tier, keeping `.ci/run` within its minutes.
SLOW_TIER = {
    *("itc_qwen2_5_7b", "itc_qwen3_8b"),
    "grpo_qwen3_8b",  # grpo_tiny runs GRPO's pipeline in seconds; this one pays a 151k-vocabulary LM head per token
    *("toolgt_qwen2_5_14b", "toolgt_qwen3_8b", "toolgt_llama3_1_8b", "toolgt_mistral_7b", "toolgt_nemo_12b"),
}


@pytest.mark.parametrize(
    "recipe",
    [
        pytest.param(name, marks=pytest.mark.slow) if name in SLOW_TIER else name
        for name in sorted(GOLDEN) + sorted(GOLDEN_FULL_SIZE)
    ],
)
def test_the_recipe_trains_to_its_golden_losses(recipe, tooltrain_cache, tmp_path, monkeypatch):
    import torch

    from train.engine.config import compose
    from train.engine.run import run

    golden = GOLDEN[recipe] if recipe in GOLDEN else GOLDEN_FULL_SIZE[recipe]
    cfg = compose([f"recipe={recipe}", *SMALL, *golden["overrides"], f"output_dir={tmp_path / 'run'}"])
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tooltrain_cache))
    if "recommend" in golden:  # an eval-only recipe (a paper's job): nothing trains; its metrics are the golden numbers
        from train.engine.entry import start

        result = start(cfg)
        (evaluated,) = result.summary["recommend"]
        assert (result.status, result.global_step) == ("evaluated", 0)
        assert {key: stat["mean"] for key, stat in evaluated["summary"].items()} == pytest.approx(
            golden["recommend"], abs=1e-6
        )
        assert (tmp_path / "run" / "metrics.json").is_file()
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the kernels of a launched run (OMP_NUM_THREADS=1), so the same rounding
    try:
        result = run(cfg)
    finally:
        torch.set_num_threads(threads)
    assert (result.status, result.global_step) == ("completed", 3)
    from train.engine.report import read_metrics

    # GRPO's loss is ~0 (a group's advantages sum to zero): its per-step mean reward pins the rollouts and rewards
    rewards = [round(row["reward"], 4) for row in read_metrics(tmp_path / "run" / "metrics.jsonl") if "reward" in row]
    print(
        f"{recipe}: losses {[round(loss, 4) for loss in result.losses]}, trained tokens "
        f"{result.summary['trained_tokens']}" + (f", rewards {rewards}" if rewards else "")
    )
    # the tokens that carry loss pin the data, format and masks exactly; the losses pin the model and optimizer too
    assert result.summary["trained_tokens"] == golden["trained_tokens"]
    assert result.losses == pytest.approx(golden["losses"], abs=1e-4)
    assert rewards == pytest.approx(golden.get("rewards", []), abs=1e-4)
