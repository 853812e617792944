"""``tooltrain data render`` through the real CLI: outputs, rejects, --show, errors, every format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from train.cli import main
from train.formats import FORMATS, MaskPolicy, get_format
from train.formats.tokenize import tokenize
from train.schema import Conversation, Message, Tool, ToolCall, dumps

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CORPUS_FILE = FIXTURES / "parity" / "corpus.jsonl"
CORPUS = [Conversation.from_dict(json.loads(line)) for line in CORPUS_FILE.open(encoding="utf-8")]
RAW = {obj["id"]: obj for obj in map(json.loads, CORPUS_FILE.open(encoding="utf-8"))}
BAD_LINES = [
    "{not json",
    '{"id": "q1", "query": "weather?", "gold_tools": ["get_weather"]}',
    "",
    '{"id": "robot", "messages": [{"role": "robot", "content": "beep"}]}',
]


@pytest.fixture(scope="module")
def smollm2():
    from session_cache import shared_tokenizer

    from train.models import ModelFetchError

    try:
        return shared_tokenizer("smollm2")
    except ModelFetchError as err:
        pytest.skip(str(err))


@pytest.fixture
def mixed_input(tmp_path) -> Path:
    """The 16 corpus conversations, then four bad lines (one blank, which is no record)."""
    path = tmp_path / "in.jsonl"
    path.write_text(CORPUS_FILE.read_text(encoding="utf-8") + "\n".join(BAD_LINES) + "\n", encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_chatml_outputs_rejects_and_summary(smollm2, mixed_input, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    assert main(["data", "render", str(mixed_input), "--format", "chatml", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed == (
        "read 19, rendered 16, rejected 3\n"  # the rejects as they are, with file:line
        f"  rejected {mixed_input}:17: invalid JSON at column 2: Expecting property name enclosed in double quotes\n"
        f"  rejected {mixed_input}:18: not a canonical conversation: conversation: missing key 'messages'\n"
        f"  rejected {mixed_input}:20: not a canonical conversation: conversation.messages[0].role: expected one of "
        "system, user, assistant, tool, got 'robot'\n"
        f"  reasons per record: {tmp_path / 'out.rejects.jsonl'}\n"
    )
    rows = read_jsonl(out)
    fmt = get_format("chatml")
    assert [row["id"] for row in rows] == [conv.id for conv in CORPUS]
    for row, conv in zip(rows, CORPUS):
        assert set(row) == {"id", "input_ids", "labels"}
        assert {"input_ids": row["input_ids"], "labels": row["labels"]} == tokenize(fmt, conv, smollm2).to_dict()
    rejects = read_jsonl(tmp_path / "out.rejects.jsonl")
    assert [(r["location"], r["reason"]) for r in rejects] == [
        (f"{mixed_input}:17", "invalid JSON at column 2: Expecting property name enclosed in double quotes"),
        (f"{mixed_input}:18", "not a canonical conversation: conversation: missing key 'messages'"),
        (
            f"{mixed_input}:20",
            (
                "not a canonical conversation: conversation.messages[0].role: expected one of system, "
                "user, assistant, tool, got 'robot'"
            ),
        ),
    ]
    assert rejects[1]["raw"] == json.loads(BAD_LINES[1])


def test_text_last_turn_only_and_weights(smollm2, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    argv = [
        "data",
        "render",
        str(CORPUS_FILE),
        "--format",
        "chatml",
        "-o",
        str(out),
        "--text",
        "--last-turn-only",
        "--weights",
        "call_args=2",
        "end=0.5",
    ]
    assert main(argv) == 0
    assert capsys.readouterr().out == "read 16, rendered 16, rejected 0\n"
    fmt = get_format("chatml")
    policy = MaskPolicy(last_turn_only=True, weights={"call_args": 2.0, "end": 0.5})
    for row, conv in zip(read_jsonl(out), CORPUS, strict=True):
        tokens = tokenize(fmt, conv, smollm2, policy)
        assert row == {
            "id": conv.id,
            "input_ids": tokens.input_ids,
            "labels": tokens.labels,
            "weights": tokens.weights,
            "text": fmt.render_text(conv),
        }
    multi = next(row for row in read_jsonl(out) if row["id"] == "multi_turn_tools")
    trained = [t for t in multi["labels"] if t != -100]
    assert smollm2.decode(trained) == "It is 08:15 in Berlin.<|im_end|>"
    assert sorted(set(multi["weights"])) == [0.0, 0.5, 1.0]


def test_show_when_piped_brackets_the_trained_spans(smollm2, tmp_path, capsys):
    assert (
        main(["data", "render", str(CORPUS_FILE), "--format", "chatml", "-o", str(tmp_path / "o.jsonl"), "--show", "2"])
        == 0
    )
    printed = capsys.readouterr().out
    assert "\x1b[" not in printed
    lines = printed.splitlines()
    assert lines[0] == "legend: ⟦trained⟧ / masked"
    assert lines[1] == "--- single_call_json_result: 312 tokens, 44 trained ---"
    assert "--- single_call_with_system: 299 tokens, 47 trained ---" in lines
    assert "--- trailing_call" not in printed
    first = printed.split("--- single_call_with_system")[0].split("---\n", 1)[1]
    assert [span.split("⟧")[0] for span in first.split("⟦")[1:]] == [
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>',
        "It is 18 °C and cloudy in Paris.<|im_end|>",
    ]
    assert printed.endswith("read 16, rendered 16, rejected 0\n")


def test_show_on_a_terminal_uses_colour(smollm2, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert (
        main(["data", "render", str(CORPUS_FILE), "--format", "chatml", "-o", str(tmp_path / "o.jsonl"), "--show", "1"])
        == 0
    )
    printed = capsys.readouterr().out
    assert "⟦" not in printed
    # each trained part in its colour (text green, end bold red), masked tokens dim
    assert "\x1b[32mIt is 18 °C and cloudy in Paris.\x1b[0m\x1b[1;31m<|im_end|>\x1b[0m" in printed
    assert "\x1b[2m<|im_start|>tool\x1b[0m" in printed


SMALL = Conversation(
    id="small",
    tools=[Tool(name="now", description="the time")],
    messages=[
        Message(role="user", content="Time?"),
        Message(
            role="assistant", content="Checking.", tool_calls=[ToolCall(name="now", arguments={"tz": "UTC"}, id="c1")]
        ),
        Message(role="tool", tool_call_id="c1", name="now", content="12:00"),
        Message(role="assistant", content="Noon."),
    ],
)


def _show_small(tmp_path, capsys, monkeypatch, **env) -> str:
    monkeypatch.setenv("TERM", "xterm-256color")
    for key in ("FORCE_COLOR", "NO_COLOR"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    source = tmp_path / "small.jsonl"
    source.write_text(dumps(SMALL) + "\n", encoding="utf-8")
    out = str(tmp_path / "o.jsonl")
    assert main(["data", "render", str(source), "--format", "chatml", "-o", out, "--show", "1"]) == 0
    return capsys.readouterr().out


def test_show_colours_each_part_of_a_small_conversation(smollm2, tmp_path, capsys, monkeypatch):
    lines = _show_small(tmp_path, capsys, monkeypatch, FORCE_COLOR="1").splitlines()
    assert lines[0] == (
        "legend: trained \x1b[35mreasoning\x1b[0m, \x1b[32mtext\x1b[0m, \x1b[1;36mcall name\x1b[0m, "
        "\x1b[33mcall args\x1b[0m, \x1b[34mcall syntax\x1b[0m, \x1b[1;31mend\x1b[0m / \x1b[2mmasked\x1b[0m"
    )
    body = "\n".join(lines[2:-1])
    call_turn = (
        "\x1b[2m<|im_start|>assistant\x1b[0m\n\x1b[35mChecking.\x1b[0m\n\x1b[34m<tool_call>\x1b[0m\n"
        '\x1b[34m{"name": "\x1b[0m\x1b[1;36mnow\x1b[0m\x1b[34m", "arguments": \x1b[0m\x1b[33m{"tz": "UTC"}\x1b[0m'
        "\x1b[34m}\x1b[0m\n\x1b[34m</tool_call>\x1b[0m\x1b[1;31m<|im_end|>\x1b[0m\n\x1b[2m<|im_start|>tool\x1b[0m"
    )
    assert call_turn in body
    assert "\x1b[32mNoon.\x1b[0m\x1b[1;31m<|im_end|>\x1b[0m" in body


def test_show_is_plain_with_no_color_or_when_piped(smollm2, tmp_path, capsys, monkeypatch):
    for env in ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, {}):
        printed = _show_small(tmp_path, capsys, monkeypatch, **env)
        assert "\x1b[" not in printed
        assert "⟦Noon.<|im_end|>⟧" in printed


def test_errors_are_messages_not_tracebacks(smollm2, tmp_path, capsys):
    out = str(tmp_path / "o.jsonl")
    assert main(["data", "render", str(tmp_path / "missing.jsonl"), "--format", "chatml", "-o", out]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'missing.jsonl'}: no such file\n"
    assert (
        main(
            ["data", "render", str(CORPUS_FILE), "--format", "chatml", "--tokenizer", str(tmp_path / "nope"), "-o", out]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith(
        f"error: tokenizer '{tmp_path / 'nope'}' is not a folder; expected a tooltrain tokenizer (llama3, "
    )
    with pytest.raises(SystemExit) as exit_:
        main(["data", "render", str(CORPUS_FILE), "--format", "chatml", "-o", out, "--weights", "user=2"])
    assert exit_.value.code == 2
    parts = "call_args, call_name, call_syntax, end, reasoning, text"
    assert f"argument --weights: expected PART=WEIGHT with PART one of {parts}, got 'user=2'" in capsys.readouterr().err


def _available(name: str):
    """The format and its default tokenizer, or a skip when the tokenizer's source package is missing."""
    fmt = get_format(name)
    from session_cache import shared_tokenizer

    try:
        return fmt, shared_tokenizer(fmt.default_tokenizer)
    except ImportError as err:  # its source package is not installed
        pytest.skip(f"tokenizer {fmt.default_tokenizer}: {err}")
    except OSError as err:  # a hub-only tokenizer (deepseek_coder's, Llama-2's: no package ships it) and no hub here
        pytest.skip(f"tokenizer {fmt.default_tokenizer} is not available offline: {str(err).splitlines()[0]}")


# `data render` hands every format the same way to tokenize(): in the default tier, the formats with cheap tokenizers
# (mistral_v3 and deepseek_v3 reject some of the corpus, mistral_v7 none) show the verb writes what tokenize() gives
# and rejects what it refuses; these, with large tokenizers to load twice, are in the slow tier: their renders are
# pinned against the official templates by their own format tests (tests/formats/) in the default tier.
SLOW_RENDER = {"llama3_1", "llama3_1_metatool", "llama4", "qwen2_5", "qwen3", "mistral_nemo", "harmony", "deepseek_v3"}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.slow) if name in SLOW_RENDER else name
        for name in FORMATS
        if name != "chatml"
    ],
)
def test_other_formats_render_the_corpus(name, tmp_path, capsys):
    fmt, tokenizer = _available(name)
    out = tmp_path / "out.jsonl"
    assert main(["data", "render", str(CORPUS_FILE), "--format", name, "-o", str(out)]) == 0
    summary = capsys.readouterr().out.splitlines()[0]
    rows = {row["id"]: row for row in read_jsonl(out)}
    rejects = read_jsonl(tmp_path / "out.rejects.jsonl")
    assert summary == f"read 16, rendered {len(rows)}, rejected {len(rejects)}"
    assert len(rows) + len(rejects) == 16
    for conv in CORPUS:
        try:
            expected = tokenize(fmt, conv, tokenizer).to_dict()
        except ValueError as err:
            assert conv.id not in rows
            reject = next(r for r in rejects if r["raw"]["id"] == conv.id)
            assert (reject["reason"], reject["raw"]) == (f"unrenderable: {err}", RAW[conv.id])
        else:
            assert rows[conv.id] == {"id": conv.id, **expected}


# ---- tooltrain bench render -------------------------------------------------------------------


def test_bench_render_prints_both_rates_and_the_ratio(smollm2, tmp_path, capsys):
    tiny = tmp_path / "tiny.jsonl"
    lines = CORPUS_FILE.read_text(encoding="utf-8").splitlines()
    tiny.write_text("\n".join(["{broken"] + lines[:3]) + "\n", encoding="utf-8")
    assert main(["bench", "render", str(tiny), "--format", "chatml", "--limit", "2", "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "render benchmark: format chatml, tokenizer smollm2, best of 1 passes after a warm-up"
    assert lines[1] == f"2 conversations from {tiny}; left out: 0 that a path cannot render; unreadable lines: 1"
    assert lines[2].split() == ["path", "conversations", "tokens", "conv/s", "tokens/s"]
    ours, batched, trl = lines[3].split(), lines[4].split(), lines[5].split()
    assert ours[:4] == ["tooltrain", "chatml", "2", "611"]  # 312 + 299 tokens
    assert batched[:5] == ["tooltrain", "chatml", "batched", "2", "611"]
    assert trl[:4] == ["trl", "qwen2_5_training.jinja", "2", "609"]
    assert float(ours[4]) > 0 and float(batched[5]) > 0 and float(trl[4]) > 0
    assert lines[6].startswith("ratio tooltrain chatml / trl qwen2_5_training.jinja: ")
    assert lines[7].startswith("ratio tooltrain chatml batched / trl qwen2_5_training.jinja: ")
    assert lines[7].endswith("x (trl qwen2_5_training.jinja: with assistant masks)")
    assert lines[8] == "identical input_ids on 0 of 2 conversations"


@pytest.mark.slow  # a benchmark run over several formats; test_bench_render_prints_both_rates... is the default's
def test_bench_render_leaves_out_what_a_path_cannot_render(tmp_path, capsys):
    _available("llama3_1")
    assert main(["bench", "render", str(CORPUS_FILE), "--format", "llama3_1", "--limit", "4", "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # the fourth corpus conversation has parallel calls, which Llama 3.1's format cannot express
    assert lines[1] == f"3 conversations from {CORPUS_FILE}; left out: 1 that a path cannot render; unreadable lines: 0"
    assert lines[5].split()[:3] == ["trl", "llama3_1.jinja", "3"]
    assert lines[7].endswith("(trl llama3_1.jinja: ids only: the template has no {% generation %} markers)")
