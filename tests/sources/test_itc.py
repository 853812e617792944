"""ITC reader: API records to JSON Schema, json{Thought, Action} answers, multilingual fixtures from the paper's
examples."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from train.base.pysyntax import PyCall, PySyntaxError, parse_call, parse_call_list
from train.base.records import SourceError
from train.cli import main as cli_main
from train.schema import Conversation, SchemaError
from train.sources import itc


@pytest.fixture
def fx(fixtures: Path) -> Path:
    return fixtures / "sources" / "itc"


def read_fixture(fx: Path, with_apis: bool = True) -> list:
    return list(itc.read([fx / "samples.jsonl"] + ([fx / "apis.json"] if with_apis else [])))


# ---------------------------------------------------------------- lenient call syntax


@pytest.mark.parametrize(
    ("action", "calls"),
    [
        (
            "[ Google Translate(text='Hello, how are you?', 'target_lang'='fr')]",
            [PyCall("Google Translate", [], {"text": "Hello, how are you?", "target_lang": "fr"})],
        ),
        (
            "[ latest(from='EUR', to='USD,AUD'), currencies() ]",
            [PyCall("latest", [], {"from": "EUR", "to": "USD,AUD"}), PyCall("currencies")],
        ),
        (
            "[Generate_password(numbers=true, pwCount=1, x=null, y=false)]",
            [PyCall("Generate_password", [], {"numbers": True, "pwCount": 1, "x": None, "y": False})],
        ),
        ("[f(s='true, null and Google Translate(x)')]", [PyCall("f", [], {"s": "true, null and Google Translate(x)"})]),
        (
            "[Global Email V4(opt='a'), Global Email V4(opt='b')]",
            [PyCall("Global Email V4", [], {"opt": "a"}), PyCall("Global Email V4", [], {"opt": "b"})],
        ),
        ("[f('two words'=1)]", [PyCall("f", [], {"two words": 1})]),
        ("[]", []),
        ("single(x=1)", [PyCall("single", [], {"x": 1})]),
    ],
)
def test_lenient_call_lists(action, calls):
    assert parse_call_list(action, lenient=True) == calls


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ("[f(x=1)", "not valid Python: "),
        ("[f(x=y)]", "item 0: f: argument 'x': a variable y is not a literal"),
        ("[f(x=g(1))]", "item 0: f: argument 'x': nested call g(1) is not a literal"),
        ("[f(), 3]", "item 1: expected a function call, got a constant"),
        ("{'a': 1}", "expected a list of function calls, got Dict"),
        ("[f(x=1, x=2)]", "item 0: f: argument 'x' given twice"),
        ("[f('x'=1, x=2)]", "item 0: f: argument 'x' given twice"),
        ("[f(x=1e999)]", "item 0: f: argument 'x': non-finite number 1e309 has no JSON form"),
        ("[f(x={1: 2})]", "item 0: f: argument 'x': dict key 1 is not a string"),
        ("[f(x='a' * 3)]", "item 0: f: argument 'x': an expression 'a' * 3 is not a literal"),
    ],
)
def test_lenient_call_lists_reject_what_is_not_a_literal_call(action, message):
    with pytest.raises(PySyntaxError) as err:
        parse_call_list(action, lenient=True)
    assert str(err.value).startswith(message)


def test_strict_mode_repairs_nothing():
    with pytest.raises(PySyntaxError, match="not valid Python"):
        parse_call("latest(from='EUR')")
    assert parse_call("f(x=true)", lenient=True).kwargs == {"x": True}
    with pytest.raises(PySyntaxError, match="argument 'x': a variable true is not a literal"):
        parse_call("f(x=true)")


def test_oversized_and_non_string_sources():
    with pytest.raises(PySyntaxError, match="exceeds 1000000"):
        parse_call("f(x='" + "a" * 1_000_001 + "')")
    with pytest.raises(PySyntaxError, match="expected a string of Python, got int"):
        parse_call(3)


# ---------------------------------------------------------------- API records


def test_parameters_to_json_schema():
    required = [
        {"name": "city", "type": "STRING", "description": "City.", "default": ""},
        {"name": "date", "type": "DATE (YYYY-MM-DD)", "description": "Day."},
    ]
    optional = [
        {"name": "units", "type": "ENUM", "description": "Units.", "default": "metric"},
        {"name": "days", "type": "NUMBER"},
        {"name": "raw", "type": "CUSTOM"},
    ]
    schema = itc.rapidapi_parameters(required, optional, "api")
    assert schema == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City."},
            "date": {"type": "string", "description": "Day."},
            "units": {"type": "string", "description": "Units.", "default": "metric"},
            "days": {"type": "number"},
            "raw": {},
        },
        "required": ["city", "date"],
    }
    jsonschema.Draft202012Validator.check_schema(schema)
    assert itc.rapidapi_parameters([], [], "api") == {"type": "object", "properties": {}}


@pytest.mark.parametrize(
    ("required", "message"),
    [
        ({"name": "q"}, "api.required_parameters: expected a list, got dict"),
        (["q"], "api.required_parameters[0]: expected a parameter object, got str"),
        ([{"type": "STRING"}], "api.required_parameters[0].name: expected a non-empty string"),
        ([{"name": "q", "description": 5}], "api.required_parameters[0].description: expected a string, got int"),
    ],
)
def test_broken_parameters_name_the_field(required, message):
    with pytest.raises(SchemaError) as err:
        itc.rapidapi_parameters(required, [], "api")
    assert str(err.value) == message


# ---------------------------------------------------------------- answers


@pytest.mark.parametrize(
    "value",
    [
        'json{"Thought": "t", "Action": "[f(x=1)]"}',
        'json({"Thought": "t", "Action": "[f(x=1)]"})',
        '```json\n{"Thought": "t", "Action": "[f(x=1)]"}\n```',
        '{"Thought": "t", "Action": "[f(x=1)]"}',
        '  JSON {"Thought": "t", "Action": "[f(x=1)]"}  ',
    ],
)
def test_answer_layouts(value):
    assert itc.parse_answer(value, "a") == ("t", [PyCall("f", [], {"x": 1})])


def test_plain_replies_are_not_answers():
    assert itc.parse_answer("Il fait beau à Paris.", "a") is None
    assert itc.parse_answer("jsonify is a Flask helper.", "a") is None


# ---------------------------------------------------------------- fixtures


def test_fixture_outcomes(fx):
    items = read_fixture(fx)
    prefix = f"{fx}/"
    got = [("ok", i.id) if isinstance(i, Conversation) else (i.location.replace(prefix, ""), i.reason) for i in items]
    assert got == [
        ("ok", "itc-single-en"),
        ("ok", "itc-repeated-en"),
        ("ok", "itc-parallel-en"),
        ("ok", "itc-nested-en"),
        ("ok", "itc-single-zh"),
        ("ok", "itc-single-ar"),
        ("ok", "itc-empty-fr"),
        ("ok", "itc-multiturn-ja"),
        ("samples.jsonl:9", "invalid JSON at column 61: Unterminated string starting at"),
        ("samples.jsonl:10 (itc-bad-conversations)", "conversations: expected a non-empty list"),
        (
            "samples.jsonl:11 (itc-bad-action)",
            "conversations[1].value.Action: not valid Python: EOF in multi-line statement",
        ),
        (
            "samples.jsonl:12 (itc-unknown-api)",
            "conversations[1].value.Action: call 'book_taxi' matches no API in the API file",
        ),
        (
            "samples.jsonl:13 (itc-ambiguous-tool)",
            "conversations[1].value.Action: call 'Travel Toolkit' names tool 'Travel Toolkit', which has 2 APIs",
        ),
        ("samples.jsonl:14 (itc-no-thought)", "conversations[1].value.Thought: expected a string, got NoneType"),
        ("samples.jsonl:15 (itc-orphan-result)", "conversations[0]: tool result answers no earlier call"),
        (
            "samples.jsonl:16 (itc-unknown-speaker)",
            "conversations[0]: unknown speaker 'robot'; expected user, assistant or tool",
        ),
        ("samples.jsonl:17", "sample: expected an object, got str"),
        ("samples.jsonl:18 (itc-value-not-string)", "conversations[0].value: expected a string, got int"),
        (
            "samples.jsonl:19 (itc-positional)",
            "conversations[1].value.Action: translate1: positional arguments have no parameter names",
        ),
        ("samples.jsonl:20 (itc-system-not-string)", "system: expected a string, got list"),
        ("samples.jsonl:21 (itc-no-user)", "conversations: no user turn"),
        (
            "samples.jsonl:22 (itc-broken-json)",
            (
                "conversations[1].value: answer is not a json{Thought, Action} object: Expecting ',' delimiter at "
                "column 37"
            ),
        ),
        ("apis.json#8", "API record: api.api_list: expected a list, got dict"),
        ("apis.json#9", "API record: api.api_list[0].required_parameters[0].type: expected a string, got int"),
        ("apis.json#10", "API record: api.api_list[0].optional_parameters[0].name: duplicate parameter 'q'"),
    ]
    samples = (fx / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(items) == len(samples) + 3  # every sample once, plus the three broken API records


def test_single_call_exact_record(fx):
    conversation = read_fixture(fx)[0]
    raw = json.loads((fx / "samples.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert conversation.to_dict() == {
        "id": "itc-single-en",
        "tools": [{"type": "function", "function": {
            "name": "translate1",
            "description": (
                "This API endpoint allows users to perform translations of text from one language to another."
            ),
            "parameters": {"type": "object", "properties": {
                "text": {"type": "string", "description": "The text content to be translated"},
                "target_lang": {
                    "type": "string",
                    "description": "The target language code (e.g., 'en' for English, 'zh' for Chinese)",
                },
            }, "required": ["text", "target_lang"]},
        }}],
        "messages": [
            {"role": "user", "content": (
                "Can you help me translate 'Hello, how are you?' into French for my upcoming trip to Paris?"
            )},
            {"role": "assistant", "content": (
                "To assist the user with their request for translation, I will utilize the Google Translate API."
            ), "tool_calls": [{"id": "call_0", "type": "function", "function": {
                "name": "translate1", "arguments": {"text": "Hello, how are you?", "target_lang": "fr"},
            }}]},
        ],
        "meta": {
            "language": "en", "task_type": "single", "source": "itc",
            "raw_answers": [raw["conversations"][1]["value"]], "system": raw["system"],
            "renamed_calls": {"Google Translate": "translate1"},
        },
    }  # fmt: skip


def test_repeated_parallel_nested_and_empty_actions(fx):
    items = {i.id: i for i in read_fixture(fx) if isinstance(i, Conversation)}
    calls = lambda conv: [
        [(c.id, c.name, c.arguments) for c in m.tool_calls] for m in conv.messages if m.role == "assistant"
    ]
    assert calls(items["itc-repeated-en"]) == [
        [
            ("call_0", "verify_email", {"opt": "VerifyMailbox: Express", "email": "john.doe@example.com"}),
            ("call_1", "verify_email", {"opt": "VerifyMailbox: ExpressPremium", "email": "jane.smith@sample.com"}),
        ]
    ]
    assert calls(items["itc-parallel-en"]) == [
        [("call_0", "latest", {"from": "EUR", "to": "USD,AUD"}), ("call_1", "currencies", {})]
    ]
    nested = items["itc-nested-en"]
    assert [m.role for m in nested.messages] == ["user", "assistant", "tool", "assistant"]
    assert calls(nested) == [
        [("call_0", "Generate_password", {"numbers": True, "pwCount": 1, "length": 12})],
        [("call_1", "MD5_Text_Hash", {"dataString": "A1b2C3d4E5f6"})],
    ]
    assert nested.messages[2].to_dict() == {
        "role": "tool",
        "content": '{"code": 200, "msg": "Password generated successfully.", "data": {"password": "A1b2C3d4E5f6"}}',
        "tool_call_id": "call_0", "name": "Generate_password",
    }  # fmt: skip
    assert nested.meta["renamed_calls"] == {"MD5_Text Hash": "MD5_Text_Hash"}
    empty = items["itc-empty-fr"]
    assert empty.messages[-1].to_dict() == {
        "role": "assistant",
        "content": (
            "Aucun des outils disponibles ne permet de réserver un restaurant. Je vous suggère de contacter "
            "directement le restaurant."
        ),
    }
    assert empty.tools == []
    japanese = items["itc-multiturn-ja"]
    assert [t.name for t in japanese.tools] == [
        "train_search",
        "hotel_search",
    ]  # the whole tool record, distractor included
    assert japanese.messages[-1].to_dict() == {
        "role": "assistant",
        "content": "東京発大阪行きの列車は、のぞみ1号（6時00分発）があります。",
    }


def test_multilingual_text_survives_and_languages_are_kept(fx):
    items = {i.id: i for i in read_fixture(fx) if isinstance(i, Conversation)}
    assert {i: c.meta["language"] for i, c in items.items()} == {
        "itc-single-en": "en", "itc-repeated-en": "en", "itc-parallel-en": "en", "itc-nested-en": "en",
        "itc-single-zh": "zh", "itc-single-ar": "ar", "itc-empty-fr": "fr", "itc-multiturn-ja": "ja",
    }  # fmt: skip
    chinese = items["itc-single-zh"]
    assert chinese.messages[0].content == "请帮我查询一下北京现在的天气，用公制单位。"
    assert chinese.messages[1].tool_calls[0].arguments == {"location": "北京", "unit": "m"}
    assert chinese.tools[0].parameters["properties"]["unit"] == {
        "type": "string",
        "description": "单位：m 公制，i 英制",
        "default": "m",
    }
    arabic = items["itc-single-ar"]
    assert arabic.messages[1].tool_calls[0].arguments == {"city": "مكة المكرمة", "country": "السعودية", "method": 4}


def test_gold_arguments_validate_against_their_tools(fx):
    for conversation in read_fixture(fx):
        if not isinstance(conversation, Conversation):
            continue
        tools = {t.name: t for t in conversation.tools}
        for tool in conversation.tools:
            jsonschema.Draft202012Validator.check_schema(tool.parameters)
        for message in conversation.messages:
            for call in message.tool_calls:
                errors = list(jsonschema.Draft202012Validator(tools[call.name].parameters).iter_errors(call.arguments))
                assert errors == [], (conversation.id, call.name, errors[0].message)


def test_without_api_file_calls_keep_their_written_names(fx):
    items = read_fixture(fx, with_apis=False)
    first = items[0]
    assert first.tools == [] and first.messages[1].tool_calls[0].name == "Google Translate"
    assert (
        sum(isinstance(i, Conversation) for i in items) == 10
    )  # the unknown and the ambiguous name are kept as written


def test_inputs_contract(fx, tmp_path):
    with pytest.raises(SourceError, match=r"expected SAMPLES then APIS \(1 optional\), got 0 input\(s\)"):
        list(itc.read([]))
    with pytest.raises(SourceError, match="got a folder"):
        list(itc.read([fx]))
    with pytest.raises(SourceError, match="no such file or directory"):
        list(itc.read([tmp_path / "none.jsonl"]))
    broken_array = tmp_path / "samples.json"  # cut off: the record before the break is read, the break rejected
    broken_array.write_text('[{"conversations": []}, {"conv', encoding="utf-8")
    read = list(itc.read([broken_array]))
    assert [type(item).__name__ for item in read] == ["Rejected", "Rejected"]  # the first has no turns
    reason = "invalid JSON at line 1 column 26: Unterminated string starting at; the rest of the file is unreadable"
    assert (read[1].location, read[1].reason) == (f"{broken_array}#1", reason)


def test_cli_end_to_end(fx, tmp_path, capsys):
    out = tmp_path / "itc.jsonl"
    assert cli_main(["data", "convert", "itc", str(fx / "samples.jsonl"), str(fx / "apis.json"), "-o", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "read 25, written 8, rejected 17"
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [line["id"] for line in lines][:2] == ["itc-single-en", "itc-repeated-en"]


def test_a_dict_key_given_twice_is_refused_not_overwritten():
    # Python keeps the last value of a repeated key; a gold answer must not lose the first one silently.
    with pytest.raises(PySyntaxError, match="dict key 'k' given twice"):
        parse_call("f(a={'k': 1, 'k': 2})")
    assert parse_call("f(a={'k': 1, 'j': 2})").kwargs == {"a": {"k": 1, "j": 2}}
