"""ToolGT's Table 2 at the end of a run (``train.papers.toolgt.run_table``): the paper's rows beside the run's, from
the per-category / per-task sections of the run's evaluations (as the engine hands them to a paper's table), unrun
cells with their reason."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from train.engine.paper_table import Unrun, table_lines
from train.engine.summary import eval_before_after
from train.evaluation.bfcl.summary import TOOLGT_ITEM_COUNTS
from train.evaluation.nexus import TOOLGT_NEXUS_TASKS
from train.papers import PAPERS
from train.papers.toolgt.run_table import COLUMNS, measured_points, table

TINY_CFG = {"toolgt": {"arm": "template", "template": "detail", "arm_data": "paper"}, "model": {"name": "tiny_llama"}}


def metrics_rows() -> list[dict]:
    """What the toolgt_tiny eval logs (bench per category, Nexus's toolgt block), at step 0 and steps 2 and 4."""

    def row(step: int, simple: float, nvd: float) -> dict:
        return {
            "step": step,
            "eval/bfcl/accuracy": simple,  # top level: what summary["eval"] keeps, not what the table reads
            "eval/bfcl/by_category/simple_python/accuracy": simple,
            "eval/bfcl/by_category/simple_python/total": 4,
            "eval/bfcl_1/by_category/multiple/accuracy": 1 / 3,
            "eval/bfcl_1/by_category/multiple/total": 3,
            "eval/bfcl_2/by_category/parallel/accuracy": 0.0,
            "eval/bfcl_2/by_category/parallel/total": 3,
            "eval/bfcl_3/by_category/parallel_multiple/accuracy": 0.5,
            "eval/bfcl_3/by_category/parallel_multiple/total": 2,
            "eval/nexus/tasks/cve_cpe/accuracy": nvd,  # V1 names: not ToolGT's
            "eval/nexus/toolgt/tasks/NVDLibrary/accuracy": nvd,
            "eval/nexus/toolgt/tasks/VirusTotal/accuracy": 0.25,
            "eval/nexus/toolgt/weighted_average": 0.0,  # not read: the table computes W / U itself
        }

    return [row(0, 0.0, 0.0), {"step": 1, "loss": 2.0}, row(2, 0.25, 0.5), row(4, 0.5, 0.75)]


def evaluations(rows: list[dict]) -> dict:
    """The run's evaluations with every section, as ``train.engine.run.paper_tables`` gives a paper's table."""
    return eval_before_after(rows, sections=True)


def test_the_table_reads_each_category_and_nexus_task_at_step_0_and_the_last_step():
    found = measured_points(evaluations(metrics_rows()))
    assert found["before"]["step"] == 0 and found["after"]["step"] == 4
    assert found["after"]["bfcl"] == {
        "simple_python": {"accuracy": 0.5, "total": 4},
        "multiple": {"accuracy": 1 / 3, "total": 3},
        "parallel": {"accuracy": 0.0, "total": 3},
        "parallel_multiple": {"accuracy": 0.5, "total": 2},
    }
    assert found["after"]["nexus"] == {"NVDLibrary": 0.75, "VirusTotal": 0.25}
    assert measured_points(evaluations([{"step": 3, "loss": 1.0}])) == {"before": None, "after": None}


def test_the_tiny_runs_table_has_the_arms_rows_of_the_four_models_and_says_why_cells_are_unrun():
    summary = {"eval": evaluations(metrics_rows())}
    # by hand: non-live = correct / items over its 4 categories: base (0 + 1 + 0 + 1) / 12, trained (2+1+0+1) / 12;
    # Nexus W weights NVDLibrary and VirusTotal by their sizes 78 and 151: (0.75 * 78 + 0.25 * 151) / 229 = 42.03
    assert table_lines(table(OmegaConf.create(TINY_CFG), summary).to_dict()) == [
        "ToolGT Table 2 (fine-tuning; BFCL-v2 groups from Table 6), %",
        (
            "                                                             W    BFCL  non-live    live  relevance"
            "  Nexus W  Nexus U"
        ),
        (
            "  LLaMA-3.1-8B-Instruct, Template-Training               74.10   75.28     84.61   63.68      75.61"
            "    36.27    30.23"
        ),
        (
            "  Mistral-7B-Instruct-v0.3, Template-Training            69.87   71.40     81.22   59.92      70.07"
            "    27.02    23.17"
        ),
        (
            "  Mistral-Nemo-12B-Instruct, Template-Training           77.40   78.63     86.78   68.54      78.31"
            "    37.28    32.46"
        ),
        (
            "  Qwen-2.5-14B-Instruct, Template-Training               78.55   79.83     88.70   69.22      79.24"
            "    42.20    37.05"
        ),
        "  " + "-" * 115,
        (
            "  this run: base model (step 0)                         n/a[1]  n/a[1]     16.67  n/a[2]     n/a[3]"
            "   n/a[4]   n/a[4]"
        ),
        (
            "  this run: Template-Training (detail, arm_data=paper)  n/a[1]  n/a[1]     33.33  n/a[2]     n/a[3]"
            "   n/a[4]   n/a[4]"
        ),
        (
            "  [1] W and BFCL need all 13 ToolGT BFCL-v2 categories; not run: simple_java, simple_javascript, "
            "live_simple, live_multiple, live_parallel, live_parallel_multiple, irrelevance, live_irrelevance, "
            "live_relevance"
        ),
        "  [2] no BFCL live category in this run's eval",
        "  [3] no BFCL relevance category in this run's eval",
        (
            "  [4] Nexus W / U are over ToolGT's 8 Nexus tasks; not run: Places, Climate, OTX, VT-nested, VT-parallel, "
            "CVECPE"
        ),
        "  paper rows: Template-Training of the paper's four models (Table 2 has none for this model)",
        (
            "  non-live measured on simple_python, multiple, parallel, parallel_multiple: 12 items (the paper's: 6 "
            "categories, 1,150 items)"
        ),
        (
            "  Nexus over the ToolGT tasks scored (NVDLibrary, VirusTotal; the paper's: 8 tasks, 692 items), base: "
            "W / U 16.48 / 12.50"
        ),
        (
            "  Nexus over the ToolGT tasks scored (NVDLibrary, VirusTotal; the paper's: 8 tasks, 692 items), trained: "
            "W / U 42.03 / 50.00"
        ),
    ]


def test_a_full_run_of_a_paper_model_fills_every_cell_beside_that_models_three_arms():
    everything = {
        "step": 9,
        "bfcl": {name: {"accuracy": 0.5, "total": count} for name, count in TOOLGT_ITEM_COUNTS.items()},
        "nexus": {task: 0.25 for task in TOOLGT_NEXUS_TASKS},
    }
    choices = {"arm": "none", "template": "simple", "arm_data": "shared"}
    cfg = OmegaConf.create({"toolgt": choices, "model": {"path": "meta-llama/Llama-3.1-8B-Instruct"}})
    logged = {
        f"by_category/{name}/{key}": value for name, score in everything["bfcl"].items() for key, value in score.items()
    }
    logged |= {f"toolgt/tasks/{task}/accuracy": value for task, value in everything["nexus"].items()}
    made = table(cfg, {"eval": {"bfcl": {"before": None, "after": {"step": 9, **logged}}}})
    assert [label for label, _ in made.paper_rows] == [
        "LLaMA-3.1-8B-Instruct, No Thought-Training",
        "LLaMA-3.1-8B-Instruct, CoT-Training",
        "LLaMA-3.1-8B-Instruct, Template-Training",
    ]
    assert made.paper_rows[0][1] == dict(zip(COLUMNS, (69.73, 72.16, 87.22, 63.22, 59.86, 35.98, 29.82)))
    [(label, cells)] = made.measured
    assert label == "this run: No Thought-Training (simple, arm_data=shared)"
    expected = {**dict.fromkeys(("W", "BFCL", "non-live", "live", "relevance"), 50.0), "Nexus W": 25.0, "Nexus U": 25.0}
    assert cells == pytest.approx(expected)
    assert made.notes == []  # nothing measured on a subset


def test_a_run_that_evaluated_nothing_still_ends_with_the_table_every_cell_saying_so():
    made = table(OmegaConf.create(TINY_CFG), {"status": "completed"})
    unrun = dict.fromkeys(COLUMNS, Unrun("not evaluated after training"))
    assert made.measured == [("this run: Template-Training (detail, arm_data=paper)", unrun)]


def test_toolgt_registers_the_table():
    spec = PAPERS.get("toolgt")
    assert spec.table is not None
    summary = {"eval": evaluations(metrics_rows())}
    cfg = OmegaConf.create(TINY_CFG)
    assert spec.table(cfg, summary).to_dict() == table(cfg, summary).to_dict()
