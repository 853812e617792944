"""Per-target-turn expansion (``train.formats.expansion``, ``data.turns``).

A fake Qwen3-like format drops the reasoning of assistant turns before the last user query: each trained turn
must then be trained in the rendering of its own prefix (exact texts, ids and labels per sample), merged with
later turns only where the format did not rewrite what they share. Every registered format that does not
rewrite history yields exactly the whole-conversation sample on the parity corpus.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from session_cache import shared_tokenizer

from train.data.rendered import trained_runs
from train.formats import FORMATS, MaskPolicy, format_class, get_format
from train.formats.base import Segment
from train.formats.chatml import ChatMLFormat
from train.formats.expansion import expand, plan_samples, resolve_turns
from train.formats.tokenize import tokenize
from train.schema import Conversation, Message, Tool, ToolCall
from train.tokenizers import load_tokenizer

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "parity" / "corpus.jsonl"
CONVS = [Conversation.from_dict(json.loads(line)) for line in CORPUS.open(encoding="utf-8")]


class DropsEarlierReasoning(ChatMLFormat):
    """ChatML that writes ``<think>REASONING</think>`` only for assistant turns after the last user query."""

    name = "drops_earlier_reasoning"
    default_system = None
    rewrites_history = True
    supports_reasoning = True

    def render(self, conv: Conversation) -> list[Segment]:
        last_user = max((i for i, m in enumerate(conv.messages) if m.role == "user"), default=-1)
        segments = []
        for seg in super().render(conv):
            segments.append(seg)
            message = conv.messages[seg.message] if seg.message >= 0 else None
            if seg.text == "assistant\n" and message.reasoning_content and seg.message > last_user:
                segments.append(Segment(f"<think>\n{message.reasoning_content}\n</think>\n\n", "text", seg.message))
        return segments


CONV = Conversation(
    id="weather",
    tools=[Tool(name="get_weather")],
    messages=[
        Message(role="user", content="Paris?"),
        Message(
            role="assistant",
            reasoning_content="use the tool",
            tool_calls=[ToolCall(name="get_weather", arguments={"city": "Paris"}, id="c1")],
        ),
        Message(role="tool", tool_call_id="c1", name="get_weather", content="18C"),
        Message(role="assistant", reasoning_content="answer", content="18C."),
        Message(role="user", content="Thanks"),
        Message(role="assistant", reasoning_content="be polite", content="Welcome."),
    ],
)
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


@pytest.fixture(scope="module")
def tiny():
    return load_tokenizer("tiny_chatml")


def prefix(conv: Conversation, end: int) -> Conversation:
    return Conversation(conv.id, conv.messages[:end], tools=conv.tools)


def test_each_turn_is_trained_in_the_context_inference_shows_it(tiny):
    fmt = DropsEarlierReasoning()
    samples = expand(fmt, CONV, tiny)
    # turns 1 and 3 share one rendering (nothing rewritten before the second user query): one sample;
    # turn 5 follows a new user query that erased their reasoning: a sample of its own
    assert [sorted(s.targets) for s in plan_samples(fmt, CONV, MaskPolicy())] == [[1, 3], [5]]
    assert len(samples) == 2
    first, second = samples
    assert first.input_ids == tokenize(fmt, prefix(CONV, 4), tiny).input_ids
    assert second.input_ids == tokenize(fmt, CONV, tiny).input_ids
    trained = [[text for text, is_trained in trained_runs(s, tiny) if is_trained] for s in samples]
    assert trained == [
        [f"<think>\nuse the tool\n</think>\n\n{CALL}<|im_end|>", "<think>\nanswer\n</think>\n\n18C.<|im_end|>"],
        ["<think>\nbe polite\n</think>\n\nWelcome.<|im_end|>"],
    ]
    shown = [text for text, _ in trained_runs(second, tiny)]  # the earlier turns, as turn 5 sees them: no reasoning
    assert "".join(shown).count("<think>") == 1
    assert f"<|im_start|>assistant\n{CALL}<|im_end|>" in "".join(shown)
    # labels: the token id where trained, -100 elsewhere, and weights follow
    for sample in samples:
        assert all(label in (-100, tok) for label, tok in zip(sample.labels, sample.input_ids))
        assert [w > 0 for w in sample.weights] == [label != -100 for label in sample.labels]


def test_whole_trains_every_turn_in_the_last_rendering(tiny):
    whole = tokenize(DropsEarlierReasoning(), CONV, tiny)
    trained = [text for text, is_trained in trained_runs(whole, tiny) if is_trained]
    assert trained == [f"{CALL}<|im_end|>", "18C.<|im_end|>", "<think>\nbe polite\n</think>\n\nWelcome.<|im_end|>"]


def test_last_turn_only_expands_to_the_last_turn_alone(tiny):
    samples = expand(DropsEarlierReasoning(), CONV, tiny, MaskPolicy(last_turn_only=True))
    assert len(samples) == 1
    assert samples[0].labels == tokenize(DropsEarlierReasoning(), CONV, tiny, MaskPolicy(last_turn_only=True)).labels


def test_a_turn_whose_prefix_is_never_rewritten_merges_with_trailing_messages(tiny):
    # ends with a user message: the unexpanded sample keeps it (masked), and so does the expansion
    conv = replace(CONV, messages=[*CONV.messages[:4]])
    trailing = replace(conv, messages=[*conv.messages, Message(role="user", content="more?")])
    # the trailing user query drops every reasoning: the last sample is the prefix, not the whole
    assert (
        expand(DropsEarlierReasoning(), trailing, tiny)[-1].input_ids
        == tokenize(DropsEarlierReasoning(), conv, tiny).input_ids
    )
    plain = replace(trailing, messages=[replace(m, reasoning_content=None) for m in trailing.messages])
    chatml = get_format("chatml")
    assert expand(chatml, plain, tiny)[0].input_ids == tokenize(chatml, plain, tiny).input_ids


def test_auto_resolves_by_the_format():
    assert resolve_turns("auto", DropsEarlierReasoning) == "per_turn"
    assert resolve_turns("auto", format_class("chatml")) == "whole"
    assert resolve_turns("whole", DropsEarlierReasoning) == "whole"
    with pytest.raises(ValueError, match="data.turns must be one of auto, whole, per_turn"):
        resolve_turns("each", DropsEarlierReasoning)


def _splits_at_user_turns(name: str, conv: Conversation) -> bool:
    """mistral-common writes tools and the system prompt at the LAST user turn: with two user turns, the
    rendering of an earlier turn's prefix places them elsewhere (history rewritten, masked parts only)."""
    users = sum(m.role == "user" for m in conv.messages)
    has_system = any(m.role == "system" for m in conv.messages)
    return name.startswith("mistral") and users > 1 and bool(conv.tools or has_system)


NON_REWRITING = [name for name in FORMATS if not format_class(name).rewrites_history]


def offline_tokenizer(fmt):
    """The format's own tokenizer; for one that loads only from the hub (deepseek_coder, toolselect_text), one
    token per byte plus the format's control tokens."""
    if "/" not in fmt.default_tokenizer:
        return shared_tokenizer(fmt.default_tokenizer)
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = sorted({seg.text for conv in CONVS for seg in _render_or_none(fmt, conv) if seg.special})
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    tok = Tokenizer(models.BPE(vocab={char: i for i, char in enumerate(sorted(alphabet))}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, additional_special_tokens=specials)


def _render_or_none(fmt, conv):
    try:
        return fmt.render(conv)
    except ValueError:
        return []


@pytest.mark.slow  # a full run or a whole corpus: the slow tier (`.ci/run --all`)
@pytest.mark.parametrize("name", NON_REWRITING)
def test_a_format_that_keeps_history_expands_to_the_whole_sample(name):
    fmt = get_format(name)
    tokenizer = offline_tokenizer(fmt)
    compared = 0
    for conv in CONVS:
        try:
            whole = tokenize(fmt, conv, tokenizer)
        except ValueError:
            continue
        samples = expand(fmt, conv, tokenizer)
        if _splits_at_user_turns(name, conv):
            assert len(samples) > 1 and samples[-1].input_ids == whole.input_ids, conv.id
            continue
        assert [(s.input_ids, s.labels, s.weights) for s in samples] == [
            (whole.input_ids, whole.labels, whole.weights)
        ], conv.id
        compared += 1
    assert compared >= (0 if name == "toolselect_text" else 2)  # deepseek_coder renders the 2 tool-free cases


# ---- data.turns: the config, the build ---------------------------------------------------------------------------

FAKE = "tests.formats.test_expansion:DropsEarlierReasoning"


def test_whole_with_a_history_rewriting_format_is_warned_about_at_compose_time():
    import warnings

    from train.engine.config import HistoryRewriteWarning, compose

    with pytest.warns(HistoryRewriteWarning, match="data.turns=whole with model.chat_format=tests.formats"):
        compose(["recipe=tiny", f"model.chat_format={FAKE}", "data.turns=whole"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", HistoryRewriteWarning)
        assert compose(["recipe=tiny", f"model.chat_format={FAKE}"]).data.turns == "auto"
        compose(["recipe=tiny", "data.turns=whole"])  # chatml keeps history: nothing to warn about


def test_an_unknown_turns_mode_fails_at_compose_time():
    from train.engine.config import ConfigError, compose

    with pytest.raises(ConfigError, match="data.turns must be one of auto, whole, per_turn, got 'each'"):
        compose(["recipe=tiny", "data.turns=each"])


def test_turns_is_fixed_on_resume_and_in_the_cache_key(tiny):
    from train.data.inputs import cache_key
    from train.engine.resume_config import FIXED, rule_for

    assert rule_for("data.turns")[0] == FIXED
    data = {"name": "d", "sources": [], "max_seq_len": 64}
    keys = {cache_key({**data, "turns": mode}, "chatml", tiny) for mode in ("auto", "whole", "per_turn")}
    assert len(keys) == 3


def test_the_build_expands_per_turn_and_reports_conversations_and_samples(tiny):
    from train.data.dataset import BuildReport, build_rows

    cfg = {"max_seq_len": 4096, "overlong": "drop", "eval_fraction": 0.0}
    report = BuildReport()
    rows = build_rows([CONV, replace(CONV, id="two")], DropsEarlierReasoning(), tiny, cfg, report).train
    assert [row["id"] for row in rows] == ["weather#0", "weather#1", "two#0", "two#1"]
    assert (report.conversations_rendered, report.samples, report.train_rows) == (2, 4, 4)
    expected = expand(DropsEarlierReasoning(), CONV, tiny)
    assert [(r["input_ids"], r["labels"]) for r in rows[:2]] == [(s.input_ids, s.labels) for s in expected]
    whole = BuildReport()
    rows = build_rows([CONV], DropsEarlierReasoning(), tiny, {**cfg, "turns": "whole"}, whole).train
    assert [row["id"] for row in rows] == ["weather"] and (whole.conversations_rendered, whole.samples) == (1, 1)


def test_a_held_out_conversation_is_listed_once_whatever_its_samples(tiny):
    from train.data.dataset import BuildReport, build_rows

    cfg = {"max_seq_len": 4096, "overlong": "drop", "eval_fraction": 0.9999}  # every id held out
    split = build_rows([CONV], DropsEarlierReasoning(), tiny, cfg, BuildReport())
    assert len(split.eval) == 2 and [c.id for c in split.eval_conversations] == ["weather"]
