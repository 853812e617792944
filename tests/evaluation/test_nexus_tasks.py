"""Scoring the NexusRaven-V2 release's eight tasks: nested calls as the stubs record them, order counting, ToolGT's
W / U over all eight."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from train.evaluation.nexus import TOOLGT_NEXUS_TASKS, score_nexus, toolgt_nexus, toolgt_nexus_averages
from train.schema import Conversation
from train.sources import nexus

DIFFER = "calls differ from the reference"


@pytest.fixture
def references(fixtures: Path, tmp_path: Path) -> dict[str, dict]:
    """The release fixture (tests/fixtures/sources/nexus_release), every file as JSON Lines (same names, so the
    same tasks), read by the nexus reader."""
    for relative, rows in json.loads((fixtures / "sources" / "nexus_release" / "release.json").read_text()).items():
        path = (tmp_path / "release" / relative).with_suffix(".jsonl")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    items = list(nexus.read([tmp_path / "release"]))
    assert all(isinstance(item, Conversation) for item in items)
    return {item.id: item.to_dict() for item in items}


def verdict(reference: dict, call: str) -> tuple[bool, str | None]:
    item = score_nexus([{"id": reference["id"], "call": call}], [reference])["per_item"][0]
    return item["correct"], item["error"]


def test_every_gold_text_scores_itself_and_toolgt_gets_all_eight(references):
    predictions = [{"id": rid, "call": ref["meta"]["reference"]} for rid, ref in references.items()]
    report = score_nexus(predictions, list(references.values()))
    assert report["reference_errors"] == []
    toolgt = report["toolgt"]
    assert list(toolgt["tasks"]) == list(TOOLGT_NEXUS_TASKS)
    assert (toolgt["missing"], toolgt["not_toolgt"]) == ([], [])
    assert (toolgt["weighted_average"], toolgt["unweighted_average"]) == (1.0, 1.0)
    assert toolgt["size_differs"]["VT-parallel"] == [1, 21]
    assert toolgt["note"].startswith("all 8 of ToolGT's Nexus tasks; sizes differ from Table 7 (NVDLibrary 2 rows")


@pytest.mark.parametrize(
    ("rid", "call", "expected"),
    [
        # the nested call as the model may write it: keyword or positional, any argument order
        ("Places-0", "get_recommendations(lat_long=get_latitude_longitude('Austin'), topics=['coffee'])", (True, None)),
        # the inner call left out: its value is not None, and its record is missing
        ("Places-0", "get_recommendations(topics=['coffee'], lat_long=[30.27, -97.74])", (False, DIFFER)),
        # a truthy default (radius_miles=50) is recorded whether written or not; another value differs
        ("Places-1", "find_places_near_location(['gym'], 'Austin', 50)", (True, None)),
        ("Places-1", "find_places_near_location(['gym'], 'Austin', radius_miles=10)", (False, DIFFER)),
        # CVECPE's searchCPE has delay=6: recorded though the gold leaves it out
        ("CVECPE-1", "count_cvecpe_items(cvecpeList=searchCPE(keywordSearch='nginx', delay=6))", (True, None)),
        # parallel calls: the order counts in the V2 tasks (the stubs append to one list)
        (
            "VT-parallel-0",
            "vt_get_domain_report('a.example', 'k3'); vt_get_domain_report('b.example', 'k3')",
            (True, None),
        ),
        (
            "VT-parallel-0",
            "[vt_get_domain_report('b.example', 'k3'), vt_get_domain_report('a.example', 'k3')]",
            (False, DIFFER),
        ),
        # NVDLibrary: the module prefix and the assignment are dropped, as the notebook strips them
        ("NVDLibrary-0", "r = nvdlib.searchCVE(limit=5, keywordSearch='log4j')", (True, None)),
        ("Climate-1", "get_timezone(get_latitude_longitude(get_current_location()))", (True, None)),
        ("Climate-1", "get_timezone(lat_long=get_latitude_longitude(location='Paris'))", (False, DIFFER)),
        ("OTX-0", "getIndicatorForIPv4(apiKey='k2', ip='1.2.3.4', section='general', extra=1)",
         (False, "getIndicatorForIPv4() got an unexpected keyword argument 'extra'")),
    ],
)  # fmt: skip
def test_v2_calls_are_judged_as_the_stubs_record_them(references, rid, call, expected):
    assert verdict(references[rid], call) == expected


def test_predicted_tool_calls_in_the_wrong_order_are_wrong_only_in_v2_tasks(references):
    reference = references["VT-parallel-0"]
    calls = reference["messages"][-1]["tool_calls"]
    prediction = {"id": reference["id"], "tool_calls": list(reversed(calls))}
    assert score_nexus([prediction], [reference])["per_item"][0]["correct"] is False
    v1 = {**reference, "meta": {**reference["meta"], "dataset": "virustotal"}}  # a V1 task: order free
    assert score_nexus([prediction], [v1])["per_item"][0]["correct"] is True


def test_the_release_task_stands_for_toolgt_not_the_v1_file():
    tasks = {
        "cve_cpe": {"accuracy": 0.5, "correct": 1, "total": 2},
        "NVDLibrary": {"accuracy": 1.0, "correct": 78, "total": 78},
        "virustotal": {"accuracy": 0.25, "correct": 1, "total": 4},
        "emailrep": {"accuracy": 1.0, "correct": 1, "total": 1},
    }
    toolgt = toolgt_nexus(tasks)
    assert toolgt["tasks"] == {
        "NVDLibrary": {"accuracy": 1.0, "correct": 78, "total": 78},
        "VirusTotal": {"accuracy": 0.25, "correct": 1, "total": 4},
    }
    assert toolgt["not_toolgt"] == ["cve_cpe", "emailrep"]
    assert toolgt["size_differs"] == {"VirusTotal": [4, 151]}
    assert toolgt["note"].startswith("only NVDLibrary (cve_cpe) and VirusTotal (virustotal)")


def test_the_note_says_whose_w_and_u_they_are():
    full = {task: {"accuracy": 0.5, "correct": 0, "total": size} for task, size in TOOLGT_NEXUS_TASKS.items()}
    paper = "all 8 of ToolGT's Nexus tasks at Table 7's sizes: W / U as the paper computes them"
    assert toolgt_nexus(full)["note"] == paper
    assert toolgt_nexus(full)["weighted_average"] == toolgt_nexus_averages(dict.fromkeys(TOOLGT_NEXUS_TASKS, 0.5))[0]
    climate_47 = {**full, "Climate": {"accuracy": 0.5, "correct": 0, "total": 47}}  # the V2 notebooks' size
    assert toolgt_nexus(climate_47)["note"] == (
        "all 8 of ToolGT's Nexus tasks; sizes differ from Table 7 (Climate 47 rows, Table 7 197); "
        "W weights by Table 7's sizes"
    )
    three = {task: full[task] for task in ("NVDLibrary", "Places", "OTX")}
    assert toolgt_nexus(three)["note"].startswith("3 of ToolGT's 8 Nexus tasks scored (missing: VirusTotal, Climate,")
    assert toolgt_nexus({})["note"].startswith("no ToolGT Nexus task scored")
