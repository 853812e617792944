"""Token identity of GRPO rollouts (#30 item 2, acceptance "Token identity"): for each of the 13 exact formats, a
rollout's trained ids are the format's rendering of the same conversation.

A scripted policy (tests/rollout_replay.py) answers every prompt with exactly the ids the format trains for the
gold assistant turn after it, then padding; a replay episode plays the gold conversation (user turns and tool
results from the gold). ``train.evaluation.rollout.play`` must then keep, per conversation of the parity corpus
(and, for Qwen3 and Harmony, of their multi-turn reasoning fixtures):

* trace ids = the format's tokenization cut after its last trained token: of the whole conversation where the
  format shows history as it was sampled, else of the per-turn expansion's first sample (``expand_planned``: the
  turns before the first rewrite; later turns are played, not trained), with ``closed`` saying so;
* ``env_mask`` 1 exactly on the sampled ids, which are exactly the tokens SFT trains there (labels != -100);
* where the trace closes, the boundary is one the format is known to rewrite (``rewrite``), named in the assertion;
* every prompt the policy saw is the inference prompt of its gold prefix; for Qwen3 and Harmony, the official
  template's render (trl's qwen3.jinja, openai-harmony), and the trace the official training render through its
  last trained turn, as tests/formats/test_history_expansion.py checks SFT;
* the same trace when the history holds the parsed answers (as a task's episode writes it) instead of the gold
  turns; for Qwen3 and Harmony, whose parse drops reasoning, a prefix of it;
* one turn (``OneTurn``) alone: prompt + the turn's ids, every completion id trained.

What no rollout can replay (``UNREPLAYABLE``): a Harmony turn with parallel calls, which gpt-oss writes over several
sampling rounds (it stops at each ``<|call|>``), while the gold renders the calls before all their results.
"""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path

import pytest

from train.evaluation.generate import Generation, stop_token_ids
from train.evaluation.rollout import OneTurn, play
from train.formats import FORMATS, get_format
from train.formats.expansion import expand_planned
from train.formats.tokenize import IGNORE_INDEX, tokenize_many
from train.schema import Conversation
from train.tokenizers import load_tokenizer

TESTS = Path(__file__).resolve().parents[1]
for folder in (TESTS, TESTS / "formats"):  # importlib mode: the replay helper, the official reference renders
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from rollout_replay import Replay, Turn, play_scripted, script

FIXTURES = TESTS / "fixtures"


def load(path: Path) -> list[Conversation]:
    return [Conversation.from_dict(json.loads(line)) for line in path.open(encoding="utf-8")]


CORPUS = load(FIXTURES / "parity" / "corpus.jsonl")
REASONING = {
    "qwen3": load(FIXTURES / "formats" / "qwen3" / "reasoning_parity.jsonl"),
    "harmony": load(FIXTURES / "formats" / "harmony" / "reasoning.jsonl"),
}
BYTES = "bytes"  # the format's tokenizer is only on the hub: one token per byte plus its control tokens
# format -> the tokenizer it is played with (the format's own, built offline; tests/formats use the same ones)
TOKENIZERS = {
    "llama3_1": "llama3",
    "llama3_1_metatool": "llama3",
    "llama4": "llama4",
    "qwen2_5": "qwen2_5",
    "qwen3": "qwen3",
    "mistral_v3": "mistral_v3",
    "mistral_nemo": "mistral_tekken",
    "mistral_v7": "mistral_v7",
    "chatml": "smollm2",
    "deepseek_coder": BYTES,
    "deepseek_v3": "deepseek_v4",
    "toolselect_text": BYTES,
    "harmony": "o200k_harmony",
}
# The default tier plays the formats of the per-turn acceptance (Qwen3, Harmony) and those whose tokenizers load in
# a second (Mistral's sentencepiece v3 and v7, the byte tokenizers); the slow tier the rest, each seconds of loading
# a 128k-200k vocabulary (the tekken build alone is 10+ s, and no default-tier test loads it).
SLOW = {"llama3_1", "llama3_1_metatool", "llama4", "qwen2_5", "chatml", "mistral_nemo", "deepseek_v3"}
NAMES = [pytest.param(name, marks=pytest.mark.slow) if name in SLOW else name for name in TOKENIZERS]

# Gold turns a rollout cannot replay as one sampled turn. Harmony writes each of a turn's parallel calls as its own
# message ending <|call|>, a stop id: gpt-oss writes one call, the engine answers it, the model writes the next (a
# sequential rollout, trained fine); the gold turn holding both calls before both results is never sampled so.
UNREPLAYABLE = {"harmony": {"parallel_calls", "reasoning_parallel_calls"}}
# conversations each format cannot express (its own ValueError); every other one is played
REFUSED = {
    "llama3_1": {"parallel_calls", "text_and_call"},  # the official Llama 3.1 template: one call, no text beside it
    "mistral_v3": {"text_and_call"},
    "mistral_nemo": {"text_and_call"},
    "deepseek_coder": {c.id for c in CORPUS if c.tools},  # no tool syntax (its text answers are single-turn)
    "deepseek_v3": {"multi_round", "multi_turn_tools"},  # a second call turn: the official template drops its header
    "toolselect_text": {c.id for c in CORPUS if c.id != "tools_no_call"},  # one user turn, one CALLTOOL answer
}


def test_every_exact_format_is_played():
    assert list(TOKENIZERS) == list(FORMATS) and len(TOKENIZERS) == 13


def rewrite(name: str, sampled: str, shown: str) -> str | None:
    """Why the next prompt shows the history otherwise than the trace holds it (``sampled``: the trace's text from
    the first differing token, ``shown``: the prompt's), for the rewrites each format is known to make; None for
    any other difference (a rollout bug)."""
    if name == "qwen3" and sampled.startswith("<think>") and not shown.startswith("<think>"):
        # the template writes a <think> block only for turns after the last user query, an empty one only last
        return "Qwen3 drops an earlier <think> block (an empty one once a tool result follows, any at a new user query)"
    if name == "harmony" and sampled.startswith("<|return|>") and shown.startswith("<|end|>"):
        return "Harmony ends a final answer <|end|> in history, where the model wrote <|return|>"
    if name == "harmony" and "analysis" in sampled[:40] and "analysis" not in shown[:40]:
        return "Harmony drops analysis before the last final answer (vLLM's history rule)"
    if name.startswith("mistral") and sampled.startswith("[AVAILABLE_TOOLS]") and shown.startswith("[INST]"):
        return "Mistral writes the tools before the last user message, so a new user turn moves them"
    return None


# ---- tokenizers -------------------------------------------------------------------------------------------------


def byte_tokenizer(fmt):
    """One token per byte plus the format's control tokens (as tests/formats/test_expansion.py's offline_tokenizer)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = set()
    for conv in CORPUS:
        try:
            specials |= {seg.text for seg in fmt.render(conv) if seg.special}
        except ValueError:
            pass
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    tok = Tokenizer(models.BPE(vocab={char: i for i, char in enumerate(sorted(alphabet))}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, additional_special_tokens=sorted(specials))


@cache
def _tokenizer(name: str):
    """Loaded once per process for the tests of a format (the build itself is the session cache's)."""
    return byte_tokenizer(get_format(name)) if TOKENIZERS[name] == BYTES else _loaded(TOKENIZERS[name])


@cache
def _loaded(name: str):
    return load_tokenizer(name)


@pytest.fixture
def fmt_tok(request):
    from train.models import ModelFetchError

    try:
        return get_format(request.param), _tokenizer(request.param)
    except ModelFetchError as err:  # smollm2's GGUF on a fresh machine with no package index (as tests/formats skip)
        pytest.skip(str(err))


# ---- playing the gold -------------------------------------------------------------------------------------------


def playable(name: str, fmt, tok) -> list[tuple[Conversation, list[Turn]]]:
    """The fixture conversations the format expresses, each with its script; the refused ones as expected."""
    assert fmt.name == name and tok is _tokenizer(name)
    return _playable(name)


@cache
def _playable(name: str) -> list[tuple[Conversation, list[Turn]]]:
    """(once per format and process: the tests of a format read the same scripts and never change them)"""
    fmt, tok = get_format(name), _tokenizer(name)
    played, refused = [], set()
    for conv in CORPUS + REASONING.get(name, []):
        try:
            played.append((conv, script(fmt, conv, tok)))
        except ValueError as err:
            refused.add(conv.id)
            if conv.id in UNREPLAYABLE.get(name, set()):
                assert "untrained tokens inside" in str(err), (conv.id, str(err))
    assert refused == REFUSED.get(name, set()) | UNREPLAYABLE.get(name, set())
    return played


def padding(tok, stop_ids: list[int]) -> list[int]:
    """What a batched generate writes after a row that stopped: ids that are no stop id, then a stop id."""
    filler = next(i for i in range(len(tok)) if i not in stop_ids)
    return [filler, filler, stop_ids[-1]]


def first_rewrite(turns: list[Turn]) -> int | None:
    """The first turn whose prompt does not begin with the previous prompt and the previous turn's sampled ids."""
    for k in range(1, len(turns)):
        held = turns[k - 1].prompt + turns[k - 1].ids
        if turns[k].prompt[: len(held)] != held:
            return k
    return None


def boundary(name: str, tok, conv: Conversation, turns: list[Turn], k: int) -> str:
    held, shown = turns[k - 1].prompt + turns[k - 1].ids, turns[k].prompt
    at = next(i for i in range(len(held)) if i >= len(shown) or held[i] != shown[i])
    sampled, now = tok.decode(held[at : at + 8]), tok.decode(shown[at : at + 8])
    why = rewrite(name, sampled, now)
    after = conv.messages[turns[k].index - 1].role
    where = f"{conv.id}: the prompt of message {turns[k].index} (after a {after} message) shows {now!r} for {sampled!r}"
    assert why is not None, f"{where}: not a rewrite {name} is known to make"
    return f"{where}: {why}"


@pytest.mark.parametrize("fmt_tok", NAMES, indirect=True)
def test_a_multi_turn_rollout_trains_the_formats_rendering(fmt_tok):
    fmt, tok = fmt_tok
    name = fmt.name
    stop_ids = stop_token_ids(fmt, tok)
    played = playable(name, fmt, tok)
    rollouts, batches = play_scripted(
        fmt, tok, [(Replay(conv), turns) for conv, turns in played], padding(tok, stop_ids)
    )
    for policy, positions in batches:  # one backend call per round, every unfinished episode in it
        assert policy.calls == max(len(played[position][1]) for position in positions)
    closed = {}
    for (conv, turns), rollout in zip(played, rollouts):
        trace = rollout.trace
        planned = expand_planned(fmt, conv, tok)
        sample = planned[0][2]  # the turns before the first rewrite (all of them where nothing is rewritten)
        end = max(i for i, label in enumerate(sample.labels) if label != IGNORE_INDEX) + 1
        start = len(trace.prompt_ids)
        assert trace.prompt_ids == turns[0].prompt, conv.id
        assert trace.ids == sample.input_ids[:end], conv.id  # token for token, never re-tokenized
        assert all(label == IGNORE_INDEX for label in sample.labels[:start]), conv.id
        # sampled (env 1) exactly where SFT trains; SFT trains every sampled id (no header inside a turn untrained)
        assert trace.env_mask == [int(label != IGNORE_INDEX) for label in sample.labels[start:end]], conv.id
        sampled = [0] * len(trace.completion_ids)
        for turn in turns[: trace.turns_trained]:
            sampled[len(turn.prompt) - start : len(turn.prompt) - start + len(turn.ids)] = [1] * len(turn.ids)
        assert trace.env_mask == sampled, conv.id
        assert trace.turns_played == len(turns) and trace.turns_trained == len(planned[0][0].targets), conv.id
        k = first_rewrite(turns)
        if k is None:
            assert trace.closed is None and len(planned) == 1 and trace.turns_trained == len(turns), conv.id
            if not fmt.rewrites_history:
                # the format's tokenization of the whole conversation (on the reference encoding path, which gives
                # the training path's ids without a tiktoken copy of the vocabulary)
                whole = tokenize_many(fmt, [conv], tok, fast=False)[0]
                assert (whole.input_ids[:end], whole.labels[:end]) == (sample.input_ids[:end], sample.labels[:end])
        else:
            closed[conv.id] = boundary(name, tok, conv, turns, k)
            assert trace.closed == "history shown otherwise than sampled" and trace.turns_trained == k, closed[conv.id]
        # each turn stopped at its end-of-turn id and reads back as the gold turn's calls
        for turn, generation in zip(turns, rollout.record):
            assert generation.error is None and generation.stopped, (conv.id, turn.index, generation.error)
            gold = conv.messages[turn.index].tool_calls
            assert [(c.name, c.arguments) for c in generation.tool_calls] == [(c.name, c.arguments) for c in gold]
    # which conversations close, and why (each boundary named in ``closed``)
    assert sorted(closed) == sorted(CLOSES.get(name, ())), "\n".join(closed.values())


CLOSES = {
    # Mistral (rewrites_history False, but mistral-common writes tools and the system prompt at the last user turn):
    # a conversation with tools and a second user turn trains the turns before that turn
    "mistral_v3": ["multi_turn_tools"],
    "mistral_nemo": ["multi_turn_tools"],
    "mistral_v7": ["multi_turn_tools"],
    # Qwen3 (thinking): every call turn without reasoning is sampled with an empty <think> block the next prompt
    # drops once its tool result follows; reasoning is dropped at a new user query
    "qwen3": [
        *("single_call_json_result", "single_call_with_system", "parallel_calls", "multi_round", "text_and_call"),
        *("plain_text_result", "non_ascii_nested", "scalars_nulls_empty", "control_token_lookalikes"),
        *("multi_turn_tools", "call_no_arguments", "whitespace_and_newlines", "no_tools_chat"),
        *("r_multi_turn_drops_earlier", "r_middle_turn_without_reasoning", "r_calls_before_last_query"),
        *("r_mid_conversation_system", "r_three_queries", "r_earlier_turns_no_reasoning", "r_reasoning_only_early"),
    ],
    # Harmony: a final answer sampled with <|return|> is shown <|end|> at the next user turn; analysis before the
    # last final answer is dropped
    "harmony": [
        *("no_tools_chat", "multi_turn_tools", "reasoning_multi_turn_history_dropped", "reasoning_three_turns"),
        "reasoning_ends_in_call_keeps_history_after_last_final",
    ],
}


@pytest.mark.parametrize("fmt_tok", NAMES, indirect=True)
def test_a_history_written_from_the_parsed_answers_trains_the_same_ids(fmt_tok):
    """A task's episode writes the model's earlier turns into the history as they parse (content, calls and the
    reasoning block: ``Generation.reasoning``), not as sampled. Every format renders that parse back to the sampled
    ids: the same trace as with the gold history, Qwen3's and Harmony's reasoning included (before
    ``Generation.reasoning``, a turn that reasoned was shown without it and the trace closed there)."""
    fmt, tok = fmt_tok
    for conv, turns in playable(fmt.name, fmt, tok):
        rollouts = []
        for episode in (Replay(conv), Replay(conv, from_parse=True)):
            answers = iter([turn.ids + padding(tok, stop_token_ids(fmt, tok)) for turn in turns])
            rollouts += play([episode], fmt, tok, lambda prompts, *_, a=answers: [next(a)], 4096, 100_000)
        gold, parsed = (rollout.trace for rollout in rollouts)
        assert (parsed.ids, parsed.env_mask, parsed.closed) == (gold.ids, gold.env_mask, gold.closed), conv.id


@pytest.mark.parametrize("fmt_tok", NAMES, indirect=True)
def test_one_turn_rollouts_are_the_prompt_and_the_turns_trained_ids(fmt_tok):
    fmt, tok = fmt_tok
    stop_ids = set(stop_token_ids(fmt, tok))
    turns = [(conv, turn) for conv, scripted in playable(fmt.name, fmt, tok) for turn in scripted]
    episodes = [(OneTurn(conv, turn.index), [turn]) for conv, turn in turns]
    rollouts, batches = play_scripted(fmt, tok, episodes, padding(tok, sorted(stop_ids)))
    assert all(policy.calls == 1 for policy, _ in batches)
    for (conv, turn), rollout in zip(turns, rollouts):
        trace = rollout.trace
        assert (trace.prompt_ids, trace.completion_ids) == (turn.prompt, turn.ids), (conv.id, turn.index)
        assert trace.env_mask == [1] * len(turn.ids) and trace.completion_ids[-1] in stop_ids
        assert (trace.closed, trace.turns_played, trace.turns_trained) == (None, 1, 1)
        assert isinstance(rollout.record, Generation) and rollout.record.stopped


# ---- Qwen3 and Harmony: every prompt is the official template's ----------------------------------------------


def official_prompt(name: str, tok, conv: Conversation, index: int) -> list[int]:
    """The official render of ``conv.messages[:index]`` with the generation prompt for the assistant turn."""
    if name == "qwen3":
        from test_qwen3 import official_qwen3_ids

        from train.formats.hf import to_hf_messages

        messages, tools = to_hf_messages(conv)
        return official_qwen3_ids(messages[:index], tools, tok, add_generation_prompt=True)
    h = pytest.importorskip("openai_harmony")
    from test_harmony import _encoding, _harmony_messages

    # vLLM's history rule for the turn: analysis before the last final answer dropped, then <|start|>assistant
    context = _harmony_messages(conv.messages[:index], conv.tools)
    finals = [i for i, m in enumerate(context) if m.author.role == h.Role.ASSISTANT and m.channel == "final"]
    cut = finals[-1] if finals else -1
    kept = [m for i, m in enumerate(context) if not (i < cut and m.channel == "analysis")]
    config = h.RenderConversationConfig(auto_drop_analysis=False)
    return _encoding().render_conversation_for_completion(h.Conversation.from_messages(kept), h.Role.ASSISTANT, config)


def official_render(name: str, tok, conv: Conversation, end: int) -> list[int]:
    """The official training render of ``conv.messages[:end]``, its last message the turn being written (as
    tests/formats/test_history_expansion.py compares the expanded samples with)."""
    if name == "qwen3":
        from test_qwen3 import official_qwen3_ids

        from train.formats.hf import to_hf_messages

        messages, tools = to_hf_messages(conv)
        return official_qwen3_ids(messages[:end], tools, tok)
    from test_harmony import official_harmony_ids

    return official_harmony_ids(conv.messages[:end], conv.tools)


@pytest.mark.parametrize("fmt_tok", ["qwen3", "harmony"], indirect=True)
def test_qwen3_and_harmony_rollouts_are_the_official_renders_of_each_prompt_and_trained_prefix(
    fmt_tok, tmp_path_factory
):
    fmt, tok = fmt_tok
    if fmt.name == "harmony":
        from train.tokenizers.harmony import offline_encodings_dir

        offline_encodings_dir(tmp_path_factory.mktemp("tiktoken"))  # openai-harmony reads o200k from there
    stop_ids = stop_token_ids(fmt, tok)
    # Qwen3's template makes control-token text inside user text a control id, the format keeps it text (the
    # cases tests/formats/test_qwen3.py compares otherwise)
    lookalikes = __import__("test_qwen3").LOOKALIKES if fmt.name == "qwen3" else set()
    played = [
        (conv, turns) for conv, turns in playable(fmt.name, fmt, tok) if len(turns) > 1 and conv.id not in lookalikes
    ]
    rollouts, batches = play_scripted(
        fmt, tok, [(Replay(conv), turns) for conv, turns in played], padding(tok, stop_ids)
    )
    official = {
        (conv.id, turn.index): official_prompt(fmt.name, tok, conv, turn.index)
        for conv, turns in played
        for turn in turns
    }
    seen = [prompt for policy, _ in batches for prompt in policy.seen]
    assert len(seen) == len(official) >= 20
    for conv, turns in played:
        for turn in turns:
            assert turn.prompt == official[conv.id, turn.index], (conv.id, turn.index)
    assert sorted(seen) == sorted(official.values())  # the policy saw exactly the official prompts
    # and the trained sequence is the official render of the conversation through its last trained turn (Qwen3's
    # ends with the newline after <|im_end|>, which is the next message's)
    for (conv, turns), rollout in zip(played, rollouts):
        last = turns[rollout.trace.turns_trained - 1].index
        whole = official_render(fmt.name, tok, conv, last + 1)
        assert rollout.trace.ids == whole[: len(whole) - (fmt.name == "qwen3")], conv.id
