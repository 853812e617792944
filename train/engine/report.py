"""RUN_DIR/report.png from RUN_DIR/metrics.jsonl: what a run learned, at a glance.

Panels: the training loss, raw and smoothed (an exponential moving average, debiased as TensorBoard's
smoothing is, so its first point is the first loss); the learning rate; real (non-padding) tokens/s; what a
preference objective logs (DPO's reward margin and accuracy, the chosen and rejected log-probabilities); what GRPO
logs (the mean reward and its spread within groups, the rollout length, the KL when one is kept); and
every evaluation rate over steps, one panel per benchmark section (counts are left out; rates with the same points
drawn once under all their names; at most ``MAX_SERIES`` series a panel, each with its own linestyle and marker,
the legend under the axes), so the step-0 evaluation of the base model sits beside the tuned model's. The figure
is titled with the run name, model, chat format and recipe; under the panels, the paper tables the run ended with
(``table_text``).

``report_panels`` (rows -> panels of series) and ``report_title`` are pure and tested; ``write_report``
only draws what they return.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EMA_SMOOTHING = 0.8  # weight of the past in the smoothed loss: about the last 5 steps count
MAX_SERIES = 6  # per panel: more lines and their legend would hide each other
PANEL_HEIGHT = 4.6  # inches a row of panels: the axes and, under them, a legend of up to 3 lines
# one linestyle and one marker per series of a panel (MAX_SERIES at most): rates that sit at the same values
# (a metric and its strict variant, often equal) still show as two lines
LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1, 1, 1)), (0, (1, 3))]
MARKERS = ["o", "s", "^", "D", "v", "x"]
# What a preference or RL objective logs per step (TRL's names), a panel each where the run logged them
OBJECTIVE_PANELS = (
    ("preference: reward margin and accuracy", "reward", ("rewards/margins", "rewards/accuracies")),
    ("preference: log-probabilities", "log p", ("logps/chosen", "logps/rejected")),
    ("rl: mean reward and its spread in a group", "reward", ("reward", "reward_std")),
    ("rl: rollout length (sampled tokens)", "tokens", ("completions/mean_length",)),
    ("rl: KL to the reference", "kl", ("kl",)),
)


@dataclass
class Series:
    label: str
    steps: list[int]
    values: list[float]


@dataclass
class Panel:
    title: str
    ylabel: str
    series: list[Series] = field(default_factory=list)
    ylim: tuple[float, float] | None = None  # rates: 0 to 1, so a flat line at 0.33 reads as 0.33


def read_metrics(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by a kill mid-write
    return rows


def ema(values: list[float], smoothing: float = EMA_SMOOTHING) -> list[float]:
    """Exponential moving average, debiased: ``m_t = s * m_(t-1) + (1 - s) * x_t`` from ``m_0 = 0``, divided
    by ``1 - s^t`` (without it the curve would start near 0)."""
    out, mean = [], 0.0
    for t, value in enumerate(values, start=1):
        mean = smoothing * mean + (1 - smoothing) * value
        out.append(mean / (1 - smoothing**t))
    return out


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _series(rows: list[dict], key: str, label: str | None = None) -> Series | None:
    points = [(int(row["step"]), row[key]) for row in rows if _number(row.get(key)) and _number(row.get("step"))]
    if not points:
        return None
    return Series(label or key, [step for step, _ in points], [float(value) for _, value in points])


def eval_panels(rows: list[dict]) -> list[Panel]:
    """Every rate ``eval/<bench>/[<section>/...]<metric>`` (logged as a float) over steps, in a panel per benchmark
    section of at most ``MAX_SERIES`` series (a section with more is split: "(1/2)", "(2/2)"; rates with the same
    points are one series, ``merge_identical``). Counts (integers:
    correct, total, parse_errors) are not drawn: Meta-Bench logs some sixty, whose lines and legend would hide
    every other; metrics.jsonl and summary.json keep them."""
    keys = sorted({key for row in rows for key in row if key.startswith("eval/") and _number(row[key])})
    groups: dict[tuple[str, str], list[Series]] = {}  # (bench, section) -> series
    for key in keys:
        path = key.split("/")[1:]
        series = _series(rows, key)
        if len(path) < 2 or series is None:
            continue
        if any(isinstance(row[key], int) for row in rows if _number(row.get(key))):
            continue  # a count
        bench, section, metric = path[0], "/".join(path[1:-1]), path[-1]
        series.label = metric
        groups.setdefault((bench, section), []).append(series)
    panels = []
    for bench, section in sorted(groups):  # per benchmark: its overall rates, then its sections'
        title = f"eval: {bench}" + (f" {section}" if section else "")
        series = merge_identical(groups[(bench, section)])
        parts = [series[start : start + MAX_SERIES] for start in range(0, len(series), MAX_SERIES)]
        for number, part in enumerate(parts, start=1):
            part_title = title + (f" ({number}/{len(parts)})" if len(parts) > 1 else "")
            panels.append(Panel(part_title, "rate", part, ylim=(-0.03, 1.03)))
    return panels


def merge_identical(series: list[Series]) -> list[Series]:
    """Series with the same points drawn once, labelled with every name (``hr@1 = hr@3``): one line over another
    hides it whatever its style."""
    merged: dict[tuple[tuple[int, ...], tuple[float, ...]], Series] = {}
    for one in series:
        key = (tuple(one.steps), tuple(one.values))
        if key in merged:
            merged[key].label += f" = {one.label}"
        else:
            merged[key] = Series(one.label, one.steps, one.values)
    return list(merged.values())


def series_styles(count: int) -> list[tuple[str, str]]:
    """A (linestyle, marker) per series of a panel, no two alike: lines at the same values stay apart."""
    return [(LINESTYLES[index % len(LINESTYLES)], MARKERS[index % len(MARKERS)]) for index in range(count)]


def report_panels(rows: list[dict]) -> list[Panel]:
    """The report's panels from metrics.jsonl rows; a panel with nothing logged is left out."""
    panels = []
    loss = _series(rows, "loss", "loss (raw)")
    if loss is not None:
        smoothed = Series(f"loss (EMA, smoothing {EMA_SMOOTHING})", loss.steps, ema(loss.values))
        panels.append(Panel("training loss", "loss", [loss, smoothed]))
    for key, title, ylabel in (
        ("learning_rate", "learning rate", "lr"),
        ("tokens_per_s_per_device", "real tokens/s (per device, padding excluded)", "tokens/s"),
    ):
        series = _series([row for row in rows if "loss" in row], key, title)
        if series is not None:
            panels.append(Panel(title, ylabel, [series]))
    for title, ylabel, keys in OBJECTIVE_PANELS:
        drawn = [series for key in keys if (series := _series(rows, key)) is not None]
        if drawn:
            panels.append(Panel(title, ylabel, drawn))
    return panels + eval_panels(rows)


def report_title(identity: dict[str, Any] | None) -> str:
    """``demo: smollm2_135m, chatml, recipe demo`` (parts that are unknown are left out)."""
    identity = identity or {}
    parts = [identity.get("model"), identity.get("chat_format")]
    if identity.get("recipe"):
        parts.append(f"recipe {identity['recipe']}")
    details = ", ".join(str(part) for part in parts if part)
    name = identity.get("name") or "run"
    return f"{name}: {details}" if details else str(name)


def table_text(tables: dict[str, Any] | None) -> str:
    """The paper tables (summary.json's ``paper_tables``) as the monospaced block under the panels."""
    from train.engine.paper_table import table_lines

    return "\n\n".join("\n".join(table_lines(table)) for table in (tables or {}).values())


def write_report(
    metrics_path: Path, out_path: Path, identity: dict[str, Any] | None = None, tables: dict[str, Any] | None = None
) -> Path | None:
    """Draws report.png: the panels, and under them the run's paper tables (``tables``: summary.json's
    ``paper_tables``). None when the metrics hold nothing to draw."""
    panels = report_panels(read_metrics(metrics_path))
    if not panels:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(3, len(panels))
    rows = math.ceil(len(panels) / columns)
    text = table_text(tables)
    text_height = 0.16 * (text.count("\n") + 2) if text else 0.0  # inches: one monospaced line at 8 pt
    width = max(5.5 * columns, 11.0 if text else 0.0)  # a table of five columns and its labels fits 11 inches
    fig = plt.figure(figsize=(width, PANEL_HEIGHT * rows + text_height), layout="constrained")
    plots, under = (
        fig.subfigures(2, 1, height_ratios=[PANEL_HEIGHT * rows, max(text_height, 1e-3)]) if text else (fig, None)
    )
    axes = plots.subplots(rows, columns, squeeze=False)
    if under is not None:
        under.text(0.01, 0.98, text, family="monospace", fontsize=8, va="top", ha="left")
    from matplotlib.ticker import MaxNLocator

    for ax, panel in zip(axes.flat, panels):
        for series, (linestyle, marker) in zip(panel.series, series_styles(len(panel.series))):
            few = len(series.steps) <= 20
            ax.plot(
                series.steps,
                series.values,
                linestyle=linestyle,
                marker=marker if few else None,
                markersize=4,
                markerfacecolor="none",  # hollow: a marker under another still shows
                label=series.label,
            )
            if panel.ylim is not None and len(series.steps) <= 3:  # before/after: the numbers themselves
                for step, value in zip(series.steps, series.values):
                    ax.annotate(f"{value:.2f}", (step, value), textcoords="offset points", xytext=(4, 4), fontsize=7)
        if panel.ylim is not None:
            ax.set_ylim(*panel.ylim)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(panel.title, fontsize=10)
        ax.set_xlabel("step")
        ax.set_ylabel(panel.ylabel)
        ax.grid(alpha=0.3)
        if len(panel.series) > 1 or panel.series[0].label != panel.title:  # names the lines; under the axes
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, frameon=False)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(report_title(identity))
    fig.savefig(out_path, dpi=110)
    plt.close(fig)
    return out_path
