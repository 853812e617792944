"""BFCL's own Java/JavaScript answer decoding as a test reference, and the recorded outputs the tests compare with.

BFCL decodes a prompting model's Java/JavaScript answer with tree-sitter (bfcl-eval's ``java_parser`` /
``js_parser``), pinned by bfcl-eval to tree_sitter 0.21.3, tree-sitter-java 0.21.0 and tree-sitter-javascript
0.21.4. Where those are installed the tests run BFCL's parsers live; elsewhere they compare with
``tests/fixtures/evaluation/bfcl/java_js/decoded.json``, recorded by this module from the live parsers:

    PYTHONPATH=<tree-sitter 0.21 site> python tests/evaluation/bfcl_java_js_reference.py [SHARED_DATA]

and ``--measure SHARED_DATA`` prints how many shipped items' gold, written as text, scores correct read as Python
(before) and as BFCL reads Java/JavaScript (after).

``bfcl_decode`` is ``default_decode_ast_prompting`` (bfcl-eval's ``model_handler/utils.py``, which imports vendor
SDKs, hence restated here: strip, wrap in ``[ ]``, drop the first and last character) around the official parsers.
Nothing here is decoder logic of tooltrain's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from train.evaluation.bfcl.decode import decode_prompting
from train.formats.text_answers import text_answer_view
from train.schema import Conversation

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "evaluation" / "bfcl" / "java_js"
RECORDED = FIXTURE / "decoded.json"
LANGUAGES = ("java", "javascript")
FAILED = "FAILED"  # BFCL's decode raised (the item is an "ast_decoder:decoder_failed")

# Inputs to the parsers themselves (what is inside the brackets): each construct BFCL's parsers treat specially.
HAND_CASES = {
    "java": [
        "Analyzer.makeProposals(useShortName=true)",
        "GeometryPresentation.createPresentation(controller=mapController, parent=mapArea)",
        'f(a = 1 , b = "x y")',
        "f(a=1); g(b=2)",
        "f(a=1)",
        "f(abcde=1)",
        "f(abcdef=1)",
        "f(a=\"x\\\"y\", b='c', c='abc')",
        "f(a=x -> x + 1, b=(int) 5, c=String::valueOf, d=List.<String>of())",
        'f(a=new int[]{1, 2}, b=new String[]{"a", "b"}, c=new int[][]{{1, 2}, {3}})',
        'f(a=new ArrayList<>(Arrays.asList("a", "b")), b=new ArrayList<Integer>() {{ add(1); add(2); }})',
        'f(a=new HashMap<String, Integer>() {{ put("a", 1); }}, b=Map.of("a", 1))',
        "f(a=1L, b=1.5f, c=-1, d=- 1, e=0x1F, g=1e3, h=1_000)",
        'f(a=1+2, b="a" + "b", c=x.y.z, d=x[0], e=x.m(1, 2), f=String.class, g=this, h=a ? b : c)',
        'f(a=new Foo(1, "x"), b=new Foo(), c=new java.util.Date())',
        "f(a=!flag, b=~x, c=i++, d=a instanceof B, e=null)",
        "new Foo().f(a=1, b=2)",
        "f(a=g(b=1), c=2)",
        "f(alpha=1, alpha=2)",
        "f(x, y, 3)",
        "obj.f(a=1, b=2) obj.g()",
        "f(a=1, b=2",
        "f(a=1, b=2))",
        "f(a=1 b=2)",
        "f(a=new int[5])",
        "f(a=[1, 2], b=3)",
        "f(a=1.5.3, b=2)",
        "no call here at all;",
        "",
    ],
    "javascript": [
        "f(a=1)",
        "validateUserInput(inputField=userInputField, isComplete=true)",
        "f(a=[1, 2], b={x: 1, 'y': \"z\"}, c=\"s\", d='t', e=5n, g=x.y, h=() => 1)",
        "f(i=function(a) { return a; }, j=new Date(), k=`tpl ${x}`)",
        'f(a = 1 , b = "x y")',
        'f(a=1+2, b="a" + "b", c=x?.y, d=x[0], e=x.m(1, 2), f=a ? b : c, g=typeof x, h=-1, i=!x, j=a ?? b)',
        "f(a=async () => { await x; }, b=x => x * 2, c=[...xs], d={...o})",
        "f(a=null, b=undefined, c=NaN, d=/re/g, e=1.5e3, f=0x1F)",
        "f(a=\"x\\\"y\", b='it\\'s', c='')",
        "f(a=b=1, c += 1, d={}, e=[], g=[,1])",
        "f(x)",
        "f(true, 1, false, null)",
        "f(x, y)",
        "f(a=1, a=2)",
        "f(a=1); g(b=2)",
        "f(a=1)\ng(b=2)",
        "f\n(a=1)",
        "f(a=1) // a comment",
        "f(a=1), g(b=2)",
        "x = f(a=1)",
        "new Foo(a=1)",
        "await f(a=1)",
        "Sure: f(a=1)",
        "f(a=1)(b=2)",
        "f(a=1).g(b=2)",
        "f(a=1,)",
        "f()",
        "f(a=1",
        "f(a=1))",
        "f(a=1 b=2)",
        "",
    ],
}


def bfcl_decode(text: str, language: str) -> Any:
    """BFCL's prompting decode of ``text`` with the official tree-sitter parsers (ImportError without them)."""
    body = text.strip("`\n ")
    if not body.startswith("["):
        body = "[" + body
    if not body.endswith("]"):
        body = body + "]"
    return bfcl_parse(body[1:-1], language)


def bfcl_parse(source: str, language: str) -> Any:
    if language == "java":
        from bfcl_eval.model_handler.parser.java_parser import parse_java_function_call as parse
    else:
        from bfcl_eval.model_handler.parser.js_parser import parse_javascript_function_call as parse
    try:
        return parse(source)
    except Exception:  # noqa: BLE001 -- any raise is BFCL's decode failure
        return FAILED


def ours_shown(result: Any) -> str:
    """tooltrain's decoded result as the fixture records BFCL's (a decode failure, an error string, as FAILED)."""
    return FAILED if isinstance(result, str) else repr(result)


# ---------------------------------------------------------------- gold answers as text


def turn_text(conversation: Conversation) -> str:
    """The reader's gold turn as ``answer_style=toolgt_text`` writes it (every value a quoted string)."""
    view, _ = text_answer_view(conversation)
    return view.messages[-1].content


_STRING_TYPES = {"String", "char", "any"}


def source_text(conversation: Conversation, language: str) -> str:
    """The gold calls in the language's own syntax, as a prompting model writes them: each value as source text
    (``useShortName=true``, ``nums=new int[]{2, 7}``, ``store={k: "v"}``), a string as a quoted literal unless it
    is itself an expression that reads back unchanged (``parent=mapArea``, ``sa=new InetSocketAddress(..)``)."""
    functions = {doc["name"]: doc for doc in conversation.meta["bfcl_functions"]}
    written = []
    for call in conversation.messages[-1].tool_calls:
        doc = functions.get(call.name) or conversation.meta["bfcl_functions"][0]
        properties = doc["parameters"]["properties"]
        expected = next(iter(conversation.meta["ground_truth"][0].values()))
        parts = []
        for name, value in call.arguments.items():
            first = next((answer for answer in expected.get(name, [""]) if answer != ""), "")
            as_string = properties.get(name, {}).get("type") in _STRING_TYPES or isinstance(first, str)
            parts.append(f"{name}={_string_literal(value, language) if as_string else value}")
        written.append(f"{call.name}({', '.join(parts)})")
    return "[" + ", ".join(written) + "]"


def _string_literal(value: str, language: str) -> str:
    probe = decode_prompting(f"[probe.call(xx={value}, yy=0)]", language)
    if isinstance(probe, list) and probe and next(iter(probe[0].values())).get("xx") == value:
        return value  # an expression BFCL reads back as exactly this text
    return f'"{value}"'


# ---------------------------------------------------------------- recording


def gold_texts(folder: Path) -> dict[str, tuple[str, str]]:
    """``language/id/form`` -> (language, text) for every Java/JavaScript item in ``folder`` (BFCL v2 layout)."""
    from train.sources.bfcl import read

    texts = {}
    for language in LANGUAGES:
        name = f"BFCL_v2_{language}.json"
        for conversation in read([folder / name, folder / "possible_answer" / name]):
            if isinstance(conversation, Conversation):
                texts[f"{language}/{conversation.id}/turn"] = (language, turn_text(conversation))
                texts[f"{language}/{conversation.id}/source"] = (language, source_text(conversation, language))
    return texts


def record(shared_data: Path | None) -> dict[str, Any]:
    cases: dict[str, Any] = {}
    for language, sources in HAND_CASES.items():
        for index, source in enumerate(sources):
            cases[f"{language}/hand/{index}"] = {"parse": source, "bfcl": _shown_live(bfcl_parse(source, language))}
    folders = [FIXTURE] + ([shared_data / "bfcl_v2"] if shared_data else [])
    for folder in folders:
        for key, (language, text) in gold_texts(folder).items():
            cases[key] = {"text": text, "bfcl": _shown_live(bfcl_decode(text, language))}
    return cases


def _shown_live(result: Any) -> str:
    return FAILED if result == FAILED else repr(result)


def measure(folder: Path) -> dict[str, dict[str, int]]:
    """Items whose gold, written as text, tooltrain scores correct: read as Python (the text-answer reading BFCL
    tasks used before) and as BFCL reads the language, for the gold turn as rendered and in Java/JS syntax."""
    import types

    from train.evaluation.bfcl.scorer import CATEGORIES, check_ast
    from train.evaluation.bfcl.task import BfclTask
    from train.evaluation.task_base import EvalItem
    from train.formats.text_answers import parse_text_answer
    from train.sources.bfcl import read

    counts: dict[str, dict[str, int]] = {}
    for language in LANGUAGES:
        spec = CATEGORIES[f"simple_{language}"]
        name = f"BFCL_v2_{language}.json"
        for conversation in read([folder / name, folder / "possible_answer" / name]):
            if not isinstance(conversation, Conversation):
                continue
            item = EvalItem(conversation.id, conversation, len(conversation.messages) - 1)
            for form, text in (("turn", turn_text(conversation)), ("source", source_text(conversation, language))):
                parsed = parse_text_answer(text)
                calls = parsed.calls if parsed.well_formed else []
                for reading, answer_text in (("python", None), ("bfcl", text)):
                    generation = types.SimpleNamespace(
                        text=text, answer_text=answer_text, error=parsed.error, tool_calls=calls
                    )
                    result = BfclTask().prediction(item, generation)["result"]
                    meta = conversation.meta
                    valid = check_ast(result, meta["bfcl_functions"], meta["ground_truth"], spec)["valid"]
                    key = f"{form}/{reading}"
                    counts.setdefault(key, {}).setdefault(language, 0)
                    counts[key][language] += valid
    return counts


if __name__ == "__main__":
    if sys.argv[1:2] == ["--measure"]:
        for key, by_language in measure(Path(sys.argv[2]) / "bfcl_v2").items():
            print(f"{key}: {by_language} = {sum(by_language.values())} of 150")
        sys.exit(0)
    shared = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    RECORDED.write_text(json.dumps(record(shared), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {RECORDED}")
