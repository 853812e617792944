"""The memory plan (train/engine/memory_plan.py): exact bytes for a small hand-computed model, parameter counts
against the model cards, every shipped GPU recipe fitting the GPUs it states, and the refusal naming its knob."""

from __future__ import annotations

import pytest
from helpers import CPU_RECIPES
from omegaconf import OmegaConf

from train.engine.config import CONF_DIR, REPO_ROOT, compose
from train.engine.memory_plan import (
    GIB,
    Setup,
    Shape,
    activation_bytes,
    adapter_parameters,
    describe,
    estimate,
    logit_bytes,
    parameters,
    plan,
    plan_problem,
    shape_of,
    world_of,
)

# h 8, 2 layers, MLP 16, 2 heads of 4 (q 8), 1 kv head (kv 4), vocabulary 10, untied
SMALL = Shape(hidden=8, layers=2, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10)


def small(**changes) -> Setup:
    return Setup(**{"micro_batch": 2, "seq_len": 3, "world": 1, "strategy": "single", "lora_r": 0} | changes)


def test_parameters_of_the_small_model_by_hand():
    # a layer: q 8x8 + k 8x4 + v 8x4 + o 8x8 = 192, gate/up/down 3 x 8x16 = 384, two norms 16 -> 592
    # model: 2 x 592 + embedding and lm_head 2 x 10x8 + final norm 8 = 1352
    assert parameters(SMALL) == 1352
    # LoRA r 2 on q (8 -> 8) and v (8 -> 4): 2 x (8 + 8) + 2 x (8 + 4) = 56 a layer
    assert adapter_parameters(SMALL, 2, ("q_proj", "v_proj")) == 112


def test_activations_and_logits_of_the_small_model_by_hand():
    # per token and layer, bf16 (a = 2), SDPA: attention 2 x (8 + 8 + 4 + 4 + 8) + fp32 log-sum-exp 4 x 2 = 72,
    # norms 2 x 2 x 8 = 32, MLP 2 x (8 + 4 x 16) = 144 -> 248; 6 tokens (2 x 3), 2 layers
    assert activation_bytes(SMALL, small()) == 6 * 2 * 248
    # checkpointing: each layer's input (2 x 8) kept, one layer's whole activations during its recomputation
    assert activation_bytes(SMALL, small(checkpointing=True)) == 6 * (2 * 2 * 8 + 248)
    # LoRA on q and v with dropout: their inputs (8 + 8) again in fp32 (4) with the dropout mask (1)
    lora = small(lora_r=2, lora_targets=("q_proj", "v_proj"), lora_dropout=True)
    assert activation_bytes(SMALL, lora) == 6 * 2 * (248 + 5 * 16)
    # eager attention keeps the scores: Korthikanti's 5 x heads x s bytes a token instead of the log-sum-exp
    assert activation_bytes(SMALL, small(eager_attention=True)) == 6 * 2 * (248 - 8 + 5 * 2 * 3)
    # logits: 6 tokens x 10 x (bf16 2 + fp32 copy 4 + its gradient 4); none with a fused loss
    assert logit_bytes(SMALL, small()) == 600
    assert logit_bytes(SMALL, small(fused_loss=True)) == 0


def parts(memory):
    return (memory.weights, memory.gradients, memory.optimizer)


def test_weights_gradients_optimizer_by_strategy():
    # full fine-tuning in bf16: 2 + 2 + (fp32 master 4 + m 4 + v 4) bytes a parameter
    assert parts(estimate(SMALL, small())) == (2704, 2704, 16224)
    assert parts(estimate(SMALL, small(world=2, strategy="ddp"))) == (2704, 2704, 16224)
    # ZeRO-2 halves gradients and optimizer over 2 ranks; ZeRO-3 the weights too, plus one gathered layer (592 x 2)
    assert parts(estimate(SMALL, small(world=2, strategy="zero2"))) == (2704, 1352, 8112)
    assert parts(estimate(SMALL, small(world=2, strategy="zero3"))) == (1352 + 1184, 1352, 8112)
    assert parts(estimate(SMALL, small(world=2, strategy="fsdp2"))) == (1352 + 1184, 1352, 8112)
    offload = small(world=2, strategy="zero3_offload", offload_optimizer=True, offload_params=True)
    assert parts(estimate(SMALL, offload)) == (1184, 1352, 0)
    # fp32 weights keep no separate master copy: 4 + 4 + 8
    assert parts(estimate(SMALL, small(weight_bytes=4))) == (5408, 5408, 10816)
    # LoRA: the frozen base in bf16, the 112 adapter parameters in fp32 with fp32 gradients and m + v
    lora = small(lora_r=2, lora_targets=("q_proj", "v_proj"))
    assert parts(estimate(SMALL, lora)) == (2704 + 448, 448, 896)


def test_overhead_and_total():
    memory = estimate(SMALL, small())
    rest = 2704 + 2704 + 16224 + 2976 + 600
    assert memory.overhead == pytest.approx(GIB + 0.1 * rest)
    assert memory.total == pytest.approx(rest + GIB + 0.1 * rest)
    assert memory.fits and not estimate(SMALL, small(gpu_memory_gb=1.0)).fits


def test_describe_names_every_part():
    line = describe(estimate(SMALL, small(world=8, strategy="zero3", gpu_memory_gb=80)))
    assert line.startswith("memory plan: 1.0 of 80 GiB per GPU (8 GPUs, zero3): weights 0.0, gradients 0.0,")
    assert "activations 0.0 (gradient checkpointing off), logits 0.0, overhead 1.0" in line


# name -> parameters the model card (or this repo's meta-device build test) gives, in billions
CARD_PARAMETERS = {
    "llama3_1_8b": 8.03,
    "qwen3_8b": 8.19,
    "qwen2_5_7b": 7.62,  # Qwen2.5's q/k/v biases (0.3M) are not counted
    "mistral_nemo_12b": 12.25,
    "llama2_70b": 68.98,
    "mistral_small_v7": 23.57,
    "llama4_scout": 107.77,  # the text model (tests/test_model_configs_families.py)
    "deepseek_v3": 671.0,  # the card's 671B (37B active)
}


@pytest.mark.parametrize("name", list(CARD_PARAMETERS))
def test_parameter_count_matches_the_model_card(name):
    model = OmegaConf.load(CONF_DIR / "model" / f"{name}.yaml")  # read, not composed: one GPU cannot hold most
    count = parameters(shape_of(model.arch, model.arch_type)) / 1e9
    assert count == pytest.approx(CARD_PARAMETERS[name], rel=0.01)


# Every shipped recipe that trains on GPUs -> the GPUs its comments state (nodes x GPUs per node, 80 GB each).
GPU_RECIPES = {
    "itc_qwen2_5_7b": 1,  # "global batch 8 is one GPU"
    "itc_qwen3_8b": 1,
    "grpo_qwen3_8b": 8,  # "one 8-GPU node"
    "mt_llama": 8,  # torchrun --nproc_per_node 8
    "toolgt_llama3_1_8b": 8,  # Table 4: 8 A100 80GB
    "toolgt_mistral_7b": 8,
    "toolgt_nemo_12b": 8,
    "toolgt_qwen2_5_14b": 8,
    "toolgt_qwen3_8b": 8,
    "toolverifier": 16,  # "We train it on 16 A100 GPUs": launcher 2 x 8
}


def test_every_recipe_is_classified_gpu_or_cpu():
    shipped = {path.stem for path in (REPO_ROOT / "recipes").glob("*.yaml")}
    assert shipped == set(GPU_RECIPES) | CPU_RECIPES


def fits_its_gpus(name: str, overrides: list[str]) -> None:
    cfg = compose([f"recipe={name}", *overrides])
    assert world_of(cfg) == GPU_RECIPES[name]
    assert plan_problem(cfg) is None, describe(plan(cfg))


@pytest.mark.parametrize("name", list(GPU_RECIPES))
def test_each_gpu_recipe_fits_the_gpus_it_states(name):
    """Before: mt_llama needed 219.9 GiB a GPU (micro batch 4 x 4,096 tokens, no checkpointing) and the toolgt
    recipes stated their 8 GPUs only in comments (the plan saw one)."""
    fits_its_gpus(name, [])


def test_cpu_recipes_fit_or_have_no_shapes():
    for name in CPU_RECIPES:
        assert plan_problem(compose([f"recipe={name}"])) is None


def shipped_then(name: str, fix: list[str], **knobs):
    """Recipe ``name`` composed with ``fix``, then the knobs set on the composed config:
    ``train__micro_batch_size=4`` sets train.micro_batch_size."""
    cfg = compose([f"recipe={name}", *fix])
    for key, value in knobs.items():
        section, field = key.split("__")
        cfg[section][field] = value
    return cfg


def test_refusal_names_the_knobs_that_fit():
    """mt_llama under the paper's ZeRO-3 on its 8 GPUs: micro batch 4 of 4,096 tokens without checkpointing."""
    cfg = shipped_then("mt_llama", ["distributed=zero3"], distributed__gradient_checkpointing=False)
    problem = plan_problem(cfg)
    assert problem.startswith("memory plan: 219.9 of 80 GiB per GPU (8 GPUs, zero3): ")
    assert "activations 177.1 (gradient checkpointing off)" in problem
    assert problem.endswith(
        "does not fit; set distributed.gradient_checkpointing=true (fits: 35.6 GiB), "
        "or train.micro_batch_size=1 (fits: 57.7 GiB)"
    )


def test_refusal_offers_two_knobs_together_when_neither_fits_alone():
    # 16,384-token rows: checkpointing alone leaves 4 rows of logits and one layer's activations, micro batch 1
    # alone 32 layers of one row's
    cfg = shipped_then(
        "mt_llama", ["distributed=zero3"], distributed__gradient_checkpointing=False, data__max_seq_len=16384
    )
    assert plan_problem(cfg).endswith(
        "set distributed.gradient_checkpointing=true and train.micro_batch_size=1 (fits: 35.6 GiB)"
    )


def test_refusal_without_a_knob_that_fits_says_to_shard():
    """Full fine-tuning 14B on one GPU: no knob alone or together fits."""
    cfg = shipped_then("toolgt_qwen2_5_14b", [], launcher__gpus_per_node=1)
    problem = plan_problem(cfg)
    assert "(1 GPU, zero3)" in problem and "no single knob makes it fit" in problem
    assert "launcher.gpus_per_node" in problem


def test_the_running_world_overrides_the_stated_one():
    cfg = compose(["recipe=toolgt_qwen2_5_14b"])
    assert plan(cfg).setup.world == 8 and plan(cfg, world_size=1).setup.world == 1
    assert plan_problem(cfg) is None and "does not fit" in plan_problem(cfg, world_size=1)


def test_a_run_on_a_gpu_prints_its_plan_and_refuses_one_that_cannot_fit(capsys):
    """At run start (train.engine.run.set_up): the plan for the world that runs; on a CPU nothing is said."""
    from train.base.errors import ConfigError
    from train.engine.distributed import World
    from train.engine.run import check_memory_plan

    eight = World(rank=0, local_rank=0, world_size=8, local_world_size=8, node_rank=0)
    cfg = compose(["recipe=mt_llama", "distributed=zero3"])
    import transformers.integrations  # noqa: F401 - its first import prints a line under WANDB_MODE=offline

    capsys.readouterr()  # (the test alone, or first in its worker, saw it in the plan's output)
    check_memory_plan(cfg, eight, gpu=True)
    assert capsys.readouterr().out.startswith("memory plan: 35.6 of 80 GiB per GPU (8 GPUs, zero3): ")
    no_checkpointing = compose(["recipe=mt_llama", "distributed=zero3", "distributed.gradient_checkpointing=false"])
    with pytest.raises(ConfigError, match="does not fit; set distributed.gradient_checkpointing=true"):
        check_memory_plan(no_checkpointing, eight, gpu=True)
    capsys.readouterr()
    check_memory_plan(no_checkpointing, eight, gpu=False)
    assert capsys.readouterr().out == ""


def test_launch_refuses_a_plan_that_cannot_fit_before_writing_anything(tmp_path):
    from train.engine.launch import LaunchError
    from train.engine.launch import plan as launch_plan

    cfg = compose(
        [
            "recipe=mt_llama",
            "distributed=zero3",
            "distributed.gradient_checkpointing=false",
            f"output_dir={tmp_path / 'run'}",
        ]
    )
    with pytest.raises(LaunchError, match="219.9 of 80 GiB per GPU .* does not fit"):
        launch_plan(cfg, "torchrun", "mt_llama", [], REPO_ROOT, "python", tmp_path, "tooltrain launch")
    assert list(tmp_path.iterdir()) == []
    # a CPU-only partition (no GPUs requested) has no GPU memory to plan for
    cpu = compose(["recipe=mt_llama", "distributed.gradient_checkpointing=false", "launcher.request_gpus=false"])
    assert launch_plan(cpu, "torchrun", "mt_llama", [], REPO_ROOT, "python", tmp_path, "x").launcher == "torchrun"


def test_part_weights_count_one_chunk_of_logits_not_the_whole_row():
    from train.engine.loss import LOSS_CHUNK
    from train.engine.memory_plan import setup_of

    cfg = compose(["recipe=mt_llama", "+data.part_weights.call_args=2"])
    shape, setup = shape_of(cfg.model.arch, str(cfg.model.arch_type)), setup_of(cfg)
    assert setup.chunked_loss and setup.micro_batch * setup.seq_len > LOSS_CHUNK
    assert logit_bytes(shape, setup) == LOSS_CHUNK * shape.vocab * (2 + 4 + 4)
    plain = setup_of(compose(["recipe=mt_llama"]))
    assert not plain.chunked_loss
    assert logit_bytes(shape, plain) == plain.micro_batch * plain.seq_len * shape.vocab * (2 + 4 + 4)
    # a LoRA-wrapped head under ZeRO-3 keeps the full logits (train.engine.loss)
    wrapped = setup_of(
        compose(["recipe=mt_llama", "+data.part_weights.call_args=2", "distributed=zero3",
                 "peft.target_modules=[q_proj,lm_head]"])
    )  # fmt: skip
    assert not wrapped.chunked_loss
