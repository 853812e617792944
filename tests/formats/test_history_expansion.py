"""Per-turn expansion against the official renderers (issue 17, item 2): each trained assistant turn of Qwen3 and
Harmony is trained exactly in the context inference shows it.

For every expanded sample (``data.turns=per_turn``) of conversations with reasoning across several user turns and
tool loops:

* its ids are the official render of its prefix (the messages up to its last rendered one): Qwen3's template
  (trl's ``qwen3.jinja``, ``official_qwen3_ids``) and openai-harmony's training render after vLLM's history rule
  (``official_harmony_ids``, the convention of the harmony parity test);
* its trained tokens are exactly its target turns' tokens in that render: a target turn ``t`` spans from the end
  of the official generation prompt for ``messages[:t]`` to the end of the official render of ``messages[:t+1]``
  (Qwen3: through its ``<|im_end|>``; Harmony: through its ``<|call|>``/``<|return|>``, less the
  ``<|start|>assistant`` the engine writes after a ``<|call|>`` of a parallel call). Labels equal ids there and
  are -100 everywhere else.

And the reason expansion exists: rendered once (``data.turns=whole``), some turn is trained after a context that
is not the official generation prompt for it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from train.formats.expansion import expand_planned
from train.formats.harmony import HarmonyFormat
from train.formats.hf import to_hf_messages
from train.formats.qwen3 import Qwen3Format
from train.formats.tokenize import IGNORE_INDEX, tokenize
from train.schema import Conversation

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:  # importlib mode: the parity tests' reference renders beside this file
    sys.path.insert(0, HERE)

from test_harmony import _encoding, _harmony_messages, official_harmony_ids
from test_qwen3 import LOOKALIKES, official_qwen3_ids

openai_harmony = pytest.importorskip("openai_harmony")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
HARMONY_CALL = 200012


def load(path: Path) -> list[Conversation]:
    return [Conversation.from_dict(json.loads(line)) for line in path.open(encoding="utf-8")]


def multi_turn(conversations: list[Conversation]) -> list[Conversation]:
    return [c for c in conversations if sum(m.role == "assistant" for m in c.messages) > 1]


def chained(first: Conversation, second: Conversation) -> Conversation:
    """``second`` continued after ``first`` (its tools added, its call ids made distinct): a longer history."""
    data = second.to_dict()
    for message in data["messages"]:
        for call in message.get("tool_calls") or []:
            call["id"] = call["id"] and "2" + call["id"]
        if message.get("tool_call_id"):
            message["tool_call_id"] = "2" + message["tool_call_id"]
    head = first.to_dict()
    names = {tool.name for tool in first.tools}
    tools = head.get("tools", []) + [t.to_dict() for t in second.tools if t.name not in names]
    return Conversation.from_dict(
        {"id": f"{first.id}+{second.id}", "tools": tools, "messages": head["messages"] + data["messages"]}
    )


# Qwen3: the multi-turn reasoning cases, less those holding control-token text in user text (there the template's
# tokenization makes it a control id and the format keeps it text: tests/formats/test_qwen3.py)
QWEN3_CASES = {
    c.id: c for c in multi_turn(load(FIXTURES / "qwen3" / "reasoning_parity.jsonl")) if c.id not in LOOKALIKES
}
HARMONY_FIXTURES = {c.id: c for c in load(FIXTURES / "harmony" / "reasoning.jsonl")}
# Harmony's fixtures hold 6 multi-turn cases; chaining them gives longer histories with several finals and tool loops
_CHAINS = [
    ("reasoning_call_result_final", "reasoning_three_turns"),
    ("reasoning_three_turns", "reasoning_call_result_final"),
    ("reasoning_parallel_calls", "preamble_with_call"),
    ("reasoning_ends_in_call_keeps_history_after_last_final", "reasoning_single_turn"),
    ("reasoning_single_turn", "reasoning_ends_in_call_keeps_history_after_last_final"),
    ("preamble_with_call", "reasoning_parallel_calls"),
]
HARMONY_CASES = {c.id: c for c in multi_turn(list(HARMONY_FIXTURES.values()))}
HARMONY_CASES.update({c.id: c for c in (chained(HARMONY_FIXTURES[a], HARMONY_FIXTURES[b]) for a, b in _CHAINS)})

qwen3 = Qwen3Format(mode="thinking")
harmony = HarmonyFormat()


@pytest.fixture(scope="module")
def qwen3_tok(built_tokenizer):
    return built_tokenizer("qwen3")


@pytest.fixture(scope="module")
def harmony_tok(tmp_path_factory, built_tokenizer):
    from train.tokenizers.harmony import offline_encodings_dir

    offline_encodings_dir(tmp_path_factory.mktemp("tiktoken"))  # openai-harmony reads o200k from there
    return built_tokenizer("o200k_harmony")


# --- the official renders of a prefix and of a turn's prompt ----------------------------------------


def qwen3_render(conv: Conversation, tok, end: int, prompt: bool = False) -> list[int]:
    messages, tools = to_hf_messages(conv)
    return official_qwen3_ids(messages[:end], tools, tok, add_generation_prompt=prompt)


def harmony_render(conv: Conversation, tok, end: int, prompt: bool = False) -> list[int]:
    if not prompt:
        return official_harmony_ids(conv.messages[:end], conv.tools)
    # the prompt for messages[end]: its context with the history rule for that turn, then <|start|>assistant
    h = openai_harmony
    context = _harmony_messages(conv.messages[:end], conv.tools)
    finals = [i for i, m in enumerate(context) if m.author.role == h.Role.ASSISTANT and m.channel == "final"]
    cut = finals[-1] if finals else -1
    kept = [m for i, m in enumerate(context) if not (i < cut and m.channel == "analysis")]
    config = h.RenderConversationConfig(auto_drop_analysis=False)
    return _encoding().render_conversation_for_completion(h.Conversation.from_messages(kept), h.Role.ASSISTANT, config)


def harmony_engine_written(ids: list[int], start: int, end: int) -> set[int]:
    """``<|start|>assistant`` right after a ``<|call|>`` inside a turn: the engine re-prompts, the model does not."""
    return {p for i in range(start, end - 1) if ids[i] == HARMONY_CALL for p in (i + 1, i + 2)}


FORMATS = {
    # (format, tokenizer fixture, reference render, tokens after a turn that are not its own, engine-written tokens)
    "qwen3": (qwen3, "qwen3_tok", qwen3_render, 1, lambda ids, start, end: set()),  # the newline after <|im_end|>
    "harmony": (harmony, "harmony_tok", harmony_render, 0, harmony_engine_written),
}
# The default tier expands every Qwen3 case and the first three harmony ones; the other harmony cases are the slow
# tier's (the same expansion rule, over longer chained histories)
CASES = [("qwen3", case) for case in sorted(QWEN3_CASES)] + [
    ("harmony", case) if index < 3 else pytest.param("harmony", case, marks=pytest.mark.slow)
    for index, case in enumerate(sorted(HARMONY_CASES))
]


def test_enough_multi_turn_cases():
    assert len(QWEN3_CASES) >= 10 and len(HARMONY_CASES) >= 10
    for cases in (QWEN3_CASES, HARMONY_CASES):
        with_user_turns = [c for c in cases.values() if sum(m.role == "user" for m in c.messages) > 1]
        with_tool_loops = [c for c in cases.values() if any(m.role == "tool" for m in c.messages)]
        assert len(with_user_turns) >= 5 and len(with_tool_loops) >= 5


@pytest.mark.parametrize(("name", "case"), CASES)
def test_every_expanded_sample_is_the_official_render_training_its_turns(request, name, case):
    fmt, tok_fixture, render, after_turn, engine_written = FORMATS[name]
    tok = request.getfixturevalue(tok_fixture)
    conv = (QWEN3_CASES if name == "qwen3" else HARMONY_CASES)[case]
    planned = expand_planned(fmt, conv, tok)
    trained_turns = []
    for sample, _, tokens in planned:
        end = max(seg.message for seg in sample.segments) + 1
        ids = render(conv, tok, end)
        assert tokens.input_ids == ids, (case, sorted(sample.targets))
        want = [IGNORE_INDEX] * len(ids)
        for target in sorted(sample.targets):
            prompt = render(conv, tok, target, prompt=True)
            assert ids[: len(prompt)] == prompt, (case, target)  # the turn follows its inference prompt
            turn = render(conv, tok, target + 1)  # the turn is its last message: it ends the render
            stop = len(turn) - after_turn
            assert ids[:stop] == turn[:stop], (case, target)
            skipped = engine_written(ids, len(prompt), stop)
            for position in range(len(prompt), stop):
                if position not in skipped:
                    want[position] = ids[position]
        assert tokens.labels == want, (case, sorted(sample.targets))
        trained_turns += sorted(sample.targets)
    assert trained_turns == [i for i, m in enumerate(conv.messages) if m.role == "assistant"]


@pytest.mark.parametrize("name", ["qwen3", "harmony"])
def test_whole_conversation_trains_some_turn_unlike_inference(request, name):
    """Rendered once (``data.turns=whole``), turn t is trained as the whole render shows it; where the official
    prompt for t followed by t's official tokens is not a prefix of the whole render, the turn (its dropped
    reasoning, a final's end) or its context is not what the model sees and writes at inference. Exactly those
    conversations expand to more than one sample."""
    fmt, tok_fixture, render, after_turn, _ = FORMATS[name]
    tok = request.getfixturevalue(tok_fixture)
    cases = QWEN3_CASES if name == "qwen3" else HARMONY_CASES
    rewritten = []
    for case, conv in cases.items():
        whole = tokenize(fmt, conv, tok).input_ids
        for index, message in enumerate(conv.messages):
            if message.role == "assistant":
                turn = render(conv, tok, index + 1)
                turn = turn[: len(turn) - after_turn]
                if whole[: len(turn)] != turn:
                    rewritten.append((case, index))
        assert (len(expand_planned(fmt, conv, tok)) > 1) == any(c == case for c, _ in rewritten), case
    # (conversations, turns trained unlike inference when rendered once)
    assert (len(cases), len(rewritten)) == {"qwen3": (14, 9), "harmony": (12, 19)}[name]
