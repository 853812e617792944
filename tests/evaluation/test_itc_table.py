"""#27 item 10 for ITC: the run ends with Table 3 (from paper_tables, every row) and the run's base and trained rows."""

from __future__ import annotations

from train.engine.paper_table import table_lines
from train.papers import PAPERS
from train.papers.itc.paper_tables import TABLE_3

CFG = {"model": {"name": "qwen2_5_7b"}, "run_name": "itc_qwen2_5_7b", "data": {"builder": "itc"}}
POINT = {"lm": 0.9, "fm": 1.0, "items": 24, "by_language/en/lm": 1.0, "by_language/zh/lm": 0.8,
         **{f"macro/{k}": 0.5 for k in ("tool_p", "tool_r", "tool_f1", "ti_p", "ti_r", "ti_f1")}}  # fmt: skip


def test_table_has_table_3_and_measured_rows():
    spec = PAPERS.get("itc")
    assert spec.in_run(CFG)
    table = spec.table(CFG, {"eval": {"itc": {"before": {"step": 0, **POINT}, "after": {"step": 20, **POINT}}}})
    data = table.to_dict()
    assert [row["row"] for row in data["paper"]][:24] == [label for label, _ in TABLE_3]
    assert data["paper"][0]["LM"] == 90.51 and data["paper"][-1]["row"].endswith("fine-tuned (Table 5)")
    base, trained = data["measured"]
    assert base["row"].endswith("step 0 (base)") and trained["row"].endswith("step 20 (trained)")
    assert base["LM"] == 90.0 and trained["TI F1"] == 50.0
    assert any("absent of Table 10's 29: 27" in note for note in data["notes"])
    assert any("GPT4o" in line for line in table_lines(data))


def test_cells_are_unrun_with_a_reason_when_the_base_was_not_evaluated():
    table = PAPERS.get("itc").table(CFG, {"eval": {"itc": {"before": None, "after": {"step": 5, **POINT}}}})
    base = table.to_dict()["measured"][0]
    assert base["LM"] == {"unrun": "itc was not evaluated at step 0 (eval.at_start)"}
    none = PAPERS.get("itc").table(CFG, {"eval": {}}).to_dict()["measured"][1]
    assert "no itc benchmark" in none["FM"]["unrun"]
