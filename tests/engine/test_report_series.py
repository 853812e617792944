"""report.png's evaluation panels keep their series apart: no counts (Meta-Bench logs some sixty, whose lines and
legend hid the plot), at most MAX_SERIES series a panel (a larger section split in parts), and each series of a
panel with its own linestyle and marker (rates at the same values stay two lines)."""

from __future__ import annotations

from train.engine.report import (
    MAX_SERIES,
    Series,
    eval_panels,
    merge_identical,
    report_panels,
    series_styles,
    write_report,
)

CATEGORIES = [f"cat{index}" for index in range(12)]
RATES = ["hr@1", "hr@3", "hr@5", "t_acc", "fmd", "irr", "strict_t_acc", "call_f1"]  # 8: more than one panel holds


def metabench_row(step: int, value: float) -> dict:
    """A Meta-Bench-like evaluation: overall rates and counts, and per category three rates and five counts; every
    rate at its own values."""
    row = {"step": step, **{f"eval/metabench/{rate}": value + index / 100 for index, rate in enumerate(RATES)}}
    row.update({f"eval/metabench/{count}": 40 for count in ("call_turns", "irrelevance_turns", "fmd_turns")})
    for category in CATEGORIES:
        for index, rate in enumerate(("hr@1", "hr@3", "t_acc")):
            row[f"eval/metabench/by_category/{category}/{rate}"] = value + index / 100
        row.update({f"eval/metabench/by_category/{category}/{count}": 3 for count in ("a", "b", "c", "d", "e")})
    return row


ROWS = [metabench_row(0, 0.25), metabench_row(5, 0.75)]


def test_counts_are_not_drawn_and_every_rate_is():
    panels = eval_panels(ROWS)
    drawn = sorted(f"{panel.title.split(' (')[0]}|{series.label}" for panel in panels for series in panel.series)
    rates = sorted(
        [f"eval: metabench|{rate}" for rate in RATES]
        + [f"eval: metabench by_category/{cat}|{rate}" for cat in CATEGORIES for rate in ("hr@1", "hr@3", "t_acc")]
    )
    assert drawn == rates  # 69 counts logged, none drawn; each of the 44 rates once
    assert all(panel.ylabel == "rate" and "counts" not in panel.title for panel in panels)


def test_no_panel_holds_more_than_max_series_and_a_larger_section_is_split_in_parts():
    panels = eval_panels(ROWS)
    assert max(len(panel.series) for panel in panels) <= MAX_SERIES == 6
    overall = [panel for panel in panels if panel.title.startswith("eval: metabench (")]
    assert [(panel.title, [series.label for series in panel.series]) for panel in overall] == [
        ("eval: metabench (1/2)", ["call_f1", "fmd", "hr@1", "hr@3", "hr@5", "irr"]),
        ("eval: metabench (2/2)", ["strict_t_acc", "t_acc"]),
    ]
    assert [panel.title for panel in panels][2:4] == [
        "eval: metabench by_category/cat0",
        "eval: metabench by_category/cat1",
    ]


def test_rates_at_the_same_points_are_one_series_under_all_their_names():
    rows = [
        {"step": 0, "eval/b/hr@1": 0.0, "eval/b/hr@3": 0.0, "eval/b/t_acc": 0.0},
        {"step": 4, "eval/b/hr@1": 0.5, "eval/b/hr@3": 0.5, "eval/b/t_acc": 0.75},
    ]
    [panel] = eval_panels(rows)
    assert [(s.label, s.steps, s.values) for s in panel.series] == [
        ("hr@1 = hr@3", [0, 4], [0.0, 0.5]),
        ("t_acc", [0, 4], [0.0, 0.75]),  # the same at step 0 only: its own line (and style)
    ]
    same = [Series("a", [1], [0.5]), Series("b", [1], [0.5])]
    assert [s.label for s in merge_identical(same)] == ["a = b"] and [s.label for s in same] == ["a", "b"]


def test_each_series_of_a_panel_has_its_own_linestyle_and_marker():
    styles = series_styles(MAX_SERIES)
    assert len({str(linestyle) for linestyle, _ in styles}) == MAX_SERIES
    assert len({marker for _, marker in styles}) == MAX_SERIES


def test_the_training_panels_are_unchanged_beside_them():
    rows = [{"step": 1, "loss": 1.0, "learning_rate": 0.1}, *ROWS]
    assert [panel.title for panel in report_panels(rows)][:2] == ["training loss", "learning rate"]


def test_a_report_with_split_panels_is_drawn(tmp_path):
    import json

    rows = [{key: value for key, value in row.items() if "by_category" not in key} for row in ROWS]  # two panels
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert write_report(metrics, tmp_path / "report.png") == tmp_path / "report.png"
    assert (tmp_path / "report.png").read_bytes()[:4] == b"\x89PNG"


def test_a_dpo_run_draws_its_margin_accuracy_and_log_probabilities():
    rows = [
        {"step": 1, "loss": 0.69, "learning_rate": 0.1, "rewards/margins": 0.0, "rewards/accuracies": 0.0,
         "logps/chosen": -40.0, "logps/rejected": -42.0},
        {"step": 2, "loss": 0.6, "learning_rate": 0.1, "rewards/margins": 0.3, "rewards/accuracies": 1.0,
         "logps/chosen": -38.0, "logps/rejected": -45.0},
    ]  # fmt: skip
    panels = {panel.title: panel for panel in report_panels(rows)}
    margin = panels["preference: reward margin and accuracy"]
    assert [(series.label, series.steps, series.values) for series in margin.series] == [
        ("rewards/margins", [1, 2], [0.0, 0.3]),
        ("rewards/accuracies", [1, 2], [0.0, 1.0]),
    ]
    assert [series.values for series in panels["preference: log-probabilities"].series] == [
        [-40.0, -38.0],
        [-42.0, -45.0],
    ]
    sft = {panel.title for panel in report_panels([{"step": 1, "loss": 1.0}])}
    assert not any(title.startswith("preference") for title in sft)  # an SFT run has no such panel
