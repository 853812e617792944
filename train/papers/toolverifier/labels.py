"""The names ToolVerifier shows the 17 ToolBench tools under at test time (seed 003, A.6.8, §4 qualitative analysis).

The ToolBench reader names each tool by its API name (``forecast_weather_latitude_longitude``); ToolSelect trains on
human labels ("Car Rental with insurance"), and the paper's test-time prompt (A.6.8) offers "A. Forecast Air
Pollution = Get the future air pollution data ... B. Forecast Weather Latitude Longitude = Get the weather data for
future ...": the API name's words, each capitalised, beside ``sambanova.json``'s description. That rule, not
``test.csv``'s ``Name`` ("Weather Forecast Latitude Longitude"), is what the prompt shows, so it is the one used here.

``labelled_tools(tools)`` gives the tools under their labels and the map label -> API name, so that what the model
chose is scored as the API name the reader's ``meta["gold_tool"]`` holds.
"""

from __future__ import annotations

from dataclasses import replace

from train.schema import Tool


def paper_label(api_name: str) -> str:
    """``forecast_air_pollution`` -> "Forecast Air Pollution" (A.6.8's spelling)."""
    return " ".join(word.capitalize() for word in api_name.split("_") if word)


def labelled_tools(tools: list[Tool]) -> tuple[list[Tool], dict[str, str]]:
    """(the tools renamed to their labels, label -> API name); ``ValueError`` when two tools share a label, which
    would make the model's choice ambiguous."""
    back: dict[str, str] = {}
    renamed = []
    for tool in tools:
        label = paper_label(tool.name) or tool.name
        if label in back:
            raise ValueError(f"tools {back[label]!r} and {tool.name!r} both read {label!r}")
        back[label] = tool.name
        renamed.append(replace(tool, name=label))
    return renamed, back
