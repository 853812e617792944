"""Two nodes on one machine: two torchrun agents (one rank each) meeting through the c10d rendezvous
train exactly as one node with two ranks. Same seed, data and world size -> the same losses."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

RUN = ["distributed=zero3", "train.max_steps=4"]


def test_two_torchrun_agents_match_one_node_with_two_ranks(repo, run_env, free_port, small, losses, tmp_path):
    one_node = tmp_path / "one-node"
    # the single-node reference through `tooltrain launch --launcher torchrun` (torchrun --nproc-per-node 2)
    reference = subprocess.run(
        [
            sys.executable,
            "-m",
            "train",
            "launch",
            "recipe=tiny",
            "--launcher",
            "torchrun",
            "--nodes",
            "1",
            "--gpus-per-node",
            "2",
            *small,
            *RUN,
            f"launcher.master_port={free_port()}",
            f"output_dir={one_node}",
        ],
        cwd=repo,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert reference.returncode == 0, reference.stdout[-3000:] + reference.stderr[-3000:]
    assert reference.stdout.startswith("NNODES=1 NODE_RANK=0 NPROC_PER_NODE=2 MASTER_ADDR=127.0.0.1 ")

    two_nodes = tmp_path / "two-nodes"
    port = free_port()
    agents, logs = [], []
    for node_rank in (0, 1):
        env = {
            **run_env,
            "NNODES": "2",
            "NODE_RANK": str(node_rank),
            "NPROC_PER_NODE": "1",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RDZV_ID": "two-nodes-test",
        }
        log = (tmp_path / f"node{node_rank}.log").open("w+")
        logs.append(log)
        agents.append(
            subprocess.Popen(
                [str(repo / "launch/torchrun.sh"), "recipe=tiny", *small, *RUN, f"output_dir={two_nodes}"],
                cwd=repo,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    codes = [agent.wait(timeout=400) for agent in agents]
    outputs = []
    for log in logs:
        log.seek(0)
        outputs.append(log.read())
    assert codes == [0, 0], "\n".join(output[-3000:] for output in outputs)
    for node_rank, output in enumerate(outputs):
        first = output.splitlines()[0]
        is_host = "true" if node_rank == 0 else "false"  # node rank 0 hosts the c10d store
        assert first.startswith(
            f"+ {sys.executable} -m torch.distributed.run --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d "
            f"--rdzv-endpoint 127.0.0.1:{port} --rdzv-id two-nodes-test --rdzv-conf is_host={is_host} "
        )
    # global rank 0 (on whichever agent the rendezvous made node 0) reports the world once
    assert "\n".join(outputs).count("tooltrain: tiny on 2 rank(s), zero3; 12 rows from 12 samples") == 1

    expected = losses(one_node)
    assert sorted(expected) == [1, 2, 3, 4]
    assert losses(two_nodes) == expected
    summary = json.loads((two_nodes / "summary.json").read_text())
    assert (summary["status"], summary["steps"]) == ("completed", 4)
    assert (two_nodes / "final" / "adapter_model.safetensors").is_file()
