"""History and keyword retrieval on the tiny fixture library (hash-bow embedder: lexical, deterministic)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from train.papers.metatool.baselines import KeywordIndex, bm25_tokens, history_scores, history_search
from train.retrieval.embed import load_embedder
from train.retrieval.index import ToolIndex, json_text, name_description_text, read_library


@pytest.fixture
def index(fixtures, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path))
    return ToolIndex(read_library(fixtures / "retrieval" / "tiny.library.jsonl"), load_embedder("hash-bow"))


def test_tool_texts_are_the_papers_json_and_name_plus_description(index):
    tool = index.tools[5]
    assert json.loads(json_text(tool)) == {
        "name": "random_quote",
        "description": "Get a random motivational quote",
        "parameters": {"type": "object", "properties": {}},
    }
    assert name_description_text(tool) == "random_quote Get a random motivational quote"


def test_bm25_tokens_split_names_and_drop_stop_words():
    assert bm25_tokens("get_traffic_report Get the current trafficReport, e.g. A") == [
        "get",
        "traffic",
        "report",
        "get",
        "current",
        "traffic",
        "report",
    ]


def test_keyword_bm25_ranks_by_name_and_description(index):
    keywords = KeywordIndex(index)
    assert keywords.search(["traffic", "book table", "currencies amount", "zzz", ""], k=3) == [
        ["get_traffic_report", "get_weather", "book_table"],  # one match, then zero scores in library order
        ["book_table", "get_traffic_report", "get_weather"],
        ["convert_currency", "get_traffic_report", "get_weather"],
        ["get_traffic_report", "get_weather", "book_table"],  # no known word: all zero
        ["get_traffic_report", "get_weather", "book_table"],
    ]
    scores = keywords.scores(["weather"])
    assert scores[0, 1] > 0 and np.count_nonzero(scores) == 1


def test_keyword_dense_scoring_uses_embeddings(index):
    keywords = KeywordIndex(index, "dense")
    assert keywords.search(["random motivational quote"], k=1) == [["random_quote"]]
    with pytest.raises(ValueError, match="keyword scoring must be one of bm25, dense, got 'tfidf'"):
        KeywordIndex(index, "tfidf")


def test_history_compares_the_dialogue_with_each_tool_json(index):
    found = history_search(
        index,
        ["I need the current traffic report for my city and state", "convert an amount of money between currencies"],
        k=2,
    )
    assert found[0] == ["get_traffic_report", "get_weather"]  # get_weather shares "current" and "city"
    assert found[1][0] == "convert_currency"
    assert history_scores(index, []).shape == (0, 6)
