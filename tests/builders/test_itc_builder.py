"""The itc builder (seed 002, Figs 4 and 17-20): its invariants on the shipped glaive en + zh data, hand-made task
types (nested as multi-turn text), the EN filter, the counts, and one sample rendered exactly in qwen2_5."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from train.builders import make_args
from train.cli import main
from train.formats import get_format
from train.formats.tokenize import IGNORE_INDEX, tokenize
from train.papers.itc import teacher as prompts
from train.papers.itc.builder import ITCBuilder, ITCOptions, build
from train.schema import Conversation, Message, Tool, ToolCall
from train.sources.itc import parse_answer, tools_of_record
from train.validate import check_conversation

ASSETS = Path(__file__).resolve().parents[2] / "train" / "assets"
TINY_BUILD = [  # the command in conf/data/itc_tiny.yaml and train/assets/itc_tiny/NOTICE.md
    "glaive:pkg://train/assets/demo/glaive_en_300.json",
    "glaive:pkg://train/assets/itc_tiny/glaive_zh_tools.json",
]


def data_build(out: Path, *args: str) -> int:
    return main(["data", "build", "itc", *args, "--out-dir", str(out)])


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open(encoding="utf-8")]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict:
    """The tiny recipe's build, as the command writes it."""
    out = tmp_path_factory.mktemp("itc_tiny")
    assert data_build(out, *TINY_BUILD) == 0
    return {
        "out": out,
        "train": rows(out / "train.jsonl"),
        "test": rows(out / "test.jsonl"),
        "report": json.loads((out / "report.json").read_text()),
    }


def listed_apis(row: dict) -> set[str]:
    """The API names the row's system prompt lists (its Fig. 4 records)."""
    system = row["messages"][0]["content"]
    head, tail = prompts.SYSTEM_PROMPT.split("{api_list}")
    assert system.startswith(head) and system.endswith(tail)
    records = json.loads(system[len(head) : len(system) - len(tail)])
    return {api["name"] for record in records for api in record["api_list"]}


# ---------------------------------------------------------------- the invariants, on the shipped data


def test_the_split_is_by_api_no_test_api_appears_in_training(tiny):
    train_apis = set().union(*(listed_apis(row) for row in tiny["train"]))
    test_apis = set().union(*(listed_apis(row) for row in tiny["test"]))
    held = set(tiny["report"]["split"]["test_apis"])
    assert held == {"calculate_bmi", "generate_qr_code", "generate_random_password", "search_movies"}
    assert held <= test_apis and not held & train_apis
    # APIs offered only beside a test API are unseen in training too
    assert test_apis - train_apis == held | {"analyze_customer_sentiment", "execute_program"}
    for row in tiny["train"]:
        assert set(row["meta"]["apis"]) == listed_apis(row) and not set(row["meta"]["apis"]) & held
    assert all(set(row["meta"]["apis"]) & held for row in tiny["test"])  # every test task offers a test API
    assert (len(tiny["train"]), len(tiny["test"])) == (441, 63)


def test_every_answer_parses_and_its_action_is_the_written_call_list(tiny):
    for row in tiny["train"] + tiny["test"]:
        answer = row["messages"][row["meta"]["turn"]]
        assert answer["role"] == "assistant" and "tool_calls" not in answer and row["tools"] == []
        assert answer["content"].startswith('json{"Thought": ')
        thought, calls = parse_answer(answer["content"], row["id"])
        assert thought and all(not call.args for call in calls)
        action = json.loads(answer["content"][4:])["Action"]
        assert action == prompts.action_text([ToolCall(c.name, dict(c.kwargs)) for c in calls])
        assert (action == "[]") == (row["meta"]["task_type"] == "none")
        assert {c.name for c in calls} <= set(row["meta"]["apis"])


def test_the_offline_thought_is_in_the_querys_language_for_en_and_zh(tiny):
    from train.papers.itc.builder import langid_of

    identify = langid_of()
    seen = set()
    for row in tiny["train"] + tiny["test"]:
        thought, _ = parse_answer(row["messages"][-1]["content"], row["id"])
        assert identify(thought) == row["meta"]["language"], row["id"]
        seen.add(row["meta"]["language"])
    assert seen == {"en", "zh"}
    assert {row["meta"]["language"] for row in tiny["test"][:24]} == {"en", "zh"}  # the tiny eval's limit sees both


def test_every_row_carries_fig_17s_system_prompt_with_fig_4_records(tiny):
    assert prompts.SYSTEM_PROMPT.startswith(
        "You are an advanced AI assistant with expertise in:\n1. Intelligent tool and API selection\n"
    )
    assert '- Return an empty list in the "Action" section\n' in prompts.SYSTEM_PROMPT
    assert prompts.SYSTEM_PROMPT.count("{api_list}") == 1
    assert prompts.SYSTEM_PROMPT.endswith(
        'json{"Thought": "Respond in same language as problem. Provide analysis, reasoning for tool selection, and '
        "challenges.\",\n\"Action\": \"[function_name1(param_1='val1', param_2='val2'), function_name2(param_1='val1', "
        "param_2='val2')]\"}"
    )
    row = tiny["train"][0]
    head, tail = prompts.SYSTEM_PROMPT.split("{api_list}")
    records = json.loads(row["messages"][0]["content"][len(head) : -len(tail)])
    for record in records:
        assert list(record) == ["tool_name", "tool_description", "country", "api_list"]
        assert record["country"] == "Global"
        assert [list(api) for api in record["api_list"]] == [
            ["name", "url", "description", "method", "required_parameters", "optional_parameters"]
        ]
        tools_of_record(record, "record")  # the ITC reader reads the records back
    assert [m["role"] for m in row["messages"]] in (["system", "user", "assistant"],)


def test_a_rebuild_is_byte_identical_and_the_shipped_test_side_is_this_build(tiny, tmp_path):
    assert (tiny["out"] / "test.jsonl").read_bytes() == (ASSETS / "itc_tiny" / "test.jsonl").read_bytes()
    small = ["glaive:pkg://train/assets/demo/glaive_sample.json", "test_fraction=0.2"]
    assert data_build(tmp_path / "a", *small) == 0 and data_build(tmp_path / "b", *small) == 0
    for name in ("train.jsonl", "test.jsonl", "report.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert data_build(tmp_path / "c", *small, "--seed", "7") == 0
    assert (tmp_path / "c" / "test.jsonl").read_bytes() != (tmp_path / "a" / "test.jsonl").read_bytes()


def test_read_equals_accepted_plus_rejected(tiny, capsys):
    report = tiny["report"]
    assert report["read"] == 500 and report["rejected"] == {}
    assert report["conversations"] == 500 and report["dropped_conversations"] == {
        "no tools offered (an ITC task comes with its API list)": 109
    }
    assert report["tasks"] == 508 == report["split"]["train_tasks"] + report["split"]["test_tasks"]
    kept = {side: sum(counts.values()) for side, counts in report["kept"].items()}
    dropped = {side: sum(n for r, n in report["dropped_tasks"].items() if r.startswith(side + ":")) for side in kept}
    assert kept["train"] + dropped["train"] == report["split"]["train_tasks"]
    assert kept["test"] + dropped["test"] == report["split"]["test_tasks"]
    # four English "Can you order a pizza for me?" chats that langid reads as Italian: rejected, with the reason
    assert report["dropped_tasks"] == {"train: the offline teacher writes no Thought in it": 4}
    assert report["kept"] == {"train": {"none": 68, "single": 373}, "test": {"none": 9, "single": 54}}


def test_the_english_only_filter_trains_on_english_and_keeps_the_same_test_set(tiny, tmp_path):
    assert data_build(tmp_path, *TINY_BUILD, "languages=en") == 0
    train, test = rows(tmp_path / "train.jsonl"), rows(tmp_path / "test.jsonl")
    assert {row["meta"]["language"] for row in train} == {"en"}
    assert len(train) == sum(1 for row in tiny["train"] if row["meta"]["language"] == "en") == 214
    assert test == tiny["test"]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["dropped_tasks"]["train: language zh not in languages=en"] == 227


def test_the_recipe_builder_yields_one_side_and_reports_every_conversation_it_does_not_use(tiny):
    from train.sources import get_reader

    conversations = [
        c
        for name in ("demo/glaive_en_300.json", "itc_tiny/glaive_zh_tools.json")
        for c in get_reader("glaive")([ASSETS / name])
        if isinstance(c, Conversation)
    ]
    drops: list[str] = []
    train = list(build(conversations, seed=42, on_drop=drops.append))
    assert [c.to_dict() for c in train] == tiny["train"]
    used = {c.meta["source_id"] for c in train}
    assert len(used) + len(drops) == len(conversations)  # read = yielded + dropped, per conversation


# ---------------------------------------------------------------- task types and nested rendering

LOOKUP = Tool("lookup_city", "Find a city's id", {"type": "object", "properties": {"name": {"type": "string"}}})
WEATHER = Tool(
    "get_weather",
    "Weather of a city",
    {"type": "object", "properties": {"city_id": {"type": "integer"}, "unit": {"type": "string"}}},
)


def conv(conv_id: str, *messages: Message, language: str = "en") -> Conversation:
    return Conversation(conv_id, list(messages), tools=[LOOKUP, WEATHER], meta={"language": language})


def call(tool: str, **arguments) -> ToolCall:
    return ToolCall(tool, arguments, id=f"{tool}-{sorted(arguments.items())}")


NESTED = conv(
    "nested",
    Message("user", "What's the weather in Paris, in celsius?"),
    Message("assistant", "", tool_calls=[ToolCall("lookup_city", {"name": "Paris"}, id="c1")]),
    Message("tool", '{"city_id": 75}', tool_call_id="c1", name="lookup_city"),
    Message("assistant", "", tool_calls=[ToolCall("get_weather", {"city_id": 75, "unit": "celsius"}, id="c2")]),
    Message("tool", '{"temp": 21}', tool_call_id="c2", name="get_weather"),
    Message("assistant", "It is 21 °C in Paris."),
)
HAND_MADE = [
    NESTED,
    conv(
        "repeated",
        Message("user", "Weather for city 1 and city 2?"),
        Message("assistant", "", tool_calls=[call("get_weather", city_id=1), call("get_weather", city_id=2)]),
    ),
    conv(
        "parallel",
        Message("user", "Find Lyon's id and the weather of city 3."),
        Message("assistant", "", tool_calls=[call("lookup_city", name="Lyon"), call("get_weather", city_id=3)]),
    ),
    conv(
        "single_zh",
        Message("user", "请帮我查一下城市编号为5的天气，用摄氏度。"),
        Message("assistant", "", tool_calls=[call("get_weather", city_id=5, unit="摄氏度")]),
        language="zh",
    ),
    conv("none", Message("user", "Book me a flight to Rome."), Message("assistant", "I cannot book flights.")),
    conv(
        "french",
        Message("user", "Quel temps fait-il à Paris ?"),
        Message("assistant", "", tool_calls=[call("lookup_city", name="Paris")]),
        language="fr",
    ),
]


def built_all(conversations: list[Conversation], **options) -> tuple[dict[str, Conversation], ITCBuilder]:
    builder = ITCBuilder(ITCOptions.from_args({"split": "all", "test_fraction": 0.01, **options}), seed=0)
    sides = builder.build_sides(conversations)
    return {c.meta["source_id"]: c for side in sides.values() for c in side}, builder


def test_task_types_and_the_nested_task_as_multi_turn_text():
    built, builder = built_all(HAND_MADE)
    assert {k: c.meta["task_type"] for k, c in built.items()} == {
        "nested": "nested",
        "repeated": "repeated",
        "parallel": "parallel",
        "single_zh": "single",
        "none": "none",
    }
    nested = built["nested"]
    assert [m.role for m in nested.messages] == ["system", "user", "assistant", "user", "assistant"]
    assert nested.meta["turn"] == 4 and nested.messages[3].content == '{"city_id": 75}'  # the tool's result
    first, second = (parse_answer(nested.messages[i].content, "t")[1] for i in (2, 4))
    assert [(c.name, c.kwargs) for c in first] == [("lookup_city", {"name": "Paris"})]
    assert [(c.name, c.kwargs) for c in second] == [("get_weather", {"city_id": 75, "unit": "celsius"})]
    assert "previous call returned its result" in parse_answer(nested.messages[4].content, "t")[0]
    assert json.loads(built["repeated"].messages[-1].content[4:])["Action"] == (
        "[get_weather(city_id=1), get_weather(city_id=2)]"
    )
    assert json.loads(built["single_zh"].messages[-1].content[4:])["Action"] == (
        "[get_weather(city_id=5, unit='摄氏度')]"
    )
    assert json.loads(built["none"].messages[-1].content[4:])["Action"] == "[]"
    # French: the offline teacher writes en and zh only: a counted reject, not an English Thought
    side = built["nested"].meta["split"]
    assert builder.report()["dropped_tasks"] == {f"{side}: the offline teacher writes no Thought in fr": 1}
    for sample in built.values():  # a valid conversation every native format renders, both answers trained
        assert check_conversation(sample) == []


@pytest.mark.parametrize("family", ["qwen2_5", "chatml", "llama3_1", "mistral_v3"])
def test_every_native_format_renders_a_nested_text_task_and_trains_only_the_answers(family):
    from train.formats import mask_segments

    built, _ = built_all(HAND_MADE)
    nested = built["nested"]
    segments = get_format(family).render(nested)
    weights = mask_segments(segments)
    trained = {seg.message for seg, w in zip(segments, weights) if w}
    assert trained == {2, 4}
    text = "".join(seg.text for seg in segments)
    assert nested.messages[0].content in text and '{"city_id": 75}' in text


def test_one_sample_renders_exactly_in_qwen2_5_and_only_its_answer_trains():
    from session_cache import shared_tokenizer

    single = conv(
        "single",
        Message("user", "Weather of city 7?"),
        Message("assistant", "", tool_calls=[call("get_weather", city_id=7)]),
    )
    built, _ = built_all([single])
    sample = built["single"]
    answer = (
        'json{"Thought": "The \\"get_weather\\" API fits this request, so I call it with city_id. '
        'This answers the request.", "Action": "[get_weather(city_id=7)]"}'
    )
    fmt = get_format("qwen2_5")
    assert fmt.render_text(sample) == (
        "<|im_start|>system\n"
        + prompts.system_prompt([LOOKUP, WEATHER], "Global")
        + "<|im_end|>\n<|im_start|>user\nWeather of city 7?<|im_end|>\n<|im_start|>assistant\n"
        + answer
        + "<|im_end|>\n"
    )
    tok = shared_tokenizer("qwen2_5")  # this session's build (conftest: one cache per run)
    tokenized = tokenize(fmt, sample, tok)
    trained = [t for t, label in zip(tokenized.input_ids, tokenized.labels) if label != IGNORE_INDEX]
    assert tok.decode(trained) == answer + "<|im_end|>"


# ---------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"split": "dev"}, "unknown split 'dev'"),
        ({"test_fraction": 0.0}, "test_fraction must be in (0, 1]"),
        ({"languages": "en,xx"}, "unknown language(s) ['xx']"),
        ({"teacher": {"kind": "oracle"}}, "unknown teacher kind 'oracle'"),
    ],
)
def test_bad_arguments_are_refused_with_the_valid_choices(args, message):
    with pytest.raises(ValueError, match=None) as err:
        make_args("itc", args)
    assert message in str(err.value)


def test_the_command_refuses_a_bad_argument_with_exit_2(tmp_path, capsys):
    assert data_build(tmp_path, "glaive:pkg://train/assets/demo/glaive_sample.json", "split=dev") == 2
    assert capsys.readouterr().err.startswith("error: itc builder: unknown split 'dev'; valid: train, test, all")


# ---------------------------------------------------------------- a model teacher (http / hf) and its answers


def test_a_model_teacher_is_asked_fig_14s_question_and_its_bad_answers_are_counted_rejects():
    from train.teacher import OfflineBackend, Teacher

    asked = []

    def model(request):  # stands in for an http/hf backend: answers by the query it was given
        asked.append(request)
        if "city 1" in request.user:
            return 'json{"Thought": "Je vais appeler get_weather deux fois pour les deux villes.", "Action": "[]"}'
        if "Lyon" in request.user:
            return "I would call lookup_city."
        answer = '{"Thought": "I call the weather API with the city id.", "Action": "[get_weather(city_id=1)]"}'
        return "```json\n" + answer + "\n```"

    teacher = Teacher(OfflineBackend({prompts.THOUGHT_STAGE: model}, "fake"))
    options = ITCOptions.from_args({"split": "all", "test_fraction": 0.01})
    builder = ITCBuilder(options, seed=0, teacher=teacher)
    cases = [c for c in HAND_MADE if c.id in ("repeated", "parallel", "none")]
    sides = builder.build_sides(cases)
    kept = [c for side in sides.values() for c in side]
    assert [c.meta["source_id"] for c in kept] == ["none"]
    # the gold Action is kept, whatever Action the teacher wrote: it writes the Thought only
    assert json.loads(kept[0].messages[-1].content[4:]) == {
        "Thought": "I call the weather API with the city id.",
        "Action": "[]",
    }
    reasons = {reason.split(": ", 1)[1] for reason in builder.report()["dropped_tasks"]}
    assert reasons == {
        "thought: Thought in fr, query in en",
        "thought: no Thought in the answer",
    }
    system, user = asked[0].system, asked[0].user
    assert system.startswith("You are an expert in using APIs as tools and are highly knowledgeable in multilingual")
    assert system.endswith("Please strictly respond in the language of the task (English).")
    assert "The correct Action is: [get_weather(city_id=1), get_weather(city_id=2)]" in user
    assert "The task is as follows:\nWeather for city 1 and city 2?" in user
