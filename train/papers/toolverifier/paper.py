"""ToolVerifier's spec (``PAPERS["toolverifier"]``): the ``eval.toolbench_verify`` node its recipes set, its check,
the ToolBench folder it reads (checked before training) and its after-training step (self-verification with the
trained model as the selector, ``train.papers.toolverifier.after_training``), and ``eval run toolbench MODEL --verify``,
its form of ``eval run`` (``verbs/run_verify.py``), and its table: Table 1, printed last (``table.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from train.papers.spec import PaperSpec

NODE = "eval.toolbench_verify"


def problems(cfg: Any) -> list[str]:
    from omegaconf import OmegaConf

    from train.papers.toolverifier.after_training import toolbench_verify_problems

    return toolbench_verify_problems(OmegaConf.to_container(cfg.eval.toolbench_verify, resolve=True))


def inputs(cfg: Any) -> list[tuple[str, str]]:
    """The ToolBench folder: read after training, checked before it."""
    from train.papers.toolverifier.after_training import DEFAULT_DATA

    return [(f"{NODE}.data", str(cfg.eval.toolbench_verify.get("data", DEFAULT_DATA)))]


def table(cfg: Any, summary: dict[str, Any]) -> Any:
    """Table 1, the paper's rows and this run's (``train.papers.toolverifier.table``): printed last by the engine."""
    from train.papers.toolverifier.table import toolbench_table

    return toolbench_table(summary)


def after_training(cfg: Any, model: Any, tokenizer: Any, out: Path, world_size: int) -> dict[str, Any]:
    from train.papers.toolverifier.after_training import verify_after_training

    return {"toolbench_verify": verify_after_training(cfg.eval.toolbench_verify, model, tokenizer, out, world_size)}


PAPER = PaperSpec(
    title="ToolVerifier: self-verification of tool selection (seed 003)",
    node=NODE,
    # after training, self-verification on a few ToolBench cases per task with the teacher ({cases_per_task, verify:
    # [tool, params], teacher: {kind: offline}, data, max_new_tokens}); empty: off
    section=dict,
    checks=problems,
    inputs=inputs,
    after_training=after_training,
    eval_run_form="train.papers.toolverifier.verbs.run_verify",
    table=table,
    builders=("toolselect",),  # a selector's training run ends with Table 1 too, its rows unrun when not verified
)
