"""The Meta-Bench task executes the model's meta_tool calls: Algorithm 1 over each row's pool gives the scorer
its ``retrieved`` rankings, so HR@1/3/5 are real numbers in ``tooltrain eval run`` and in the eval callback.

Rankings are hand-derived with the model-free hash-bow embedder: a meta_tool call whose description and
parameter texts are a tool's own has cosine 1 on both parts (score 1), and a pool of two tools ranks both.
"""

from __future__ import annotations

import json

import pytest

from train.evaluation.generate import Generation
from train.evaluation.tasks import TaskError, evaluate_generations, flat_metrics, get_task, read_references
from train.schema import Conversation, Message, Tool, ToolCall, ToolLibrary

TOOLS = [
    ("get_weather", "Get the current weather for a city", "city", "The city name"),
    ("get_news", "Get the latest news headlines", "topic", "The news topic"),
    ("book_hotel", "Book a hotel room", "hotel_id", "The hotel identifier"),
    ("convert_currency", "Convert an amount between currencies", "amount", "The amount"),
]
LIBRARY = [
    Tool(name, description, {"type": "object", "properties": {p: {"description": d}}, "required": [p]})
    for name, description, p, d in TOOLS
]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path / "cache"))


def meta_call(description: str, params: list[str], **extra) -> ToolCall:
    return ToolCall("meta_tool", {"tool_description": description, "param_description": params, **extra})


def own_call(name: str) -> ToolCall:
    _, description, _, param = next(t for t in TOOLS if t[0] == name)
    return meta_call(description, [param])


def retrieve_row(row_id: str, gold: str, pool: list[str]) -> dict:
    gold_turn = Message(role="assistant", tool_calls=[own_call(gold)])
    conv = Conversation(
        row_id,
        [Message(role="user", content="help"), gold_turn],
        meta={
            "category": "function_missing",
            "difficulty": "simple",
            "world": "open",
            "gold_tools": [gold],
            "pool": pool,
            "library": "library.jsonl",
            "turn": 1,
        },
    )
    return conv.to_dict()


def write_bench(folder) -> list:
    rows = [
        retrieve_row("r1", "get_weather", ["get_news", "get_weather", "book_hotel", "convert_currency"]),
        retrieve_row("r2", "book_hotel", ["get_news", "book_hotel"]),
        retrieve_row("r3", "convert_currency", ["get_weather", "convert_currency"]),
        retrieve_row("r4", "get_news", ["get_news", "get_weather"]),
        retrieve_row("r5", "convert_currency", ["get_weather", "get_news", "book_hotel"]),  # gold not in the pool
    ]
    (folder / "bench.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (folder / "library.jsonl").write_text(json.dumps(ToolLibrary("lib", LIBRARY).to_dict()) + "\n")
    return [folder / "bench.jsonl"]


def test_meta_tool_calls_are_executed_over_each_rows_pool(tmp_path):
    task = get_task("metabench", {"embedder": "hash-bow", "k": 5})
    sources = write_bench(tmp_path)
    conversations, rejected = read_references(sources, None, task)
    items = task.prepare(conversations, sources=sources).items
    assert rejected == [] and len(items) == 5
    generations = [
        Generation(text="-", tool_calls=[own_call("get_weather")]),  # r1: its own texts, rank 1
        Generation(text="-", tool_calls=[own_call("get_news")]),  # r2: asks for news, book_hotel second of two
        Generation(text="-", content="It is sunny."),  # r3: no meta_tool call: nothing retrieved
        Generation(text="-", tool_calls=[meta_call("Get news", ["The topic"], extra=1)]),  # r4: breaks A.3
        Generation(text="-", tool_calls=[own_call("convert_currency")]),  # r5: the gold is not in the pool
    ]
    outcome = evaluate_generations(task, items, generations)
    retrieved = {row["id"]: row.get("retrieved") for row in outcome.predictions}
    assert retrieved["r1"][0][0] == "get_weather" and sorted(retrieved["r1"][0]) == sorted(r[0] for r in TOOLS)
    assert retrieved["r2"] == [["get_news", "book_hotel"]]
    assert retrieved["r3"] is None and retrieved["r4"] == [[]]
    assert sorted(retrieved["r5"][0]) == ["book_hotel", "get_news", "get_weather"]
    overall = outcome.metrics["overall"]
    hits = (overall["fmd"], overall["hr@1"], overall["hr@3"], overall["hr@5"], overall["fmd_turns"])
    assert hits == (0.8, 0.2, 0.4, 0.4, 5)
    per_item = {item["id"]: (item["hits"], item["error"]) for item in outcome.result["per_item"]}
    assert per_item == {
        "r1": ({"@1": 1, "@3": 1, "@5": 1}, None),
        "r2": ({"@1": 0, "@3": 1, "@5": 1}, None),
        "r3": ({"@1": 0, "@3": 0, "@5": 0}, None),
        "r4": ({"@1": 0, "@3": 0, "@5": 0}, None),
        "r5": ({"@1": 0, "@3": 0, "@5": 0}, None),
    }
    flat = flat_metrics(outcome.metrics, "eval/metabench/")
    assert (flat["eval/metabench/hr@1"], flat["eval/metabench/hr@3"]) == (0.2, 0.4)


def test_k_cuts_the_rankings_and_options_are_checked(tmp_path):
    sources = write_bench(tmp_path)
    task = get_task("metabench", {"embedder": "hash-bow", "k": 1})
    items = task.prepare(read_references(sources, None, task)[0], sources=sources).items
    outcome = evaluate_generations(task, items[1:2], [Generation(text="-", tool_calls=[own_call("get_news")])])
    assert outcome.predictions[0]["retrieved"] == [["get_news"]]
    assert outcome.metrics["overall"]["hr@5"] == 0.0  # book_hotel was cut at k = 1
    with pytest.raises(TaskError, match=r"metabench: unknown option 'beta' \(valid: embedder, alpha, k\)"):
        get_task("metabench", {"beta": 1})
    with pytest.raises(TaskError, match="option 'k' must be int, got '5'"):
        get_task("metabench", {"k": "5"})


def test_a_pooled_row_without_its_library_is_an_error_not_a_silent_zero(tmp_path):
    sources = write_bench(tmp_path)
    (tmp_path / "library.jsonl").unlink()
    task = get_task("metabench", {"embedder": "hash-bow"})
    with pytest.raises(TaskError, match=f"meta.library 'library.jsonl' not found .*{tmp_path}"):
        task.prepare(read_references(sources, None, task)[0], sources=sources)


def test_the_tiny_recipes_eval_callback_logs_real_hit_rates(monkeypatch):
    """recipe=mt_llama_tiny's eval group, its shipped bench and library: a model that writes every gold turn
    (scripted in place of generate) retrieves every gold tool at rank 1 of its pool."""
    import torch

    from train.engine import distributed
    from train.engine import eval_callback as callback
    from train.engine.config import compose

    cfg = compose(["recipe=mt_llama_tiny"])
    benchmarks = callback.load_benchmarks(cfg.eval, [])
    items = benchmarks["metabench"].items
    assert [item.id for item in items if "pool" in item.conversation.meta] == [
        "glaive_sample-26/function_missing/open/retrieve",
        "glaive_sample-30/function_missing/open/retrieve",
    ]

    def gold_turns(prompts, fmt, tokenizer, backend, max_new_tokens):
        turns = [conv.messages[target] for conv, target in prompts]
        return [Generation(text="-", content=turn.content, tool_calls=list(turn.tool_calls)) for turn in turns]

    monkeypatch.setattr(callback, "generate", gold_turns)
    monkeypatch.setattr(callback, "HFBackend", lambda *args, **kwargs: None)
    tokenizer = type("Tokenizer", (), {"pad_token_id": 0, "eos_token_id": 0})()
    evaluation = callback.GenerationEval(
        benchmarks, None, tokenizer, log=print, world=distributed.World(0, 0, 1, 1, 0), synced_gpus=False
    )
    logged = evaluation.evaluate(torch.nn.Linear(2, 2))
    hit_rates = {key: logged[f"eval/metabench/{key}"] for key in ("fmd", "hr@1", "hr@3", "hr@5", "fmd_turns")}
    assert hit_rates == {"fmd": 1.0, "hr@1": 1.0, "hr@3": 1.0, "hr@5": 1.0, "fmd_turns": 2}
    assert logged["eval/metabench/by_category/function_missing/hr@1"] == 1.0
