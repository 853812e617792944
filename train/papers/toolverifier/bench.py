"""ToolVerifier on SambaNova ToolBench (seed 003, §3.1, Tables 1-2): Table 1's rows and Table 2 from one pass.

``verify_toolbench(selector, teacher, references, switches, demonstrations, limit_per_task)`` runs every case through
``ToolVerifier.run_rows`` with all the tools its conversation carries (the reader gives each case all 17, §3.1),
under the names the paper's prompts show ("Forecast Air Pollution", ``labels.paper_label``; the traces keep them)
and maps the chosen name back to the API name before scoring (``scored_prediction``),
scores each Table 1 row the switches allow with ``score_toolbench`` and returns ``(metrics, traces)``:

* the rows: ``--verify tool,params`` -> all four (``none``, ``tool``, ``params``, ``tool,params``); ``tool`` ->
  ``none`` and ``tool``; ``params`` -> ``none`` and ``params``; ``none`` -> ``none``. The selector runs once per
  case for all of them, and a prompt two rows share is asked once (``run_rows``).
* ``metrics["rows"][row]``: per task the success rate and tool accuracy (fractions, as the scorer gives them), and
  ``average``: the rate pooled over all cases, Table 1's "Average" (90, 84.17, 88, 97 over 100/120/100/100 cases
  -> 376/420 = 89.52).
* ``metrics["selection"]``: Table 2, tool selection accuracy without (top-1: row ``none``) and with tool
  verification (the verified choice: row ``tool``), per task and pooled; "with" only when the tool is verified.
* ``metrics["paper"]``: the paper's Tables 1 and 2 (ToolVerifier rows), to print beside the measured numbers.
* traces: one JSON-ready row per case, ``{"id", "task", "gold_tool", "instruction", "rows": {row: trace}}``, each
  trace ``VerifierTrace.to_dict()`` plus the scorer's ``success`` and ``tool_correct`` for that row.

``format_tables(metrics)`` is the printed report: Table 1's layout (rows x Weather / Booking / Home / Cat /
Average, the paper's column order) and Table 2, each cell ``measured (paper)`` in %.

The selector is any ``(instruction, tools) -> name``; for a trained model, ``text_selector(model_completer(model,
tokenizer))`` (ToolSelect's plain-completion prompt, greedy, the model's own tokenizer). Demonstrations default to
``toolbench_demonstrations(references)`` (leave-one-out from the test set, ``train.papers.toolverifier.demos``;
pass the weather xlsx through that function to use the documented ones).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from train.evaluation.toolbench import score_toolbench
from train.papers.toolverifier.demos import toolbench_demonstrations
from train.papers.toolverifier.labels import labelled_tools, paper_label
from train.papers.toolverifier.verify import (
    ROW_NAMES,
    ROWS,
    Demonstrations,
    Selector,
    ToolVerifier,
    VerifySwitches,
    pooled_rate,
)
from train.schema import Conversation, Tool
from train.teacher import Teacher

TASK_ORDER = ("weather", "booking", "home", "cat")  # the paper's column order
TASK_CASES = {"weather": 100, "booking": 120, "home": 100, "cat": 100}  # §3.1
# The paper's ToolVerifier rows (seed 003), success rate / accuracy in %, per task in TASK_ORDER, then "Average".
PAPER_TABLE_1: dict[str, tuple[float, float, float, float, float]] = {
    "none": (76, 82.50, 85, 82, 81.43),
    "tool": (84, 82.50, 85, 83, 83.57),
    "params": (81, 84.17, 88, 96, 87.14),
    "tool,params": (90, 84.17, 88, 97, 89.52),
}
PAPER_TABLE_2: dict[str, tuple[float, float, float, float, float]] = {
    "without": (82, 98.33, 100, 96, 94.28),  # pooled, its per-task numbers give 396/420 = 94.29: the paper truncates
    "with": (91, 98.33, 100, 97, 96.67),
}
SELECTION_NAMES = {"without": "without tool verification", "with": "with tool verification"}
# Table 1's other rows (§3.2's baselines), as printed, in the paper's order
PAPER_TABLE_1_BASELINES: dict[str, tuple[float, float, float, float, float]] = {
    "ToolLLM 7B": (18, 0, 0, 11, 6.90),
    "NexusRaven-V2 13B": (55, 27.50, 43, 82, 50.71),
    "Qwen1.5-Chat-72B": (74, 55, 52, 89, 66.90),
    "Single-Step Llama-2 70B (1-shot)": (70, 7.50, 85, 83, 58.81),
    "Two-Step Llama-2 70B (1-shot tool selection)": (80, 34.17, 85, 78, 67.62),
    "Two-Step Llama-2-Chat-70B (0-shot tool selection)": (77, 64.17, 84, 83, 76.43),
}
# Table 3 (§4.1, success rate) and Table 4 (A.1, selection accuracy): tool-augmented LLMs without / with verification
PAPER_TABLE_3: dict[str, tuple[float, float, float, float, float]] = {
    "ToolLLM 7B": (18, 0, 0, 11, 6.90),
    "ToolLLM 7B + Tool, Param Verification": (23, 7.5, 9, 15, 13.33),
    "NexusRaven-V2 13B": (55, 27.50, 43, 82, 50.70),
    "NexusRaven-V2 13B + Tool, Param Verification": (78, 34.17, 46, 84, 59.29),
    "Qwen1.5-Chat-72B": (74, 55, 52, 89, 66.90),
    "Qwen1.5-Chat-72B + Tool, Param Verification": (76, 57.5, 59, 91, 70.24),
}
PAPER_TABLE_4: dict[str, tuple[float, float, float, float, float]] = {
    "ToolLLM 7B": (27, 22, 84, 26, 38.90),
    "ToolLLM 7B + Tool Verification": (34, 30, 95, 33, 47.14),
    "NexusRaven-V2 13B": (84, 93.33, 100, 98, 93.81),
    "NexusRaven-V2 13B + Tool Verification": (93, 100, 100, 99, 98.10),
    "Qwen1.5-Chat-72B": (93, 95, 99, 96, 95.71),
    "Qwen1.5-Chat-72B + Tool Verification": (97, 100, 100, 99, 99.05),
}
# Table 5 (A.2): parameter generation only, the gold tool given (selector: gold); * from ToolBench's leaderboard
PAPER_TABLE_5: dict[str, tuple[float, float, float, float, float]] = {
    "GPT-4*": (93, 96.70, 97, 96, 95.72),
    "GPT-3.5-Turbo*": (90, 85.80, 80, 92, 86.90),
    "Llama-2 70B": (93, 84.17, 85, 86, 86.91),
    "Llama-2-Chat-70B": (89, 45, 91, 88, 76.67),
    "TOOLVERIFIER": (99, 85.80, 88, 100, 92.85),
}


def rows_for(switches: VerifySwitches) -> list[str]:
    """The Table 1 rows the switches allow: a row is run when each stage it verifies is switched on."""
    return [key for key, row in ROWS.items() if (switches.tool or not row.tool) and (switches.params or not row.params)]


def select_cases(references: Iterable[Conversation], limit_per_task: int | None) -> list[Conversation]:
    """The cases to score: each task's first ``limit_per_task`` in reference order (all when None)."""
    taken: dict[str, int] = {}
    cases = []
    for conv in references:
        task = str((conv.meta or {}).get("task"))
        if limit_per_task is not None and taken.get(task, 0) >= limit_per_task:
            continue
        taken[task] = taken.get(task, 0) + 1
        cases.append(conv)
    return cases


def _task_cells(scores: dict[str, Any], field: str) -> dict[str, Any]:
    cells = {}
    for task, aggregate in scores["tasks"].items():
        count_field = "success" if field == "success_rate" else "tool_correct"
        cells[task] = {"total": aggregate["total"], "correct": aggregate[count_field], "rate": aggregate[field]}
    return cells


def verify_toolbench(
    selector: Selector,
    teacher: Teacher,
    references: Iterable[Conversation],
    switches: VerifySwitches | None = None,
    demonstrations: Demonstrations | None = None,
    limit_per_task: int | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run, score and tabulate (see the module docstring). ``references``: the whole test set (ToolBench reader
    conversations); leave-one-out demonstrations are drawn from all of it, the first ``limit_per_task`` cases of
    each task are scored. ``switches`` None: both stages on (all four rows). ``demonstrations`` None:
    ``toolbench_demonstrations(references)``."""
    switches = switches or VerifySwitches()
    references = list(references)
    demos = demonstrations if demonstrations is not None else toolbench_demonstrations(references)
    cases = select_cases(references, limit_per_task)
    keys = rows_for(switches)
    offered, back = _offered_tools(cases)
    verifier = ToolVerifier(selector, teacher, switches, lambda name, item_id: demos(back.get(name, name), item_id))
    runs = [verifier.run_rows(case.id, case.messages[0].content or "", offered[case.id], keys) for case in cases]
    gold = [case.to_dict() for case in cases]
    metrics: dict[str, Any] = {
        "verify": ",".join(part for part, on in (("tool", switches.tool), ("params", switches.params)) if on) or "none",
        "items": len(cases),
        "items_per_task": {},
        "tools_offered": sorted({len(case.tools) for case in cases}),
        "rows": {},
    }
    per_item: dict[str, dict[str, dict[str, Any]]] = {key: {} for key in keys}
    for key in keys:
        scores = score_toolbench([scored_prediction(rows[key].to_prediction(), back) for rows in runs], gold)
        per_item[key] = {item["id"]: item for item in scores["per_item"]}
        metrics["rows"][key] = {
            "name": ROW_NAMES[key],
            "tasks": _task_cells(scores, "success_rate"),
            "average": scores["overall"]["success_rate"],
            "unweighted_average": scores["overall"]["unweighted_success_rate"],
            "selection": {**_task_cells(scores, "tool_accuracy"), "average": scores["overall"]["tool_accuracy"]},
            "items_with_errors": sum(1 for rows in runs if rows[key].errors),
        }
        metrics["reference_errors"] = scores.get("reference_errors", [])
    metrics["items_per_task"] = {task: cell["total"] for task, cell in metrics["rows"][keys[0]]["tasks"].items()}
    metrics["selection"] = {"without": _selection(metrics["rows"]["none"])}
    if switches.tool:
        metrics["selection"]["with"] = _selection(metrics["rows"]["tool" if "tool" in keys else "tool,params"])
    metrics["paper"] = {"table_1": PAPER_TABLE_1, "table_2": PAPER_TABLE_2, "columns": [*TASK_ORDER, "average"]}
    describe = getattr(demos, "describe", None)
    metrics["demonstrations"] = describe() if callable(describe) else {"rule": "given by the caller"}
    metrics["teacher"] = teacher.report()
    metrics["contrastive_questions"] = len(verifier.questions)
    traces = []
    for case, rows in zip(cases, runs):
        traced = {}
        for key, trace in rows.items():
            scored = per_item[key].get(case.id, {})
            traced[key] = {
                **trace.to_dict(),
                "success": scored.get("success"),
                "tool_correct": scored.get("tool_correct"),
            }
        meta = case.meta or {}
        instruction = case.messages[0].content
        traces.append(
            {
                "id": case.id,
                "task": meta.get("task"),
                "gold_tool": meta.get("gold_tool"),
                "gold_tool_label": paper_label(str(meta.get("gold_tool") or "")),
                "instruction": instruction,
                "rows": traced,
            }
        )
    return metrics, traces


def _offered_tools(cases: list[Conversation]) -> tuple[dict[str, list[Tool]], dict[str, str]]:
    """Each case's tools under the paper's labels (``labels``), and label -> API name over all cases."""
    offered: dict[str, list[Tool]] = {}
    back: dict[str, str] = {}
    for case in cases:
        offered[case.id], labels = labelled_tools(list(case.tools))
        for label, api in labels.items():
            if back.setdefault(label, api) != api:
                raise ValueError(f"tools {back[label]!r} and {api!r} both read {label!r}")
    return offered, back


def scored_prediction(prediction: dict[str, Any], back: dict[str, str]) -> dict[str, Any]:
    """The scorer's row with the chosen label mapped back to its API name (``meta["gold_tool"]``)."""
    return {**prediction, "tool": back.get(prediction.get("tool") or "", prediction.get("tool") or "")}


def _selection(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "tasks": {task: cell for task, cell in row["selection"].items() if task != "average"},
        "average": row["selection"]["average"],
    }


# ---------------------------------------------------------------- the printed tables


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def _cells(measured: dict[str, Any], average: float | None, paper: tuple[float, ...] | None, tasks: list[str]) -> str:
    out = []
    for index, task in enumerate([*tasks, "average"]):
        value = average if task == "average" else measured.get(task, {}).get("rate")
        reference = f" ({paper[TASK_ORDER.index(task) if task != 'average' else 4]:.2f})" if paper else ""
        out.append(f"{_percent(value) + reference:<17}")
    return "".join(out).rstrip()


def format_tables(metrics: dict[str, Any], table_1: bool = True) -> str:
    """Table 1 (success rate per row; left out when ``table_1`` is false: a training run ends with it as its paper
    table, ``paper.table``) and Table 2 (selection accuracy), each cell ``measured (paper)`` in %."""
    tasks = [task for task in TASK_ORDER if task in metrics["items_per_task"]]
    counts = ", ".join(f"{task} {metrics['items_per_task'][task]}" for task in tasks)
    tools = "/".join(str(n) for n in metrics["tools_offered"])
    lines = [
        (
            f"ToolVerifier on SambaNova ToolBench (seed 003): {metrics['items']} cases ({counts}), {tools} tools "
            f"offered per case, --verify {metrics['verify']}"
        ),
        "",
    ]
    header = f"{'':<40}" + "".join(f"{name.capitalize():<17}" for name in [*tasks, "average"]).rstrip()
    if table_1:
        lines += ["Table 1: tool call success rate, % -- measured (paper, all 420 cases)", header]
        for key, row in metrics["rows"].items():
            paper = metrics["paper"]["table_1"].get(key)
            lines.append(f"{row['name']:<40}" + _cells(row["tasks"], row["average"], paper, tasks))
        lines += ["Average: pooled over the cases (task-size weighted), as the paper's.", ""]
    lines += ["Table 2: tool selection accuracy, % -- measured (paper)"] + ([] if table_1 else [header])
    for key, selection in metrics["selection"].items():
        paper = metrics["paper"]["table_2"][key]
        lines.append(f"{SELECTION_NAMES[key]:<40}" + _cells(selection["tasks"], selection["average"], paper, tasks))
    lines.append("(the paper prints 94.28 for 'without'; its per-task numbers pool to 396/420 = 94.29)")
    demos = metrics.get("demonstrations", {})
    lines += ["", f"demonstrations (§3.3): {demos.get('rule', 'given by the caller')}"]
    errors = {key: row["items_with_errors"] for key, row in metrics["rows"].items() if row["items_with_errors"]}
    if errors:
        lines.append(
            "cases whose trace holds an error (no tool chosen, a teacher failure): "
            + ", ".join(f"{k} {v}" for k, v in errors.items())
        )
    teacher = metrics.get("teacher", {})
    if teacher:
        lines.append(
            f"teacher: {teacher['backend']} {teacher['model']}, {teacher['asked']} asked, {teacher['cache_hits']} from "
            f"the cache, {teacher['failures']} failed; {metrics.get('contrastive_questions', 0)} contrastive questions"
        )
    return "\n".join(lines)


TABLE_5_ROWS = {"none": "Llama-2 70B", "params": "TOOLVERIFIER"}  # this run's row -> the Table 5 row of its setting


def format_table_5(metrics: dict[str, Any]) -> str:
    """Table 5 (A.2, the gold tool given: selector ``gold``): the paper's rows, then this run's rows ``none`` (few-shot
    parameters, no verification: the "Llama-2 70B" row's setting when ``params`` and ``call`` ask Llama-2 70B) and
    ``params`` (parameter verification: the "TOOLVERIFIER" row's), success rate in %."""
    tasks = [task for task in TASK_ORDER if task in metrics["items_per_task"]]
    head = f"{'':<60}" + "".join(f"{name.capitalize():<10}" for name in [*TASK_ORDER, "average"]).rstrip()
    lines = ["Table 5: parameter generation, the gold tool given (A.2), success rate, %", head]
    for label, values in PAPER_TABLE_5.items():
        lines.append(f"{'paper: ' + label:<60}" + "".join(f"{value:<10.2f}" for value in values).rstrip())
    for key, label in TABLE_5_ROWS.items():
        row = metrics["rows"].get(key)
        if row is not None:
            cells = [_percent(row["tasks"].get(task, {}).get("rate")) for task in TASK_ORDER]
            text = "".join(f"{cell:<10}" for cell in [*cells, _percent(row["average"])]).rstrip()
            lines.append(f"{'this run: ' + ROW_NAMES[key] + ' (' + label + ')':<60}" + text)
    lines.append(
        f"(this run: {metrics['items']} cases over {', '.join(tasks)}; * the paper took from ToolBench's leaderboard)"
    )
    return "\n".join(lines)


# ---------------------------------------------------------------- a trained model as the selector


_ACT_LINE = re.compile(r"\nAct: CALLTOOL\[[^\]\n]*\]")


def model_completer(model: Any, tokenizer: Any, max_new_tokens: int = 512) -> Callable[[str], str]:
    """``prompt -> completion``: greedy, the tokenizer's BOS in front (the ToolSelect format trains with it), no other
    special token added, with the KV cache (a training config may switch it off), stopping at the tokenizer's EOS
    (the format trains one after the Act) or once the first ``Act: CALLTOOL[...]`` line is complete (the selector
    reads only that one: a model that runs on costs no more tokens)."""
    import torch
    from transformers import GenerationConfig, StoppingCriteria, StoppingCriteriaList

    device = next(model.parameters()).device
    head = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    config = GenerationConfig(
        max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=eos, pad_token_id=pad, use_cache=True
    )

    class AfterTheAct(StoppingCriteria):
        def __init__(self, start: int):
            self.start = start

        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> bool:
            text = tokenizer.decode(input_ids[0, self.start :].tolist(), skip_special_tokens=True)
            return _ACT_LINE.search(text) is not None

    def complete(prompt: str) -> str:
        ids = head + tokenizer.encode(prompt, add_special_tokens=False)
        with torch.no_grad():
            out = model.generate(
                input_ids=torch.tensor([ids], device=device),
                attention_mask=torch.ones((1, len(ids)), dtype=torch.long, device=device),
                generation_config=config,
                stopping_criteria=StoppingCriteriaList([AfterTheAct(len(ids))]),
            )
        return tokenizer.decode(out[0, len(ids) :].tolist(), skip_special_tokens=True)

    return complete


def paper_average(row: tuple[float, ...]) -> float:
    """A paper row's "Average" recomputed from its per-task numbers (``TASK_ORDER``) over the §3.1 case counts."""
    return pooled_rate({task: (rate, TASK_CASES[task]) for task, rate in zip(TASK_ORDER, row)})


__all__ = [
    "PAPER_TABLE_1",
    "PAPER_TABLE_1_BASELINES",
    "PAPER_TABLE_2",
    "PAPER_TABLE_3",
    "PAPER_TABLE_4",
    "PAPER_TABLE_5",
    "TASK_ORDER",
    "format_table_5",
    "format_tables",
    "model_completer",
    "paper_average",
    "rows_for",
    "select_cases",
    "verify_toolbench",
]
