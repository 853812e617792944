"""The memory plan: how many bytes each GPU needs for a composed config, and whether that fits its GPUs.

A pure estimate from the config alone (no torch, no model): the model's shapes (``model.arch``), the micro batch
and row length (``train.micro_batch_size`` x ``data.max_seq_len``: packed rows are that long, padded rows at most
that long, so the peak is the same), LoRA or full fine-tuning, the strategy and its world size
(``launcher.nodes`` x ``launcher.gpus_per_node``, the GPUs a recipe states), gradient checkpointing and the dtype.
``plan_problem`` is the compose-time check (a plan that cannot fit refuses, naming the knob that makes it fit);
``describe`` is the line printed at run start; ``fastest_strategy`` is the fastest strategy that fits a run's GPUs
(what each shipped recipe defaults to).

Per GPU, in bytes (P parameters, A LoRA adapter parameters, N ranks, w = 2 for bf16/fp16 weights, 4 for fp32):

- weights: P*w; LoRA adds A*4 (peft keeps adapters in fp32; A*w with peft.adapter_dtype=base).
- gradients: full fine-tuning P*w; LoRA A*4 (A*w with peft.adapter_dtype=base; the base is frozen).
- optimizer (AdamW): fp32 m and v, 8 bytes a trained parameter, plus a 4-byte fp32 master copy when the weights are
  16-bit (the 16 bytes a parameter of the ZeRO paper, Rajbhandari et al. 2020, §3: 2 + 2 + K=12); LoRA: A*8.
- sharding: ZeRO-2 divides gradients and optimizer by N; ZeRO-3 and FSDP2 divide all three by N and hold one
  layer's gathered weights besides; offloading moves the offloaded part to host memory (0 here). single/ddp hold
  everything on every GPU.
- activations, per token and layer (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
  Transformer Models", eq. 1: sbh(34 + 5as/h) for 16-bit activations, generalized to grouped-query attention and
  gated (SwiGLU) MLPs, with a = activation bytes):
    attention  a*(h + q + kv + kv + q)    input, Q, K, V, the output projection's input (q = heads*head_dim,
                                          kv = kv_heads*head_dim; Korthikanti's 10sbh for q = kv = h)
                + 4*heads                 flash/SDPA's fp32 log-sum-exp; eager attention (which stores the
                                          scores) adds Korthikanti's 5as/h term instead: 5*heads*s bytes
    norms      a*2h                       the two RMSNorm inputs (Korthikanti's 4sbh)
    MLP        a*(h + 4I)                 input; gate, up, act(gate) and their product (SwiGLU stores four
                                          I-wide tensors where GeLU stores two: Korthikanti's 19sbh)
               MoE: I is the active width (experts per token x expert width + shared experts), plus the
               router's logits a*experts
    LoRA       (4 + 1 if dropout) * d_in  per adapted module: peft casts its input to fp32 for lora_A and keeps
                                          the dropout mask; with peft.adapter_dtype=base no cast: (a + 1) * d_in
                                          with dropout (its output and mask), else nothing
  With gradient checkpointing a layer keeps only its input (a*h) and one layer's full activations live at a time
  during its recomputation.
- logits: tokens x vocab x (a + 4 + 4): the lm_head's output, its fp32 copy for the loss and that copy's gradient;
  0 with kernels=liger (its fused linear cross-entropy never builds them) unless data.part_weights turns it off;
  with data.part_weights, one chunk of positions (train.engine.loss's LOSS_CHUNK) instead of the whole micro batch.
- overhead: CUDA context (1 GiB) plus 10% of everything above for the allocator's fragmentation.

Bytes are shown in GiB (2^30: what "80 GB" on an A100/H100 holds); launcher.gpu_memory_gb is in the same unit.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from omegaconf import OmegaConf

from train.base.errors import choice

GIB = 2**30
GPU_MEMORY_GB = 80.0  # launcher.gpu_memory_gb's default: an A100/H100 80 GB
CUDA_CONTEXT_BYTES = 1 * GIB
FRAGMENTATION = 0.10
ADAPTER_BYTES = 4  # peft's adapters are fp32
DTYPE_BYTES = {"auto": 2, "bfloat16": 2, "float16": 2, "float32": 4}  # auto: bf16 on a GPU
SHARDED = {"zero3", "zero3_offload", "fsdp2"}  # weights, gradients and optimizer divided by the world
SHARDED_STATE = SHARDED | {"zero2"}  # gradients and optimizer divided by the world
SHARED_EXPERTS = {"llama4_text": 1}  # model types whose MoE layers carry shared experts without a count field


@dataclass(frozen=True)
class Shape:
    """The shapes the plan needs, from ``model.arch`` (transformers' config names)."""

    hidden: int
    layers: int
    intermediate: int  # a dense layer's MLP width
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool = False
    experts: int = 0  # routed experts per MoE layer (0: dense)
    experts_per_token: int = 0
    expert_intermediate: int = 0
    shared_intermediate: int = 0  # the shared experts' total width in an MoE layer
    dense_layers: int = 0  # leading dense layers of an MoE model (DeepSeek's first_k_dense_replace)
    q_lora_rank: int = 0  # multi-head latent attention (DeepSeek): 0 = ordinary attention
    kv_lora_rank: int = 0
    qk_rope_dim: int = 0
    v_head_dim: int = 0


@dataclass(frozen=True)
class Setup:
    """What the run does with the model: the knobs ``plan_problem`` turns."""

    micro_batch: int
    seq_len: int
    world: int
    strategy: str
    lora_r: int  # 0: full fine-tuning
    lora_targets: tuple[str, ...] = ()
    lora_dropout: bool = False
    adapter_in_base_dtype: bool = False  # peft.adapter_dtype=base: adapters in the weights' dtype, not fp32
    checkpointing: bool = False
    weight_bytes: int = 2
    eager_attention: bool = False
    fused_loss: bool = False  # logits never built whole (Liger's fused linear cross-entropy)
    chunked_loss: bool = False  # the weighted loss (train.engine.loss): logits a chunk of positions at a time
    offload_optimizer: bool = False
    offload_params: bool = False
    gpu_memory_gb: float = GPU_MEMORY_GB


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes per GPU, by part, for ``setup`` on a model of ``shape``."""

    shape: Shape
    setup: Setup
    weights: float
    gradients: float
    optimizer: float
    activations: float
    logits: float
    overhead: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.logits + self.overhead

    @property
    def fits(self) -> bool:
        return self.total <= self.setup.gpu_memory_gb * GIB


# ---- shapes and parameter counts ------------------------------------------------------------------


def shape_of(arch: Any, model_type: str = "llama") -> Shape | None:
    """The model's shapes, or None when ``arch`` does not give them (a model loaded by name alone)."""
    arch = dict(arch or {})
    needed = ("hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads", "vocab_size")
    if any(arch.get(key) is None for key in needed):
        return None
    hidden, heads = int(arch["hidden_size"]), int(arch["num_attention_heads"])
    experts = int(arch.get("num_local_experts") or arch.get("n_routed_experts") or 0)
    expert_width = int(arch.get("moe_intermediate_size") or arch["intermediate_size"]) if experts else 0
    shared = int(arch.get("n_shared_experts") or SHARED_EXPERTS.get(model_type, 0)) * expert_width
    return Shape(
        hidden=hidden,
        layers=int(arch["num_hidden_layers"]),
        intermediate=int(arch.get("intermediate_size_mlp") or arch["intermediate_size"]),
        heads=heads,
        kv_heads=int(arch.get("num_key_value_heads") or heads),
        head_dim=int(arch.get("head_dim") or arch.get("qk_nope_head_dim", 0) + arch.get("qk_rope_head_dim", 0))
        or hidden // heads,
        vocab=int(arch["vocab_size"]),
        tied=bool(arch.get("tie_word_embeddings", False)),
        experts=experts,
        experts_per_token=int(arch.get("num_experts_per_tok") or 0) if experts else 0,
        expert_intermediate=expert_width,
        shared_intermediate=shared,
        dense_layers=int(arch.get("first_k_dense_replace") or 0) if experts else 0,
        q_lora_rank=int(arch.get("q_lora_rank") or 0),
        kv_lora_rank=int(arch.get("kv_lora_rank") or 0),
        qk_rope_dim=int(arch.get("qk_rope_head_dim") or 0),
        v_head_dim=int(arch.get("v_head_dim") or 0),
    )


def linear_shapes(shape: Shape, dense: bool) -> dict[str, tuple[int, int]]:
    """(in, out) of each named linear layer in one decoder layer; an MoE layer's gate/up/down are its shared
    experts' (the routed experts are fused 3-D parameters, counted in ``layer_parameters``)."""
    h, q, kv = shape.hidden, shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    width = shape.intermediate if dense else shape.shared_intermediate
    if shape.q_lora_rank:  # MLA: q through a low-rank bottleneck, k/v from one compressed latent
        v = shape.heads * shape.v_head_dim
        attention = {
            "q_a_proj": (h, shape.q_lora_rank),
            "q_b_proj": (shape.q_lora_rank, q),
            "kv_a_proj_with_mqa": (h, shape.kv_lora_rank + shape.qk_rope_dim),
            "kv_b_proj": (shape.kv_lora_rank, q - shape.heads * shape.qk_rope_dim + v),
            "o_proj": (v, h),
        }
    else:
        attention = {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h)}
    mlp = {"gate_proj": (h, width), "up_proj": (h, width), "down_proj": (width, h)} if width else {}
    return attention | mlp


def is_dense(shape: Shape, layer: int) -> bool:
    return not shape.experts or layer < shape.dense_layers


def layer_parameters(shape: Shape, layer: int) -> int:
    """One decoder layer's parameters: its linear layers, routed experts and router, two norms (no biases)."""
    dense = is_dense(shape, layer)
    count = sum(i * o for i, o in linear_shapes(shape, dense).values()) + 2 * shape.hidden
    if not dense:
        count += shape.experts * (3 * shape.hidden * shape.expert_intermediate + shape.hidden)  # experts + router
    return count


def parameters(shape: Shape) -> int:
    """All parameters: the layers, the embedding, the lm_head unless tied, the final norm."""
    embeddings = shape.vocab * shape.hidden * (1 if shape.tied else 2)
    return sum(layer_parameters(shape, layer) for layer in range(shape.layers)) + embeddings + shape.hidden


def adapter_parameters(shape: Shape, r: int, targets: tuple[str, ...]) -> int:
    """LoRA's A (r x in) and B (out x r) for every targeted linear layer of every layer."""
    total = 0
    for layer in range(shape.layers):
        linears = linear_shapes(shape, is_dense(shape, layer))
        total += sum(r * (linears[name][0] + linears[name][1]) for name in targets if name in linears)
    return total


# ---- activations ------------------------------------------------------------------------------------


def layer_activation_bytes(shape: Shape, setup: Setup, layer: int) -> int:
    """Bytes one token's activations take in one layer without checkpointing (the module docstring's formula)."""
    a, h = setup.weight_bytes, shape.hidden
    linears = linear_shapes(shape, is_dense(shape, layer))
    q_in = linears["o_proj"][0]
    kv = shape.kv_heads * shape.head_dim
    attention = a * (h + q_in + 2 * kv + q_in)
    attention += 5 * shape.heads * setup.seq_len if setup.eager_attention else 4 * shape.heads
    if is_dense(shape, layer):
        mlp = a * (h + 4 * shape.intermediate)
    else:
        width = shape.experts_per_token * shape.expert_intermediate + shape.shared_intermediate
        mlp = a * (h + 4 * width + shape.experts)
    lora = 0
    if setup.lora_r:
        lora = lora_input_bytes(setup) * sum(linears[name][0] for name in setup.lora_targets if name in linears)
    return attention + a * 2 * h + mlp + lora


def lora_input_bytes(setup: Setup) -> int:
    """Bytes per input feature an adapted module keeps besides the base layer's own input: an fp32 adapter's cast
    copy, and with dropout the dropout's mask (and, without the cast, its output)."""
    dropout = 1 if setup.lora_dropout else 0
    if not setup.adapter_in_base_dtype:
        return ADAPTER_BYTES + dropout
    return setup.weight_bytes + dropout if dropout else 0


def activation_bytes(shape: Shape, setup: Setup) -> int:
    tokens = setup.micro_batch * setup.seq_len
    per_layer = [layer_activation_bytes(shape, setup, layer) for layer in range(shape.layers)]
    if setup.checkpointing:
        return tokens * (shape.layers * setup.weight_bytes * shape.hidden + max(per_layer))
    return tokens * sum(per_layer)


def logit_bytes(shape: Shape, setup: Setup) -> int:
    if setup.fused_loss:
        return 0
    positions = setup.micro_batch * setup.seq_len
    if setup.chunked_loss:
        from train.engine.loss import LOSS_CHUNK  # here: the loss module imports torch, a plan needs none

        positions = min(positions, LOSS_CHUNK)
    return positions * shape.vocab * (setup.weight_bytes + 4 + 4)


# ---- the plan ---------------------------------------------------------------------------------------


def estimate(shape: Shape, setup: Setup) -> MemoryPlan:
    """Bytes per GPU for ``setup`` on a model of ``shape`` (the module docstring's formulas)."""
    w, world = setup.weight_bytes, max(setup.world, 1)
    sharded, state_sharded = setup.strategy in SHARDED, setup.strategy in SHARDED_STATE
    shard = world if sharded else 1
    state_shard = world if state_sharded else 1
    total = parameters(shape)
    if setup.lora_r:
        adapters = adapter_parameters(shape, setup.lora_r, setup.lora_targets)
        adapter_bytes = w if setup.adapter_in_base_dtype else ADAPTER_BYTES
        weights = total * w + adapters * adapter_bytes
        gradients = adapters * adapter_bytes
        optimizer = adapters * 8
    else:
        weights = gradients = total * w
        optimizer = total * (8 + (4 if w < 4 else 0))
    weights = 0 if setup.offload_params else weights / shard
    if sharded:  # the layer being computed, gathered whole
        weights += max(layer_parameters(shape, layer) for layer in range(shape.layers)) * w
    gradients /= state_shard
    optimizer = 0 if setup.offload_optimizer else optimizer / state_shard
    activations, logits = activation_bytes(shape, setup), logit_bytes(shape, setup)
    overhead = CUDA_CONTEXT_BYTES + FRAGMENTATION * (weights + gradients + optimizer + activations + logits)
    return MemoryPlan(shape, setup, weights, gradients, optimizer, activations, logits, overhead)


def _select(cfg: Any, key: str, default: Any) -> Any:
    value = OmegaConf.select(cfg, key, default=default)
    return default if value is None else value


def world_of(cfg: Any) -> int:
    """The ranks the recipe states: launcher.nodes x launcher.gpus_per_node (1 for distributed=single)."""
    if str(_strategy(cfg)) == "single":
        return 1
    return int(_select(cfg, "launcher.nodes", 1)) * int(_select(cfg, "launcher.gpus_per_node", 1))


def _strategy(cfg: Any) -> str:
    return choice(cfg.distributed.strategy)


def setup_of(cfg: Any, world_size: int | None = None) -> Setup:
    """The plan's knobs from a composed config; ``world_size`` overrides the stated world (the running one)."""
    lora = choice(cfg.peft.kind) == "lora"
    targets = cfg.peft.get("target_modules") or cfg.model.lora_target_modules
    kernels = choice(cfg.kernels)
    return Setup(
        micro_batch=int(cfg.train.micro_batch_size),
        seq_len=int(cfg.data.max_seq_len),
        world=world_size if world_size is not None else world_of(cfg),
        strategy=_strategy(cfg),
        lora_r=int(cfg.peft.r) if lora else 0,
        lora_targets=tuple(targets) if lora else (),
        lora_dropout=lora and float(cfg.peft.dropout) > 0,
        adapter_in_base_dtype=lora and choice(_select(cfg, "peft.adapter_dtype", "fp32")) == "base",
        checkpointing=bool(cfg.distributed.gradient_checkpointing),
        weight_bytes=DTYPE_BYTES.get(str(cfg.model.dtype), 2),
        eager_attention=str(cfg.model.attn_implementation) == "eager",
        fused_loss=kernels == "liger" and not cfg.data.part_weights,
        # part weights take the chunked weighted loss, except a LoRA-wrapped head under ZeRO-3 (full logits there)
        chunked_loss=bool(cfg.data.part_weights)
        and not (_strategy(cfg) == "zero3" and lora and "lm_head" in (targets or ())),
        offload_optimizer=bool(cfg.distributed.offload_optimizer),
        offload_params=bool(cfg.distributed.offload_params),
        gpu_memory_gb=float(_select(cfg, "launcher.gpu_memory_gb", GPU_MEMORY_GB)) * (1 - _vllm_share(cfg)),
    )


def _vllm_share(cfg: Any) -> float:
    """The share of each GPU a colocated vLLM takes (train.objective=grpo, grpo.vllm=colocate): training has the
    rest."""
    colocated = choice(_select(cfg, "grpo.vllm", "off")) == "colocate"
    if choice(_select(cfg, "train.objective", "sft")) != "grpo" or not colocated:
        return 0.0
    return float(_select(cfg, "grpo.vllm_gpu_memory_utilization", 0.0))


def plan(cfg: Any, world_size: int | None = None) -> MemoryPlan | None:
    """The plan for a composed config, or None when ``model.arch`` does not give the model's shapes."""
    shape = shape_of(cfg.model.arch, str(cfg.model.arch_type))
    return None if shape is None else estimate(shape, setup_of(cfg, world_size))


def gib(value: float) -> str:
    return f"{value / GIB:.1f}"


def describe(memory: MemoryPlan) -> str:
    """One line: the total against the GPU's memory, then each part (GiB)."""
    s = memory.setup
    checkpointing = "on" if s.checkpointing else "off"
    gpus = f"{s.world} GPU{'s' if s.world > 1 else ''}, {s.strategy}"
    return (
        f"memory plan: {gib(memory.total)} of {s.gpu_memory_gb:g} GiB per GPU ({gpus}): weights {gib(memory.weights)}"
        f", gradients {gib(memory.gradients)}, optimizer {gib(memory.optimizer)}, activations "
        f"{gib(memory.activations)} (gradient checkpointing {checkpointing}), logits {gib(memory.logits)}, "
        f"overhead {gib(memory.overhead)}"
    )


def _fixes(setup: Setup) -> list[tuple[str, Setup]]:
    """Each knob that lowers the plan, as (override, the setup with it), most usual first."""
    fixes = []
    if not setup.checkpointing:
        fixes.append(("distributed.gradient_checkpointing=true", dataclasses.replace(setup, checkpointing=True)))
    if setup.micro_batch > 1:
        fixes.append(("train.micro_batch_size=1", dataclasses.replace(setup, micro_batch=1)))
    if setup.world > 1 and setup.strategy not in SHARDED:
        fixes.append(("distributed=zero3", dataclasses.replace(setup, strategy="zero3")))
    return fixes


# The strategies of a run on several GPUs, fastest first. DDP replicates everything and all-reduces the gradients once
# a step; ZeRO-2 shards gradients and optimizer state besides (a reduce-scatter, then an all-gather of the update);
# ZeRO-3 shards the weights too and gathers each layer's in every forward and backward pass, 1.5x DDP's traffic
# (Rajbhandari et al. 2020, §7) and many small collectives. One GPU: single.
SPEED_ORDER = ("ddp", "zero2", "zero3")
# A faster strategy is taken only where its plan leaves this share of the GPU free: the plan is an estimate, and a
# run at the edge of memory is not faster once it runs out. (Where none leaves it, the first that fits at all.)
HEADROOM = 0.10


def fastest_strategy(memory: MemoryPlan) -> str | None:
    """The fastest strategy (``SPEED_ORDER``; single on one GPU) whose plan for ``memory``'s model, knobs and GPUs
    fits with ``HEADROOM`` to spare, else the fastest that fits at all; None when none fits."""
    setup = memory.setup
    candidates = ("single",) if setup.world == 1 else SPEED_ORDER
    plans = [
        estimate(memory.shape, dataclasses.replace(setup, strategy=s, offload_optimizer=False, offload_params=False))
        for s in candidates
    ]
    roomy = [p for p in plans if p.total <= (1 - HEADROOM) * setup.gpu_memory_gb * GIB]
    fitting = roomy or [p for p in plans if p.fits]
    return fitting[0].setup.strategy if fitting else None


def plan_problem(cfg: Any, world_size: int | None = None) -> str | None:
    """None when the plan fits ``launcher.gpu_memory_gb`` (or cannot be made: no shapes); else ``refusal``'s line."""
    return refusal(plan(cfg, world_size))


def refusal(memory: MemoryPlan | None) -> str | None:
    """None when ``memory`` fits (or there is no plan); else one line with the plan and the overrides that make it
    fit, each with the total it reaches."""
    if memory is None or memory.fits:
        return None
    shape = memory.shape
    fixes = _fixes(memory.setup)
    fitting = [(knob, estimate(shape, setup)) for knob, setup in fixes]
    fitting = [(knob, fixed) for knob, fixed in fitting if fixed.fits]
    if not fitting and len(fixes) > 1:  # no knob alone: the first two together
        (knob1, setup1), (knob2, _) = fixes[0], fixes[1]
        both = estimate(shape, dict(_fixes(setup1))[knob2])
        fitting = [(f"{knob1} and {knob2}", both)] if both.fits else []
    head = f"{describe(memory)}: does not fit"
    if not fitting:
        return (
            f"{head}; no single knob makes it fit: shard over more GPUs (launcher.nodes, launcher.gpus_per_node with "
            "distributed=zero3), offload (distributed=zero3_offload) or shorten data.max_seq_len"
        )
    options = ", or ".join(f"{knob} (fits: {gib(fixed.total)} GiB)" for knob, fixed in fitting)
    return f"{head}; set {options}"
