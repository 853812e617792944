"""The world as each launcher describes it, read in one place (train.engine.distributed.World)."""

from __future__ import annotations

import os

import pytest

from train.engine.distributed import World, adopt_submitit_tasks

LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture
def clean_env(monkeypatch):
    """No launcher variables; whatever a test (or adopt_submitit_tasks) sets is undone afterwards."""
    for name in {*LAUNCH_VARS, *(n for n in os.environ if n.startswith(("SLURM_", "SUBMITIT_")))}:
        monkeypatch.setenv(name, "")  # recorded first, so teardown restores the variable's absence too
        monkeypatch.delenv(name)
    return monkeypatch


def test_torchrun_on_the_second_of_two_nodes(clean_env):
    for name, value in {
        "RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_RANK": "1",
    }.items():
        clean_env.setenv(name, value)
    world = World.from_env()
    assert world == World(rank=3, local_rank=1, world_size=4, local_world_size=2, node_rank=1)
    assert (world.is_main, world.is_local_main) == (False, False)


def test_node_local_rank_zero_of_a_later_node_does_node_work_but_does_not_report(clean_env):
    for name, value in {
        "RANK": "2",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_RANK": "1",
    }.items():
        clean_env.setenv(name, value)
    world = World.from_env()
    assert (world.node_rank, world.is_local_main, world.is_main) == (1, True, False)


def test_a_plain_process_is_a_world_of_one(clean_env):
    assert World.from_env() == World(rank=0, local_rank=0, world_size=1, local_world_size=1, node_rank=0)
    assert adopt_submitit_tasks() == {}


def submitit_local_task(monkeypatch, rank: int, tasks: int) -> None:
    """The variables submitit's LocalExecutor gives task ``rank`` of ``tasks`` on one node."""
    for name, value in {
        "SUBMITIT_EXECUTOR": "local",
        "SUBMITIT_LOCAL_JOB_ID": "4711",
        "SUBMITIT_LOCAL_NTASKS": str(tasks),
        "SUBMITIT_LOCAL_JOB_NUM_NODES": "1",
        "SUBMITIT_LOCAL_NODEID": "0",
        "SUBMITIT_LOCAL_GLOBALID": str(rank),
        "SUBMITIT_LOCAL_LOCALID": str(rank),
    }.items():
        monkeypatch.setenv(name, value)


def test_submitit_tasks_are_described_to_torch_distributed(clean_env):
    submitit_local_task(clean_env, rank=1, tasks=2)
    world = World.from_env()
    assert world == World(rank=1, local_rank=1, world_size=2, local_world_size=2, node_rank=0)
    assert {
        name: os.environ[name] for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")
    } == {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0"}
    # every task of the job derives the same rendezvous from the job id
    port = os.environ["MASTER_PORT"]
    assert 20000 <= int(port) <= 60000 and os.environ["MASTER_ADDR"]
    clean_env.delenv("RANK")
    submitit_local_task(clean_env, rank=0, tasks=2)
    assert adopt_submitit_tasks()["MASTER_PORT"] == port


def test_a_single_submitit_task_and_a_torchrun_world_are_left_alone(clean_env):
    submitit_local_task(clean_env, rank=0, tasks=1)
    assert adopt_submitit_tasks() == {}
    submitit_local_task(clean_env, rank=0, tasks=2)
    clean_env.setenv("RANK", "0")  # a launcher inside the job (torchrun) already described the world
    assert adopt_submitit_tasks() == {}
    assert "MASTER_ADDR" not in os.environ
