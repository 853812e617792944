"""Masks fail loudly (train.formats.mask_checks, hooked into the dataset build): a sample whose mask cannot be
right stops the build with its id and the reason; the real corpora and every registered format pass."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from train.data.dataset import BuildReport, MaskError, build_rows
from train.formats import FORMATS, get_format
from train.formats.base import MaskPolicy, Segment, trained_segments
from train.formats.chatml import ChatMLFormat
from train.formats.expansion import plan_samples, resolve_turns, sample_masks
from train.formats.mask_checks import Norm, check_sample, format_norm
from train.schema import Conversation
from train.sources import Rejected, get_reader
from train.tokenizers import load_tokenizer

CORPUS = Path(__file__).resolve().parent / "fixtures" / "parity" / "corpus.jsonl"
CONVS = {c.id: c for c in (Conversation.from_dict(json.loads(line)) for line in CORPUS.open(encoding="utf-8"))}
CFG = {"max_seq_len": 4096, "overlong": "drop", "eval_fraction": 0.0}


class Relabelled(ChatMLFormat):
    """ChatML with one mask bug: parts in ``swap`` take another part, ``every`` makes every segment that part,
    ``repeat_end`` repeats a closing tag after each end. The end, call and repeat bugs show only on data (the probe
    the norm is read from renders right), as ms-swift #9427's repeated ``</think>`` shows only after tool turns:
    a bug the format makes on every conversation is its parity tests' to catch, not the build's."""

    name = "relabelled"

    def __init__(self, swap=None, every=None, repeat_end=False):
        super().__init__()
        self.swap, self.every, self.repeat_end = swap or {}, every, repeat_end

    def render(self, conv):
        out = []
        on_data = conv.id != "mask-norm-probe" or self.every or "text" in self.swap
        for seg in super().render(conv):
            part = self.every or (self.swap.get(seg.part, seg.part) if on_data else seg.part)
            out.append(replace(seg, part=part))
            if self.repeat_end and on_data and seg.part == "end":
                out += [Segment("</think>", "end", seg.message)] * 3  # ms-swift #9427: a repeated closing tag
        return out


@pytest.fixture(scope="module")
def tiny():
    return load_tokenizer("tiny_chatml")


@pytest.mark.parametrize(
    ("fmt", "reason"),
    [
        (
            Relabelled(
                {"text": "user", "call_name": "user", "call_args": "user", "call_syntax": "user", "end": "user"}
            ),
            "every token is masked, though messages [1, 3] are assistant turns with text or calls to train",
        ),
        (Relabelled(every="text"), "every one of its 474 tokens is trained: the format masks no prompt"),
        (Relabelled({"end": "header"}), "the trained turn of messages [1] has no trained end-of-turn part"),
        (
            Relabelled(repeat_end=True),
            "the trained turn of messages [1] has 34 end-of-turn characters, the format's norm is 10",
        ),
        (
            Relabelled({"call_args": "call_syntax"}),
            "the trained turn of messages [1] makes 1 call(s) but labels no call name or no arguments",
        ),
    ],
)
def test_a_wrong_mask_stops_the_build_naming_the_sample_and_the_reason(tiny, fmt, reason):
    conv = CONVS["single_call_json_result"]
    with pytest.raises(MaskError) as err:
        build_rows([conv], fmt, tiny, CFG, BuildReport())
    assert f"conversation 'single_call_json_result': {reason}" in str(err.value)
    assert "data.check_masks=false" in str(err.value)
    # the escape hatch: the same build goes through
    build_rows([conv], fmt, tiny, {**CFG, "check_masks": False}, BuildReport())


def test_a_conversation_without_an_assistant_turn_is_still_a_counted_reject(tiny):
    conv = replace(CONVS["no_tools_chat"], messages=CONVS["no_tools_chat"].messages[:1])
    report = BuildReport()
    assert build_rows([conv], get_format("chatml"), tiny, CFG, report).train == []
    assert report.dropped_untrained == 1


def test_the_norm_is_read_from_the_format():
    assert format_norm(get_format("chatml")) == Norm(end_chars=10, syntax_per_call=52, calls_labelled=True)
    assert format_norm(get_format("chatml", {"answer_style": "toolgt_text"})).calls_labelled is False
    assert format_norm(get_format("deepseek_coder")) == Norm(end_chars=8, syntax_per_call=0, calls_labelled=False)


def _corpora(data: Path):
    bfcl = data / "bfcl_v2"
    yield from (
        ("glaive", [data / "glaive_toolcall_demo" / f"glaive_toolcall_{lang}_demo.json"]) for lang in ["en", "zh"]
    )
    for cat in ("simple", "multiple", "parallel", "parallel_multiple", "live_multiple", "java"):
        yield "bfcl", [bfcl / f"BFCL_v2_{cat}.json", bfcl / "possible_answer" / f"BFCL_v2_{cat}.json"]


@pytest.mark.slow  # a full run or a whole corpus: the slow tier (`.ci/run --all`)
@pytest.mark.shared_data
def test_real_corpora_pass_the_checks_in_every_format(shared_data):
    convs = [c for reader, inputs in _corpora(shared_data) for c in get_reader(reader)(inputs)]
    convs = [c for c in convs if not isinstance(c, Rejected)]
    checked = 0
    for name in FORMATS:
        fmt = get_format(name)
        norm = format_norm(fmt)
        per_turn = resolve_turns("auto", fmt) == "per_turn"  # as the build samples it (data.turns=auto)
        for conv in convs:
            try:
                samples = plan_samples(fmt, conv, MaskPolicy()) if per_turn else [fmt.render(conv)]
            except ValueError:
                continue
            for sample in samples:
                segments, trained = (
                    (sample.segments, sample_masks(sample, MaskPolicy(), conv)[0])
                    if per_turn
                    else (sample, trained_segments(sample))
                )
                labels = [0 if t else -100 for seg, t in zip(segments, trained) if seg.text]
                assert check_sample(conv, segments, trained, labels, norm) is None, (name, conv.id)
            checked += 1
    assert checked > 10_000
