"""ToolBench (SambaNova tasks) scorer: the AST-walk mock API, curl normalisation, rows and aggregates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from train.base.records import Rejected
from train.evaluation.pyprogram import ProgramError, run_program
from train.evaluation.toolbench import (
    normalise_string,
    precision_recall_f1,
    request_fields,
    score_case,
    score_toolbench,
)
from train.sources.toolbench import read

HOME_GOLD = (
    'API.set_location("Birmingham")\nAPI.set_buy_or_rent("buy")\nAPI.set_num_beds(6)\nAPI.set_min_price(961000)\n'
    "API.search()"
)
HOME_META = {"task": "home", "completion": [HOME_GOLD], "gold_tool": "home_search", "gold_tool_label": "Home search"}


def load_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def references(shared_data) -> list[dict]:
    items = list(read([shared_data / "toolbench_sambanova_toolverifier"]))
    assert not [item for item in items if isinstance(item, Rejected)]
    return [item.to_dict() for item in items]


# ---------------------------------------------------------------- real data


def test_every_gold_scores_itself_perfectly(references):
    predictions = [
        {"id": r["id"], "program": r["meta"]["completion"][0], "tool": r["meta"]["gold_tool"]} for r in references
    ]
    report = score_toolbench(predictions, references)
    assert {task: (agg["total"], agg["success"], agg["tool_correct"]) for task, agg in report["tasks"].items()} == {
        "booking": (120, 120, 120), "cat": (100, 100, 100), "home": (100, 100, 100), "weather": (100, 100, 100),
    }  # fmt: skip
    assert report["overall"]["success_rate"] == 1.0 and report["overall"]["f1"] == 1.0
    assert report["reference_errors"] == [] and report["missing_prediction_ids"] == []


def test_csv_api_programs_with_none_defaults_equal_the_jsonl_golds(references):
    # test.csv lists every setter, 'None' for the ones not mentioned; they must leave the field unset.
    predictions = [
        {"id": r["id"], "program": r["meta"]["api_program"], "tool": r["meta"]["gold_tool_label"]} for r in references
    ]
    report = score_toolbench(predictions, references)
    assert report["overall"]["success"] == 420 and report["overall"]["tool_correct"] == 420


def test_neighbouring_golds_rarely_match(references):
    # Each case answered with the next case's gold (same task): only identical golds may succeed.
    predictions = []
    for task in ("booking", "cat", "home", "weather"):
        rows = [r for r in references if r["meta"]["task"] == task]
        for index, row in enumerate(rows):
            other = rows[(index + 1) % len(rows)]
            predictions.append(
                {"id": row["id"], "program": other["meta"]["completion"][0], "tool": other["meta"]["gold_tool"]}
            )
    report = score_toolbench(predictions, references)
    # cat: the 12 identical "Get favorite cat images" golds give 11 neighbouring pairs; weather: one repeated gold.
    assert {task: agg["success"] for task, agg in report["tasks"].items()} == {
        "booking": 0,
        "cat": 11,
        "home": 0,
        "weather": 1,
    }
    assert {task: agg["tool_correct"] for task, agg in report["tasks"].items()} == {
        "booking": 120,
        "cat": 94,
        "home": 100,
        "weather": 91,
    }


# ---------------------------------------------------------------- Home / Booking mock API


def test_home_fields_follow_sambanova_rules():
    program = (
        'API.set_location("Austin")\nAPI.set_buy_or_rent("rent")\nAPI.select_home_type(["Condo", "House"])\n'
        "API.set_num_baths(1.5)\nAPI.search()"
    )
    assert run_program(program, "home") == {
        "location": "Austin", "buy_or_rent": "rent", "home_type": "condo,house", "num_baths": 1.5,
        "min_price": 0, "min_square_feet": 0,
    }  # fmt: skip
    same_types = program.replace('["Condo", "House"]', '["house", "CONDO"]')
    assert run_program(same_types, "home")["home_type"] == "condo,house"


def test_booking_fields_dates_locations_and_defaults():
    program = (
        'API.select_booking_type("both")\nAPI.select_transportation("train")\n'
        'API.set_origin(Loc("Boston"))\nAPI.set_destination(Loc(location="Albany"))\n'
        'API.set_hotel_location(Loc("Albany"))\nd = Date(3, 9, 2023)\nAPI.set_checkin_date(d)\n'
        "API.set_checkout_date(Date(month=3, day=\"10\", year=2023))\nAPI.set_num_children('None')\nAPI.search()"
    )
    assert run_program(program, "booking") == {
        "booking_type": "both", "means_of_transportation": "train", "location_from": "Boston", "location_to": "Albany",
        "location": "Albany", "checkin_date": "3-9-2023", "checkout_date": "3-10-2023",
        "min_price_ticket": 0, "min_price_room": 0, "departure_date": "3-9-2023", "return_date": "3-10-2023",
        "num_rooms": 1,
    }  # fmt: skip


def test_hand_computed_precision_recall_f1_on_perturbations():
    # Gold fields: location, buy_or_rent, num_beds, min_price, min_square_feet (added by search) = 5.
    wrong_beds = HOME_GOLD.replace("set_num_beds(6)", "set_num_beds(5)")
    assert _scores(wrong_beds) == (False, 0.8, 0.8, pytest.approx(0.8))
    extra_field = HOME_GOLD.replace("API.search()", "API.set_num_baths(2)\nAPI.search()")
    assert _scores(extra_field) == (False, 5 / 6, 1.0, pytest.approx(10 / 11))
    no_search = HOME_GOLD.replace("\nAPI.search()", "")  # no defaults: 4 fields, all right
    assert _scores(no_search) == (False, 1.0, 0.8, pytest.approx(8 / 9))
    reordered_with_none = (
        'API.set_location("Birmingham")\nAPI.set_buy_or_rent("buy")\nAPI.set_min_price(961000)\n'
        "API.set_max_price(None)\nAPI.set_num_beds(6)\nAPI.search()"
    )
    assert _scores(reordered_with_none) == (True, 1.0, 1.0, 1.0)
    assert precision_recall_f1({}, {"a": 1}) == (0.0, 0.0, 0.0)
    assert precision_recall_f1({"a": 2}, {"a": 1}) == (0.0, 0.0, 0.0)


def _scores(program: str) -> tuple:
    verdict = score_case(program, "home_search", HOME_META)
    return verdict["success"], verdict["precision"], verdict["recall"], verdict["f1"]


def test_best_matching_gold_is_kept():
    meta = {**HOME_META, "completion": [HOME_GOLD.replace("6", "7"), HOME_GOLD]}
    verdict = score_case(HOME_GOLD, None, meta)
    assert (verdict["success"], verdict["closest_gold"]) == (True, 1)


@pytest.mark.parametrize(
    ("program", "reason"),
    [
        ("API.set_location(", "not valid Python: '(' was never closed at line 1"),
        ("import os\nAPI.search()", "line 1: unsupported statement import os"),
        ("API.set_location(city)", "line 1: name 'city' is not defined"),
        ("API.set_location(open('f').read())", "line 1: call open('f').read() is not a value (only API calls)"),
        ('API.set_location("a" + "b")', "line 1: an expression 'a' + 'b' is not a literal"),
        ('exec("API.search()")', "line 1: exec('API.search()') is not a call on API"),
        ("API.__class__.search()", "line 1: API.__class__.search() is not a call on API"),
        ('API.delete_everything("x")', "line 1: API has no method 'delete_everything'"),
        ('API.set_location("x", "y")', "line 1: API.set_location takes exactly one argument (value)"),
        ('API.set_location(place="x")', "line 1: API.set_location takes exactly one argument (value)"),
        ('API.set_location(*["x"])', "line 1: API.set_location: * and ** arguments are not allowed"),
        ('API.set_location(f"{1}")', "line 1: JoinedStr f'{1}' is not a literal"),
        ('API.set_buy_or_rent("buy")', "line 1: set_buy_or_rent must be called right after set_location"),
        ('API.set_location("x")\nAPI.set_num_beds(2)', "line 2: set_num_beds called before set_buy_or_rent"),
        (
            'API.set_location("x")\nAPI.set_buy_or_rent("lease")',
            "line 2: set_buy_or_rent: 'lease' is not one of 'buy', 'rent'",
        ),
        (
            'API.set_location("x")\nAPI.set_buy_or_rent("rent")\nAPI.select_home_type(["Land"])',
            "line 3: invalid 'rent' home type(s) ['land']; choices: house, townhouse, condo, apartment",
        ),
        (
            'API.set_location("x")\nAPI.set_buy_or_rent("buy")\nAPI.select_home_type("House")',
            "line 3: select_home_type expects a list of strings",
        ),
        ("for i in range(3):\n    API.search()", "line 1: unsupported statement for i in range(3):\n    API.search()"),
        ("x, y = 1, 2", "line 1: only 'name = value' assignments are allowed"),
        ("API.search(1)", "line 1: API.search() takes no arguments"),
        (None, "expected program text, got NoneType"),
        (42, "expected program text, got int"),
    ],
)
def test_malformed_home_programs_are_invalid_with_a_reason(program, reason):
    with pytest.raises(ProgramError) as caught:
        run_program(program, "home")
    assert str(caught.value) == reason
    verdict = score_case(program, None, HOME_META)
    assert (verdict["success"], verdict["f1"], verdict["error"]) == (False, 0.0, reason)


@pytest.mark.parametrize(
    ("program", "reason"),
    [
        (
            'API.select_booking_type("trip tickets")\nAPI.set_origin("Boston")',
            "line 2: set_origin expects a Loc(...) value, got str 'Boston'",
        ),
        (
            'API.select_booking_type("hotels")\nAPI.set_checkin_date("3-9-2023")',
            "line 2: set_checkin_date expects a Date(month, day, year) value, got str '3-9-2023'",
        ),
        (
            'API.select_booking_type("hotels")\nAPI.set_checkin_date(Date(3, 9))',
            "line 2: Date() takes exactly 3 argument(s): month, day, year",
        ),
        (
            'API.select_booking_type("hotels")\nAPI.set_hotel_location(Loc(where="x"))',
            "line 2: Loc() got an unexpected or repeated argument 'where'",
        ),
        (
            'API.select_transportation("bus")\nAPI.select_booking_type("hotels")',
            "line 2: select_booking_type must be called before any other criterion",
        ),
        (
            'API.select_booking_type("hotels")\nAPI.search()',
            "line 2: search() for 'hotels' without location, checkin_date, checkout_date",
        ),
        ("API.search()", "line 1: search() before select_booking_type"),
        (
            'API.select_booking_type("cruise")',
            "line 1: select_booking_type: 'cruise' is not one of 'hotels', 'trip tickets', 'both'",
        ),
    ],
)
def test_malformed_booking_programs_are_invalid_with_a_reason(program, reason):
    with pytest.raises(ProgramError) as caught:
        run_program(program, "booking")
    assert str(caught.value) == reason


def test_loc_and_date_are_not_home_values():
    with pytest.raises(ProgramError, match=r"call Loc\('x'\) is not a value \(only API calls\)"):
        run_program('API.set_location(Loc("x"))', "home")


def test_clear_empties_the_fields():
    assert run_program('API.set_location("x")\nAPI.clear()\nAPI.set_location("y")', "home") == {"location": "y"}


# ---------------------------------------------------------------- curl requests


WEATHER = "curl -X GET 'https://api.openweathermap.org/data/2.5/forecast?q=kansas+city&appid={API_KEY}&units=metric'"


def test_weather_request_fields_add_sambanova_defaults():
    assert request_fields(WEATHER) == {
        "method": "GET", "url": "https://api.openweathermap.org/data/2.5/forecast",
        "query.appid": "{API_KEY}", "query.lang": "en", "query.mode": "json", "query.q": "kansas city",
        "query.units": "metric",
    }  # fmt: skip


@pytest.mark.parametrize(
    "variant",
    [
        "curl -X GET 'https://api.openweathermap.org/data/2.5/forecast?units=metric&appid={API_KEY}&q=Kansas%20City'",
        'curl "HTTPS://API.openweathermap.org/data/2.5/forecast/?q=kansas+city&units=metric&appid={API_KEY}&mode=json&lang=en"',
        "Here you go:\n  curl -s -H 'Accept: application/json' --request get 'https://api.openweathermap.org/data/2.5/forecast?q=kansas+city&appid={API_KEY}&units=metric'\nDone.",
    ],
)
def test_equivalent_weather_requests_match(variant):
    assert score_case(variant, None, {"task": "weather", "completion": [WEATHER]})["success"] is True


@pytest.mark.parametrize(
    ("variant", "f1"),
    [
        (
            "curl -X GET 'https://api.openweathermap.org/data/2.5/forecast?q=kansas+city&appid={API_KEY}&units=imperial'",
            6 / 7,
        ),
        (
            "curl -X GET 'https://api.openweathermap.org/data/2.5/forecast?q=kansas+city&appid={API_KEY}&units=metric&cnt=3'",
            14 / 15,
        ),
        (
            "curl -X POST 'https://api.openweathermap.org/data/2.5/forecast?q=kansas+city&appid={API_KEY}&units=metric'",
            6 / 7,
        ),
    ],
)
def test_different_weather_requests_fail_with_field_f1(variant, f1):
    verdict = score_case(variant, None, {"task": "weather", "completion": [WEATHER]})
    assert verdict["success"] is False and verdict["f1"] == pytest.approx(f1)


def test_weather_numbers_and_air_pollution_without_defaults():
    gold = "curl -X GET 'https://api.openweathermap.org/data/2.5/air_pollution?lat=40.1&lon=35.0&appid={API_KEY}'"
    assert request_fields(gold) == {
        "method": "GET", "url": "https://api.openweathermap.org/data/2.5/air_pollution",
        "query.appid": "{API_KEY}",
        "query.lat": request_fields(gold.replace("40.1", "40.10"))["query.lat"],
        "query.lon": request_fields(gold.replace("35.0", "35"))["query.lon"],
    }  # fmt: skip
    zip_gold = "curl 'https://api.openweathermap.org/data/2.5/weather?zip=02134&appid={API_KEY}'"
    assert (
        score_case(zip_gold.replace("02134", "2134"), None, {"task": "weather", "completion": [zip_gold]})["success"]
        is False
    )


def test_cat_bodies_and_lists():
    gold = 'curl -X POST \'https://api.thecatapi.com/v1/votes\' --data \'{"image_id":"b93", "value":-1}\''
    assert request_fields(gold) == {
        "method": "POST",
        "url": "https://api.thecatapi.com/v1/votes",
        "body.image_id": "b93",
        "body.value": -1,
    }
    meta = {"task": "cat", "completion": [gold]}
    assert (
        score_case('curl https://api.thecatapi.com/v1/votes -d \'{"value": -1, "image_id": "b93"}\'', None, meta)[
            "success"
        ]
        is True
    )
    assert score_case(gold.replace("-1", "1"), None, meta)["f1"] == pytest.approx(3 / 4)
    search = "curl -X GET 'https://api.thecatapi.com/v1/images/search?&mime_types=jpg,png&breeds=acur,abob'"
    assert (
        score_case(
            search.replace("jpg,png", "png, jpg").replace("acur,abob", "abob,acur"),
            None,
            {"task": "cat", "completion": [search]},
        )["success"]
        is True
    )


def test_bare_url_is_wrapped_as_toolverifier_did():
    gold = "curl -X DELETE 'https://api.thecatapi.com/v1/favourites/dv0'"
    assert request_fields(
        "https://api.thecatapi.com/v1/favourites/dv0", "Delete image from favorites"
    ) == request_fields(gold)
    assert request_fields("https://api.thecatapi.com/v1/favourites/dv0")["method"] == "GET"


@pytest.mark.parametrize(
    ("program", "reason"),
    [
        ("I cannot help with that.", "no line starts with 'curl'"),
        (
            "curl -X GET 'https://api.thecatapi.com/v1/favourites",
            "curl command does not split into words: No closing quotation",
        ),
        ("curl -o out.json 'https://api.thecatapi.com/v1/favourites'", "unsupported curl option '-o'"),
        ("curl -X", "curl option -X has no value"),
        ("curl 'https://a.com/x' 'https://b.com/y'", "expected one URL in the curl command, got 2"),
        ("curl -X GET 'api.thecatapi.com/v1/favourites'", "'api.thecatapi.com/v1/favourites' is not an absolute URL"),
        ("curl -X GET", "expected one URL in the curl command, got 0"),
        ({"url": "x"}, "expected the answer as text, got dict"),
    ],
)
def test_malformed_curl_answers_are_invalid_with_a_reason(program, reason):
    verdict = score_case(
        program, None, {"task": "cat", "completion": ["curl -X GET 'https://api.thecatapi.com/v1/favourites'"]}
    )
    assert (verdict["success"], verdict["error"]) == (False, reason)


def test_compare_string_only_uses_sambanova_whitespace_rule():
    meta = {
        "task": "cat",
        "completion": ["curl -X DELETE 'https://api.thecatapi.com/v1/favourites/dv0'"],
        "compare_string_only": True,
    }
    assert (
        score_case("curl   -X\tDELETE 'https://api.thecatapi.com/v1/favourites/dv0'  ", None, meta)["success"] is True
    )
    # A string comparison: an equivalent request spelled differently does not count.
    assert score_case('curl -X DELETE "https://api.thecatapi.com/v1/favourites/dv0"', None, meta)["error"] == (
        "string comparison between the answer and the gold failed"
    )
    assert normalise_string("a  b\n\n\nc \n") == "a b\nc"


# ---------------------------------------------------------------- rows and aggregates


def test_fixture_mix_hand_computed(fixtures):
    folder = fixtures / "evaluation" / "toolbench"
    report = score_toolbench(load_jsonl(folder / "predictions.jsonl"), load_jsonl(folder / "references.jsonl"))
    items = {item["id"]: item for item in report["per_item"]}
    assert items["home/test-1"] == {
        "id": "home/test-1", "task": "home", "success": False,
        "precision": 0.8, "recall": 0.8, "f1": pytest.approx(0.8),
        "closest_gold": 0, "error": None, "tool_correct": True,
    }  # fmt: skip
    # booking: 10 predicted fields (num_children extra), 9 gold, 8 shared (return date differs).
    assert (items["booking/test-0"]["precision"], items["booking/test-0"]["recall"]) == (0.8, 8 / 9)
    assert items["booking/test-0"]["f1"] == pytest.approx(16 / 19) and items["booking/test-0"]["tool_correct"] is False
    assert (items["weather/test-0"]["success"], items["weather/test-0"]["tool_correct"]) == (True, True)
    assert (items["cat/test-0"]["success"], items["cat/test-0"]["tool_correct"]) == (True, False)  # no "tool"
    assert items["cat/test-8"]["error"] == "no prediction" and items["cat/test-8"]["tool_correct"] is False
    assert {task: (agg["total"], agg["success"], agg["tool_correct"]) for task, agg in report["tasks"].items()} == {
        "home": (1, 0, 1), "booking": (1, 0, 0), "weather": (1, 1, 1), "cat": (2, 1, 0),
    }  # fmt: skip
    overall = report["overall"]
    assert (overall["success_rate"], overall["unweighted_success_rate"]) == (0.4, 0.375)
    assert (overall["tool_accuracy"], overall["unweighted_tool_accuracy"]) == (0.4, 0.5)
    assert report["missing_prediction_ids"] == ["cat/test-8"] and report["unknown_prediction_ids"] == ["cat/test-99"]


def test_average_is_pooled_over_cases_like_toolverifier_table_1():
    # ToolVerifier Table 1: 90 / 84.17 / 88 / 97 on 100 / 120 / 100 / 100 cases -> Average 89.52.
    curl = "curl 'https://api.thecatapi.com/v1/favourites'"
    booking = (
        'API.select_booking_type("hotels")\nAPI.set_hotel_location(Loc("x"))\n'
        "API.set_checkin_date(Date(1, 2, 2023))\nAPI.set_checkout_date(Date(1, 3, 2023))\nAPI.search()"
    )
    references, predictions = [], []
    for task, gold, total, right in (
        ("weather", curl, 100, 90),
        ("booking", booking, 120, 101),
        ("home", HOME_GOLD, 100, 88),
        ("cat", curl, 100, 97),
    ):
        for index in range(total):
            references.append({"id": f"{task}-{index}", "meta": {"task": task, "completion": [gold]}})
            predictions.append({"id": f"{task}-{index}", "program": gold if index < right else ""})
    report = score_toolbench(predictions, references)
    assert [round(100 * agg["success_rate"], 2) for agg in report["tasks"].values()] == [90, 84.17, 88, 97]
    assert round(100 * report["overall"]["success_rate"], 2) == 89.52
    assert round(100 * report["overall"]["unweighted_success_rate"], 2) == 89.79


def test_tool_accuracy_is_none_when_no_prediction_names_a_tool():
    references = [{"id": "home/test-1", "meta": HOME_META}]
    report = score_toolbench([{"id": "home/test-1", "program": HOME_GOLD}], references)
    assert report["overall"]["tool_accuracy"] is None and report["overall"]["success"] == 1


def test_bad_rows_are_listed_not_raised():
    references = [
        {"id": "home/test-1", "meta": HOME_META},
        {"id": "x/test-0", "meta": {"task": "garden", "completion": ["x"]}},
        {"id": "home/test-2", "meta": {"task": "home", "completion": []}},
        {"id": "home/test-3", "meta": {"task": "home", "completion": ["API.search("]}},
        {"id": "home/test-1", "meta": HOME_META},
        "not a row",
    ]
    predictions = [
        {"id": "home/test-1", "program": HOME_GOLD},
        {"id": "home/test-1", "program": "x"},
        {"id": "home/test-3", "program": "API.search()"},
        [],
    ]
    report = score_toolbench(predictions, references)
    assert [(item["id"], item["success"]) for item in report["per_item"]] == [("home/test-1", True)]
    assert report["reference_errors"] == [
        {"id": "x/test-0", "reason": "meta.task 'garden' is not one of home, booking, weather, cat"},
        {"id": "home/test-2", "reason": "meta.completion is not a non-empty list of gold programs"},
        {"id": "home/test-3", "reason": "gold 0: not valid Python: '(' was never closed at line 1"},
    ]
    assert report["duplicate_prediction_ids"] == ["home/test-1"] and report["duplicate_reference_ids"] == [
        "home/test-1"
    ]
    assert [row["file"] for row in report["rows_without_id"]] == ["predictions", "references"]


# ---------------------------------------------------------------- empty predictions, repeated setters


def test_empty_predictions_fail_every_case(fixtures):
    references = load_jsonl(fixtures / "evaluation" / "toolbench" / "references.jsonl")
    ids = [row["id"] for row in references]
    nothing = score_toolbench([], references)  # no prediction file rows at all
    assert [(i["id"], i["success"], i["f1"], i["tool_correct"], i["error"]) for i in nothing["per_item"]] == [
        (i, False, 0.0, None, "no prediction") for i in ids
    ]
    assert nothing["missing_prediction_ids"] == ids
    assert {k: nothing["overall"][k] for k in ("total", "success", "success_rate", "tool_accuracy", "f1")} == {
        "total": 5,
        "success": 0,
        "success_rate": 0.0,
        "tool_accuracy": None,
        "f1": 0.0,
    }
    assert nothing["overall"]["unweighted_success_rate"] == 0.0
    blank = score_toolbench([{"id": i, "program": ""} for i in ids], references)  # every answer empty text
    assert [(i["success"], i["f1"], i["error"]) for i in blank["per_item"]] == [
        (False, 0.0, None),  # home: an empty program sets no field (F1 0: the prediction has no field)
        (False, 0.0, None),  # booking: the same
        (False, 0.0, "no line starts with 'curl'"),
        (False, 0.0, "string comparison between the answer and the gold failed"),  # cat/test-0, string only
        (False, 0.0, "no line starts with 'curl'"),
    ]
    assert blank["missing_prediction_ids"] == [] and blank["overall"]["success_rate"] == 0.0
    empty = score_toolbench([], [])
    assert (empty["overall"]["total"], empty["overall"]["success_rate"], empty["tasks"]) == (0, None, {})


@pytest.mark.parametrize(
    ("setters", "expected"),
    [
        ("API.set_num_beds(6)\nAPI.set_num_beds(6)", (True, 1.0, 1.0, 1.0)),  # the same field twice: one field
        ("API.set_num_beds(7)\nAPI.set_num_beds(6)", (True, 1.0, 1.0, 1.0)),  # the last call wins, as in the mock
        ("API.set_num_beds(6)\nAPI.set_num_beds(7)", (False, 0.8, 0.8, pytest.approx(0.8))),  # 4 of 5 fields
        ("API.set_num_beds(6)\nAPI.set_num_beds('None')", (True, 1.0, 1.0, 1.0)),  # 'None' leaves the field alone
    ],
)
def test_repeated_setter_calls_keep_the_last_value(setters, expected):
    # Gold fields: location, buy_or_rent, num_beds, min_price, min_square_feet (added by search) = 5.
    assert _scores(HOME_GOLD.replace("API.set_num_beds(6)", setters)) == expected


def test_repeated_search_and_a_late_set_location():
    assert _scores(HOME_GOLD + "\nAPI.search()") == (True, 1.0, 1.0, 1.0)  # defaults added again: the same fields
    late = HOME_GOLD.replace('API.set_buy_or_rent("buy")', 'API.set_buy_or_rent("buy")\nAPI.set_location("Birmingham")')
    verdict = score_case(late, None, HOME_META)
    assert (verdict["success"], verdict["f1"]) == (False, 0.0)
    assert verdict["error"] == "line 3: set_location must be called before any other criterion"
