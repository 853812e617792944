"""ToolLens (BEIR layout): real counts and split, exact records, tool names, broken inputs rejected."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest
from helpers import split_queries

from train.sources import Rejected, SourceError, get_reader
from train.sources.toollens import function_name, parse_packed_text, unique_name

read = get_reader("toollens")


@pytest.fixture
def mini(fixtures: Path) -> Path:
    return fixtures / "sources" / "toollens" / "mini"


def test_real_toollens(shared_data: Path) -> None:
    queries, rejects, libraries = split_queries(list(read([shared_data / "toollens"])))
    assert (len(queries), len(rejects), len(libraries)) == (18770, 0, 1)
    assert Counter(q.meta["split"] for q in queries) == {"train": 16893, "test": 1877}
    # query-tool pairs: 45,035 train + 5,010 test
    assert sum(len(q.gold_tools) for q in queries) == 45035 + 5010
    library = libraries[0]
    names = [t.name for t in library.tools]
    assert len(names) == len(set(names)) == 464
    assert max(map(len, names)) == 64
    assert not any(info.get("unparsed") for info in library.meta["corpus"].values())
    assert {g for q in queries for g in q.gold_tools} <= set(names)
    assert queries[0].to_dict() == {
        "id": "18674",
        "query": "I'm planning a meal using the ingredient beef and grocery.",
        "gold_tools": [
            "suggestions_for_worldwide_recipes",
            "v1_nutrition_for_nutrition_by_api_ninjas",
            "search_a_grocery_for_store_groceries",
        ],
        "meta": {"source": "toollens", "split": "train", "gold_corpus_ids": ["0", "1", "2"]},
    }
    assert library.tools[1].to_dict()["function"] == {
        "name": "v1_nutrition_for_nutrition_by_api_ninjas",
        "description": "API Ninjas Nutrition API endpoint.",
        "parameters": {
            "type": "object",
            "required": ["query"],
            "properties": {
                "query": {
                    "type": "string",
                    "description": "Query text to extract nutrition information (e.g. **bacon and 3 eggs**).",
                }
            },
        },
    }
    info = library.meta["corpus"]["v1_nutrition_for_nutrition_by_api_ninjas"]
    assert (info["_id"], info["category_name"], info["tool_name"], info["api_name"]) == (
        "1",
        "Food",
        "Nutrition by API-Ninjas",
        "/v1/nutrition",
    )
    assert info["return_schema"]["calories"] == "float" and info["text"].startswith("category_name:Food, tool_name:")


def test_mini_folder_records_and_rejects(mini: Path) -> None:
    items = list(read([mini]))
    queries, rejects, libraries = split_queries(items)
    names = [t.name for t in libraries[0].tools]
    assert names == [
        "suggestions_for_worldwide_recipes",
        "query_dive_operators_by_a_country_or_a_region_for_world_dive_cen",  # cut to 64
        "toollens_2",  # free text: kept, unparsed
        "query_dive_operators_by_a_country_or_a_region_for_world_dive_c_3",  # same cut name: corpus id suffix
    ]
    assert libraries[0].tools[0].parameters == {
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "limit": {"type": "number", "description": "How many", "default": "10"},
            "day": {"type": "string", "format": "date", "description": "Day"},
        },
        "required": ["q"],
    }
    corpus = libraries[0].meta["corpus"]
    assert corpus["toollens_2"] == {
        "_id": "2",
        "title": "",
        "text": "a free-text description that is not packed",
        "metadata": {},
        "unparsed": True,
    }
    assert corpus[names[3]]["return_schema"] == "not json"
    assert [q.to_dict() for q in queries] == [
        {
            "id": "10",
            "query": "I'm planning a meal using the ingredient beef.",
            "gold_tools": names[:2],
            "meta": {"source": "toollens", "split": "train", "gold_corpus_ids": ["0", "1"]},
        },
        {
            "id": "11",
            "query": "Find dive sites in Egypt.",
            "gold_tools": [names[1], names[3]],
            "meta": {"source": "toollens", "split": "test", "gold_corpus_ids": ["1", "3"], "metadata": {"lang": "en"}},
        },
        {
            "id": "15",
            "query": "Judged against a missing corpus id and a score 0.",
            "gold_tools": ["99"],
            "meta": {
                "source": "toollens",
                "split": "train",
                "gold_corpus_ids": ["99"],
                "unknown_gold": ["99"],
                "nonrelevant_corpus_ids": ["2"],
            },
        },
    ]
    train, queries_file = mini / "qrels" / "train.tsv", mini / "queries.jsonl"
    assert [(r.location, r.reason) for r in rejects] == [
        (f"{mini / 'corpus.jsonl'}:5", "expected a corpus record with string _id and text"),
        (f"{train}:8", "expected query-id, corpus-id and score separated by tabs, got 2 field(s)"),
        (f"{train}:9", "score 'one' is not an integer"),
        (f"{queries_file}:3 (id 12)", "no relevant tool in qrels/train.tsv or qrels/test.tsv"),
        (f"{queries_file}:4 (id 13)", "judged in both train and test qrels"),
        (f"{queries_file}:5", "invalid JSON at column 23: Unterminated string starting at"),
        (f"{queries_file}:7", "duplicate query id '10'"),
        (f"{train}:7", "qrels name query id '20', which queries.jsonl lacks"),
    ]


def test_non_utf8_qrels_line_is_rejected(mini: Path, tmp_path: Path) -> None:
    folder = tmp_path / "toollens"
    shutil.copytree(mini, folder)
    with (folder / "qrels" / "test.tsv").open("ab") as fh:
        fh.write(b"11\t\xff\t1\n")
    rejects = [r for r in read([folder]) if isinstance(r, Rejected)]
    assert (f"{folder / 'qrels' / 'test.tsv'}:5", "not UTF-8 at byte 3") in [(r.location, r.reason) for r in rejects]


def test_layout_errors_are_source_errors(mini: Path, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="expected the ToolLens folder, not a file"):
        list(read([mini / "queries.jsonl"]))
    shutil.copytree(mini, tmp_path / "t")
    (tmp_path / "t" / "qrels" / "test.tsv").unlink()
    with pytest.raises(SourceError, match=r"qrels/test.tsv: missing \(expected the BEIR layout\)"):
        list(read([tmp_path / "t"]))


def test_packed_text_and_names() -> None:
    text = (
        "category_name:Data, tool_name:A, B & C, api_name:get, api_description:Gets a, b, required_params: "
        '[{"name": "x", "type": "ENUM", "description": "one, two"}], optional_params: [], return_schema: {}'
    )
    # commas inside the names and the description do not split fields: the field markers do
    assert parse_packed_text(text) == {
        "category_name": "Data",
        "tool_name": "A, B & C",
        "api_name": "get",
        "api_description": "Gets a, b",
        "required_params": [{"name": "x", "type": "ENUM", "description": "one, two"}],
        "optional_params": [],
        "return_schema": {},
    }
    assert parse_packed_text("category_name:x, tool_name:y") is None
    assert function_name("/v1/nutrition", "Nutrition by API-Ninjas") == "v1_nutrition_for_nutrition_by_api_ninjas"
    assert unique_name("a" * 70, "7", set()) == "a" * 64
    assert unique_name("a" * 70, "7", {"a" * 64}) == "a" * 62 + "_7"
