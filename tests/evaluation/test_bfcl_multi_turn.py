"""BFCL multi-turn (train/evaluation/bfcl/multi_turn/): the executor never evals, the runner plays entries as
BFCL's inference loop does, gold through the runner scores 100% and an empty model 0%, the verdicts agree with
bfcl-eval's own multi_turn_checker on perturbed answers (a fixed sample here; every entry in
test_bfcl_multi_turn_slow.py), and the episodic hook is driven by ``generate.run_episodes`` and the eval callback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("bfcl_eval")
HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import bfcl_multi_turn_perturb as perturb

from train.evaluation.bfcl.multi_turn.check import check_entry
from train.evaluation.bfcl.multi_turn.episode import EpisodeRecord
from train.evaluation.bfcl.multi_turn.execute import Call, Environments
from train.evaluation.generate import Generation, run_episodes
from train.evaluation.tasks import get_task, read_references
from train.schema import ToolCall
from train.sources.bfcl import calls_from_python


@pytest.fixture(scope="module")
def base_items():
    task = get_task("bfcl_multi_turn")
    folder = perturb.data_dir()
    files = [folder / "BFCL_v4_multi_turn_base.json", folder / "possible_answer" / "BFCL_v4_multi_turn_base.json"]
    conversations, rejected = read_references(files, None, task)
    assert not rejected
    return task, task.prepare(conversations).items


def scripted(item, empty: bool = False):
    """A "model" answering each turn with its gold calls in one answer, then text (only text when ``empty``)."""
    functions = {f["name"]: f for f in item.conversation.meta["bfcl_functions"]}
    gold = item.conversation.meta["ground_truth"]
    answered: set[int] = set()

    def answer(episode) -> Generation:
        turn = episode.turn
        if not empty and gold[turn] and turn not in answered:
            answered.add(turn)
            return Generation(text="calls", tool_calls=calls_from_python(gold[turn], functions))
        return Generation(text="done", content="done")

    return answer


def play(task, item, model) -> EpisodeRecord:
    episode = task.episode(item)
    while episode.prompt() is not None:
        episode.take(model(episode))
    return episode.record()


def test_gold_through_the_runner_scores_100_and_an_empty_model_0_on_multi_turn_base(base_items):
    task, items = base_items
    assert len(items) == 200
    for empty, expected in ((False, 1.0), (True, 0.0)):
        records = [play(task, item, scripted(item, empty)) for item in items]
        result = task.score(items, task.predictions(items, records))
        assert result["overall"] == {"accuracy": expected, "correct": int(200 * expected), "total": 200}


def test_tool_results_go_back_as_tool_messages_and_a_text_answer_ends_the_turn(base_items):
    task, items = base_items
    item = next(i for i in items if i.id == "multi_turn_base_105")
    episode = task.episode(item)
    conv, index = episode.prompt()
    assert index == len(conv.messages) == 1 and conv.messages[0].role == "user"
    episode.take(Generation(text="x", tool_calls=[ToolCall("get_current_time"), ToolCall("no_such_function")]))
    conv, index = episode.prompt()
    assert [m.role for m in conv.messages] == ["user", "assistant", "tool", "tool"]
    assert [m.tool_call_id for m in conv.messages[2:]] == [c.id for c in conv.messages[1].tool_calls]
    assert conv.messages[2].content == '{"current_time": "10:30 AM"}'
    assert conv.messages[3].content == "Error during execution: name 'no_such_function' is not defined"
    episode.take(Generation(text="ok", content="ok"))  # text: the turn ends, the next user turn follows
    conv, index = episode.prompt()
    assert [m.role for m in conv.messages][-2:] == ["assistant", "user"] and episode.turn == 1
    episode.take(Generation(text="bad", error="parse: no"))  # an unreadable answer ends the turn too
    assert episode.prompt() is None
    assert episode.record().result == [[[{"get_current_time": {}}, {"no_such_function": {}}], []], ["parse: no"]]


def test_a_turn_over_the_step_budget_ends_the_entry_as_a_forced_termination(base_items):
    task, items = base_items
    bounded = get_task("bfcl_multi_turn", {"max_steps": 2})
    item = next(i for i in items if i.id == "multi_turn_base_105")
    record = play(bounded, item, lambda episode: Generation(text="x", tool_calls=[ToolCall("get_current_time")]))
    assert record.force_terminated and len(record.result) == 1 and len(record.result[0]) == 3  # 3 > max_steps
    verdict = task.score([item], task.predictions([item], [record]))["per_item"][0]
    assert verdict["error_type"] == "multi_turn:force_terminated"


def test_a_missing_function_turn_adds_its_tool_with_bfcls_user_message():
    task = get_task("bfcl_multi_turn")
    folder = perturb.data_dir()
    name = "BFCL_v4_multi_turn_miss_func.json"
    conversations, _ = read_references([folder / name, folder / "possible_answer" / name], None, task)
    item = task.prepare(conversations, limit=1).items[0]
    ((turn, (held_out,)),) = item.conversation.meta["missed_function"].items()
    episode = task.episode(item)
    while episode.turn < int(turn):
        assert held_out not in {t.name for t in episode.prompt()[0].tools}
        episode.take(Generation(text="done", content="done"))
    conv, _ = episode.prompt()
    assert held_out in {t.name for t in conv.tools}
    assert conv.messages[-1].content == "I have updated some more functions you can choose from. What about now?"


def test_the_executor_calls_permitted_methods_by_name_and_never_evaluates_text(base_items):
    _, items = base_items
    meta = next(i for i in items if i.id == "multi_turn_base_105").conversation.meta
    envs = Environments(meta["involved_classes"], meta["initial_config"], False, permitted={"get_stock_info"})
    assert envs.execute(Call("get_current_time")).endswith("name 'get_current_time' is not defined")  # not listed
    assert envs.execute(Call("__import__", ["os"])) == "Error during execution: name '__import__' is not defined"
    assert envs.execute(Call("remove")) == "Error during execution: Function call remove is not allowed."
    message = envs.execute(Call("get_stock_info", [], {"symbol": "__import__('os').system('true')"}))
    assert message.startswith("{") and "error" in message.lower()  # the text is a value, looked up, never run
    assert envs.execute(Call("get_stock_info", [], {"nope": 1})).startswith(
        "Error during execution: TradingBot.get_stock_info() got an unexpected keyword argument"
    )


# a fixed sample: two entries of each category, every perturbation of each (all 800 entries: the slow tier)
SAMPLE = [(c, n) for c in ("base", "miss_func", "miss_param", "long_context") for n in (3, 11)]


@pytest.mark.parametrize("category,number", SAMPLE)
def test_verdicts_agree_with_the_official_checker_on_perturbed_answers(category, number):
    entry, gold, functions = perturb.load_category(category)[number]
    meta = {"category": f"multi_turn_{category}", "bfcl_functions": functions, **entry}
    for kind, result in perturb.perturbations(gold, functions, seed=number).items():
        ours, official = check_entry(result, gold, meta, entry["id"]), perturb.official_verdict(result, gold, entry)
        assert (ours["valid"], ours["error_type"] if not ours["valid"] else None) == (
            official["valid"],
            official["error_type"] if not official["valid"] else None,
        ), (entry["id"], kind)


def test_unparseable_or_missing_answers_are_wrong(base_items):
    task, items = base_items
    item = items[0]
    gold = item.conversation.meta["ground_truth"]
    for result in ("Error during inference: prompt: 9 tokens, over max_prompt_tokens=8", [[]] * len(gold), None):
        rows = [] if result is None else [{"id": item.id, "result": result}]
        assert task.score([item], rows)["overall"]["correct"] == 0


# ---- the episodic hook: generate.run_episodes and the eval callback --------------------------------------------


class Countdown:
    """An episode of ``n`` answers; each prompt is one more user message."""

    def __init__(self, n: int):
        from train.schema import Conversation, Message

        self.n, self.conv, self.seen = n, Conversation(id="c", messages=[Message(role="user", content="go")]), []

    def prompt(self):
        return None if len(self.seen) >= self.n else (self.conv, len(self.conv.messages))

    def take(self, generation):
        self.seen.append(generation.text)

    def record(self):
        return SimpleNamespace(seen=self.seen, to_dict=lambda: {"seen": self.seen})


def fake_generate(calls):
    def generate(prompts, fmt, tokenizer, backend, max_new_tokens, pad_to=0, max_prompt_tokens=None):
        calls.append((len(prompts), pad_to))
        return [Generation(text=f"answer {len(calls)}") for _ in prompts]

    return generate


def test_episodes_run_in_rounds_and_lockstep_ranks_pad_every_round(monkeypatch):
    from train.evaluation import generate as generation

    calls: list = []
    monkeypatch.setattr(generation, "generate", fake_generate(calls))
    records = run_episodes([Countdown(1), Countdown(3)], None, None, None, 8)
    assert [r.seen for r in records] == [["answer 1"], ["answer 1", "answer 2", "answer 3"]]
    assert calls == [(2, 0), (1, 0), (1, 0)]  # one generate call per round, only unfinished episodes
    calls.clear()
    answers = iter([True, True, True, True, False])  # another rank still has an episode for one more round
    run_episodes([Countdown(1), Countdown(3)], None, None, None, 8, lockstep=lambda mine: next(answers))
    assert calls == [(2, 2), (1, 2), (1, 2), (0, 2)]  # every round pads to the share size


def test_the_eval_callback_plays_an_episodic_benchmark_and_logs_its_verdicts(monkeypatch, base_items):
    import torch

    from train.engine import distributed
    from train.engine import eval_callback as callback

    task, items = base_items
    chosen = [i for i in items if i.id in ("multi_turn_base_105", "multi_turn_base_132")]
    models = {item.id: scripted(item) for item in chosen}

    def generate(prompts, *rest, **options):
        return [models[conv.id](episodes[conv.id]) for conv, _ in prompts]

    episodes: dict = {}
    original = task.episode

    def remembered(item):
        episodes[item.id] = original(item)
        return episodes[item.id]

    monkeypatch.setattr(task, "episode", remembered)
    monkeypatch.setattr(callback, "HFBackend", lambda *args, **kwargs: SimpleNamespace(synced_gpus=False))
    from train.evaluation import generate as generation

    monkeypatch.setattr(generation, "generate", generate)
    evaluation = callback.GenerationEval(
        {"bfcl_multi_turn": callback.Benchmark(task, chosen, 16)},
        None,
        SimpleNamespace(pad_token_id=0),
        log=lambda _: None,
        world=distributed.World(0, 0, 1, 1, 0),
        synced_gpus=False,
    )
    metrics = evaluation.evaluate(torch.nn.Linear(2, 2), 3)
    assert metrics["eval/bfcl_multi_turn/accuracy"] == 1.0 and metrics["eval/bfcl_multi_turn/total"] == 2
    assert metrics["eval/bfcl_multi_turn/by_category/multi_turn_base/correct"] == 2


def test_the_multi_turn_reward_is_the_checkers_verdict_on_the_episode(base_items):
    from train.evaluation.rewards import get_reward

    reward = get_reward("bfcl_multi_turn")
    task, items = base_items
    for item in items[:3]:
        gold, empty = play(task, item, scripted(item)), play(task, item, scripted(item, empty=True))
        assert (reward(gold, item.conversation), reward(empty, item.conversation)) == (1.0, 0.0)
        assert reward(gold.result, item.conversation.to_dict()) == 1.0  # the per-turn result and a dict reference
    with pytest.raises(ValueError, match="no meta.ground_truth"):
        reward([], items[0].conversation.__class__(id="q", messages=[]))
