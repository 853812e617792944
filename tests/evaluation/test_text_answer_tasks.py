"""The BFCL and Nexus tasks with ``answer_style=toolgt_text``: the prompt carries ToolGT's system prompt with the
question's functions, a text answer is read back into calls (its reasoning stripped), and ``well_formed_rate``
is the share of answers that were call lists."""

from __future__ import annotations

from pathlib import Path

from train.evaluation.generate import Generation, parse_output
from train.evaluation.tasks import evaluate_generations, get_task, read_references
from train.formats import get_format
from train.formats.text_answers import PROMPT_OPENING as TOOLGT_PROMPT_OPENING

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "evaluation"
BFCL_FILES = [FIXTURES / "eval_run" / name / "BFCL_v3_simple_python.json" for name in (".", "possible_answer")]
TEXT = get_format("qwen2_5", {"answer_style": "toolgt_text"})


def answered(text: str) -> Generation:
    content, calls, error = parse_output(TEXT, text)
    return Generation(text=text, content=content, tool_calls=calls, error=error)


def test_bfcl_reads_text_answers_and_counts_the_well_formed_ones():
    task = get_task("bfcl")
    conversations, _ = read_references(BFCL_FILES, None, task)
    items = task.prepare(conversations).items
    prompt = "".join(seg.text for seg in TEXT.render_prompt(items[0].conversation, items[0].target))
    assert TOOLGT_PROMPT_OPENING in prompt and '"name": "get_weather"' in prompt and "<tools>" not in prompt
    generations = [
        answered(
            '<thinking>1. get_weather fits.\n6. get_weather(city="San Francisco")</thinking>'
            '[get_weather(city="San Francisco", unit="celsius")]'
        ),
        answered("<thinking>1. circle_area fits.</thinking>The area is 12.57."),  # prose: not a call list
    ]
    outcome = evaluate_generations(task, items, generations)
    assert outcome.predictions == [
        {
            "id": "mini_0",
            "result": [{"get_weather": {"city": "San Francisco", "unit": "celsius"}}],
            "well_formed": True,
        },
        {
            "id": "mini_1",
            "result": "parse: text answer: the answer is not a call list: 'The area is 12.57.'",
            "well_formed": False,
        },
    ]
    assert outcome.metrics["overall"] == {"accuracy": 0.5, "correct": 1, "total": 2}
    assert outcome.metrics["well_formed_rate"] == 0.5


def test_nexus_reads_text_answers():
    task = get_task("nexus")
    conversations, _ = read_references([FIXTURES / "nexus" / "references.jsonl"], None, task)
    items = task.prepare(conversations).items[:1]  # cve_cpe_queries-0
    generation = answered(
        "<thinking>1. searchCPE.\n</thinking>\n"
        "<function>[searchCPE(keywordSearch='Microsoft Exchange 2010', limit=2)]</function>"
    )
    outcome = evaluate_generations(task, items, [generation])
    assert outcome.predictions[0]["tool_calls"] == [
        {
            "type": "function",
            "function": {"name": "searchCPE", "arguments": {"keywordSearch": "Microsoft Exchange 2010", "limit": 2}},
        }
    ]
    assert (outcome.metrics["weighted_average"], outcome.metrics["well_formed_rate"]) == (1.0, 1.0)
