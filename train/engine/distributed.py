"""Everything distributed, in one place: the world, the strategy, DeepSpeed configs, rank-0 policy.

Model, data and loop code never read ``RANK`` or call ``torch.distributed``: they receive what they
need from here. The HF Trainer (through accelerate) runs the actual engine; this module only
translates the Hydra ``distributed`` group into TrainingArguments and a DeepSpeed config whose
batch sizes agree with the world size, and says where each rank builds its model (``model_placement``).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from train.base.errors import choice


@dataclass(frozen=True)
class World:
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int

    @property
    def is_main(self) -> bool:
        """Global rank 0: logs, trackers, reports."""
        return self.rank == 0

    @property
    def is_local_main(self) -> bool:
        """Rank 0 of its node: node-local work such as filling a node-local cache."""
        return self.local_rank == 0

    @classmethod
    def from_env(cls) -> World:
        """The world as torchrun, deepspeed, Slurm's srun or submitit describe it (a single process otherwise)."""
        adopt_submitit_tasks()
        env = os.environ
        world_size = int(env.get("WORLD_SIZE", env.get("SLURM_NTASKS", 1)))
        rank = int(env.get("RANK", env.get("SLURM_PROCID", 0)))
        local_rank = int(env.get("LOCAL_RANK", env.get("SLURM_LOCALID", 0)))
        local_world = int(env.get("LOCAL_WORLD_SIZE", env.get("SLURM_NTASKS_PER_NODE", world_size)))
        node_rank = int(env.get("GROUP_RANK", env.get("SLURM_NODEID", rank // max(local_world, 1))))
        return cls(
            rank=rank, local_rank=local_rank, world_size=world_size, local_world_size=local_world, node_rank=node_rank
        )


def adopt_submitit_tasks() -> dict[str, str]:
    """Describe a submitit job's tasks to torch.distributed the way torchrun would.

    Hydra's submitit launchers (conf/launcher/slurm.yaml, submitit_local.yaml) start nodes x
    tasks_per_node processes themselves and run the training job in each, with no torchrun to set
    RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; without them every task would train
    alone. Sets them from submitit's job environment (the first host of the job is the master, the
    port derives from the job id) and returns what it set. Nothing to do outside submitit, when a
    launcher already set RANK, or for a single task.
    """
    if "SUBMITIT_EXECUTOR" not in os.environ or "RANK" in os.environ:
        return {}
    from submitit import JobEnvironment
    from submitit.helpers import TorchDistributedEnvironment

    job = JobEnvironment()
    if job.num_tasks <= 1:
        return {}
    dist = TorchDistributedEnvironment()
    values = {
        "RANK": str(dist.rank),
        "WORLD_SIZE": str(dist.world_size),
        "LOCAL_RANK": str(dist.local_rank),
        "LOCAL_WORLD_SIZE": str(dist.local_world_size),
        "GROUP_RANK": str(job.node),
        "MASTER_ADDR": dist.master_addr,
        "MASTER_PORT": str(dist.master_port),
    }
    os.environ.update(values)
    return values


def requeue_submitit_job(signum: int | None) -> bool:
    """After the checkpoint, let submitit requeue the sweep job its own preemption signal stopped.

    In a ``-m launcher=slurm`` (or submitit_local) sweep, submitit runs the training job in its own
    process and answers its preemption signal (SIGUSR2 unless SUBMITIT_PREEMPT_SIGNAL names another;
    Slurm sends it ``signal_delay_s`` before the time limit) by requeueing at once, mid-step, with
    nothing saved. ``Preemption`` holds that signal during training (finish the step, save, stop) and
    gives submitit's handler back at train end; this calls it as the signal would have. On global
    rank 0 it requeues the job (``scontrol requeue``; the local executor restarts it), within
    submitit's count of timeouts, and ends the process; on other ranks it only logs. The requeued
    job reruns the same command and resumes from the checkpoint.

    Returns False, doing nothing, outside submitit or for another signal (SIGTERM: scancel, or a
    Slurm preemption that requeues by itself).
    """
    if signum is None or "SUBMITIT_EXECUTOR" not in os.environ:
        return False
    from submitit import JobEnvironment

    if signum != getattr(signal, "SIG" + JobEnvironment.USR_SIG, None):
        return False
    handler = signal.getsignal(signum)
    if not callable(handler):
        return False
    handler(signum, None)
    return True


def on_gpu() -> bool:
    return torch.cuda.is_available()


class StrategyError(ValueError):
    pass


def gradient_accumulation_steps(global_batch: int, micro_batch: int, world_size: int) -> int:
    per_step = micro_batch * world_size
    if global_batch % per_step:
        raise StrategyError(
            f"train.global_batch_size={global_batch} is not a multiple of micro_batch_size x world_size = "
            f"{micro_batch} x {world_size}; choose a global batch in multiples of {per_step}"
        )
    return global_batch // per_step


DEEPSPEED_STRATEGIES = ("zero2", "zero3", "zero3_offload")


def zero_stage(dist_cfg: Any) -> int | None:
    """The ZeRO stage a DeepSpeed strategy runs (``distributed.zero_stage``, else the strategy's own), None for
    strategies without DeepSpeed."""
    strategy = choice(dist_cfg.strategy)
    if strategy not in DEEPSPEED_STRATEGIES:
        return None
    return int(dist_cfg.zero_stage or (2 if strategy == "zero2" else 3))


def deepspeed_config(
    dist_cfg: Any, micro_batch: int, grad_accum: int, world_size: int, max_grad_norm: float, bf16: bool
) -> dict[str, Any]:
    """A DeepSpeed ZeRO config with explicit batch sizes (DeepSpeed asserts they multiply out)."""
    stage = zero_stage(dist_cfg) or 2
    # overlap_comm: reduce gradients (and, at stage 3, gather the next layers' weights) while computing, DeepSpeed's
    # own default. "auto" sizes are filled by the HF integration from the model's hidden size h when the Trainer
    # starts DeepSpeed (transformers' HfTrainerDeepSpeedConfig.trainer_config_finalize): reduce buckets h^2, which
    # also bounds overlap_comm's in-flight buffers (~4.5 buckets) to megabytes instead of DeepSpeed's 5e8 elements.
    zero: dict[str, Any] = {
        "stage": stage,
        "overlap_comm": True,
        "contiguous_gradients": True,
        "reduce_bucket_size": "auto",
    }
    if stage == 3:
        zero.update(
            {
                # Gather the 16-bit weights on save so checkpoints and adapters are usable without zero_to_fp32.
                "stage3_gather_16bit_weights_on_model_save": True,
                # Parameters under 10h elements (norms, biases) stay whole on every rank: 0 partitioned them too,
                # hundreds of tiny all-gathers a pass for a few kilobytes each.
                "stage3_param_persistence_threshold": "auto",
                "stage3_prefetch_bucket_size": "auto",  # 0.9 h^2: about one projection fetched ahead
                "stage3_max_live_parameters": 10**9,  # DeepSpeed's defaults, said where they are tuned
                "stage3_max_reuse_distance": 10**9,
            }
        )
    if dist_cfg.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": on_gpu()}
    if dist_cfg.offload_params:
        if stage != 3:
            raise StrategyError("distributed.offload_params needs ZeRO stage 3")
        zero["offload_param"] = {"device": "cpu", "pin_memory": on_gpu()}
    return {
        "train_micro_batch_size_per_gpu": micro_batch,
        "gradient_accumulation_steps": grad_accum,
        "train_batch_size": micro_batch * grad_accum * world_size,
        "gradient_clipping": max_grad_norm,
        "zero_optimization": zero,
        "bf16": {"enabled": bf16},
        "fp16": {"enabled": False},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }


def training_arguments_for(
    dist_cfg: Any, world: World, micro_batch: int, grad_accum: int, max_grad_norm: float, bf16: bool
) -> dict[str, Any]:
    """The TrainingArguments fields that depend on the strategy and the hardware."""
    strategy = choice(dist_cfg.strategy)
    gpu = on_gpu()
    if strategy == "single" and world.world_size > 1:
        raise StrategyError(
            f"distributed=single but WORLD_SIZE={world.world_size}; use distributed=ddp, zero2 or zero3"
        )
    args: dict[str, Any] = {
        # Without use_cpu, each CPU rank runs as a world of its own (FINDINGS); with it, gloo joins them.
        "use_cpu": not gpu,
        "ddp_backend": "gloo" if not gpu and world.world_size > 1 else None,
        "gradient_checkpointing": bool(dist_cfg.gradient_checkpointing),
    }
    if strategy in DEEPSPEED_STRATEGIES:
        args["deepspeed"] = deepspeed_config(dist_cfg, micro_batch, grad_accum, world.world_size, max_grad_norm, bf16)
        if not gpu:
            skip_cpu_shared_memory_op()
    elif strategy == "fsdp2":
        if not gpu:
            # accelerate only switches to FSDP for GPU-like backends: on CPU it would silently train as DDP.
            raise StrategyError(
                "distributed=fsdp2 needs GPUs: on CPU accelerate silently falls back to DDP; "
                "use distributed=zero3 or ddp"
            )
        args["fsdp"] = "full_shard auto_wrap"
        args["fsdp_config"] = {
            "fsdp_version": 2,
            "reshard_after_forward": True,
            "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        }
    if gradient_checkpointing_needs_reentrant_off(args):
        args["gradient_checkpointing_kwargs"] = {"use_reentrant": False}
    return args


def check_kernels(kernels: str) -> None:
    """Liger's kernels are Triton kernels: GPUs only. Checked with the strategy, before any data or model work."""
    if kernels == "liger" and not on_gpu():
        raise StrategyError("kernels=liger needs a GPU (Triton); run with kernels=none on CPU")


# DeepSpeed <= 0.19.2 recomputes a different graph under ZeRO-3 when LoRA's frozen weights are checkpointed
# (``CheckpointError: Recomputed values ...``); 0.19.3 fixed it. pyproject.toml's floor says the same.
DEEPSPEED_LORA_ZERO3_CHECKPOINTING = "0.19.3"


def installed_deepspeed() -> str | None:
    """The installed DeepSpeed's version, or None where it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("deepspeed")
    except PackageNotFoundError:
        return None


def check_deepspeed(dist_cfg: Any, lora: bool) -> None:
    """LoRA + ZeRO-3 + gradient checkpointing on a DeepSpeed that crashes on it: refused at setup, naming the fix.
    Checked at setup, not compose time: the version is the training machine's."""
    from packaging.version import Version

    if not (lora and zero_stage(dist_cfg) == 3 and dist_cfg.gradient_checkpointing):
        return
    installed = installed_deepspeed()
    if installed is not None and Version(installed) < Version(DEEPSPEED_LORA_ZERO3_CHECKPOINTING):
        raise StrategyError(
            f"LoRA with ZeRO-3 and gradient checkpointing crashes on deepspeed {installed} (fixed in "
            f"{DEEPSPEED_LORA_ZERO3_CHECKPOINTING}); run pip install 'deepspeed>={DEEPSPEED_LORA_ZERO3_CHECKPOINTING}'"
            ", or set distributed.gradient_checkpointing=false or distributed=zero2"
        )


def skip_cpu_shared_memory_op() -> None:
    """Keep DeepSpeed from JIT-compiling its CPU shared-memory all-reduce op.

    On CPU, DeepSpeed's comm backend compiles ``deepspeed_shm_comm`` (C++, ~1 minute, a compiler
    needed) the first time it starts. Training never uses it: it serves only
    ``inference_all_reduce``; ZeRO's collectives go through torch.distributed (gloo). Marking the
    op incompatible makes the backend skip the build. Must run before DeepSpeed's comm starts, that
    is before TrainingArguments are created.
    """
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def gradient_checkpointing_needs_reentrant_off(args: dict[str, Any]) -> bool:
    # Reentrant checkpointing breaks with LoRA (frozen inputs) and with ZeRO-3 partitioned params.
    return bool(args.get("gradient_checkpointing"))


# ---- where each rank builds the model ------------------------------------------------------------

ZERO_INIT, ON_DEVICE, ON_CPU = "zero.Init", "device", "cpu"


def model_placement(dist_cfg: Any, gpu: bool, random_init: bool, redrawn: bool) -> str:
    """Where this rank builds the base model (``build_context`` applies it around ``build_model``).

    * ZeRO-3 (``zero_stage`` 3): ``ZERO_INIT``, DeepSpeed's zero.Init: each module's parameters are partitioned as it
      is built and only rank 0 reads the checkpoint, so no rank holds the whole model (loaded whole, a 70B fp16
      checkpoint converted to bf16 is 140 GB on each rank: ~1.1 TB for a node of 8).
    * single, ddp, zero2 on a GPU: a random init ``ON_DEVICE``, the rank's GPU, not drawn on the CPU and copied.
    * ``ON_CPU`` otherwise, as before: weights from files under single/ddp/zero2 (the Trainer moves them), and FSDP2:
      transformers 5 loads every weight on every rank whatever accelerate's ``cpu_ram_efficient_loading`` says (it
      spares only buffers and missing keys, once accelerate sets ACCELERATE_USE_FSDP at the Trainer), and a whole
      random init on one GPU is what sharding is there to avoid.

    ``redrawn``: the random init is drawn again later, as LoRA's frozen base is (``tooltrain export``, ``tooltrain
    eval run`` and a resume rebuild it from model config and seed, on the CPU: train/engine/run_folder.py). Such an
    init is drawn as they draw it, ``ON_CPU`` outside zero.Init, or the adapter lands on another base: zero.Init's
    random init skips the constructors' draws and initializes on rank 0 (every tensor of recipe=tiny's model comes out
    different), and CUDA's generator draws other numbers than the CPU's (and may differ between GPU models: its
    kernels' grid follows the SM count). Full fine-tuning saves every weight, so nothing draws its init again."""
    if random_init and redrawn:
        return ON_CPU
    if zero_stage(dist_cfg) == 3:
        return ZERO_INIT
    if gpu and random_init and choice(dist_cfg.strategy) in ("single", "ddp", "zero2"):
        return ON_DEVICE
    return ON_CPU


def build_context(placement: str, args: Any) -> AbstractContextManager[Any]:
    """The context to build the model in, for ``model_placement``'s answer and the run's TrainingArguments ``args``.

    ``args`` must be made before the model and live as long as it does: transformers builds every model under
    zero.Init while a ZeRO-3 config is registered, and the registration is a weak reference to ``args``'s
    (``args.hf_deepspeed_config``). ``args.device`` is read first, as the Trainer would: accelerate starts the
    process group and selects this rank's GPU there, before zero.Init partitions onto it."""
    device = args.device
    if placement == ZERO_INIT:
        start_deepspeed_comm()
    if placement == ON_DEVICE:
        return torch.device(device)
    ds_config = getattr(args, "hf_deepspeed_config", None)
    if placement == ON_CPU and ds_config is not None and ds_config.is_zero3():
        return zero_init_paused(ds_config)
    return nullcontext()


def start_deepspeed_comm() -> None:
    """DeepSpeed's comm over the process group accelerate started, as ``deepspeed.initialize`` would make it later:
    zero.Init reads the world size from it (with none, it checks the batch sizes for a world of 1 and refuses them).
    accelerate starts it for GPU ranks, not for CPU ones. Without a process group (one process, no launcher) zero.Init
    starts DeepSpeed's comm itself."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        import deepspeed

        deepspeed.init_distributed(dist_backend=torch.distributed.get_backend())


@contextmanager
def zero_init_paused(ds_config: Any) -> Iterator[None]:
    """transformers builds without zero.Init inside; the run's ZeRO-3 config ``ds_config`` is registered again after."""
    from transformers.integrations import set_hf_deepspeed_config, unset_hf_deepspeed_config

    unset_hf_deepspeed_config()
    try:
        yield
    finally:
        set_hf_deepspeed_config(ds_config)


def barrier() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()


def any_rank(flag: bool) -> bool:
    """True on every rank when it is True on any rank (one int all-reduce)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return flag
    backend = torch.distributed.get_backend()
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    value = torch.tensor([1 if flag else 0], device=device)
    torch.distributed.all_reduce(value, op=torch.distributed.ReduceOp.MAX)
    return bool(value.item())


# ---- evaluation during training: every rank generates its share, results gathered --------------


def generation_needs_sync(strategy: str, world: World) -> bool:
    """Whether ``generate`` must keep ranks in lock-step (``synced_gpus=True``).

    Under ZeRO-3 and FSDP every forward gathers the sharded parameters with a collective, so a rank
    that finished its sequences must keep stepping until all ranks have; replicated weights (DDP,
    ZeRO-2) need nothing.
    """
    return world.world_size > 1 and strategy in ("zero3", "zero3_offload", "fsdp2")


def shard_evenly(items: list[Any], rank: int, world_size: int) -> list[tuple[int | None, Any]]:
    """This rank's share of ``items`` as ``(index, item)``, the same count on every rank.

    Rank r takes items r, r + W, r + 2W, ...; a rank that comes up short repeats item 0 with index
    None (its result is thrown away), so every rank makes the same number of generate calls.
    """
    share: list[tuple[int | None, Any]] = [(i, items[i]) for i in range(rank, len(items), world_size)]
    per_rank = -(-len(items) // world_size)
    return share + [(None, items[0])] * (per_rank - len(share)) if items else []


def gather_shards(share: list[tuple[int | None, Any]]) -> list[Any]:
    """Every rank's ``(index, result)`` pairs -> all results in index order, padding dropped (on every rank)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        shares: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(shares, share)
    else:
        shares = [share]
    pairs = [(index, result) for part in shares for index, result in part if index is not None]
    return [result for _, result in sorted(pairs, key=lambda pair: pair[0])]


def device_name() -> str | None:
    """This rank's GPU's name (what the peak-FLOPs table reads: train.engine.flops), None on CPU."""
    return torch.cuda.get_device_name() if on_gpu() else None
