"""The ``bfcl_ast`` reward equals the official BFCL checker's verdict (bfcl-eval's ``ast_checker``, the way
tests/evaluation/bfcl_reference.py calls it) on gold answers and their perturbations: wrong value, missing
argument, extra call, wrong name, no call, text instead of calls. References are read by tooltrain's BFCL reader
from the data in the installed bfcl-eval package; completions are what a chat format's parse gives (calls, or a
parse error). The default tier takes the first items of each category; the slow tier every item.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("bfcl_eval")
HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:  # the corpus helpers beside this file (pytest imports tests in importlib mode)
    sys.path.insert(0, HERE)

import bfcl_reference as ref
from bfcl_corpus import perturb_ast_item, perturb_relevance_item

from train.evaluation.bfcl.decode import decode_text_answer
from train.evaluation.bfcl.scorer import CATEGORIES
from train.evaluation.rewards import REWARDS, get_reward
from train.evaluation.rewards.base import completion_of
from train.evaluation.rewards.bfcl_ast import bfcl_ast_reward, bfcl_verdict
from train.schema import Conversation, Message, ToolCall
from train.sources.bfcl import read

CATEGORIES_READ = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "simple_java",
    "simple_javascript",
    "live_simple",
    "live_relevance",
)


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    import os

    os.environ.setdefault("BFCL_PROJECT_ROOT", str(tmp_path_factory.mktemp("bfcl-root")))
    return ref.load_official()


def references(official, category: str, limit: int | None) -> list[Conversation]:
    questions, answers = ref.category_files(official.data_dir, "v4", category)
    found = [row for row in read([questions, *([answers] if answers else [])]) if isinstance(row, Conversation)]
    return found[:limit]


def as_completion(result):
    """A decoded BFCL result as a chat format's parse gives it: calls, or a parse error; None for shapes no parse
    produces (a dict, a call with two names, arguments that are not an object)."""
    if isinstance(result, str):
        return completion_of(error=f"parse: {result}")
    if not isinstance(result, list):
        return None
    calls = []
    for call in result:
        if not (isinstance(call, dict) and len(call) == 1 and isinstance(next(iter(call.values())), dict)):
            return None
        ((name, arguments),) = call.items()
        calls.append(ToolCall(name=name, arguments=arguments))
    return completion_of(content=None if calls else "No function fits.", calls=calls)


def cases(official, limit: int | None):
    for category in CATEGORIES_READ:
        for conv in references(official, category, limit):
            functions, ground_truth = conv.meta["bfcl_functions"], conv.meta.get("ground_truth")
            if ground_truth is None:
                perturbed = [(label, result, False) for label, result in perturb_relevance_item(functions)]
            else:
                perturbed = perturb_ast_item(functions, ground_truth, CATEGORIES[category].language)
            for label, result, dot in perturbed:
                completion = as_completion(result)
                if completion is not None:
                    case = ref.Case("v4", category, conv.id, label, result, functions, ground_truth, dot)
                    yield case, conv, completion


def assert_agreement(official, limit: int | None) -> int:
    disagreements, verdicts = [], set()
    for case, conv, completion in cases(official, limit):
        theirs = ref.official_verdict(official, case)[0]
        assert not theirs.startswith("raises"), case.key
        ours = bfcl_ast_reward(completion, conv, underscore_to_dot=case.underscore_to_dot)
        verdicts.add(theirs)
        if ours != (1.0 if theirs == "valid" else 0.0):
            disagreements.append((case.key, theirs, ours))
    assert disagreements == [], f"{len(disagreements)} disagreements, first: {disagreements[:5]}"
    assert verdicts == {"valid", "invalid"}
    return len(disagreements)


def test_the_reward_is_the_official_verdict_on_perturbed_gold_answers(official):
    built = list(cases(official, limit=3))
    labels = {case.label.rpartition(".")[2] for case, _, _ in built}
    # the brief's perturbations all occur: wrong value, missing argument, extra call, wrong name, no call
    assert {"plus_one", "drop", "first_call_repeated", "wrong_name", "no_calls", "string"} <= labels
    assert len(built) > 300
    assert_agreement(official, limit=3)


@pytest.mark.slow
def test_the_reward_is_the_official_verdict_on_every_item(official):
    assert_agreement(official, limit=None)


def test_a_java_text_answer_is_decoded_as_bfcl_decodes_it(official):
    (conv,) = references(official, "simple_java", 1)
    ((name, expected),) = conv.meta["ground_truth"][0].items()
    args = ", ".join(f"{key}={values[0]}" for key, values in expected.items() if values and values[0] != "")
    text = f"{name}({args})"
    completion = completion_of(content=text)
    completion.answer_text = text  # a format reading answers as text (answer_style=toolgt_text) sets it
    result = decode_text_answer(text, "java")
    functions, ground_truth = conv.meta["bfcl_functions"], conv.meta["ground_truth"]
    case = ref.Case("v4", "simple_java", conv.id, "text", result, functions, ground_truth)
    assert ref.official_verdict(official, case)[0] == "valid"  # the gold call, written as Java source
    assert bfcl_ast_reward(completion, conv) == 1.0
    broken = completion_of(content=text + ")")
    broken.answer_text = text + ")"
    assert bfcl_ast_reward(broken, conv) == 0.0


def test_registered_and_reads_the_conversation_dict():
    conv = Conversation(
        id="irrelevance_x",
        messages=[Message(role="user", content="What is the weather?")],
        meta={"category": "irrelevance", "bfcl_functions": [{"name": "f", "parameters": {"properties": {}}}]},
    )
    reward = get_reward("bfcl_ast")
    assert reward is bfcl_ast_reward and (REWARDS.get("bfcl_ast").low, REWARDS.get("bfcl_ast").high) == (0.0, 1.0)
    assert reward(completion_of(content="No tool can tell."), conv.to_dict()) == 1.0
    assert reward(completion_of(calls=[ToolCall("f", {})]), conv) == 0.0
    assert reward(completion_of(error="parse: broken"), conv) == 1.0  # BFCL: an undecodable answer holds no call
    assert bfcl_verdict(completion_of(calls=[ToolCall("f", {})]), conv)["error_type"] == (
        "irrelevance_error:decoder_success"
    )


def test_a_reference_without_its_answer_is_an_error_not_a_zero():
    conv = Conversation(
        id="simple_x",
        messages=[Message(role="user", content="hi")],
        meta={"category": "simple_python", "bfcl_functions": [{"name": "f"}]},
    )
    with pytest.raises(ValueError, match="needs meta.ground_truth"):
        bfcl_ast_reward(completion_of(calls=[ToolCall("f", {})]), conv)
    with pytest.raises(ValueError, match="category"):
        bfcl_ast_reward(completion_of(content="x"), Conversation(id="y", messages=[], meta={"category": "chat"}))
