"""PTR's tool libraries and histories, and its two test splits.

A dataset is a tool library (``name -> description``, the ``*_tool.json`` file's order) and its examples
(``query``, gold tool *set*), read through the ``train.sources`` readers, from a data root laid out as
/work/shared/data is (``ROOT/rectools_ptr/`` = GHupppp/PTR's ``src/Datasets/``, ``ROOT/toollens/`` = COLT's
``datasets/ToolLens/``):

* ``rectools``: ``rectools_ptr/RecTools_QT.json`` over ``rectools_ptr/RecTools_tool.json`` (1,000 queries, 47 tools).
* ``metatool``: ``rectools_ptr/MetaTool_QT.json`` over ``rectools_ptr/MetaTool_tool.json`` (497 two-tool queries,
  the 47 merged tools PTR uses; the same queries as MetaTool's ``multi_tool_query_golden.json``).
* ``toollens``: COLT's queries and qrels (both splits, queries.jsonl order: PTR's ``ToolLens_QT.json`` was never
  published, so its row order is unknown) with each judged API collapsed to the tool that owns it, named as in
  ``rectools_ptr/ToolLens_tool.json`` (314 tools; descriptions from that file). COLT's corpus names 314 tools; PTR
  cut four of them at their first "," or ":" and dropped the trailing space of three (``TOOLLENS_NAME_FIXES``), so
  ``toollens_tool_name`` is "cut at the first ',' or ':', then strip". Two APIs of one tool are one gold tool.

Query text (``load_dataset(..., clean_queries=...)``): by default each query is used as published, which is what
the released code does (``item['query']`` as it stands, the history's ``.strip(':')`` aside). 93 of RecTools'
1,000 queries carry the query generator's leftovers after a blank line ("Tool Combination: ..." or "Explanation:"
lists naming the gold tools; 34 queries also start with a stray ``**``). ``clean_queries=True`` keeps only the
query itself (``clean_query``): a leading ``**`` is dropped and the text is cut at its first blank line
(every leftover of the 93 sits after one; no query has the markers without it). ``Dataset.cleaned`` counts the
queries it changed.

An example whose gold set names a tool the library lacks, or is empty, is a counted reject (``Dataset.rejected``),
as is every record a reader rejects: read = accepted + rejected.

Splits (``make_split``):

* ``random20`` (default; the paper's §4: "We randomly select 20% of each dataset to serve as the test data"): a
  seeded shuffle, ``round(0.2 * n)`` test examples; bundles and history come from the other 80% only.
* ``first100`` (the released code, ``testAndtrain`` + ``getToolCombinations``): the first 100 rows are the test;
  the history is the rest, but bundles are built from the *whole* file, so every test query's own gold set is a
  candidate bundle (100 of 100 on RecTools, 99 of 100 on MetaTool would be there anyway). The seed is unused.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from train.base.records import Rejected, SourceError, load_json
from train.schema import ToolLibrary, ToolQuery

DATASETS = ("rectools", "metatool", "toollens")
PROTOCOLS = ("random20", "first100")
TEST_FRACTION = 0.2
FIRST_ROWS = 100
# COLT corpus tool_name -> the name ToolLens_tool.json gives it (what toollens_tool_name computes; pinned in tests).
TOOLLENS_NAME_FIXES = {
    "Physical quantities, constants and equations ": "Physical quantities",
    "Locations - Languages, Countries & German Cities": "Locations - Languages",
    "Movie, TV, music search and download": "Movie",
    "Kubric: The Comprehensive Movie News API": "Kubric",
    "TimeTable Lookup ": "TimeTable Lookup",
    "Vehicle charging stations ": "Vehicle charging stations",
    "Github API Scraper ": "Github API Scraper",
}
_CUT = re.compile(r"[,:]")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_LEADING_MARKUP = re.compile(r"^\s*\*\*(?=\s)")  # a lone "**" before the query (34 RecTools rows)


class DataError(ValueError):
    """A dataset cannot be read at all (missing file, wrong layout, unknown name)."""


@dataclass(frozen=True)
class Example:
    id: str
    query: str
    tools: tuple[str, ...]  # the gold set, in published order, repeats removed


@dataclass
class Dataset:
    name: str
    tools: dict[str, str]  # name -> description, in the tool file's order
    examples: list[Example]
    rejected: list[Rejected] = field(default_factory=list)
    clean_queries: bool = False  # cut each query to the query itself (clean_query)
    cleaned: int = 0  # accepted queries clean_query changed

    @property
    def read(self) -> int:
        return len(self.examples) + len(self.rejected)


@dataclass
class Split:
    protocol: str
    seed: int | None
    test: list[Example]
    history: list[Example]  # past queries with their tool sets (stage 3 looks here)
    bundle_source: list[Example]  # whose gold sets become stage 1's bundles


def toollens_tool_name(corpus_tool_name: str) -> str:
    """COLT's tool name as PTR's ToolLens_tool.json spells it: cut at the first ',' or ':', then stripped."""
    return _CUT.split(corpus_tool_name, maxsplit=1)[0].strip()


def clean_query(text: str) -> str:
    """The query without the generator's leftovers: a leading lone ``**`` dropped, then everything from the first
    blank line on cut, then stripped ("**\\n\\nPlan a trip.\\n\\nTool Combination: ..." -> "Plan a trip.")."""
    body = _LEADING_MARKUP.sub("", text, count=1).strip()
    return _BLANK_LINE.split(body, maxsplit=1)[0].strip()


def load_dataset(name: str, root: Path, clean_queries: bool = False) -> Dataset:
    """``clean_queries``: cut each query to the query itself (``clean_query``); off by default, as the released
    code reads them."""
    dataset = _load(name, root)
    if clean_queries:
        dataset.clean_queries = True
        cleaned = [Example(ex.id, clean_query(ex.query), ex.tools) for ex in dataset.examples]
        dataset.cleaned = sum(new.query != old.query for new, old in zip(cleaned, dataset.examples))
        dataset.examples = cleaned
    return dataset


def _load(name: str, root: Path) -> Dataset:
    if name not in DATASETS:
        raise DataError(f"unknown dataset {name!r}; choose from {', '.join(DATASETS)}")
    ptr = root / "rectools_ptr"
    try:
        if name == "toollens":
            return _toollens(root / "toollens", ptr / "ToolLens_tool.json")
        stem = {"rectools": "RecTools", "metatool": "MetaTool"}[name]
        return _query_file(name, ptr / f"{stem}_QT.json", ptr / f"{stem}_tool.json")
    except SourceError as err:
        raise DataError(str(err)) from None


def _query_file(name: str, queries: Path, tool_file: Path) -> Dataset:
    from train.sources.rectools import read

    for path in (queries, tool_file):
        if not path.is_file():
            raise DataError(f"{path}: missing (dataset {name} reads {queries.name} and {tool_file.name})")
    dataset = Dataset(name, {}, [])
    for item in read([queries, tool_file]):
        if isinstance(item, Rejected):
            dataset.rejected.append(item)
        elif isinstance(item, ToolLibrary):
            dataset.tools = {tool.name: tool.description or "" for tool in item.tools}
        else:
            _accept(dataset, item, item.gold_tools, f"{queries}#{item.id.rsplit('-', 1)[-1]}")
    return dataset


def _toollens(folder: Path, tool_file: Path) -> Dataset:
    from train.sources.toollens import read

    if not tool_file.is_file():
        raise DataError(f"{tool_file}: missing (ToolLens's tool-level names and descriptions)")
    descriptions = load_json(tool_file)
    if not isinstance(descriptions, dict) or not all(isinstance(v, str) for v in descriptions.values()):
        raise DataError(f"{tool_file}: expected an object {{tool name: description}}")
    dataset = Dataset("toollens", dict(descriptions), [])
    owner: dict[str, str] = {}  # API function name -> tool-level name
    for item in read([folder]):
        if isinstance(item, Rejected):
            dataset.rejected.append(item)
        elif isinstance(item, ToolLibrary):
            corpus = item.meta["corpus"]
            owner = {api: toollens_tool_name(info.get("tool_name", api)) for api, info in corpus.items()}
        else:
            gold = [owner.get(api, api) for api in item.gold_tools]
            _accept(dataset, item, gold, f"{folder / 'queries.jsonl'} (id {item.id})")
    return dataset


def _accept(dataset: Dataset, item: ToolQuery, gold: Iterable[str], location: str) -> None:
    tools = tuple(dict.fromkeys(gold))
    unknown = [name for name in tools if name not in dataset.tools]
    if not tools:
        dataset.rejected.append(Rejected(location, "empty gold tool set", item.to_dict()))
    elif unknown:
        why = f"gold tool(s) {', '.join(map(repr, unknown))} not in the {dataset.name} library"
        dataset.rejected.append(Rejected(location, why, item.to_dict()))
    else:
        dataset.examples.append(Example(item.id, item.query, tools))


def make_split(
    examples: list[Example], protocol: str = "random20", seed: int = 0, test_fraction: float = TEST_FRACTION
) -> Split:
    if protocol == "first100":
        if len(examples) <= FIRST_ROWS:
            raise DataError(f"the first100 protocol needs more than {FIRST_ROWS} examples, got {len(examples)}")
        return Split(protocol, None, examples[:FIRST_ROWS], examples[FIRST_ROWS:], list(examples))
    if protocol != "random20":
        raise DataError(f"unknown protocol {protocol!r}; choose from {', '.join(PROTOCOLS)}")
    n_test = round(test_fraction * len(examples))
    if not 0 < n_test < len(examples):
        raise DataError(f"a {test_fraction:.0%} test split of {len(examples)} examples leaves a side empty")
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    test_ids = set(order[:n_test])
    test = [ex for i, ex in enumerate(examples) if i in test_ids]  # file order within each side
    history = [ex for i, ex in enumerate(examples) if i not in test_ids]
    return Split(protocol, seed, test, history, history)
