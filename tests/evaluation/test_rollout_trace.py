"""``train.evaluation.rollout``'s ``Trace`` and ``play`` on their own: what a trace keeps, masks and leaves out, on
ids (no format) and on the tiny ChatML tokenizer with a scripted backend."""

from __future__ import annotations

import pytest

from train.evaluation.generate import stop_token_ids
from train.evaluation.rollout import OneTurn, Trace, play
from train.formats import get_format
from train.formats.tokenize import tokenize_prompt
from train.schema import Conversation, Message, Tool, ToolCall
from train.tokenizers import load_tokenizer

# ---- Trace -------------------------------------------------------------------------------------------------------


def test_the_next_prompt_extends_the_trace_with_masked_ids():
    trace = Trace([1, 2])
    trace.take([3, 4], max_len=100)
    trace.continue_with([1, 2, 3, 4, 5, 6], max_len=100)
    trace.take([7], max_len=100)
    assert (trace.completion_ids, trace.env_mask) == ([3, 4, 5, 6, 7], [1, 1, 0, 0, 1])
    assert trace.ids == [1, 2, 3, 4, 5, 6, 7]
    assert (trace.closed, trace.turns_played, trace.turns_trained) == (None, 2, 2)


def test_a_prompt_that_shows_the_history_otherwise_closes_the_trace_and_later_turns_are_not_trained():
    trace = Trace([1, 2])
    trace.take([3, 4], max_len=100)
    trace.continue_with([1, 2, 9, 4, 5], max_len=100)  # the sampled 3 shown as 9: history rewritten
    assert trace.closed == "history shown otherwise than sampled"
    trace.take([6], max_len=100)
    trace.continue_with([1, 2, 3, 4, 6, 7], max_len=100)  # nothing is appended once closed, even an extension
    assert (trace.completion_ids, trace.env_mask) == ([3, 4], [1, 1])
    assert (trace.turns_played, trace.turns_trained) == (2, 1)


def test_a_shorter_prompt_closes_the_trace():
    trace = Trace([1, 2])
    trace.take([3, 4], max_len=100)
    trace.continue_with([1, 2, 3], max_len=100)
    assert trace.closed == "history shown otherwise than sampled" and trace.completion_ids == [3, 4]


def test_past_max_len_the_trace_closes_at_the_prompt_or_at_the_turn():
    by_prompt = Trace([1, 2])
    by_prompt.take([3], max_len=5)
    by_prompt.continue_with([1, 2, 3, 4, 5, 6], max_len=5)  # 6 ids > 5: the masked ids are not appended
    assert by_prompt.closed == "over 5 tokens" and by_prompt.ids == [1, 2, 3]
    by_turn = Trace([1, 2])
    by_turn.take([3, 4, 5], max_len=5)  # exactly 5: trained
    by_turn.take([6], max_len=5)  # 6: not trained, and nothing after it
    by_turn.take([7], max_len=100)
    assert by_turn.closed == "over 5 tokens" and by_turn.ids == [1, 2, 3, 4, 5]
    assert (by_turn.turns_played, by_turn.turns_trained) == (3, 1)


# ---- play ----------------------------------------------------------------------------------------------------------

CONV = Conversation(
    id="weather",
    tools=[Tool(name="get_weather")],
    messages=[
        Message(role="user", content="Paris?"),
        Message(role="assistant", tool_calls=[ToolCall(name="get_weather", arguments={"city": "Paris"}, id="c1")]),
        Message(role="tool", tool_call_id="c1", name="get_weather", content="18C"),
        Message(role="assistant", content="18C."),
    ],
)


@pytest.fixture(scope="module")
def chatml():
    fmt = get_format("chatml")
    tok = load_tokenizer("tiny_chatml")
    return fmt, tok, stop_token_ids(fmt, tok)


def test_play_cuts_at_the_first_stop_id_and_trains_it(chatml):
    fmt, tok, stop_ids = chatml
    answer = tok.encode("18C.", add_special_tokens=False)
    pad = tok.convert_tokens_to_ids("<|endoftext|>")
    shown = []

    def backend(prompts, max_new_tokens, stops):
        shown.extend(prompts)
        assert stops == stop_ids
        return [answer + [stop_ids[0]] + [pad, answer[0], stop_ids[0]]]  # the rest of a batch after the stop

    [rollout] = play([OneTurn(CONV, 3)], fmt, tok, backend, max_new_tokens=16, max_len=1000)
    prompt = tokenize_prompt(fmt, CONV, 3, tok)
    assert shown == [prompt]
    assert (rollout.trace.prompt_ids, rollout.trace.completion_ids) == (prompt, answer + [stop_ids[0]])
    assert rollout.trace.env_mask == [1] * (len(answer) + 1)
    generation = rollout.record
    assert (generation.text, generation.content, generation.stopped) == ("18C.", "18C.", True)
    assert generation.new_tokens == len(answer) + 1


def test_a_turn_without_its_stop_id_is_kept_whole_and_not_stopped(chatml):
    fmt, tok, _ = chatml
    answer = tok.encode("18C. and more", add_special_tokens=False)
    [rollout] = play([OneTurn(CONV, 3)], fmt, tok, lambda p, n, s: [answer], max_new_tokens=len(answer), max_len=1000)
    assert rollout.trace.completion_ids == answer and not rollout.record.stopped


def test_a_first_prompt_that_does_not_render_is_the_callers_error(chatml):
    fmt, tok, _ = chatml
    with pytest.raises(ValueError, match="weather: the first prompt does not render .*'user' message"):
        play([OneTurn(CONV, 0)], fmt, tok, lambda p, n, s: [[] for _ in p], max_new_tokens=4, max_len=1000)


class GoldTurns:
    """The episode of CONV's two assistant turns, each after its gold history."""

    def __init__(self) -> None:
        self.taken = []

    def prompt(self):
        if len(self.taken) == 2:
            return None
        index = [1, 3][len(self.taken)]
        return Conversation(CONV.id, CONV.messages[:index], tools=CONV.tools), index

    def take(self, generation):
        self.taken.append(generation)

    def record(self):
        return self.taken


class TwoPrompts:
    """An episode whose second prompt the format cannot render (a user message where the assistant's should be)."""

    def __init__(self) -> None:
        self.taken = []

    def prompt(self):
        return [(CONV, 1), (CONV, 2)][len(self.taken)] if len(self.taken) < 2 else None

    def take(self, generation):
        self.taken.append(generation)

    def record(self):
        return self.taken


def test_a_later_prompt_that_does_not_render_ends_the_episode_as_a_failed_generation_and_closes_the_trace(chatml):
    fmt, tok, stop_ids = chatml
    first = tok.encode("hi", add_special_tokens=False) + [stop_ids[0]]
    [rollout] = play([TwoPrompts()], fmt, tok, lambda p, n, s: [first for _ in p], max_new_tokens=8, max_len=1000)
    failed = rollout.record[1]
    assert failed.text is None and failed.error.startswith("prompt: ") and "'tool' message" in failed.error
    assert rollout.trace.closed == failed.error
    assert (rollout.trace.completion_ids, rollout.trace.turns_played, rollout.trace.turns_trained) == (first, 1, 1)


def test_a_turn_past_max_len_leaves_no_masked_ids_after_the_last_trained_one():
    """The ids between two turns are context for the later turn: when it is not trained (over max_len), they go
    too, so the trace still ends with its last trained id (the format's tokenization cut there)."""
    trace = Trace([1, 2])
    trace.take([3, 4], max_len=10)
    trace.continue_with([1, 2, 3, 4, 5, 6, 7], max_len=10)  # the tool result: fits
    trace.take([8, 9, 10, 11], max_len=10)  # the next turn does not
    assert trace.closed == "over 10 tokens"
    assert (trace.ids, trace.env_mask, trace.turns_trained) == ([1, 2, 3, 4], [1, 1], 1)


def test_a_rollout_whose_second_turn_is_over_max_len_is_the_formats_tokenization_through_the_first(chatml):
    from train.formats.tokenize import IGNORE_INDEX, tokenize

    fmt, tok, stop_ids = chatml
    whole = tokenize(fmt, CONV, tok)
    trained = [position for position, label in enumerate(whole.labels) if label != IGNORE_INDEX]
    first_end = next(p for p in trained if whole.input_ids[p] in stop_ids) + 1  # through the call turn's <|im_end|>
    second_start = next(p for p in trained if p > first_end)
    turns = [whole.input_ids[len(tokenize_prompt(fmt, CONV, 1, tok)) : first_end], whole.input_ids[second_start:]]
    answers = iter(turns)

    [rollout] = play(
        [GoldTurns()], fmt, tok, lambda p, n, s: [next(answers)], max_new_tokens=64, max_len=second_start + 1
    )
    assert rollout.trace.closed == f"over {second_start + 1} tokens"
    assert rollout.trace.ids == whole.input_ids[:first_end] and rollout.trace.env_mask[-1] == 1
