"""``tooltrain launch recipe=NAME --nodes N --gpus-per-node G [--launcher slurm|torchrun|deepspeed] [--dry-run]
[overrides]``

Composes the recipe's config with the overrides (``launcher.*`` settings included), then:
slurm: renders a batch script (partition, account, time, memory, constraint, log paths from
``launcher.*``; the body is launch/slurm/train.sbatch), writes it to OUTPUT_DIR/JOB.sbatch and
submits it with sbatch. torchrun: runs launch/torchrun.sh for this node (``--node-rank`` across
nodes). deepspeed: runs launch/deepspeed.sh (across nodes from the first host, with
``launcher.hostfile``). ``--dry-run`` prints the script or the per-node commands and starts nothing; for
Slurm it still writes the batch script it names (and says so), so that ``sbatch PATH`` is the next step.
Every launch warns about the recipe's data files that do not exist where the ranks will read them.
The recipe is named as ``tooltrain train`` names it, ``recipe=NAME`` among the overrides; the old positional
``tooltrain launch NAME`` is an error that says so. Exit codes: sbatch's or the launcher's, 2 for a configuration
that cannot launch.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from train.engine.launch import LAUNCHERS, LaunchError, Plan, input_paths, plan


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tooltrain launch",
        description="Launch a recipe on N nodes: render a Slurm batch "
        "script from the config and submit it, or start torchrun or deepspeed here.",
    )
    parser.add_argument("--nodes", type=int, default=None, help="nodes (default: launcher.nodes, 1)")
    parser.add_argument(
        "--gpus-per-node",
        type=int,
        default=None,
        help="ranks per node: GPUs, or processes on a CPU machine (default: launcher.gpus_per_node, 1)",
    )
    parser.add_argument(
        "--launcher", choices=LAUNCHERS, default="slurm", help="how to start the ranks (default: slurm)"
    )
    parser.add_argument("--node-rank", type=int, default=None, help="torchrun across nodes: start this node's part")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the batch script or commands and start nothing (slurm: the script is written, not submitted)",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="recipe=NAME (recipes/NAME.yaml, required), then Hydra overrides for the run and launcher.*",
    )
    return parser


def take_recipe(args: argparse.Namespace) -> None:
    """``recipe=NAME`` out of the overrides into ``args.recipe``; LaunchError for a missing, repeated or old-style
    one."""
    for item in args.overrides:
        if "=" not in item and not item.startswith("~"):  # `tooltrain launch tiny`: the positional spelling
            raise LaunchError(
                f"{item!r} is not a key=value override; name the recipe as in tooltrain train: "
                f"tooltrain launch recipe={item} ..."
            )
    recipes = [item for item in args.overrides if item.split("=", 1)[0].lstrip("+") == "recipe"]
    if len(recipes) != 1:
        found = "none" if not recipes else ", ".join(recipes)
        raise LaunchError(f"name the recipe once, as recipe=NAME (tooltrain launch recipe=NAME ...); got {found}")
    args.recipe = recipes[0].split("=", 1)[1]
    args.overrides = [item for item in args.overrides if item not in recipes]


def compose_overrides(args: argparse.Namespace) -> list[str]:
    overrides = [f"recipe={args.recipe}"]
    if args.launcher == "slurm" and not any(o.split("=", 1)[0] == "launcher" for o in args.overrides):
        overrides.append("launcher=slurm")  # its group file carries the Slurm defaults
    overrides += args.overrides
    if args.nodes is not None:
        overrides.append(f"launcher.nodes={args.nodes}")
    if args.gpus_per_node is not None:
        overrides.append(f"launcher.gpus_per_node={args.gpus_per_node}")
    return overrides


def command_line(args: argparse.Namespace) -> str:
    parts = ["tooltrain launch", f"recipe={args.recipe}", "--launcher", args.launcher]
    if args.nodes is not None:
        parts += ["--nodes", str(args.nodes)]
    if args.gpus_per_node is not None:
        parts += ["--gpus-per-node", str(args.gpus_per_node)]
    return " ".join([*parts, *map(shlex.quote, args.overrides)])


def make_plan(args: argparse.Namespace) -> tuple[Plan, list[str]]:
    """The launch plan and its warnings (data files the run would not find)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from train.engine.config import REPO_ROOT, ConfigError, compose
    from train.engine.run_dir import output_dir_placement

    try:
        cfg = compose(compose_overrides(args))
    except (HydraException, OmegaConfBaseException, ConfigError) as err:
        raise LaunchError(f"the configuration does not compose: {err}") from None
    problem = output_dir_placement(Path(str(cfg.output_dir)).expanduser())  # as `tooltrain train` refuses it
    if problem:
        raise LaunchError(problem)
    launch_plan = plan(
        cfg, args.launcher, args.recipe, args.overrides, REPO_ROOT, sys.executable, Path.cwd(), command_line(args)
    )
    return launch_plan, missing_inputs(cfg, launch_plan.job_cwd or Path.cwd())


def missing_inputs(cfg, job_cwd: Path) -> list[str]:
    """A warning per data file of the run that does not exist (relative paths are read from ``job_cwd``,
    where the ranks run): on a cluster that costs a queue wait before the run fails."""
    from train.data.inputs import resolve_input

    warnings = []
    for key, path in input_paths(cfg):
        resolved = resolve_input(path)
        resolved = resolved if resolved.is_absolute() else job_cwd / resolved
        if not resolved.exists():
            warnings.append(f"warning: {key}: {path} does not exist ({resolved}); the run would fail reading it")
    return warnings


def write_script(launch_plan: Plan) -> str:
    """--dry-run, slurm: write the batch script where the plan names it; the line that says what happened."""
    path = launch_plan.sbatch_path
    assert launch_plan.sbatch is not None and path is not None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(launch_plan.sbatch, encoding="utf-8")
        tmp.replace(path)
    except OSError as err:
        return f"# not written: {path}: {err.strerror or err} (--dry-run; nothing submitted)\n"
    return f"# wrote {path} (--dry-run: not submitted); submit it with: sbatch {shlex.quote(str(path))}\n"


def submit(launch_plan: Plan) -> int:
    assert launch_plan.sbatch is not None and launch_plan.sbatch_path is not None and launch_plan.log_dir is not None
    path, log_dir = launch_plan.sbatch_path, launch_plan.log_dir
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(launch_plan.sbatch, encoding="utf-8")
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        result = subprocess.run(["sbatch", "--parsable", str(path)], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        print(f"error: sbatch not found; the script is in {path} (submit it on a Slurm login node)", file=sys.stderr)
        return 2
    if result.returncode != 0:
        print(f"error: sbatch {path} failed ({result.returncode}): {result.stderr.strip()}", file=sys.stderr)
        return result.returncode
    job_id = result.stdout.strip().split(";")[0]
    print(f"submitted job {job_id}: {path}; logs in {log_dir}")
    return 0


def start(launch_plan: Plan, node_rank: int | None) -> int:
    nodes = launch_plan.nodes
    if len(nodes) > 1 and node_rank is None:
        print(launch_plan.text, end="")
        print(
            f"error: {len(nodes)} nodes: run `tooltrain launch ... --node-rank K` on node K (or the lines above)",
            file=sys.stderr,
        )
        return 2
    rank = node_rank or 0
    if not 0 <= rank < len(nodes):
        print(f"error: --node-rank {rank} is outside 0..{len(nodes) - 1}", file=sys.stderr)
        return 2
    node = nodes[rank]
    print(node.shell(), flush=True)
    # exec, not a child: signals for this process reach the launcher (and through it the ranks) directly.
    os.execve(node.script, [node.script, *node.args], {**os.environ, **node.env})
    return 1  # not reached


def main(argv: list[str]) -> int:
    args = build_parser().parse_intermixed_args(argv)
    try:
        take_recipe(args)
        launch_plan, warnings = make_plan(args)
    except LaunchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for warning in warnings:
        print(warning, file=sys.stderr)
    if args.dry_run:
        print(launch_plan.text, end="")
        if launch_plan.launcher == "slurm":
            print(write_script(launch_plan), end="")
        return 0
    return submit(launch_plan) if launch_plan.launcher == "slurm" else start(launch_plan, args.node_rank)
