"""PTR's teacher questions (seed 001, D.1 and D.2): the prompts word for word, the readers on good and malformed
answers, and the offline writers (requirement splitter, embedding-threshold matcher)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ptr_fakes import AngleEmbedder

from train.papers.ptr.teacher import (
    MATCH_HEAD,
    MATCH_STAGE,
    MATCH_TAIL,
    PARAMS,
    REQUIREMENTS_STAGE,
    REQUIREMENTS_USER,
    embedding_matcher,
    match_prompt,
    match_request,
    offline_requirements,
    offline_teacher,
    offline_version,
    read_matches,
    read_requirements,
    requirements_prompt,
    requirements_request,
    split_requirements,
)

SEED = Path(__file__).resolve().parents[3] / "shared" / "seeds" / "001_638ee837c1360118.txt"

D1_FILLED = """You are an assistant helping to extract key requirements from user queries.

Example 1:
User Query:
"I want a website where users can create accounts, post messages, and follow other users."

Key Requirements:
- Users can create accounts
- Users can post messages
- Users can follow other users

Example 2:
User Query:
"I need an e-commerce platform that supports product listings, shopping cart functionality, payment processing, \
and order tracking."

Key Requirements:
- Supports product listings
- Provides shopping cart functionality
- Handles payment processing
- Offers order tracking

Now, given the following user query, extract the key requirements.

User Query:
"I'm preparing for a marathon in Paris, France."

Key Requirements:
"""

D2_FILLED = """You are an assistant helping to match tools to requirements, as long as the tool description can \
roughly provid the needed information for requirments, it does not need to be very specific, ignore the proper nouns.

Available Tools:
- **ResearchFinder**: Tool for searching academic papers.
- **WeatherTool**: Provide you with the latest weather information.

Example 1:
Requirement:
"I want to know the latest news about Tesla"

Matched Tools:
- NewsTool: Stay connected to global events with our up-to-date news around the world.

Example 2:
Requirement:
"Please provide me with the current stock price of Apple"

Matched Tools:
- FinanceTool: Stay informed with the latest financial updates, real-time insights, and analysis on a wide range \
of options, stocks, cryptocurrencies, and more.

Now, for the following requirement, list the tools from the available tools that can fulfill it.

Requirement:
"Information on weather during summer"

Matched Tools:
"""
MT_TOOLS = {
    "ResearchFinder": "Tool for searching academic papers.",
    "WeatherTool": "Provide you with the latest weather information.",
}


def test_prompts_word_for_word():
    # D.3's Listings 2 and 3 fill D.1 and D.2 in exactly like this (line breaks restored)
    assert requirements_prompt("I'm preparing for a marathon in Paris, France.") == D1_FILLED
    assert match_prompt("Information on weather during summer", MT_TOOLS) == D2_FILLED
    request = requirements_request("q")
    assert (request.stage, request.system, request.params.temperature) == (REQUIREMENTS_STAGE, None, 0.0)
    request = match_request("r", MT_TOOLS)
    assert (request.stage, request.system, request.params) == (MATCH_STAGE, None, PARAMS)


def _normalised(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@pytest.mark.skipif(not SEED.is_file(), reason="the seed text is not beside this checkout")
def test_every_fixed_paragraph_of_the_prompts_is_in_the_seed():
    seed = _normalised(SEED.read_text(encoding="utf-8"))
    fixed = [REQUIREMENTS_USER, MATCH_HEAD, MATCH_TAIL]
    blocks = [b for text in fixed for b in text.split("\n\n") if b.strip() and "{" not in b]
    blocks = [b.replace("Available Tools:\n", "Available Tools:").strip() for b in blocks]
    assert len(blocks) == 15
    missing = [b for b in blocks if _normalised(b) not in seed]
    assert missing == []


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("- Marathon preparation\n- Location: Paris, France", ["Marathon preparation", "Location: Paris, France"]),
        ("Key Requirements:\n1. **Book a table**\n2) Find a gift\n", ["Book a table", "Find a gift"]),
        ("Sure! Here they are:\n- Book a table\n- Find a gift\n\nExample 3:\nUser Query:\n- x",
         ["Book a table", "Find a gift"]),
        ("Book a table\nFind a gift", ["Book a table", "Find a gift"]),  # no bullets: every line
        ("", []),
        ("Key Requirements:\n\n", []),
        ("{'not': 'python'} __import__('os')", ["{'not': 'python'} __import__('os')"]),  # read as text, never run
    ],
)  # fmt: skip
def test_read_requirements(answer, expected):
    assert read_requirements(answer) == expected


BUNDLE = ["WeatherTool", "RestaurantBookingTool", "ToolBox", "local"]


@pytest.mark.parametrize(
    ("answer", "names", "unknown"),
    [
        ("- WeatherTool: Provide you with the latest weather information.", ["WeatherTool"], []),
        ("- **RestaurantBookingTool**: Tool for booking restaurant\n- **WeatherTool**: ...",
         ["WeatherTool", "RestaurantBookingTool"], []),  # bundle order, not answer order
        ("Matched Tools:\n- restaurant booking tool\n- LOCAL: Discover restaurants",
         ["RestaurantBookingTool", "local"], []),
        ("- ToolBox: everything", ["ToolBox"], []),
        ("None", [], []),
        ("- None", [], []),
        ("- HackerTool: does things\n- WeatherTool: x", ["WeatherTool"], ["HackerTool"]),
        ("I am sorry, I cannot decide which of these tools would be the most suitable one here.", [], []),
        ("- WeatherTool: x\n\nExample 3:\nRequirement:\n- local: y", ["WeatherTool"], []),  # a run-on is not read
        ("", [], []),
        # the summary layout of D.3's listings
        ("- Requirement: 'Book a table' matched with Tools: RestaurantBookingTool, local",
         ["RestaurantBookingTool", "local"], []),
        ("- Requirement: 'Book a poem' matched with Tools: None", [], []),
    ],
)  # fmt: skip
def test_read_matches(answer, names, unknown):
    assert read_matches(answer, BUNDLE) == (names, unknown)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("I want a website where users can create accounts, post messages, and follow other users.",
         ["I want a website where users can create accounts", "post messages", "follow other users"]),
        ("I'm preparing for a marathon in Paris, France.", ["I'm preparing for a marathon in Paris, France"]),
        ("Plan a trip to Rome, find and book a hotel, then check the weather.",
         ["Plan a trip to Rome", "find and book a hotel", "check the weather"]),
        ("Find news and weather", ["Find news and weather"]),  # "weather" alone is no requirement: glued back
        ("**\n\nBook a table; get a gift. Can you convert USD as well as read the news?\n\nTool Combination:\n- X",
         ["Book a table", "get a gift", "Can you convert USD", "read the news"]),
        ("Book a table and book a table.", ["Book a table"]),
        ("", []),
        ("please", ["please"]),
    ],
)  # fmt: skip
def test_split_requirements_rules(query, expected):
    assert split_requirements(query) == expected


def test_offline_requirements_answer_reads_back():
    request = requirements_request("Book a table, then get a gift for my friend.")
    answer = offline_requirements(request)
    assert answer == "- Book a table\n- get a gift for my friend"
    assert read_requirements(answer) == ["Book a table", "get a gift for my friend"]


def test_embedding_matcher_threshold_and_order():
    tools = {"A": "a", "B": "b", "C": "c"}
    embedder = AngleEmbedder({"need": 0, "A: a": 80, "B: b": 30, "C: c": 59})  # cosines .17, .87, .52
    request = match_request("need", tools)
    assert embedding_matcher(embedder, 0.5)(request) == "- B: b\n- C: c"  # >= threshold, bundle order
    assert embedding_matcher(embedder, 0.9)(request) == "None"
    assert embedding_matcher(embedder, 0.5)(match_request("need", {})) == "None"
    writer = embedding_matcher(embedder, 0.0)
    writer(request), writer(request)
    assert embedder.calls[-3:] == [["need"], ["A: a", "B: b", "C: c"], ["need"]]  # tools once per writer


def test_offline_teacher_version_names_the_embedder_and_threshold():
    embedder = AngleEmbedder({"need": 0, "A: a": 0})
    teacher = offline_teacher(embedder, 0.4)
    assert teacher.backend.model == "offline-" + offline_version("angles", 0.4) == "offline-ptr-1:angles:0.4"
    assert teacher.ask(match_request("need", {"A": "a"})) == "- A: a"
    assert teacher.ask(requirements_request("Book a table")) == "- Book a table"
