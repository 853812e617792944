"""ToolVerifier offers the 17 ToolBench tools under the names its paper shows (issue 27 item 6) and scores the chosen
name as the API name the reader's gold holds."""

from __future__ import annotations

from pathlib import Path

import pytest

import train
from train.papers.toolverifier import teacher as tv
from train.papers.toolverifier.bench import scored_prediction, verify_toolbench
from train.papers.toolverifier.labels import labelled_tools, paper_label
from train.papers.toolverifier.verify import VerifySwitches
from train.schema import Tool
from train.sources.toolbench import load_tools, read
from train.teacher import OfflineBackend, Teacher

TOOLBENCH = Path(train.__file__).parent / "assets" / "toolverifier_tiny" / "toolbench"

# The 17 names ToolVerifier's selector is shown; A.6.8's prompt and §4's qualitative analysis give the first four.
PAPER_NAMES = {
    "forecast_air_pollution": "Forecast Air Pollution",  # A.6.8, §4 verbatim
    "current_air_pollution": "Current Air Pollution",  # §4 verbatim
    "forecast_weather_latitude_longitude": "Forecast Weather Latitude Longitude",  # A.6.8 verbatim (not test.csv's)
    "get_favorite_cat_images": "Get Favorite Cat Images",  # §4 writes "Get favorite cat images"
    "geographical_coordinates": "Geographical Coordinates",
    "current_weather_city": "Current Weather City",
    "forecast_weather_city": "Forecast Weather City",
    "current_weather_latitude_longitude": "Current Weather Latitude Longitude",
    "forecast_weather_zipcode": "Forecast Weather Zipcode",
    "current_weather_zipcode": "Current Weather Zipcode",
    "delete_image_from_favorites": "Delete Image From Favorites",
    "find_images": "Find Images",
    "post_to_favorites": "Post To Favorites",
    "vote_down": "Vote Down",
    "vote_up": "Vote Up",
    "booking": "Booking",
    "home_search": "Home Search",
}


def test_the_17_tools_read_as_the_paper_shows_them_and_map_back_to_their_api_names():
    tools = load_tools(TOOLBENCH / "sambanova.json")
    renamed, back = labelled_tools(tools)
    assert {t.name: paper_label(t.name) for t in tools} == PAPER_NAMES
    assert [t.name for t in renamed] == [PAPER_NAMES[t.name] for t in tools]
    assert back == {label: api for api, label in PAPER_NAMES.items()}
    assert [t.description for t in renamed] == [t.description for t in tools]  # only the name changes
    assert paper_label("get_favorite_cat_images").lower() == "Get favorite cat images".lower()  # §4's spelling


def test_two_tools_with_one_label_are_refused():
    with pytest.raises(ValueError, match="both read 'Vote Up'"):
        labelled_tools([Tool(name="vote_up"), Tool(name="Vote_Up")])


def test_scoring_maps_the_chosen_label_back_and_leaves_other_names_alone():
    back = {"Forecast Air Pollution": "forecast_air_pollution"}
    assert scored_prediction({"id": "a", "program": "x", "tool": "Forecast Air Pollution"}, back)["tool"] == (
        "forecast_air_pollution"
    )
    assert scored_prediction({"id": "a", "program": "x", "tool": "elsewhere"}, back)["tool"] == "elsewhere"
    assert scored_prediction({"id": "a", "program": "x", "tool": ""}, back)["tool"] == ""


def test_the_selector_sees_the_labels_a_6_8_shows_and_its_choice_is_scored_as_the_gold():
    references = list(read([TOOLBENCH]))
    gold = {c.messages[0].content: c.meta["gold_tool"] for c in references}
    seen: list[list[str]] = []

    def select(instruction, tools):
        seen.append([f"{t.name} = {t.description}" for t in tools])
        return paper_label(gold[instruction])

    teacher = Teacher(OfflineBackend(tv.OFFLINE_WRITERS, tv.OFFLINE_VERSION))
    metrics, traces = verify_toolbench(select, teacher, references, VerifySwitches.parse("none"), limit_per_task=1)
    assert metrics["selection"]["without"]["average"] == 1.0  # every label mapped back to its API name
    option_a = (
        "Forecast Air Pollution = Get the future air pollution data in location with latitude={lat}, longitude={lon}"
    )
    assert option_a in seen[0]  # A.6.8's option A, verbatim
    assert all(len(names) == 17 for names in seen)
    assert all(t["rows"]["none"]["tool"] == t["gold_tool_label"] == paper_label(t["gold_tool"]) for t in traces)
