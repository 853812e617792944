"""The end-of-run summary ``tooltrain train`` prints: what was trained, how well, where it is, how long.

A pure function of what ``run(cfg)`` returns (``RunResult.summary``, the same dict as
RUN_DIR/summary.json, and the per-step losses), so it is tested without training anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from train.engine.paper_table import table_lines

# BuildReport counters of conversations that never became a training sample, as the summary names them
LEFT_OUT = (
    ("rejected_by_reader", "unreadable"),
    ("dropped_by_builder", "dropped by the data builder"),
    ("invalid", "invalid"),
    ("unrenderable", "unrenderable in the chat format"),
    ("dropped_overlong", "over data.max_seq_len"),
    ("dropped_untrained", "with nothing to train"),
)


def format_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def loss_line(losses: Sequence[float]) -> str:
    """First -> last logged loss; with 8+ steps also the means of the first and last quarter of the
    steps: one step's loss depends on which conversations its rows drew (on the demo data a row of
    free-text answers sits near 1.2 while a row of tool calls falls to 0.3), the means less so."""
    if not losses:
        return "not logged"
    line = f"{losses[0]:.3f} -> {losses[-1]:.3f} (step 1 -> {len(losses)})"
    if len(losses) >= 8:
        k = len(losses) // 4
        first, last = sum(losses[:k]) / k, sum(losses[-k:]) / k
        line += f"; mean of the first {k} steps {first:.3f}, of the last {k} {last:.3f}"
    return line


def data_line(data: dict[str, Any]) -> str:
    line = f"{data.get('read', 0):,} conversations read -> {data.get('train_rows', 0):,} training samples"
    if data.get("eval_rows"):
        line += f" + {data['eval_rows']:,} held out for eval"
    left_out = [(data.get(key, 0), name) for key, name in LEFT_OUT if data.get(key, 0)]
    if left_out:
        # the sum of the counts, not read - samples: a data builder may make several samples of one conversation
        total = sum(n for n, _ in left_out)
        line += f"; left out {total:,}: " + ", ".join(f"{n:,} {name}" for n, name in left_out)
    if data.get("truncated"):
        line += f"; {data['truncated']:,} truncated to data.max_seq_len"
    return line


REASONS_SHOWN = 5  # the commonest reasons a conversation was left out, on the console


def _examples(ids: list[str]) -> str:
    return " (e.g. " + ", ".join(repr(i) for i in ids) + ")" if ids else ""


def mix_share(entry: dict[str, Any]) -> str:
    """``x2.5`` for a weighted source; ``0.75 of the mix (x1.2)`` for one given as a fraction."""
    if entry.get("fraction") is not None:
        return f"{entry['fraction']:g} of the mix (x{entry['weight']:.3g})"
    return f"x{entry['weight']:g}"


def source_lines(per_source: list[dict[str, Any]]) -> list[str]:
    """One line per data.sources entry where there are several or one is weighted (a single unweighted source says
    nothing the data line does not): what it read, accepted, rejected, and holds after its weight."""
    if len(per_source) < 2 and all(entry.get("weight", 1.0) == 1.0 for entry in per_source):
        return []
    return [
        f"  source {entry['source']}  {entry['name']} {mix_share(entry)}: {entry['read']:,} read, "
        f"{entry['accepted']:,} accepted, {entry['rejected']:,} rejected -> {entry['weighted']:,} after weighting"
        for entry in per_source
    ]


def data_detail_lines(data: dict[str, Any]) -> list[str]:
    """Under the data line: why conversations were left out (the commonest reasons, with the first ids where the
    build kept them: a repeated id), and the ids renamed because an earlier source used them. summary.json has all."""
    counted = {key for key, _ in LEFT_OUT}
    reasons = [(count, key) for key, count in (data.get("reasons") or {}).items() if key.split(":")[0] in counted]
    examples = data.get("examples") or {}
    lines = [
        f"  left out  {count:,} {key}{_examples(examples.get(key, []))}"
        for count, key in sorted(reasons, key=lambda item: -item[0])[:REASONS_SHOWN]
    ]
    if len(reasons) > REASONS_SHOWN:
        lines.append(f"  left out  ... {len(reasons) - REASONS_SHOWN} more reasons in summary.json (data.reasons)")
    lines += source_lines(data.get("per_source") or [])
    if data.get("renamed_ids"):
        lines.append(
            f"  ids       {data['renamed_ids']:,} renamed s<i>/<id>: an earlier data.sources entry used the id; "
            f"both are trained{_examples(examples.get('renamed', []))}"
        )
    return lines


# how the summary names a benchmark's top-level metrics, in the order it prints them; others keep their key
METRIC_NAMES = {
    "exact_match": "call exact match",
    "name_accuracy": "name accuracy",
    "valid_call_rate": "valid-call rate",
}


def run_identity(cfg: Any, recipe: str | None = None) -> dict[str, Any]:
    """What the run is, for summary.json and the report's title: run name, model, chat format, recipe
    (the ``recipe=`` choice, from Hydra when it composed this run; None when unknown)."""
    if recipe is None:
        try:
            from hydra.core.hydra_config import HydraConfig

            recipe = HydraConfig.get().runtime.choices.get("recipe") if HydraConfig.initialized() else None
        except (ImportError, ValueError):
            recipe = None
    return {
        "name": str(cfg.run_name),
        "model": str(cfg.model.name),
        "chat_format": str(cfg.model.chat_format),
        "recipe": recipe,
    }


def eval_before_after(history: Iterable[dict[str, Any]], sections: bool = False) -> dict[str, dict[str, Any]]:
    """Per benchmark, its top-level metrics ``before`` training (the evaluation at step 0, when one ran:
    the base model) and ``after`` (the last evaluation past step 0), each with its ``step``; from the
    Trainer's log history (``eval/<bench>/<metric>`` entries). Sections (``by_kind``) are left out, but for
    a scorer's averages (``micro/<metric>``, ``macro/<metric>``) and the rates of each language
    (``by_language/<code>/lm|fm``), kept as ``macro/tool_f1``, ``by_language/zh/lm``. ``sections``: keep every
    section's metrics too (``by_group/simple/open/chat/irr``), for a paper's table."""
    logged: dict[str, dict[int, dict[str, Any]]] = {}
    for entry in history:
        step = entry.get("step")
        for key, value in entry.items():
            path = key.split("/")
            if len(path) < 3 or path[0] != "eval" or not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            if len(path) == 3 or sections or _summarised_section(path[2:]):
                logged.setdefault(path[1], {}).setdefault(int(step or 0), {})["/".join(path[2:])] = value
    result: dict[str, dict[str, Any]] = {}
    for bench, by_step in logged.items():
        later = [step for step in by_step if step > 0]
        result[bench] = {
            "before": {"step": 0, **by_step[0]} if 0 in by_step else None,
            "after": {"step": max(later), **by_step[max(later)]} if later else None,
        }
    return result


def _summarised_section(path: list[str]) -> bool:
    """Whether a sectioned metric (``macro/tool_f1``) goes into the run summary beside the top-level ones."""
    averages = len(path) == 2 and path[0] in ("micro", "macro")
    language_rates = len(path) == 3 and path[0] == "by_language" and path[2] in ("lm", "fm")
    return averages or language_rates


def rate_text(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.1%}" if 0 <= value <= 1 else f"{value:.4g}"


def shown_metrics(points: Sequence[dict[str, Any]]) -> list[str]:
    """The metrics an evaluation table shows for one benchmark's points (before and/or after, oldest first): the
    named ones (METRIC_NAMES, in its order) that any point has, then the other rates of the last point in its own
    order. Integer entries (``step``, ``total``) are counts, not rates. The summary and the model card both use it."""
    named = [key for key in METRIC_NAMES if any(key in point for point in points)]
    last = points[-1] if points else {}
    return named + [key for key in last if key not in METRIC_NAMES and isinstance(last[key], float)]


def eval_lines(evals: dict[str, dict[str, Any]]) -> list[str]:
    """The summary's evaluation block: per benchmark, before -> after for each top-level rate."""
    lines = []
    for bench, points in evals.items():
        before, after = points.get("before"), points.get("after")
        shown = [point for point in (before, after) if point]
        if not shown:
            continue
        total = shown[-1].get("total")
        items = f" on {total:,} conversations" if total is not None else ""
        if before and after:
            head = f"{bench}{items}: before (step 0, the base model) -> after (step {after['step']:,})"
        else:
            head = f"{bench}{items} at step {shown[0]['step']:,}" + (" (the base model)" if before else "")
        lines.append(f"  eval      {head}")
        rates = shown_metrics(shown)
        width = max((len(METRIC_NAMES.get(key, key)) for key in rates), default=0)
        for key in rates:
            values = " -> ".join(f"{rate_text(point.get(key)):>6}" for point in shown)
            lines.append(f"              {METRIC_NAMES.get(key, key):<{width}}  {values}")
    return lines


def format_summary(
    summary: dict[str, Any], losses: Sequence[float], output_dir: Path, total_seconds: float | None = None
) -> str:
    """The lines printed after a run, from its summary dict (RUN_DIR/summary.json) and per-step losses."""
    status, steps = summary.get("status", "unknown"), summary.get("steps", 0)
    took = (
        f"{format_duration(summary['seconds'])} of training"
        if summary.get("seconds") is not None
        else "training time unknown"
    )
    if total_seconds is not None:
        took += f", {format_duration(total_seconds)} since the command started"
    lines = [f"tooltrain: run {status} after {steps:,} steps ({took})"]
    data = summary.get("data") or {}
    if data:
        lines.append(f"  data      {data_line(data)}")
        lines += data_detail_lines(data)
    trained, masked = summary.get("trained_tokens"), summary.get("masked_tokens")
    if trained is not None and masked is not None:
        share = trained / (trained + masked) if trained + masked else 0.0
        lines.append(
            f"  tokens    {trained:,} trained, {masked:,} masked in the built samples ({share:.1%} carry loss)"
        )
    packing = summary.get("packing") or {}
    if packing:
        lines.append(
            f"  rows      {packing['samples']:,} samples in {packing['rows']:,} rows; "
            f"padding efficiency {packing['padding_efficiency']:.1%}"
        )
    lines.append(f"  loss      {loss_line(losses)}")
    grpo = summary.get("grpo") or {}
    if grpo.get("reward_first") is not None:  # GRPO's loss says little (advantages sum to zero in a group)
        first, last = grpo["reward_first"], grpo["reward_last"]
        lines.append(f"  reward    {first:.4f} -> {last:.4f} (the mean of a step's rollouts)")
    lines += eval_lines(summary.get("eval") or {})
    params = summary.get("parameters") or {}
    if params.get("total"):
        lines.append(
            f"  params    {params['trainable']:,} of {params['total']:,} trainable "
            f"({params['trainable'] / params['total']:.2%}), {summary.get('dtype', 'float32')}"
        )
    # LoRA (some parameters frozen) saves an adapter; full fine-tuning saves the model
    saved = "adapter" if params.get("total") and params.get("trainable", 0) < params["total"] else "model"
    if summary.get("final"):  # relative to the run folder (an absolute path in summaries written before)
        lines.append(f"  {saved:<9} {(output_dir / summary['final']).resolve()}")
    elif status == "preempted":
        lines.append(f"  {saved:<9} none yet: rerun the same command to resume from the last checkpoint")
    else:
        lines.append(f"  {saved:<9} none saved")
    lines.append(f"  files     {output_dir.resolve()}: summary.json, metrics.jsonl, report.png")
    for table in (summary.get("paper_tables") or {}).values():  # last: every recipe ends with its paper's table
        lines += ["", *table_lines(table)]
    return "\n".join(lines)
