"""`tooltrain launch --dry-run`: the sbatch script and per-node commands rendered from the config."""

from __future__ import annotations

import sys

import pytest

from train.cli import main
from train.engine.config import REPO_ROOT as REPO
from train.engine.launch import LaunchError, check_world, job_overrides

PY = sys.executable


def launch(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["launch", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def sbatch_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#SBATCH")]


@pytest.mark.parametrize(("nodes", "global_batch"), [(1, 16), (2, 32), (16, 256)])
def test_slurm_script_for_n_nodes(capsys, tmp_path, repo, nodes, global_batch):
    run = tmp_path / "run"
    code, out, err = launch(
        capsys,
        "recipe=tiny",
        "--nodes",
        str(nodes),
        "--gpus-per-node",
        "8",
        "--dry-run",
        "distributed=zero3",
        f"train.global_batch_size={global_batch}",
        "launcher.partition=gpu",
        f"output_dir={run}",
    )
    assert (code, err) == (0, "")
    assert out.startswith("#!/usr/bin/env bash\n")
    assert sbatch_lines(out) == [
        "#SBATCH --job-name=tiny",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --time=60",
        "#SBATCH --partition=gpu",
        "#SBATCH --signal=B:USR1@120",
        "#SBATCH --requeue",
        "#SBATCH --open-mode=append",
        f"#SBATCH --output={run}/logs/%x-%j.out",
    ]
    args = f"recipe=tiny distributed=zero3 train.global_batch_size={global_batch} output_dir={run}"
    # what node 0 runs: torchrun over every node, rendezvous on the first node of the allocation
    assert (
        f"#   {PY} -m torch.distributed.run --nnodes {nodes} --nproc-per-node 8 --rdzv-backend c10d "
        "--rdzv-endpoint $MASTER_ADDR:$MASTER_PORT --rdzv-id $SLURM_JOB_ID --rdzv-conf is_host=true "
        f"--signals-to-handle SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1 --shutdown-timeout 120 -m train train {args}\n"
    ) in out
    assert "# per node (srun; node rank = $SLURM_NODEID, rendezvous on the job's first node). Node 0 runs\n" in out
    assert f"# {nodes} node(s) x 8 rank(s) = {nodes * 8} ranks." in out
    assert f"export TOOLTRAIN_DIR={repo} LOG_DIR={run}/logs NPROC_PER_NODE=8 PYTHON={PY}\n" in out
    assert f"exec bash {repo}/launch/slurm/train.sbatch {args}\n" in out
    script = run / "tiny.sbatch"
    assert out.endswith(f"# wrote {script} (--dry-run: not submitted); submit it with: sbatch {script}\n")
    # the dry run writes the script it names (what it printed, before its summary lines), and nothing else
    assert out.startswith(script.read_text()) and sorted(run.iterdir()) == [script]


def test_slurm_settings_come_from_the_launcher_group(capsys, tmp_path):
    code, out, err = launch(
        capsys,
        "recipe=tiny",
        "--nodes",
        "1",
        "--gpus-per-node",
        "2",
        "--dry-run",
        "distributed=ddp",
        "launcher.account=proj7",
        "launcher.qos=high",
        "launcher.constraint=h100",
        "launcher.mem_gb=480",
        "launcher.cpus_per_task=32",
        "launcher.time_min=1440",
        "launcher.signal_lead_s=300",
        "launcher.job_name=sft-a",
        "launcher.log_dir=/scratch/logs",
        "launcher.sbatch_options=[--exclusive]",
        "launcher.setup=[module load cuda/12.4,source /opt/venv/bin/activate]",
        f"output_dir={tmp_path}",
    )
    assert (code, err) == (0, "")
    assert sbatch_lines(out) == [
        "#SBATCH --job-name=sft-a",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gpus-per-node=2",
        "#SBATCH --cpus-per-task=32",
        "#SBATCH --mem=480G",
        "#SBATCH --time=1440",
        "#SBATCH --account=proj7",
        "#SBATCH --qos=high",
        "#SBATCH --constraint=h100",
        "#SBATCH --signal=B:USR1@300",
        "#SBATCH --requeue",
        "#SBATCH --open-mode=append",
        "#SBATCH --output=/scratch/logs/%x-%j.out",
        "#SBATCH --exclusive",
    ]
    body = out.split("set -e\n", 1)[1]
    assert body.startswith("module load cuda/12.4\nsource /opt/venv/bin/activate\nexport TOOLTRAIN_DIR=")
    # launcher settings shape the launch, not the run: they stay out of the training arguments
    assert "launcher." not in out.split("exec bash", 1)[1]
    assert out.endswith(f"submit it with: sbatch {tmp_path}/sft-a.sbatch\n")


def test_cpu_partitions_request_no_gpus(capsys, tmp_path):
    code, out, _ = launch(
        capsys,
        "recipe=tiny",
        "--gpus-per-node",
        "2",
        "--dry-run",
        "distributed=ddp",
        "launcher.request_gpus=false",
        f"output_dir={tmp_path}",
    )
    assert code == 0
    assert not any("gpus" in line for line in sbatch_lines(out))
    assert "NPROC_PER_NODE=2 " in out


@pytest.mark.parametrize(("nodes", "global_batch"), [(1, 4), (2, 8), (16, 64)])
def test_torchrun_commands_for_n_nodes(capsys, tmp_path, repo, nodes, global_batch):
    run = tmp_path / "run"
    code, out, err = launch(
        capsys,
        "recipe=tiny",
        "--launcher",
        "torchrun",
        "--nodes",
        str(nodes),
        "--gpus-per-node",
        "2",
        "--dry-run",
        "distributed=zero3",
        f"train.global_batch_size={global_batch}",
        "launcher.master_addr=10.0.0.1",
        "launcher.master_port=29600",
        f"output_dir={run}",
    )
    assert (code, err) == (0, "")
    args = f"recipe=tiny distributed=zero3 train.global_batch_size={global_batch} output_dir={run}"
    lines = out.splitlines()
    assert lines[0] == (
        f"# tooltrain launch recipe=tiny: torchrun, {nodes} node(s) x 2 rank(s) = {2 * nodes} ranks, zero3; run in "
        f"{run}"
    )
    commands = [line for line in lines if not line.startswith("#")]
    assert commands == [
        f"NNODES={nodes} NODE_RANK={rank} NPROC_PER_NODE=2 MASTER_ADDR=10.0.0.1 MASTER_PORT=29600 RDZV_ID=tiny "
        f"PYTHON={PY} {repo}/launch/torchrun.sh {args}"
        for rank in range(nodes)
    ]
    runs = [line for line in lines if line.startswith("#   runs: ")]
    assert runs == [
        f"#   runs: {PY} -m torch.distributed.run --nnodes {nodes} --nproc-per-node 2 --rdzv-backend c10d "
        f"--rdzv-endpoint 10.0.0.1:29600 --rdzv-id tiny --rdzv-conf is_host={'true' if rank == 0 else 'false'} "
        f"--signals-to-handle SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1 --shutdown-timeout 120 -m train train {args}"
        for rank in range(nodes)
    ]


def test_deepspeed_command_across_nodes_uses_the_hostfile(capsys, tmp_path, repo):
    code, out, err = launch(
        capsys,
        "recipe=tiny",
        "--launcher",
        "deepspeed",
        "--nodes",
        "2",
        "--gpus-per-node",
        "8",
        "--dry-run",
        "distributed=zero3",
        "train.global_batch_size=32",
        f"launcher.hostfile={repo}/launch/hostfile.example",
        f"output_dir={tmp_path}",
    )
    assert (code, err) == (0, "")
    args = f"recipe=tiny distributed=zero3 train.global_batch_size=32 output_dir={tmp_path}"
    assert out.splitlines()[1:] == [
        "# run on the first host of the hostfile; it starts the others over ssh:",
        (
            f"HOSTFILE={repo}/launch/hostfile.example NUM_NODES=2 NUM_GPUS=8 MASTER_PORT=29500 PYTHON={PY} "
            f"{repo}/launch/deepspeed.sh {args}"
        ),
        (
            f"#   runs: {PY} -m deepspeed.launcher.runner --hostfile {repo}/launch/hostfile.example --num_nodes 2 "
            f"--num_gpus 8 --master_port 29500 --no_local_rank --module train train {args}"
        ),
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--nodes", "2", "--gpus-per-node", "8"],
            (
                "error: distributed=single runs one process, but 2 node(s) x 8 = 16 ranks; "
                "add distributed=zero3 (or ddp, zero2, fsdp2)\n"
            ),
        ),
        (
            ["--nodes", "2", "--gpus-per-node", "8", "distributed=zero3"],
            (
                "error: train.global_batch_size=4 is not a multiple of micro_batch_size x world_size = 2 x 16; "
                "choose a global batch in multiples of 32\n"
            ),
        ),
        (
            ["--launcher", "torchrun", "--nodes", "2", "distributed=ddp", "train.global_batch_size=4"],
            "error: torchrun across nodes needs node 0's address: launcher.master_addr=HOST\n",
        ),
        (
            ["--launcher", "deepspeed", "--nodes", "2", "distributed=zero3"],
            "error: deepspeed across nodes needs a hostfile (launch/hostfile.example): launcher.hostfile=PATH\n",
        ),
        (
            ["recipe=demo"],
            (
                "error: name the recipe once, as recipe=NAME (tooltrain launch recipe=NAME ...); "
                "got recipe=tiny, recipe=demo\n"
            ),
        ),
    ],
)
def test_what_cannot_launch_is_refused_before_queueing(capsys, argv, message):
    code, out, err = launch(capsys, "recipe=tiny", "--dry-run", *argv)
    assert (code, out, err) == (2, "", message)


def test_the_recipe_is_named_as_tooltrain_train_names_it(capsys):
    """recipe=NAME, as `tooltrain train`; the positional recipe of old is refused with the new spelling."""
    code, out, err = launch(capsys, "tiny", "--dry-run")
    assert (code, out) == (2, "")
    assert err == (
        "error: 'tiny' is not a key=value override; name the recipe as in tooltrain train: "
        "tooltrain launch recipe=tiny ...\n"
    )
    code, out, err = launch(capsys, "--dry-run", "distributed=ddp")
    assert (code, out) == (2, "")
    assert err == "error: name the recipe once, as recipe=NAME (tooltrain launch recipe=NAME ...); got none\n"
    code, out, err = launch(capsys, "--dry-run", "--launcher", "torchrun", "distributed=ddp", "recipe=tiny")
    assert (code, err) == (0, "") and "recipe=tiny" in out


def test_an_output_dir_under_a_file_is_refused_before_any_script(capsys, tmp_path):
    """`tooltrain train` refuses this output_dir; a launch of it would spend a queue wait to fail the same way.
    (Before: the script was printed, `# not written: ...`, exit 0.)"""
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    code, out, err = launch(capsys, "recipe=tiny", "--dry-run", f"output_dir={blocker}/run")
    assert (code, out) == (2, "")
    assert err == (
        f"error: output_dir={blocker}/run cannot be created: {blocker} is a file; choose another output_dir\n"
    )


def test_data_files_that_do_not_exist_are_warned_about(capsys, tmp_path):
    present = tmp_path / "present.json"
    present.write_text("[]")
    code, out, err = launch(
        capsys,
        "recipe=tiny",
        "--dry-run",
        f"output_dir={tmp_path}/run",
        f"data.sources.0.inputs=[{present},{tmp_path}/missing.json,relative/missing.json]",
    )
    assert code == 0 and out.startswith("#!/usr/bin/env bash\n")
    # relative paths are read where the ranks run: the repository, for launch/slurm/train.sbatch
    tail = "the run would fail reading it"
    assert err.splitlines() == [
        f"warning: data.sources.0.inputs: {tmp_path}/missing.json does not exist ({tmp_path}/missing.json); {tail}",
        f"warning: data.sources.0.inputs: relative/missing.json does not exist ({REPO}/relative/missing.json); {tail}",
    ]


def test_an_unknown_override_is_a_composition_error(capsys):
    code, out, err = launch(capsys, "recipe=tiny", "--dry-run", "launcher.partitions=gpu")
    assert (code, out) == (2, "")
    assert err.startswith("error: the configuration does not compose: ") and "partitions" in err


def test_job_overrides_pin_the_output_dir_and_drop_launcher_settings(tmp_path):
    assert job_overrides(
        "tiny",
        ["launcher=slurm", "launcher.partition=gpu", "+launcher.x=1", "output_dir=rel", "optim.lr=1e-3", "~eval"],
        tmp_path,
    ) == ["recipe=tiny", "optim.lr=1e-3", "~eval", f"output_dir={tmp_path}"]


def test_check_world():
    assert check_world("zero3", 16, 8, 256, 2) == 128
    assert check_world("single", 1, 1, 4, 2) == 1
    with pytest.raises(LaunchError, match="--nodes and --gpus-per-node must be >= 1, got 0 and 8"):
        check_world("zero3", 0, 8, 4, 2)


def test_submit_writes_the_script_and_calls_sbatch(capsys, tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "sbatch-calls"
    sbatch = bin_dir / "sbatch"
    sbatch.write_text(f'#!/usr/bin/env bash\necho "$@" >> {calls}\necho "4242;cluster"\n')
    sbatch.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    run = tmp_path / "run"
    code, out, err = launch(capsys, "recipe=tiny", "--gpus-per-node", "2", "distributed=ddp", f"output_dir={run}")
    assert (code, err) == (0, "")
    assert out == f"submitted job 4242: {run}/tiny.sbatch; logs in {run}/logs\n"
    assert calls.read_text() == f"--parsable {run}/tiny.sbatch\n"
    assert (run / "logs").is_dir()
    assert "#SBATCH --nodes=1" in (run / "tiny.sbatch").read_text()
