"""Launch plans from a composed config: torchrun and deepspeed command lines, Slurm batch scripts.

Pure functions: config values in, text and argv out. Nothing here runs, writes or submits;
``train.commands.launch`` does. The command lines mirror launch/torchrun.sh and launch/deepspeed.sh
argument for argument (the tests run the scripts with DRY_RUN=1 and compare), so the preview a
user reads is the command each node runs. The scripts stay the single place that starts training:
what is rendered here invokes them with environment variables.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LAUNCHERS = ("slurm", "torchrun", "deepspeed")
TORCHRUN_SCRIPT = "launch/torchrun.sh"
DEEPSPEED_SCRIPT = "launch/deepspeed.sh"
SBATCH_SCRIPT = "launch/slurm/train.sbatch"
# What launch/torchrun.sh asks torchrun to forward to its workers (SIGUSR1: the Slurm time-limit warning).
FORWARDED_SIGNALS = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"
SHUTDOWN_TIMEOUT_S = 120


class LaunchError(ValueError):
    pass


# An #SBATCH line is read by sbatch, not by a shell: it has no quoting a value could hide in, and a newline in a
# value ends the line (the rest would run as a command), a space starts another option. So a value written there
# keeps to characters Slurm's own values use (partitions, accounts, constraints such as a100&ib, paths).
SBATCH_VALUE = re.compile(r"[A-Za-z0-9._,:=+@%/~&|*()\[\]-]+")
SBATCH_VALUE_RULE = "only A-Z a-z 0-9 and . _ , : = + @ % / ~ & | * ( ) [ ] - (no spaces, quotes, $ or newlines)"
# The shell variables the batch script's preview line shows as variables: filled in on the node, at run time.
NODE_VARIABLES = frozenset({"$MASTER_ADDR", "$MASTER_PORT", "$SLURM_JOB_ID", "$MASTER_ADDR:$MASTER_PORT"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def sbatch_value(key: str, value: object) -> str:
    """``value`` as it may stand in an #SBATCH line; LaunchError naming ``key`` and the rule otherwise."""
    text = str(value)
    if not SBATCH_VALUE.fullmatch(text):
        raise LaunchError(f"{key}={text!r} cannot go into an #SBATCH line: use {SBATCH_VALUE_RULE}")
    return text


def check_job_name(name: str) -> str:
    """The job name names the script (OUTPUT_DIR/NAME.sbatch) and the job: a safe name
    (train.engine.config.SAFE_NAME)."""
    from train.engine.config import name_problem

    problem = name_problem("launcher.job_name", name)
    if problem:
        raise LaunchError(problem)
    return name


def comment(text: str) -> str:
    """``text`` safe on a ``#`` line: a control character (a newline would end the comment and start a command)
    is written as its escape, ``\\n``."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


@dataclass(frozen=True)
class NodeCommand:
    """One node's part: run ``script`` with ``env`` and ``args``; it then runs ``runs``."""

    node_rank: int
    env: dict[str, str]
    script: str
    args: list[str]
    runs: list[str]

    def shell(self) -> str:
        """The line to type on that node."""
        return " ".join(
            [
                *(f"{key}={shlex.quote(value)}" for key, value in self.env.items()),
                shlex.quote(self.script),
                *map(shlex.quote, self.args),
            ]
        )


def input_paths(cfg: Any) -> list[tuple[str, str]]:
    """(config key, path) of every file the run will read: the data sources' inputs and the eval benchmarks'
    data (``pkg://`` paths included: they name files inside the installed package)."""
    paths = [
        (f"data.sources.{i}.inputs", str(path))
        for i, source in enumerate(cfg.data.sources)
        for path in (source.inputs or [])
    ]
    for i, bench in enumerate(cfg.eval.benchmarks):
        data = bench.get("data")
        if data is not None:
            paths += [(f"eval.benchmarks.{i}.data", str(path)) for path in ([data] if isinstance(data, str) else data)]
    return paths


@dataclass(frozen=True)
class Plan:
    launcher: str
    text: str  # what --dry-run prints
    nodes: list[NodeCommand] = field(default_factory=list)  # torchrun, deepspeed
    sbatch: str | None = None  # slurm: the batch script to write and submit
    sbatch_path: Path | None = None
    log_dir: Path | None = None  # slurm: must exist before the job starts (Slurm does not create it)
    job_cwd: Path | None = None  # where the ranks run, so where relative data paths are read from


def shell_line(argv: list[str]) -> str:
    return " ".join(shlex.quote(arg) for arg in argv)


def _override_key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def job_overrides(recipe: str, overrides: list[str], output_dir: Path) -> list[str]:
    """The arguments every rank's ``tooltrain train`` gets: the recipe, the user's overrides and an
    absolute output_dir, the same on every node and every requeued attempt (so a rerun resumes).
    Launcher settings are for the launch, not the run, and stay out."""
    kept = []
    for override in overrides:
        key = _override_key(override)
        if key == "recipe":
            raise LaunchError(f"give the recipe once, as recipe=NAME, not again as {override!r}")
        if key == "launcher" or key.startswith("launcher.") or key == "output_dir":
            continue
        kept.append(override)
    return [f"recipe={recipe}", *kept, f"output_dir={output_dir}"]


def absolute(path: str, cwd: Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else cwd / p


def check_world(strategy: str, nodes: int, ranks_per_node: int, global_batch: int, micro_batch: int) -> int:
    """The world size, after rejecting what would fail on the cluster only after queueing."""
    if nodes < 1 or ranks_per_node < 1:
        raise LaunchError(f"--nodes and --gpus-per-node must be >= 1, got {nodes} and {ranks_per_node}")
    world = nodes * ranks_per_node
    if strategy == "single" and world > 1:
        raise LaunchError(
            f"distributed=single runs one process, but {nodes} node(s) x {ranks_per_node} = {world} ranks; "
            "add distributed=zero3 (or ddp, zero2, fsdp2)"
        )
    from train.engine.distributed import StrategyError, gradient_accumulation_steps

    try:
        gradient_accumulation_steps(global_batch, micro_batch, world)
    except StrategyError as err:
        raise LaunchError(str(err)) from None
    return world


def torchrun_command(
    python: str,
    nnodes: int,
    nproc_per_node: int,
    node_rank: int | str,
    master_addr: str,
    master_port: int | str,
    rdzv_id: str,
    args: list[str],
) -> list[str]:
    """What launch/torchrun.sh runs (on a torch that forwards SIGUSR1, >= 2.9)."""
    is_host = "true" if str(node_rank) == "0" else "false"
    return [
        python,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        str(nnodes),
        "--nproc-per-node",
        str(nproc_per_node),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"{master_addr}:{master_port}",
        "--rdzv-id",
        rdzv_id,
        "--rdzv-conf",
        f"is_host={is_host}",
        "--signals-to-handle",
        FORWARDED_SIGNALS,
        "--shutdown-timeout",
        str(SHUTDOWN_TIMEOUT_S),
        "-m",
        "train",
        "train",
        *args,
    ]


def deepspeed_command(
    python: str,
    args: list[str],
    hostfile: str | None = None,
    num_nodes: int | None = None,
    num_gpus: int | None = None,
    master_addr: str | None = None,
    master_port: int = 29500,
) -> list[str]:
    """What launch/deepspeed.sh runs."""
    argv = [python, "-m", "deepspeed.launcher.runner"]
    if hostfile:
        argv += ["--hostfile", hostfile]
    if num_nodes is not None:
        argv += ["--num_nodes", str(num_nodes)]
    if num_gpus is not None:
        argv += ["--num_gpus", str(num_gpus)]
    if master_addr:
        argv += ["--master_addr", master_addr]
    return [*argv, "--master_port", str(master_port), "--no_local_rank", "--module", "train", "train", *args]


def torchrun_nodes(
    repo: Path,
    python: str,
    nodes: int,
    ranks_per_node: int,
    master_addr: str,
    master_port: int,
    rdzv_id: str,
    args: list[str],
) -> list[NodeCommand]:
    script = str(repo / TORCHRUN_SCRIPT)
    commands = []
    for rank in range(nodes):
        env = {
            "NNODES": str(nodes),
            "NODE_RANK": str(rank),
            "NPROC_PER_NODE": str(ranks_per_node),
            "MASTER_ADDR": master_addr,
            "MASTER_PORT": str(master_port),
            "RDZV_ID": rdzv_id,
            "PYTHON": python,
        }
        runs = torchrun_command(python, nodes, ranks_per_node, rank, master_addr, master_port, rdzv_id, args)
        commands.append(NodeCommand(rank, env, script, args, runs))
    return commands


def deepspeed_node(
    repo: Path,
    python: str,
    nodes: int,
    ranks_per_node: int,
    master_addr: str | None,
    master_port: int,
    hostfile: str | None,
    args: list[str],
) -> NodeCommand:
    """DeepSpeed's launcher starts every node from the first one (pdsh over the hostfile)."""
    env = {"NUM_GPUS": str(ranks_per_node), "MASTER_PORT": str(master_port), "PYTHON": python}
    if hostfile:
        env = {"HOSTFILE": hostfile, "NUM_NODES": str(nodes), **env}
    if master_addr:
        env["MASTER_ADDR"] = master_addr
    runs = deepspeed_command(
        python,
        args,
        hostfile=hostfile,
        num_nodes=nodes if hostfile else None,
        num_gpus=ranks_per_node,
        master_addr=master_addr,
        master_port=master_port,
    )
    return NodeCommand(0, env, str(repo / DEEPSPEED_SCRIPT), args, runs)


@dataclass(frozen=True)
class SlurmSettings:
    job_name: str
    nodes: int
    ranks_per_node: int
    time_min: int
    log_dir: Path
    signal_lead_s: int = 120
    request_gpus: bool = True
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    cpus_per_task: int | None = None
    mem_gb: int | None = None
    sbatch_options: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()


def sbatch_directives(s: SlurmSettings) -> list[str]:
    """#SBATCH lines: one srun task (one torchrun) per node; the signal and requeue lines that make
    a time limit end in a checkpoint and another attempt (see launch/slurm/train.sbatch)."""
    options = [f"--job-name={check_job_name(s.job_name)}", f"--nodes={s.nodes}", "--ntasks-per-node=1"]
    if s.request_gpus:
        options.append(f"--gpus-per-node={s.ranks_per_node}")
    if s.cpus_per_task:
        options.append(f"--cpus-per-task={s.cpus_per_task}")
    if s.mem_gb:
        options.append(f"--mem={s.mem_gb}G")
    options.append(f"--time={s.time_min}")
    options += [
        f"--{name}={sbatch_value(f'launcher.{name}', value)}"
        for name, value in (
            ("partition", s.partition),
            ("account", s.account),
            ("qos", s.qos),
            ("constraint", s.constraint),
        )
        if value
    ]
    options += [
        f"--signal=B:USR1@{s.signal_lead_s}",
        "--requeue",
        "--open-mode=append",
        f"--output={sbatch_value('launcher.log_dir', s.log_dir)}/%x-%j.out",
    ]
    for option in s.sbatch_options:
        if not option.startswith("-"):
            raise LaunchError(f"launcher.sbatch_options: {option!r} is not an option (--name or --name=value)")
        options.append(sbatch_value("launcher.sbatch_options", option))
    return [f"#SBATCH {option}" for option in options]


def _preview(argv: list[str]) -> str:
    # Our shell variables stay visible as variables (filled in on the node); every other word is quoted, a user's
    # ``$(...)`` included, and the line is made safe for the comment it stands in.
    return comment(" ".join(arg if arg in NODE_VARIABLES else shlex.quote(arg) for arg in argv))


def sbatch_script(s: SlurmSettings, repo: Path, python: str, args: list[str], command: str) -> str:
    first_node = torchrun_command(
        python, s.nodes, s.ranks_per_node, 0, "$MASTER_ADDR", "$MASTER_PORT", "$SLURM_JOB_ID", args
    )
    lines = [
        "#!/usr/bin/env bash",
        f"# Rendered by `{comment(command)}` from the composed config. Submit: sbatch THIS_FILE",
        *sbatch_directives(s),
        (
            f"# {s.nodes} node(s) x {s.ranks_per_node} rank(s) = {s.nodes * s.ranks_per_node} ranks. "
            f"{SBATCH_SCRIPT} starts one task"
        ),
        "# per node (srun; node rank = $SLURM_NODEID, rendezvous on the job's first node). Node 0 runs",
        f"#   {_preview(first_node)}",
        "# and every other node the same with is_host=false.",
        f"# SIGUSR1 {s.signal_lead_s} s before the time limit -> checkpoint -> exit 75 -> scontrol requeue -> resume.",
        "set -e",
        *s.setup,
        (
            f"export TOOLTRAIN_DIR={shlex.quote(str(repo))} LOG_DIR={shlex.quote(str(s.log_dir))} "
            f"NPROC_PER_NODE={s.ranks_per_node} PYTHON={shlex.quote(python)}"
        ),
        f"exec bash {shlex.quote(str(repo / SBATCH_SCRIPT))} {shell_line(args)}",
    ]
    return "\n".join(lines) + "\n"


def slurm_settings(launcher: Any, nodes: int, ranks_per_node: int, cwd: Path) -> SlurmSettings:
    return SlurmSettings(
        job_name=str(launcher.job_name),
        nodes=nodes,
        ranks_per_node=ranks_per_node,
        time_min=int(launcher.time_min),
        log_dir=absolute(str(launcher.log_dir), cwd),
        signal_lead_s=int(launcher.signal_lead_s),
        request_gpus=bool(launcher.request_gpus),
        partition=launcher.partition,
        account=launcher.account,
        qos=launcher.qos,
        constraint=launcher.constraint,
        cpus_per_task=launcher.cpus_per_task,
        mem_gb=launcher.mem_gb,
        sbatch_options=tuple(launcher.sbatch_options),
        setup=tuple(launcher.setup),
    )


def plan(
    cfg: Any, launcher: str, recipe: str, overrides: list[str], repo: Path, python: str, cwd: Path, command: str
) -> Plan:
    """Everything ``tooltrain launch`` would do, as text and argv: ``cfg`` is the composed config
    (with ``launcher.nodes`` and ``launcher.gpus_per_node`` already set from the command line)."""
    if launcher not in LAUNCHERS:
        raise LaunchError(f"unknown launcher {launcher!r}; valid: {', '.join(LAUNCHERS)}")
    lc = cfg.launcher
    nodes, per_node = int(lc.nodes), int(lc.gpus_per_node)
    strategy = str(getattr(cfg.distributed.strategy, "value", cfg.distributed.strategy))
    world = check_world(strategy, nodes, per_node, int(cfg.train.global_batch_size), int(cfg.train.micro_batch_size))
    if lc.request_gpus:  # a plan that cannot fit its GPUs is refused before anything is queued (memory_plan.py)
        from train.engine.memory_plan import plan_problem

        problem = plan_problem(cfg, world)
        if problem:
            raise LaunchError(problem)
    output_dir = absolute(str(cfg.output_dir), cwd)
    args = job_overrides(recipe, overrides, output_dir)
    head = (
        f"# tooltrain launch recipe={recipe}: {launcher}, {nodes} node(s) x {per_node} rank(s) = {world} ranks, "
        f"{strategy}; run in {output_dir}"
    )

    if launcher == "slurm":
        settings = slurm_settings(lc, nodes, per_node, cwd)
        script = sbatch_script(settings, repo, python, args, command)
        path = output_dir / f"{check_job_name(settings.job_name)}.sbatch"
        return Plan(
            launcher,
            f"{script}# {comment(head[2:])}\n",
            sbatch=script,
            sbatch_path=path,
            log_dir=settings.log_dir,
            job_cwd=repo,  # launch/slurm/train.sbatch runs from TOOLTRAIN_DIR, the repository
        )

    if launcher == "torchrun":
        if nodes > 1 and not lc.master_addr:
            raise LaunchError("torchrun across nodes needs node 0's address: launcher.master_addr=HOST")
        node_commands = torchrun_nodes(
            repo,
            python,
            nodes,
            per_node,
            str(lc.master_addr or "127.0.0.1"),
            int(lc.master_port),
            str(lc.job_name),
            args,
        )
        where = "on this machine" if nodes == 1 else "each on its node, at about the same time"
        blocks = [f"{comment(head)}\n# run {where}:"]
        for node in node_commands:
            blocks.append(f"# node {node.node_rank}:\n{node.shell()}\n#   runs: {comment(shell_line(node.runs))}")
        return Plan(launcher, "\n".join(blocks) + "\n", nodes=node_commands, job_cwd=cwd)

    if nodes > 1 and not lc.hostfile:
        raise LaunchError("deepspeed across nodes needs a hostfile (launch/hostfile.example): launcher.hostfile=PATH")
    hostfile = str(absolute(str(lc.hostfile), cwd)) if lc.hostfile else None
    node = deepspeed_node(repo, python, nodes, per_node, lc.master_addr, int(lc.master_port), hostfile, args)
    where = "on this machine" if nodes == 1 else "on the first host of the hostfile; it starts the others over ssh"
    return Plan(
        launcher,
        f"{comment(head)}\n# run {where}:\n{node.shell()}\n#   runs: {comment(shell_line(node.runs))}\n",
        nodes=[node],
        job_cwd=cwd,
    )
