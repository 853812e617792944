"""``train.data.bench_render``: what the render benchmarks measure, on the tiny ChatML tokenizer (timings are not
pinned: the counts, the choice of conversations and trl's reference are)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from train.data.bench_render import (
    Comparison,
    Rate,
    Reference,
    all_conversations,
    best_batched_pass,
    best_of,
    best_pass,
    build_path_rates,
    compare_paths,
    first_conversations,
    reference_for,
    tooltrain_path,
    trl_path,
    warm_up,
)
from train.formats import get_format
from train.formats.hf import to_hf_messages

CORPUS = Path(__file__).resolve().parent / "fixtures" / "parity" / "corpus.jsonl"


@pytest.fixture(scope="module")
def chatml():
    from train.tokenizers import load_tokenizer

    return get_format("chatml"), load_tokenizer("tiny_chatml")


@pytest.fixture(scope="module")
def conversations():
    return first_conversations(CORPUS, None)[0]


def test_first_conversations_counts_what_is_not_one_and_stops_at_the_limit(tmp_path):
    good = CORPUS.read_text(encoding="utf-8").splitlines()[:3]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([good[0], "{not json", json.dumps({"id": "x"}), *good[1:]]) + "\n", encoding="utf-8")
    conversations, unreadable = first_conversations(path, None)
    assert [c.id for c in conversations] == [json.loads(line)["id"] for line in good] and unreadable == 2
    conversations, unreadable = first_conversations(path, 1)
    assert len(conversations) == 1 and unreadable == 0  # reading stops at the limit


def test_all_conversations_reads_every_file_then_cuts_at_the_limit(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n", encoding="utf-8")
    conversations, unreadable = all_conversations([CORPUS, bad, CORPUS], None)
    assert len(conversations) == 2 * len(first_conversations(CORPUS, None)[0]) and unreadable == 1
    conversations, unreadable = all_conversations([CORPUS, bad], 3)
    assert len(conversations) == 3 and unreadable == 1  # every file is read whole: its unreadable lines count


def test_best_of_keeps_the_fastest_pass_and_runs_at_least_once():
    calls = []
    seconds, tokens = best_of(lambda: calls.append(1) or 7, 0)
    assert (len(calls), tokens) == (1, 7) and seconds >= 0
    best_of(lambda: calls.append(1) or 7, 3)
    assert len(calls) == 4


def test_rate_per_second():
    assert Rate("p", 10, 100, 2.0).per_second == 5.0
    assert Rate("p", 10, 100, 0.0).per_second == float("inf")


def test_reference_for_prefers_trls_template_then_the_tokenizers(chatml):
    _, tokenizer = chatml
    reference = reference_for("chatml", tokenizer)
    assert reference.label == "trl qwen2_5_training.jinja" and reference.masks  # it has {% generation %} markers
    assert reference_for("llama3_1", tokenizer).masks is False
    assert reference_for("mistral", tokenizer) is None  # the tiny tokenizer has no chat template of its own

    class WithTemplate:
        chat_template = "{{ messages }}"

    assert reference_for("mistral", WithTemplate()) == Reference("tokenizer's chat template", "{{ messages }}", False)


def test_trl_path_labels_only_the_assistant_output(chatml, conversations):
    _, tokenizer = chatml
    ids, labels = trl_path(reference_for("chatml", tokenizer), tokenizer)(to_hf_messages(conversations[0]))
    assert len(ids) == len(labels)
    trained = [t for t in labels if t != -100]
    assert 0 < len(trained) < len(ids) and all(t == i for t, i in zip(labels, ids) if t != -100)
    no_masks = Reference("ids only", reference_for("chatml", tokenizer).template, False)
    assert trl_path(no_masks, tokenizer)(to_hf_messages(conversations[0]))[1] == []


def test_warm_up_keeps_what_both_paths_render_and_counts_identical_ids(chatml, conversations):
    fmt, tokenizer = chatml
    hf = [to_hf_messages(conv) for conv in conversations]
    tooltrain = tooltrain_path(fmt, tokenizer)

    def refuses_the_second(item):
        if item is hf[1]:
            raise ValueError("a template refusal")
        return tooltrain(conversations[hf.index(item)])

    keep, identical = warm_up(conversations, hf, tooltrain, refuses_the_second)
    assert keep == [i for i in range(len(conversations)) if i != 1]
    assert identical == len(keep)  # the stand-in for trl returns tooltrain's own ids
    assert warm_up(conversations, hf, tooltrain, None) == (list(range(len(conversations))), 0)


def test_passes_count_conversations_and_tokens(chatml, conversations):
    fmt, tokenizer = chatml
    tooltrain = tooltrain_path(fmt, tokenizer)
    one = best_pass("one", tooltrain, conversations, 2)
    batched = best_batched_pass("batched", fmt, tokenizer, conversations, 1)
    assert (one.path, one.conversations) == ("one", len(conversations))
    assert one.tokens == batched.tokens == sum(len(tooltrain(conv)[0]) for conv in conversations)


def test_build_path_rates_leaves_out_what_a_path_cannot_render(chatml, conversations):
    fmt, tokenizer = chatml
    reference = reference_for("chatml", tokenizer)
    rates, left_out = build_path_rates(fmt, tokenizer, conversations, reference, 1)
    assert [r.path for r in rates] == ["tooltrain chatml", "trl qwen2_5_training.jinja"]
    assert left_out == 0 and rates[0].conversations == rates[1].conversations == len(conversations)
    rates, left_out = build_path_rates(fmt, tokenizer, conversations, None, 1)
    assert [r.path for r in rates] == ["tooltrain chatml"] and left_out == 0


def test_compare_paths_times_three_paths_on_what_both_handle(chatml, conversations):
    fmt, tokenizer = chatml
    compared = compare_paths("chatml", fmt, tokenizer, conversations, reference_for("chatml", tokenizer), 1)
    assert [r.path for r in compared.rates] == [
        "tooltrain chatml",
        "tooltrain chatml batched",
        "trl qwen2_5_training.jinja",
    ]
    assert compared.kept == len(conversations) and 0 <= compared.identical <= compared.kept
    alone = compare_paths("chatml", fmt, tokenizer, conversations, None, 1)
    assert [r.path for r in alone.rates] == ["tooltrain chatml", "tooltrain chatml batched"] and alone.identical == 0
    assert compare_paths("chatml", fmt, tokenizer, [], None, 1) == Comparison([], 0, 0)
