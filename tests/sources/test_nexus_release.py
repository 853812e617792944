"""NexusRaven-V2 release folders: the eight ToolGT Nexus tasks from the Hub layouts, named as Table 7 names them."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from train.base.records import Rejected, SourceError
from train.schema import Conversation
from train.sources import nexus, nexus_release
from train.sources.nexus_calls import flatten_calls
from train.sources.nexus_release import TASK_LABELS, place

REPO = Path(__file__).resolve().parents[2]
TABLE_7 = ("NVDLibrary", "VirusTotal", "Places", "Climate", "OTX", "VT-nested", "VT-parallel", "CVECPE")


def write_rows(path: Path, rows: list[dict]) -> None:
    """``rows`` in the format ``path``'s suffix names."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    elif path.suffix == ".arrow":  # datasets' save_to_disk: the Arrow stream format
        table = pa.Table.from_pylist(rows)
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
    elif path.suffix == ".csv":
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))


@pytest.fixture
def release(fixtures: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "nexusraven_v2"
    for relative, rows in json.loads((fixtures / "sources" / "nexus_release" / "release.json").read_text()).items():
        write_rows(folder / relative, rows)
    # what a download leaves beside the data, none of it data
    (folder / "NVDLibraryBenchmark" / "README.md").write_text("---\nconfigs: []\n---\n")
    (folder / "NVDLibraryBenchmark" / ".gitattributes").write_text("*.parquet filter=lfs\n")
    (folder / ".cache" / "huggingface").mkdir(parents=True)
    (folder / ".cache" / "huggingface" / "x.json").write_text("[1]")
    for name in ("state.json", "dataset_info.json"):
        (folder / "ClimateAPIBenchmark" / "train" / name).write_text("{}")
    (folder / "ClimateAPIBenchmark" / "dataset_dict.json").write_text('{"splits": ["train"]}')
    return folder


def by_id(items: list) -> dict[str, Conversation]:
    return {item.id: item for item in items if isinstance(item, Conversation)}


def calls_of(conv: Conversation) -> list[tuple[str, dict]]:
    return [(call.name, call.arguments) for call in conv.messages[-1].tool_calls]


# ---------------------------------------------------------------- the task table


def test_the_tasks_are_table_7s_columns_and_the_scorers():
    from train.evaluation.nexus import ORDERED_TASKS, TOOLGT_NEXUS_TASKS

    assert TASK_LABELS == TABLE_7 == tuple(TOOLGT_NEXUS_TASKS)
    assert ORDERED_TASKS == frozenset(TABLE_7)


@pytest.mark.parametrize(
    ("relative", "tasks", "config"),
    [
        ("NVDLibraryBenchmark/data/train-00000-of-00001.parquet", ("NVDLibrary",), None),
        ("NVDLibrary/data/train-0.parquet", ("NVDLibrary",), None),  # camel's folder
        ("NVDLibrary-NestedCalls/cvecpe_multiapis_nested.csv", ("CVECPE",), None),
        ("CVECPEAPIBenchmark/cvecpe_multiapis_nested.csv", ("CVECPE",), None),
        ("VirusTotal-NestedCalls/data/train.parquet", ("VT-nested",), None),
        ("VirusTotal-ParallelCalls/data/train.parquet", ("VT-parallel",), None),
        ("vt_multiapi/data/train.parquet", ("VT-nested", "VT-parallel"), None),
        ("exports/Climate.jsonl", ("Climate",), None),
        ("ClimateAPIBenchmark/train/data-00000-of-00001.arrow", ("Climate",), None),
        ("Function_Call_Definitions/VT_Multi (Parallel)/train/0000.parquet", (), "VT_Multi (Parallel)"),
        ("Function_Call_Definitions/CVECPE/train-0.parquet", (), "CVECPE"),  # NVDLibrary's two functions
        ("function_call_definitions/places.jsonl", (), "Places"),
        ("hub/datasets--Nexusflow--OTXAPIBenchmark/snapshots/0a1b/data/train-0.parquet", ("OTX",), None),
        ("hub/datasets--Nexusflow--Function_Call_Definitions/snapshots/0a1b/OTX/train-0.parquet", (), "OTX"),
    ],
)
def test_a_files_path_names_its_task_or_definitions(relative, tasks, config):
    found = place(Path(relative))
    assert (tuple(t.label for t in found.tasks), found.config) == (tasks, config)


@pytest.mark.parametrize("relative", ["data/train.parquet", "Function_Call_Definitions/Weather/x.parquet", "x.csv"])
def test_a_path_naming_nothing_places_nothing(relative):
    assert place(Path(relative)) is None


# ---------------------------------------------------------------- reading a release folder


def test_all_eight_tasks_from_a_mixed_release_folder(release):
    items = list(nexus.read([release]))
    assert [item for item in items if isinstance(item, Rejected)] == []
    counts: dict[str, int] = {}
    for conv in items:
        counts[conv.meta["dataset"]] = counts.get(conv.meta["dataset"], 0) + 1
    assert counts == {
        "NVDLibrary": 2, "VirusTotal": 2, "Places": 2, "Climate": 2, "OTX": 2, "VT-nested": 2, "VT-parallel": 1,
        "CVECPE": 2,
    }  # fmt: skip
    assert all(conv.meta["release"] == "v2" and conv.meta["source"] == "nexusraven" for conv in items)
    conv = by_id(items)["VT-parallel-0"]  # numbered within its task: vt_multiapi's row 1
    assert conv.meta["hub_dataset"] == "Nexusflow/vt_multiapi"
    assert conv.meta["reference"] == (
        "vt_get_domain_report(domain='a.example', x_apikey='k3'); "
        "vt_get_domain_report(domain='b.example', x_apikey='k3')"
    )


def test_golds_are_the_calls_the_stubs_record_in_order(release):
    convs = by_id(list(nexus.read([release])))
    assert calls_of(convs["NVDLibrary-0"]) == [("searchCVE", {"keywordSearch": "log4j", "limit": 5})]
    assert convs["NVDLibrary-0"].meta["reference"] == "r = nvdlib.searchCVE(keywordSearch='log4j', limit=5)"
    # positional arguments named by the definition
    assert calls_of(convs["VirusTotal-1"]) == [("vt_get_ip_address_report", {"ip": "8.8.8.8", "x_apikey": "k1"})]
    # a nested call first, standing for None in the call that takes it
    assert calls_of(convs["Places-0"]) == [
        ("get_latitude_longitude", {"location": "Austin"}),
        ("get_recommendations", {"topics": ["coffee"], "lat_long": None}),
    ]
    assert calls_of(convs["Climate-1"]) == [
        ("get_current_location", {}),
        ("get_latitude_longitude", {"location": None}),
        ("get_timezone", {"lat_long": None}),
    ]
    assert calls_of(convs["CVECPE-0"]) == [
        ("searchCVE", {"keywordSearch": "OpenSSL", "limit": 10}),
        ("summarize_cvecpes", {"cvecpeList": None}),
    ]
    assert [c.id for c in convs["VT-parallel-0"].messages[-1].tool_calls] == ["call_0", "call_1"]


def test_tools_come_from_the_tasks_definitions_config(release):
    convs = by_id(list(nexus.read([release])))
    nvd = convs["NVDLibrary-1"].tools
    assert [tool.name for tool in nvd] == ["searchCVE", "searchCPE"]  # config CVECPE
    assert nvd[0].description == "Search the NVD for CVEs.\n\nkeywordSearch (str): words to look for."
    places = {tool.name: tool.parameters for tool in convs["Places-1"].tools}
    assert places["find_places_near_location"] == {
        "type": "object",
        "properties": {
            "type_of_place": {"type": "array"},
            "location": {"type": "string"},
            "radius_miles": {"type": "integer", "default": 50},
        },
        "required": ["type_of_place", "location"],
    }
    assert [t.name for t in convs["CVECPE-1"].tools][:2] == ["count_cvecpe_items", "summarize_cvecpes"]
    assert convs["CVECPE-1"].tools[3].parameters["properties"]["delay"] == {"default": 6}
    assert {t.name for t in convs["VT-nested-0"].tools} == {t.name for t in convs["VT-parallel-0"].tools}


def test_without_definitions_the_tasks_have_no_tools(release):
    for path in sorted((release / "Function_Call_Definitions").rglob("*.parquet")):
        path.unlink()
    items = list(nexus.read([release]))
    rejected = [item for item in items if isinstance(item, Rejected)]
    # only the golds with positional arguments cannot be named without their definitions
    assert [(r.location.rsplit("/", 1)[-1], r.reason) for r in rejected] == [
        (
            "cvecpe_multiapis_nested.csv#0",
            "gold: 1 positional argument(s) for summarize_cvecpes, whose parameters are unknown",
        ),
        (
            "cvecpe_multiapis_nested.csv#1",
            "gold: 1 positional argument(s) for count_cvecpe_items, whose parameters are unknown",
        ),
        (
            "VirusTotal.jsonl:2",
            "gold: 2 positional argument(s) for vt_get_ip_address_report, whose parameters are unknown",
        ),
    ]
    assert all(conv.tools == [] for conv in items if isinstance(conv, Conversation))


def test_camel_folders_split_vt_multiapi_and_a_task_column_names_rows(release, tmp_path):
    vt = pq.read_table(release / "vt_multiapi" / "data" / "train-00000-of-00001.parquet").to_pylist()
    folder = tmp_path / "camel"
    write_rows(folder / "VirusTotal-NestedCalls" / "data" / "train.parquet", vt)
    write_rows(folder / "VirusTotal-ParallelCalls" / "data" / "train.parquet", vt)
    write_rows(folder / "all_tasks.jsonl", [{"task": "OTX", "Input": "q", "Output": "f(a=1)"}])
    items = list(nexus.read([folder]))
    assert sorted(item.id for item in items) == ["OTX-0", "VT-nested-0", "VT-nested-1", "VT-parallel-0"]


def test_bad_rows_and_unplaced_files_are_counted_rejects(release):
    otx = release / "OTXAPIBenchmark" / "data"
    write_rows(
        otx / "train-00001-of-00001.jsonl",  # a second shard: numbered on after the first
        [
            {"Input": "no gold"},
            {"Input": "q", "Output": "not python("},
            {"Input": "q", "Output": "getIndicatorForIPv4(apiKey=key)"},
            {"Input": "", "Output": "f()"},
            {"task": "Weather", "Input": "q", "Output": "f()"},
            ["not", "an", "object"],
            {"Input": "q2", "Output": "getIndicatorForDomain(apiKey='k', domain='d.example', section='geo')"},
        ],
    )
    write_rows(release / "misc" / "notes.jsonl", [{"Input": "q", "Output": "f()"}])
    v1 = {"dataset": "cve_cpe", "prompt": "q", "python_function_name": "searchCVE", "python_args_dict": "{}"}
    write_rows(release / "NexusRaven_API_evaluation" / "standardized_queries" / "train.jsonl", [v1])
    write_rows(release / "zz_copy" / "OTX.jsonl", [{"Input": "again", "Output": "getIndicatorForIPv4(apiKey='k')"}])
    write_rows(release / "Function_Call_Definitions" / "OTX" / "bad.jsonl", [{"function_calls": "f(:"}, {"x": 1}])
    items = list(nexus.read([release]))
    reasons = [(r.location.split("nexusraven_v2/", 1)[1], r.reason) for r in items if isinstance(r, Rejected)]
    shard = "OTXAPIBenchmark/data/train-00001-of-00001.jsonl"
    assert reasons == [  # files in path order
        (
            "NexusRaven_API_evaluation/standardized_queries/train.jsonl:1",
            "row: a NexusRaven V1 standardized query; read the V1 *_queries.json files instead",
        ),
        (f"{shard}:1", "Output: expected the gold call as a non-empty string"),
        (f"{shard}:2", "Output: not valid Python: '(' was never closed at line 1 column 11"),
        (f"{shard}:3", "Output: getIndicatorForIPv4: argument 'apiKey': a variable key is not a literal"),
        (f"{shard}:4", "Input: expected a non-empty query ('Input' or 'generated_question')"),
        (f"{shard}:5", "task: 'Weather' is not a NexusRaven-V2 task; valid: " + ", ".join(TABLE_7)),
        (f"{shard}:6", "row: expected an object, got list"),
        ("misc/notes.jsonl:1", "task: no task: neither the path nor a task/dataset column names one"),
        ("zz_copy/OTX.jsonl:1", f"task: OTX was already read from {otx}"),
        ("Function_Call_Definitions/OTX/bad.jsonl:1", "function_calls: not valid Python: invalid syntax"),
        (
            "Function_Call_Definitions/OTX/bad.jsonl:2",
            "definition: expected a string 'function_calls' and a string 'descriptions'",
        ),
    ]
    assert calls_of(by_id(items)["OTX-2"]) == [
        ("getIndicatorForDomain", {"apiKey": "k", "domain": "d.example", "section": "geo"})
    ]


def test_unreadable_release_files_and_empty_folders_are_source_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="no NexusRaven query file"):
        list(nexus.read([tmp_path / "empty"]))
    broken = tmp_path / "r" / "OTXAPIBenchmark" / "data" / "train.parquet"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"PAR1 not really")
    with pytest.raises(SourceError, match="train.parquet: not a readable parquet file"):
        list(nexus.read([tmp_path / "r"]))
    with pytest.raises(SourceError, match="a folder is read alone"):
        list(nexus.read([tmp_path / "r", tmp_path / "empty"]))


# ---------------------------------------------------------------- V1 files stay readable


def test_the_shipped_v1_folder_reads_as_its_files():
    folder = REPO / "train" / "assets" / "toolgt_tiny" / "nexus"
    files = [
        folder / "cve_cpe_queries.json",
        folder / "virustotal_queries.json",
        folder / "_derived_function_definitions.json",
    ]
    assert [c.to_dict() for c in nexus.read([folder])] == [c.to_dict() for c in nexus.read(files)]


def test_a_folder_with_v1_files_and_a_release_reads_both(release):
    v1 = REPO / "train" / "assets" / "toolgt_tiny" / "nexus"
    for path in v1.iterdir():
        (release / path.name).write_bytes(path.read_bytes())
    tasks = {item.meta["dataset"] for item in nexus.read([release])}
    assert tasks == {"cve_cpe", "virustotal", *TABLE_7}


def test_nested_programs_flatten_in_evaluation_order():
    text = "f(a=g(x=1), b=[h(), 2], c={'k': i()})\nr = mod.j(k(1))"
    assert [(c.name, c.args, c.kwargs) for c in flatten_calls(text)] == [
        ("g", [], {"x": 1}),
        ("h", [], {}),
        ("i", [], {}),
        ("f", [], {"a": None, "b": [None, 2], "c": {"k": None}}),
        ("k", [1], {}),
        ("mod.j", [None], {}),
    ]
    assert nexus_release.normal("VT_Multi (Nested)") == "vtmultinested"


def test_toolgt_decontaminates_against_every_task_of_a_release_folder(release):
    from train.papers.toolgt.checks import EvalIndex

    index = EvalIndex(f"nexus:{release}")  # a folder: V2's eight tasks, not only V1's *_queries.json
    assert (index.items, index.rejected) == (15, 0)
    conv = by_id(list(nexus.read([release])))["VT-parallel-0"]
    query = next(m.content for m in conv.messages if m.role == "user")
    gold = [call for m in conv.messages if m.role == "assistant" for call in m.tool_calls or []]
    assert index.match(query, []) == "query" and index.match("another question", gold) == "calls"
