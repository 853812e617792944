"""SambaNova ToolBench reader: 17 API tools, row-aligned golds, gold tool names, broken rows."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

from train.base.records import SourceError
from train.cli import main as cli_main
from train.schema import Conversation
from train.sources import toolbench


@pytest.fixture
def fx(fixtures: Path) -> Path:
    return fixtures / "sources" / "toolbench"


def outcome(items: list, base: Path) -> list[tuple[str, str]]:
    prefix = f"{base}/"
    return [("ok", i.id) if isinstance(i, Conversation) else (i.location.replace(prefix, ""), i.reason) for i in items]


def test_fixture_outcomes(fx):
    items = list(toolbench.read([fx]))
    assert outcome(items, fx) == [
        ("ok", "home/test-0"),
        ("home/test.jsonl:2 (home/test-1)", "compare_string_only: expected a boolean, got str"),
        ("home/test.jsonl:3 (home/test-2)", "test.csv: compare_string_only 'False' does not match True"),
        ("ok", "weather/test-0"),
        ("ok", "weather/test-1"),
        ("weather/test.jsonl:3", "invalid JSON at column 53: Unterminated string starting at"),
        (
            "weather/test.jsonl:4 (weather/test-3)",
            "test.csv: Instruction 'How warm is Milan today?' does not match the prompt 'How warm is Rome today?'",
        ),
        ("weather/test.jsonl:5 (weather/test-4)", "completion: expected a non-empty list of program strings"),
        ("weather/test.jsonl:6 (weather/test-5)", "test.csv.Name: 'Moon Phase' matches none of the 3 tools"),
        ("weather/test.jsonl:7 (weather/test-6)", "test case: expected an object, got list"),
        ("weather/test.jsonl:8 (weather/test-7)", "prompt: expected a non-empty string"),
        ("weather/test.jsonl:9 (weather/test-8)", "test.csv: row has 1 field(s) more than the header"),
        ("weather/test.csv#9", "test.csv row 9 has no test case in test.jsonl"),
    ]


def test_fixture_exact_record(fx):
    home = next(toolbench.read([fx / "home"]))  # a task folder alone: tools come from its parent
    tools = json.loads((fx / "sambanova.json").read_text())["api_list"]
    assert home.to_dict()["messages"] == [{"role": "user", "content": "Rent a 2-bedroom home in Boston."}]
    assert (
        [t.name for t in home.tools]
        == [api["name"] for api in tools]
        == ["current_weather_city", "forecast_weather_city", "home_search"]
    )
    assert home.meta == {
        "source": "toolbench_sambanova",
        "task": "home",
        "gold_tool": "home_search",
        "gold_tool_label": "Home search",
        "completion": ['API.set_location("Boston")\nAPI.set_buy_or_rent("rent")\nAPI.set_num_beds(2)\nAPI.search()'],
        "api_program": (
            'API.set_location("Boston")\nAPI.set_buy_or_rent("rent")\nAPI.set_min_price(\'None\')\n'
            "API.set_num_beds(2)\nAPI.search()"
        ),
        "compare_string_only": False,
    }
    weather = home.tools[0].to_dict()["function"]
    assert weather["parameters"]["required"] == ["q"]
    assert weather["parameters"]["properties"]["units"]["default"] == "standard"


def test_unusable_inputs(fx, tmp_path):
    with pytest.raises(SourceError, match="expected FOLDER, got 2 input"):
        list(toolbench.read([fx, fx]))
    with pytest.raises(SourceError, match="got a file"):
        list(toolbench.read([fx / "sambanova.json"]))
    with pytest.raises(SourceError, match="no task folder with a test.jsonl"):
        list(toolbench.read([tmp_path]))
    shutil.copytree(fx / "weather", tmp_path / "weather")
    with pytest.raises(SourceError, match=r"sambanova.json: not found \(the 17 ToolBench tools\)"):
        list(toolbench.read([tmp_path]))
    (tmp_path / "sambanova.json").write_text('{"tool_name": "x", "api_list": [{"name": 3}]}')
    with pytest.raises(SourceError, match=r"sambanova.json: sambanova.api_list\[0\].name: expected a non-empty string"):
        list(toolbench.read([tmp_path]))
    shutil.copy(fx / "sambanova.json", tmp_path / "sambanova.json")
    (tmp_path / "weather" / "test.csv").write_text("Instruction,Name\nx,y\n")
    with pytest.raises(SourceError, match="test.csv: missing column"):
        list(toolbench.read([tmp_path]))


@pytest.mark.shared_data
def test_word_sets_tell_every_real_tool_apart(shared_data):
    tools = toolbench.load_tools(shared_data / "toolbench_sambanova_toolverifier" / "sambanova.json")
    assert len(toolbench.gold_tool_index(tools)) == len(tools) == 17


@pytest.mark.shared_data
def test_real_tasks(shared_data):
    items = list(toolbench.read([shared_data / "toolbench_sambanova_toolverifier"]))
    assert len(items) == 420 and all(isinstance(i, Conversation) for i in items)  # every row aligned
    assert Counter(i.meta["task"] for i in items) == {"booking": 120, "cat": 100, "home": 100, "weather": 100}
    gold = Counter((i.meta["task"], i.meta["gold_tool"]) for i in items)
    assert gold == {
        ("booking", "booking"): 120, ("home", "home_search"): 100,
        ("cat", "find_images"): 36, ("cat", "vote_down"): 15, ("cat", "vote_up"): 15, ("cat", "post_to_favorites"): 14,
        ("cat", "get_favorite_cat_images"): 12, ("cat", "delete_image_from_favorites"): 8,
        ("weather", "current_weather_zipcode"): 13, ("weather", "current_weather_city"): 12,
        ("weather", "forecast_weather_latitude_longitude"): 12, ("weather", "current_weather_latitude_longitude"): 11,
        ("weather", "forecast_weather_city"): 11, ("weather", "forecast_weather_zipcode"): 11,
        ("weather", "forecast_air_pollution"): 10, ("weather", "current_air_pollution"): 10,
        ("weather", "geographical_coordinates"): 10,
    }  # fmt: skip
    assert all(len(i.tools) == 17 and [m.role for m in i.messages] == ["user"] for i in items)
    for tool in items[0].tools:
        jsonschema.Draft202012Validator.check_schema(tool.parameters)
    cat = next(i for i in items if i.id == "cat/test-0")
    assert cat.messages[0].content == "Delete the cat image with id = dv0 from my favorites."
    assert {
        k: cat.meta[k] for k in ("gold_tool", "gold_tool_label", "completion", "api_program", "compare_string_only")
    } == {
        "gold_tool": "delete_image_from_favorites",
        "gold_tool_label": "Delete image from favorites",
        "completion": ["curl -X DELETE 'https://api.thecatapi.com/v1/favourites/dv0'"],
        "api_program": "curl -X DELETE 'https://api.thecatapi.com/v1/favourites/dv0'",
        "compare_string_only": True,
    }
    assert Counter(i.meta["gold_tool"] for i in items if i.meta["compare_string_only"]) == {
        "delete_image_from_favorites": 8
    }


@pytest.mark.shared_data
def test_cli_converts_the_folder(shared_data, tmp_path, capsys):
    out = tmp_path / "toolbench.jsonl"
    assert (
        cli_main(
            ["data", "convert", "toolbench", str(shared_data / "toolbench_sambanova_toolverifier"), "-o", str(out)]
        )
        == 0
    )
    assert capsys.readouterr().out.splitlines()[0] == "read 420, written 420, rejected 0"
    assert len(out.read_text(encoding="utf-8").splitlines()) == 420
