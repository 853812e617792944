"""NexusRaven reader: references parsed with ast, tools from definitions / docstrings / stubs, broken records."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

from train.base.pysyntax import PyCall, PySyntaxError, parse_assigned_call
from train.base.records import Rejected, SourceError
from train.cli import main as cli_main
from train.schema import Conversation
from train.sources import nexus

QUERY_FILES = ("cve_cpe", "emailrep", "virustotal", "toolalpaca", "toolllm")


@pytest.fixture
def fx(fixtures: Path) -> Path:
    return fixtures / "sources" / "nexus"


def read_fixture(fx: Path, definitions: bool = True) -> list:
    inputs = [fx / "cve_cpe_queries.json", fx / "toolalpaca_queries.json", fx / "toolllm_queries.json"]
    return list(nexus.read(inputs + ([fx / "_derived_function_definitions.json"] if definitions else [])))


# ---------------------------------------------------------------- pieces


def test_assigned_calls():
    assert parse_assigned_call("r = nvdlib.searchCVE(keywordSearch = 'x', limit = 2)") == (
        "r",
        PyCall("nvdlib.searchCVE", [], {"keywordSearch": "x", "limit": 2}),
    )
    assert parse_assigned_call('vt_get_domain_report(domain = "a.com")') == (
        None,
        PyCall("vt_get_domain_report", [], {"domain": "a.com"}),
    )
    for text, message in [
        ("r = 1", "expected a call or 'name = call', got an assignment"),
        ("a, b = f()", "expected a call or 'name = call', got an assignment"),
        ("f()\ng()", "expected one statement, got 2"),
        ("f(x=1 + 1)", "f: argument 'x': an expression 1 + 1 is not a literal"),
    ]:
        with pytest.raises(PySyntaxError) as err:
            parse_assigned_call(text)
        assert str(err.value) == message


@pytest.mark.parametrize(
    ("annotation", "schema"),
    [
        ("str", {"type": "string"}),
        ("int", {"type": "integer"}),
        ("float", {"type": "number"}),
        ("dict", {"type": "object"}),
        ("list[dict]", {"type": "array", "items": {"type": "object"}}),
        ("List[str]", {"type": "array", "items": {"type": "string"}}),
        ("ENUM", {"type": "string"}),
        ("Optional[str]", {}),
        (None, {}),
    ],
)
def test_annotation_schema(annotation, schema):
    assert nexus.annotation_schema(annotation) == schema


# ---------------------------------------------------------------- fixtures


def test_fixture_outcomes(fx):
    items = read_fixture(fx)
    prefix = f"{fx}/"
    assert [
        ("ok", i.id) if isinstance(i, Conversation) else (i.location.replace(prefix, ""), i.reason) for i in items
    ] == [
        ("ok", "cve_cpe_queries-0"),
        ("ok", "cve_cpe_queries-1"),
        (
            "cve_cpe_queries.json#2 (cve_cpe_queries-2)",
            "reference: nvdlib.searchCVE: argument 'keywordSearch': a variable kw is not a literal",
        ),
        (
            "cve_cpe_queries.json#3 (cve_cpe_queries-3)",
            "reference: not valid Python: '(' was never closed at column 21",
        ),
        ("cve_cpe_queries.json#4 (cve_cpe_queries-4)", "query: expected a non-empty string"),
        ("cve_cpe_queries.json#5", "expected an object, got str"),
        ("cve_cpe_queries.json#6", "unknown record layout with keys answer, question"),
        ("cve_cpe_queries.json#7 (cve_cpe_queries-7)", "reference: expected one statement, got 2"),
        (
            "cve_cpe_queries.json#8 (cve_cpe_queries-8)",
            "gold: 4 positional argument(s) for searchCPE, whose parameters are 3",
        ),
        ("ok", "cve_cpe_queries-9"),
        ("ok", "toolalpaca_queries-0-turns_1"),
        ("ok", "toolalpaca_queries-0-turns_3"),
        (
            "toolalpaca_queries.json#0 (toolalpaca_queries-0-turns_4)",
            "turns_4.golden_answer: expected a non-empty string",
        ),
        (
            "toolalpaca_queries.json#0 (toolalpaca_queries-0-turns_5)",
            "turns_5.docstring: no <func_start>...<docstring_end> block",
        ),
        ("toolalpaca_queries.json#1 (toolalpaca_queries-1-notes)", "unexpected key 'notes' beside the turns_<k> slots"),
        (
            "toolalpaca_queries.json#1 (toolalpaca_queries-1-turns_1)",
            "turns_1.golden_answer[0]: convertCurrency: argument 'from': a variable base is not a literal",
        ),
        (
            "toolalpaca_queries.json#2 (toolalpaca_queries-2-turns_1)",
            "turns_1.golden_answer: not a JSON list: Expecting value at column 2",
        ),
        ("toolalpaca_queries.json#2 (toolalpaca_queries-2-turns_2)", "turns_2: expected an object, got list"),
        ("ok", "toolllm_queries-0"),
        ("ok", "toolllm_queries-1"),
        ("toolllm_queries.json#2 (toolllm_queries-2)", "context[0]: not valid Python: invalid syntax"),
        ("toolllm_queries.json#3 (toolllm_queries-3)", "Output: expected a function call, got a variable"),
        ("toolllm_queries.json#4 (toolllm_queries-4)", "Input: expected a non-empty string"),
        ("toolllm_queries.json#5 (toolllm_queries-5)", "context: expected a list of function stub strings"),
        ("_derived_function_definitions.json#3", "definition: expected string 'dataset' and 'name'"),
    ]


def test_reference_record_exact(fx):
    first = read_fixture(fx)[0]
    assert first.to_dict() == {
        "id": "cve_cpe_queries-0",
        "tools": [
            {"type": "function", "function": {
                "name": "searchCVE",
                "description": (
                    "Build and send GET request then return list of objects containing a collection of CVEs.\n\n"
                    "Args:\ncpeName (str): A CPE name."
                ),
                "parameters": {"type": "object", "properties": {
                    "cpeName": {"default": None}, "keywordSearch": {"default": None},
                    "limit": {"type": "integer", "default": None},
                }},
            }},
            {"type": "function", "function": {
                "name": "searchCPE",
                "description": "Search CPE names.",
                "parameters": {"type": "object", "properties": {
                    "cpeMatchString": {"type": "string", "default": None},
                    "keywordSearch": {"type": "string", "default": None},
                    "limit": {"type": "integer", "default": 10},
                }},
            }},
        ],
        "messages": [
            {"role": "user", "content": "List two CPEs for Microsoft Exchange 2010."},
            {"role": "assistant", "tool_calls": [{"id": "call_0", "type": "function", "function": {
                "name": "searchCPE", "arguments": {"keywordSearch": "Microsoft Exchange 2010", "limit": 2},
            }}]},
        ],
        "meta": {
            "source": "nexusraven", "dataset": "cve_cpe",
            "reference": "r = nvdlib.searchCPE(keywordSearch = 'Microsoft Exchange 2010', limit = 2)",
            "assigned_to": "r",
        },
    }  # fmt: skip
    positional = read_fixture(fx)[1]
    assert positional.messages[-1].tool_calls[0].arguments == {"cpeName": "cpe:2.3:a:microsoft:exchange_server:2013:"}


def test_toolalpaca_turn_exact(fx):
    items = {i.id: i for i in read_fixture(fx) if isinstance(i, Conversation)}
    turn = items["toolalpaca_queries-0-turns_1"]
    assert [t.to_dict()["function"] for t in turn.tools] == [
        {"name": "convertCurrency", "description": "Convert currency values from one currency to another.",
         "parameters": {
            "type": "object",
            "properties": {
                "from": {"type": "string", "description": "Required. string. The currency code to convert from."},
                "to": {"type": "string", "description": "Required. string. The currency code to convert to."},
                "amount": {"type": "number", "description": "Required. number. The amount to be converted."},
            },
            "required": ["from", "to", "amount"],
        }},
        {"name": "getQuotes", "description": "Get quotes for precious metals.", "parameters": {
            "type": "object",
            "properties": {
                "symbols": {"type": "array", "items": {"type": "string"}, "description": "Metal codes."},
                "limit": {"type": "integer", "description": "How many."},
            },
            "required": ["symbols"],
        }},
    ]  # fmt: skip
    assert turn.messages[1].tool_calls[0].arguments == {"from": "EUR", "to": "GBP", "amount": 5000}
    assert turn.meta["turn"] == "turns_1" and turn.meta["in_standardized_eval"] is True
    parallel = items["toolalpaca_queries-0-turns_3"]
    assert [(c.id, c.name, c.arguments) for c in parallel.messages[1].tool_calls] == [
        ("call_0", "getQuotes", {"symbols": ["XAU", "XAG"]}),
        ("call_1", "convertCurrency", {"from": "USD", "to": "JPY", "amount": 100}),
    ]
    assert parallel.meta["in_standardized_eval"] is False


def test_toolllm_stubs(fx):
    items = {i.id: i for i in read_fixture(fx) if isinstance(i, Conversation)}
    second = items["toolllm_queries-1"]
    (tool,) = second.tools
    assert tool.to_dict()["function"] == {
        "name": "get_all_bodies_positions",
        "description": "Positions of all bodies.",
        "parameters": {"type": "object", "properties": {
            "latitude": {"type": "integer", "default": 33},
            "from_date": {"type": "string"},  # the stub's default 2017 - 12 - 20 is an expression, not a date
            "kind": {"type": "string", "default": None},
            "tags": {"type": "array", "items": {"type": "string"}, "default": ["a"]},
        }},
    }  # fmt: skip
    assert second.messages[1].tool_calls[0].arguments == {"from_date": "2017-12-20", "latitude": 40}
    first = items["toolllm_queries-0"]
    assert first.meta["tool_name"] == "maptiles" and first.meta["output_original"][1] == "maptiles"


def test_without_definitions_references_have_no_tools(fx):
    items = read_fixture(fx, definitions=False)
    cve = [i for i in items if isinstance(i, Conversation) and i.meta["dataset"] == "cve_cpe"]
    assert [c.id for c in cve] == ["cve_cpe_queries-0", "cve_cpe_queries-9"]  # positional args need the definitions
    assert all(c.tools == [] for c in cve)
    assert len(items) == len(read_fixture(fx)) - 1  # the broken definition is no longer read


def test_unusable_inputs(fx, tmp_path):
    with pytest.raises(
        SourceError, match="expected one or more query files, optionally followed by _derived_function_definitions.json"
    ):
        list(nexus.read([]))
    with pytest.raises(SourceError, match="function definitions must come last"):
        list(nexus.read([fx / "_derived_function_definitions.json", fx / "cve_cpe_queries.json"]))
    with pytest.raises(SourceError, match="no such file or directory"):
        list(nexus.read([tmp_path / "x_queries.json"]))
    (tmp_path / "bad_queries.json").write_text('{"query": "x"}')
    with pytest.raises(SourceError, match="expected a JSON list of queries, got dict"):
        list(nexus.read([tmp_path / "bad_queries.json"]))
    (tmp_path / "broken_queries.json").write_text('[{"query": "x", "refer')
    with pytest.raises(SourceError, match="invalid JSON at line 1 column"):
        list(nexus.read([tmp_path / "broken_queries.json"]))


# ---------------------------------------------------------------- real data


def read_real(shared_data: Path) -> list:
    folder = shared_data / "nexusraven_v1_eval"
    return list(
        nexus.read(
            [folder / f"{name}_queries.json" for name in QUERY_FILES] + [folder / "_derived_function_definitions.json"]
        )
    )


@pytest.mark.shared_data
def test_real_counts_and_calls(shared_data):
    items = read_real(shared_data)
    assert not [i for i in items if isinstance(i, Rejected)]
    assert Counter(i.meta["dataset"] for i in items) == {
        "cve_cpe": 78,
        "emailrep": 38,
        "virustotal": 151,
        "toolalpaca": 85,
        "toolllm": 21,
    }
    by_dataset: dict[str, list[Conversation]] = {}
    for item in items:
        by_dataset.setdefault(item.meta["dataset"], []).append(item)
    assert Counter(c.messages[-1].tool_calls[0].name for c in by_dataset["cve_cpe"]) == {
        "searchCVE": 43,
        "searchCPE": 35,
    }
    assert {c.meta["assigned_to"] for c in by_dataset["cve_cpe"]} == {"r"}
    assert [
        len(c.tools) for c in by_dataset["virustotal"][:1] + by_dataset["emailrep"][:1] + by_dataset["cve_cpe"][:1]
    ] == [12, 2, 2]
    alpaca = by_dataset["toolalpaca"]
    assert sum(c.meta["in_standardized_eval"] for c in alpaca) == 51  # every record's turns_1
    assert Counter(len(c.messages[-1].tool_calls) for c in alpaca) == {1: 69, 2: 12, 3: 2, 4: 1, 5: 1}  # parallel golds
    from_args = [c.id for c in alpaca if any("from" in call.arguments for call in c.messages[-1].tool_calls)]
    assert len(from_args) == 4  # convertCurrency(from=...): not Python, read leniently
    first_vt = by_dataset["virustotal"][0]
    assert first_vt.messages[-1].tool_calls[0].to_dict() == {
        "id": "call_0",
        "type": "function",
        "function": {"name": "vt_get_domain_report", "arguments": {"domain": "cloudflare.com", "x_apikey": "my_api"}},
    }


@pytest.mark.shared_data
def test_real_schemas_valid_and_gold_faults_are_the_sources(shared_data):
    faults: Counter[tuple[str, str]] = Counter()
    validators: dict[str, jsonschema.Draft202012Validator] = {}  # the same tools recur in every query of a file

    def validator(schema: dict) -> jsonschema.Draft202012Validator:
        key = json.dumps(schema, sort_keys=True)
        if key not in validators:
            jsonschema.Draft202012Validator.check_schema(schema)
            validators[key] = jsonschema.Draft202012Validator(schema)
        return validators[key]

    for conversation in read_real(shared_data):
        tools = {t.name: validator(t.parameters) for t in conversation.tools}
        for call in conversation.messages[-1].tool_calls:
            assert call.name in tools, (conversation.id, call.name)
            for error in tools[call.name].iter_errors(call.arguments):
                kind = (
                    "null for a typed parameter"
                    if error.instance is None
                    else f"{type(error.instance).__name__} for {error.validator_value}"
                )
                faults[(conversation.meta["dataset"], kind)] += 1
    # toolalpaca golds pass None for parameters they leave out; toolllm stubs annotate coordinates as int.
    assert faults == {("toolalpaca", "null for a typed parameter"): 30, ("toolllm", "float for integer"): 10}


@pytest.mark.shared_data
def test_cli_converts_all_query_files(shared_data, tmp_path, capsys):
    folder = shared_data / "nexusraven_v1_eval"
    out = tmp_path / "nexus.jsonl"
    args = [str(folder / f"{name}_queries.json") for name in QUERY_FILES] + [
        str(folder / "_derived_function_definitions.json")
    ]
    assert cli_main(["data", "convert", "nexus", *args, "-o", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "read 373, written 373, rejected 0"
    assert json.loads(out.read_text(encoding="utf-8").splitlines()[0])["id"] == "cve_cpe_queries-0"
