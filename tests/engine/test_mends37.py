"""Session 37 mends: one rule for the metrics an evaluation table shows (summary and model card)."""

from __future__ import annotations

import re

import pytest

from train.engine.model_card import eval_section
from train.engine.summary import METRIC_NAMES, eval_lines, shown_metrics

BEFORE = {"step": 0, "total": 40, "name_accuracy": 0.5, "kl": 1.5}
AFTER = {"step": 120, "total": 40, "exact_match": 0.75, "kl": 0.25, "loss": 0.8, "count": 3}


def test_shown_metrics_named_first_in_their_order_then_the_last_points_other_rates():
    # named metrics come from any point (exact_match only after, name_accuracy only before), in METRIC_NAMES order;
    # the other rates from the last point, in its order; integers (step, total, count) are counts, not rates
    assert shown_metrics([BEFORE, AFTER]) == ["exact_match", "name_accuracy", "kl", "loss"]
    assert shown_metrics([BEFORE]) == ["name_accuracy", "kl"]
    assert shown_metrics([]) == []
    assert list(METRIC_NAMES)[:2] == ["exact_match", "name_accuracy"]


def test_the_summary_and_the_model_card_show_the_same_metrics():
    evals = {"heldout": {"before": BEFORE, "after": AFTER}, "bfcl": {"before": None, "after": {"step": 5, "acc": 0.5}}}
    expected = ["call exact match", "name accuracy", "kl", "loss", "acc"]
    # the summary: "  eval      <bench> ..." heads, then "<name>  <values>" rows
    rows = [line.strip() for line in eval_lines(evals) if not line.startswith("  eval")]
    assert [re.split(r"\s{2,}", row)[0] for row in rows] == expected
    # the model card: a markdown table per benchmark, "| <name> | <values> |"
    card = eval_section({"eval": evals}, exported_step=None)
    cells = [line.split(" | ")[0].removeprefix("| ") for line in card.splitlines() if line.startswith("| ")]
    assert [cell for cell in cells if cell != "metric"] == expected


def test_each_record_kind_counts_its_own_generations():
    from train.commands.eval.run import generation_summary
    from train.evaluation.bfcl.multi_turn.episode import EpisodeRecord
    from train.evaluation.generate import Generation

    one_shot = [
        Generation(text="a", stopped=True),
        Generation(text="b", error="parse: not a call"),  # ran into max_new_tokens too
        Generation(text=None, error="prompt: too long"),
    ]
    assert generation_summary(one_shot) == Generation.summarize(one_shot) == {
        "prompts": 3, "prompt_errors": 1, "parse_errors": 1, "stopped": 1, "hit_max_new_tokens": 1,
    }  # fmt: skip
    assert generation_summary([]) == {
        "prompts": 0, "prompt_errors": 0, "parse_errors": 0, "stopped": 0, "hit_max_new_tokens": 0,
    }  # fmt: skip
    steps = [{"turn": 0, "text": None, "error": "prompt: over the bound"}]
    episodes = [EpisodeRecord(result="Error during inference", steps=steps), EpisodeRecord(result=[], steps=[])]
    assert generation_summary(episodes) == EpisodeRecord.summarize(episodes) == {
        "episodes": 2, "answers": 1, "prompt_errors": 1, "parse_errors": 0, "force_terminated": 0,
    }  # fmt: skip


def test_generation_summary_asks_the_records_kind_and_knows_no_fields():
    from train.commands.eval.run import generation_summary

    class Tally:  # a record kind generation_summary has never heard of
        @classmethod
        def summarize(cls, records):
            return {"tallies": len(records)}

    assert generation_summary([Tally(), Tally()]) == {"tallies": 2}


CUT_LINE = "Meta-Bench: evaluating 16 of 48 rows (limit=16: 32 left unread; the first rows in file order)"


@pytest.mark.parametrize("rank", [0, 1])
def test_the_eval_callback_prints_a_tasks_limit_line_on_the_main_rank_only(rank, tmp_path, monkeypatch, capsys):
    """recipe=mt_llama_tiny evaluates the first 16 of its bench's 48 rows: rank 0 says so once, rank 1 says nothing
    (before, every rank printed it from the task's prepare)."""
    from types import SimpleNamespace

    from train.engine import distributed
    from train.engine.config import compose
    from train.engine.eval_callback import build_eval_callback

    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path / "cache"))
    cfg = compose(["recipe=mt_llama_tiny"])
    tokenizer = SimpleNamespace(pad_token_id=0, eos_token_id=0)
    world = distributed.World(rank, rank, 2, 2, 0)
    callback = build_eval_callback(cfg, SimpleNamespace(eval_conversations=[]), tokenizer, world, log=lambda _: None)
    assert len(callback.benchmarks["metabench"].items) == 16
    assert capsys.readouterr().out.splitlines() == ([CUT_LINE] if rank == 0 else [])


def test_eval_run_prints_the_prepared_notes_once(tmp_path, capsys):
    """``eval run`` (one process) prints what prepare noted, as the task printed it before."""
    from types import SimpleNamespace

    from train.commands.eval.run import references
    from train.evaluation.task_base import Prepared, Task

    class Noting(Task):
        name = "noting"

        def prepare(self, conversations, limit=None, sources=()):
            prepared = super().prepare(conversations, limit, sources)
            prepared.notes.append("noting: a line for the console")
            return prepared

    reference = tmp_path / "refs.jsonl"
    reference.write_text(
        '{"id": "a", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}\n'
    )
    args = SimpleNamespace(data=[reference], source=None, limit=None, bench="noting")
    prepared, rejected = references(args, Noting(), SimpleNamespace(run_cfg=None))
    assert isinstance(prepared, Prepared) and len(prepared.items) == 1 and rejected == []
    assert capsys.readouterr().out == "noting: a line for the console\n"
