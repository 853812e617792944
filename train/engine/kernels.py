"""Fused kernels (``kernels=liger``): the model types Liger patches and the strategies it can run under.

Liger patches a model by its ``model_type`` (``_apply_liger_kernel_to_instance``) and only logs, at INFO, when it
has nothing for that type: the run then trains with the plain kernels while the config says liger. Its fused linear
cross-entropy reads ``lm_head.weight`` inside the model's forward, outside any module's own forward, so under ZeRO-3
it gets the rank's empty partition (DeepSpeed gathers a parameter only for the forward of the module that owns it).
Both are refused before any data or model work, with the fix.
"""

from __future__ import annotations

from typing import Any

from train.base.errors import choice

# The keys of MODEL_TYPE_TO_APPLY_LIGER_FN in liger_kernel/transformers/monkey_patch.py (linkedin/Liger-Kernel,
# main at commit 00218a06, a superset of 0.8.x's): the model types Liger patches. Update with the pinned version.
LIGER_MODEL_TYPES = frozenset(
    {
        "deepseek_v3", "deepseek_v4", "exaone4", "falcon_h1", "gemma", "gemma2", "gemma3", "gemma3_text", "gemma4",
        "gemma4_text", "glm4", "glm4v", "glm4v_moe", "gpt_oss", "granite", "hunyuan_v1_dense", "hunyuan_v1_moe",
        "internvl", "llama", "llama4", "llama4_text", "llava", "ministral", "mistral", "mixtral", "mllama",
        "mllama_text_model", "muse_glimmer", "nemotron", "olmo2", "olmo3", "paligemma", "phi3", "pixtral", "qwen2",
        "qwen2_5_vl", "qwen2_5_vl_text", "qwen2_vl", "qwen2_vl_text", "qwen3", "qwen3_5", "qwen3_5_moe",
        "qwen3_5_moe_text", "qwen3_5_text", "qwen3_moe", "qwen3_next", "qwen3_vl", "qwen3_vl_moe", "qwen3_vl_moe_text",
        "smollm3", "smolvlm",
    }
)  # fmt: skip


def liger_model_problem(model_type: str, where: str) -> str | None:
    """Why Liger cannot patch a ``model_type`` model (``where`` names the setting that decides it), or None."""
    if model_type in LIGER_MODEL_TYPES:
        return None
    return (
        f"kernels=liger has no kernels for model type {model_type!r} ({where}): the run would train with the plain "
        "kernels; use kernels=none"
    )


def liger_strategy_problem(strategy: str, zero_stage: int | None) -> str | None:
    """Why Liger's fused loss cannot run under this strategy, or None (see the module docstring)."""
    if zero_stage != 3:
        return None
    return (
        f"kernels=liger with distributed={strategy} (ZeRO stage 3): Liger's fused cross-entropy reads lm_head.weight "
        "outside the module's forward and gets ZeRO-3's empty partition; use distributed=zero2, ddp or fsdp2, "
        "or kernels=none"
    )


def kernel_problems(cfg: Any) -> list[str]:
    """The config's kernel problems at compose time: the strategy, and the model type where the config names it
    (source=config: ``model.arch_type``; the demo model is a llama; a pretrained model is checked when it loads)."""
    from train.engine.distributed import zero_stage

    if choice(cfg.kernels) != "liger":
        return []
    problems = [liger_strategy_problem(choice(cfg.distributed.strategy), zero_stage(cfg.distributed))]
    source = choice(cfg.model.source)
    if source == "config":
        problems.append(liger_model_problem(cfg.model.arch_type, f"model.arch_type of model={cfg.model.name}"))
    return [problem for problem in problems if problem]
