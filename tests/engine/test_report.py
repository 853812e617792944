"""RUN_DIR/report.png is drawn from ``report_panels`` (metrics.jsonl rows -> panels of series) and titled by
``report_title``: both pure, so the report's content is tested here without looking at pixels."""

from __future__ import annotations

import pytest

from train.engine.report import Panel, ema, report_panels, report_title, write_report

ROWS = [
    {
        "step": 0,
        "eval/heldout/exact_match": 0.25,
        "eval/heldout/valid_call_rate": 0.125,
        "eval/heldout/total": 12,
        "eval/heldout/by_kind/call/exact_match": 0.0,
        "eval/heldout/by_kind/call/total": 7,
    },
    {"step": 1, "loss": 1.2, "learning_rate": 0.001, "tokens_per_s_per_device": 100.5, "padding_efficiency": 0.9},
    {"step": 2, "loss": 1.0, "learning_rate": 0.002, "tokens_per_s_per_device": 110.0, "padding_efficiency": 0.9},
    {"step": 3, "loss": 0.7, "learning_rate": 0.001, "tokens_per_s_per_device": 90.0, "padding_efficiency": 0.9},
    {
        "step": 3,
        "eval/heldout/exact_match": 0.5,
        "eval/heldout/valid_call_rate": 0.75,
        "eval/heldout/total": 12,
        "eval/heldout/by_kind/call/exact_match": 0.5,
        "eval/heldout/by_kind/call/total": 7,
    },
    {"step": 3, "train_runtime": 9.5, "train_loss": 0.97},  # the Trainer's end-of-training record
]


def contents(panels: list[Panel]) -> list[tuple[str, list[tuple[str, list[int], list[float]]]]]:
    return [(p.title, [(s.label, s.steps, [round(v, 4) for v in s.values]) for s in p.series]) for p in panels]


def test_the_report_draws_raw_and_smoothed_loss_lr_tokens_per_s_and_every_eval_metric():
    assert contents(report_panels(ROWS)) == [
        (
            "training loss",
            [
                ("loss (raw)", [1, 2, 3], [1.2, 1.0, 0.7]),
                ("loss (EMA, smoothing 0.8)", [1, 2, 3], [1.2, 1.0889, 0.9295]),
            ],
        ),
        ("learning rate", [("learning rate", [1, 2, 3], [0.001, 0.002, 0.001])]),
        (
            "real tokens/s (per device, padding excluded)",
            [("real tokens/s (per device, padding excluded)", [1, 2, 3], [100.5, 110.0, 90.0])],
        ),
        # per benchmark: its overall rates, then each section's (counts are not drawn); step 0 = before training
        ("eval: heldout", [("exact_match", [0, 3], [0.25, 0.5]), ("valid_call_rate", [0, 3], [0.125, 0.75])]),
        ("eval: heldout by_kind/call", [("exact_match", [0, 3], [0.0, 0.5])]),
    ]
    rates = [panel for panel in report_panels(ROWS) if panel.ylabel == "rate"]
    assert [panel.ylim for panel in rates] == [(-0.03, 1.03)] * 2  # rates on a 0..1 axis


def test_the_smoothed_loss_is_a_debiased_exponential_moving_average():
    assert ema([2.0]) == [2.0]  # debiased: the curve starts at the first loss, not near 0
    assert [round(v, 6) for v in ema([1.0, 0.0], smoothing=0.5)] == [1.0, round(0.25 / 0.75, 6)]
    assert ema([]) == []


def test_the_report_is_titled_with_run_model_format_and_recipe():
    identity = {"name": "demo", "model": "smollm2_135m", "chat_format": "chatml", "recipe": "demo"}
    assert report_title(identity) == "demo: smollm2_135m, chatml, recipe demo"
    assert report_title({**identity, "recipe": None}) == "demo: smollm2_135m, chatml"  # composed outside the CLI
    assert report_title(None) == "run"


def test_a_run_without_metrics_draws_no_report(tmp_path):
    assert report_panels([]) == []
    assert write_report(tmp_path / "metrics.jsonl", tmp_path / "report.png") is None
    assert not (tmp_path / "report.png").exists()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "1.0", True, None])
def test_values_that_are_not_finite_numbers_are_left_out(bad):
    rows = [{"step": 1, "loss": 1.0}, {"step": 2, "loss": bad}, {"step": 3, "loss": 0.5}]
    assert contents(report_panels(rows))[0][1][0] == ("loss (raw)", [1, 3], [1.0, 0.5])
