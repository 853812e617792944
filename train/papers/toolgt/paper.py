"""ToolGT's spec (``PAPERS["toolgt"]``): the ``toolgt:`` config node its recipes set, its checks and resume rule,
Table 2 at the end of a run (``run_table``), and ``--summary toolgt`` for ``eval run bfcl|nexus`` and
``eval score bfcl`` (folders)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from train.papers.spec import PaperSpec, Summary, fed_to_builder


@dataclass
class ToolGTConfig:
    """The ToolGT recipes' choices (seed 004): ``toolgt.arm=none,cot,template`` sweeps Table 2's row. The recipe's data
    config reads them as ``data.builder_args.arm: ${toolgt.arm}``, ``template: ${toolgt.template}`` and
    ``arm_data: ${toolgt.arm_data}``. Plain strings,
    not enums: an interpolated enum would reach the builder (and the dataset cache key) as an Enum object; ``check``
    refuses a value outside the builder's choices and lists them."""

    arm: str = "template"  # none (No-Thought) | cot (CoT-Training) | template (Template-Training)
    template: str = "detail"  # detail (the paper's) | simple | claude | cot: decides the kept query set (Table 3)
    # paper: each arm trains on its own reasoning's kept set (No-Thought on the template's: Table 3) | shared: all
    # three arms on the samples the template's AND the CoT reasoning both passed (docs/toolgt.md, "Arms")
    arm_data: str = "paper"
    # the eval data: read by conf/eval/toolgt*.yaml and by the builder's decontamination (conf/data/toolgt*.yaml),
    # so the model is never trained on a row it is scored on
    bfcl_dir: str = (
        "data/bfcl_v2"  # BFCL_v2_*.json + possible_answer/ (gorilla's berkeley-function-call-leaderboard/data)
    )
    nexus_dir: str = "data/nexusraven_v1_eval"  # cve_cpe_queries.json, virustotal_queries.json + definitions


def problems(cfg: Any) -> list[str]:
    """``toolgt.*`` must be what the builder is given: an arm set in ``data.builder_args`` directly would train one
    arm under another arm's run name."""
    from train.papers.toolgt.builder import ARM_DATA, ARMS
    from train.papers.toolgt.teacher import TEMPLATES

    toolgt = cfg.toolgt
    found = [
        f"toolgt.{key}={toolgt[key]} is not a{n} {key}; valid: {', '.join(valid)}"
        for key, n, valid in (("arm", "n", ARMS), ("template", "", TEMPLATES), ("arm_data", "n", ARM_DATA))
        if toolgt[key] not in valid
    ]
    return found + fed_to_builder(cfg, "toolgt", ("arm", "template", "arm_data"))


def table(cfg: Any, summary: dict[str, Any]) -> Any:
    from train.papers.toolgt.run_table import table as table_2

    return table_2(cfg, summary)


def summary(bench: str, metrics: dict[str, Any], names: list[str]) -> tuple[list[str], dict[str, Any]]:
    from train.papers.toolgt.paper_tables import summary as tables_summary

    return tables_summary(bench, metrics, names)


PAPER = PaperSpec(
    title="ToolGT: template-guided reasoning (seed 004)",
    node="toolgt",
    section=ToolGTConfig,
    checks=problems,
    resume=("fixed", "the ToolGT arm, template, arm_data and eval rows choose the training samples (builder_args)"),
    table=table,  # Table 2 beside the run's rows, at the end of the run
    summary=Summary(
        lines=summary,
        run_benches=("bfcl", "nexus"),
        score_benches=("bfcl",),
        help="toolgt: ToolGT's numbers (seed 004 §3.3) beside the paper's Table 2 row for the model: bfcl W, "
        "non-live / live / relevance, exec-free BFCL; nexus: its ToolGT tasks, W / U",
    ),
)
