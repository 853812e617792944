"""ToolGT's relevance samples (Table 2's relevance column): a text answer to the user where functions were offered
becomes a sample whose reasoning concludes that no function is called and whose answer is ``[]``, counted in the
build report; BFCL's irrelevance check and the text-answer parser read that answer as no call."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from train.cli import main
from train.evaluation.bfcl.scorer import check_relevance
from train.formats.text_answers import parse_text_answer
from train.papers.toolgt import teacher as prompts
from train.papers.toolgt.builder import NO_TOOLS, ToolGTBuilder, ToolGTOptions, build, split
from train.schema import Conversation, Message, Tool, ToolCall
from train.teacher import OfflineBackend, Teacher

sys.path.insert(0, str(Path(__file__).parent))
from test_toolgt import INPUTS, real_conversations

EMAIL = Tool(
    "send_email",
    "Send an email to a recipient.",
    {
        "type": "object",
        "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
        "required": ["to", "subject"],
    },
)

BOB = {"to": "bob@x.org", "subject": "Hi"}


def email_dialogue() -> Conversation:
    return Conversation(
        id="mail",
        tools=[EMAIL],
        messages=[
            Message(role="user", content="Send an email for me."),
            Message(role="assistant", content="Sure: to whom, and with which subject?"),  # 1: lacks parameters
            Message(role="user", content="To bob@x.org, subject Hi."),
            Message(role="assistant", tool_calls=[ToolCall("send_email", BOB)]),
            Message(role="tool", content='{"sent": true}'),
            Message(role="assistant", content="Done, the email is sent."),  # 5: answers the result: no sample
            Message(role="user", content="Thanks! Can you also book me a taxi?"),
            Message(role="assistant", content="I cannot book taxis."),  # 7: no function fits
        ],
    )


def test_text_answers_to_the_user_become_relevance_samples_and_a_call_keeps_the_whole_request():
    drops: list[str] = []
    samples = [(s.id, s.query, s.gold) for s in split(email_dialogue(), drops.append)]
    assert samples == [
        ("mail#1", "Send an email for me.", []),
        ("mail#3", "Send an email for me.\nTo bob@x.org, subject Hi.", [ToolCall("send_email", BOB)]),
        ("mail#7", "Thanks! Can you also book me a taxi?", []),
    ]
    assert drops == []
    chat = Conversation("chat", [Message(role="user", content="Hi"), Message(role="assistant", content="Hello!")])
    assert list(split(chat, drops.append)) == [] and drops == [NO_TOOLS]  # nothing to call, nothing to abstain from


def test_a_relevance_sample_reasons_to_no_call_and_answers_an_empty_list_in_every_arm():
    built = {arm: list(build([email_dialogue()], seed=0, arm=arm)) for arm in ("none", "cot", "template")}
    assert [s.id for s in built["template"]] == ["mail#1", "mail#3", "mail#7"]
    taxi = {arm: samples[2] for arm, samples in built.items()}
    assert taxi["none"].messages[2].content == "[]"  # No-Thought: the empty call list alone
    assert taxi["cot"].messages[2].content == (
        '<thinking>Let me think step by step. The request is: "Thanks! Can you also book me a taxi?".\n'
        'Here none of the functions ("send_email") can fulfill it as given: it asks for something they do not do, '
        "or it lacks the parameters they require.\nSo no function is called: []</thinking>\n[]"
    )
    assert taxi["template"].messages[2].content == (
        '<thinking>1. The request is: "Thanks! Can you also book me a taxi?". Based on the function descriptions, '
        'none of the functions ("send_email") can fulfill it as given: it asks for something they do not do, or it '
        "lacks the parameters they require.\n"
        "2. So I pick no function; this is pointed out instead.\n"
        '3. Examining the documentation: "send_email": Send an email to a recipient.\n'
        '4. Analyzing the parameters: "send_email" requires "to", "subject".\n'
        "5. Extracting the values from the request: it gives none that a function above needs for this request.\n"
        "6. Draft of the function call(s): no call, []\n"
        "7. Revalidating: no function call would fulfill the user's query, so none is made.</thinking>\n[]"
    )
    for sample in taxi.values():
        assert sample.messages[0].content == prompts.train_system_prompt([EMAIL])  # Table 11's prompt, as for calls
        assert sample.meta["gold_calls"] == [] and sample.meta["verified"] in ({"detail": "exact"}, {"cot": "exact"})
        answer = parse_text_answer(sample.messages[2].content)
        assert answer.well_formed and answer.calls == []  # the eval reads it as no call
        assert check_relevance([], "irrelevance")["valid"]  # which BFCL's irrelevance check scores right


def test_the_build_report_counts_the_relevance_samples(tmp_path, capsys):
    out = tmp_path / "built"
    assert main(["data", "build", "toolgt", *INPUTS, "--out-dir", str(out), "--seed", "7"]) == 0
    report = json.loads((out / "report.json").read_text())
    # the shipped 72 conversations: 53 call turns, 28 text answers where functions were offered (toolace_tiny 4,
    # glaive 24), and 25 glaive chats without functions that give no sample
    assert (report["samples"], report["kept"], report["relevance"]) == (81, 81, {"samples": 28, "kept": 28})
    assert report["dropped"] == {NO_TOOLS: 25}
    assert (
        sum(
            1 for line in (out / "train.jsonl").read_text().splitlines() if json.loads(line)["meta"]["gold_calls"] == []
        )
        == 28
    )
    printed = capsys.readouterr().out
    assert "samples 81 from 72 conversations (28 relevance: no call), kept 81 (28 relevance;" in printed


def verify_taxi(call_answer: str, judge: str = prompts.TOTALLY_INCORRECT) -> tuple[list[Conversation], dict]:
    writers = {
        **prompts.OFFLINE_WRITERS,
        prompts.CALL_STAGE: lambda r: call_answer,
        prompts.JUDGE_STAGE: lambda r: judge,
    }
    builder = ToolGTBuilder(ToolGTOptions.from_args({"template": "simple"}), 0, Teacher(OfflineBackend(writers)))
    conv = email_dialogue()
    conv.messages = conv.messages[6:]  # the taxi turn alone
    kept = list(builder.build([conv]))
    return kept, builder.report()


def test_stage_two_and_three_for_a_relevance_sample():
    kept, report = verify_taxi("<function></function>")  # an empty block is no call: AST-equal to no call
    assert len(kept) == 1 and kept[0].meta["verified"] == {"simple": "ast"}
    kept, report = verify_taxi('<function>[send_email(to="x", subject="y")]</function>')  # a call where none fits
    assert kept == [] and report["dropped"] == {"simple stage3: judge says TOTALLY INCORRECT": 1}
    assert report["relevance"] == {"samples": 1, "kept": 0}


def test_every_shipped_relevance_sample_is_kept_with_the_offline_teacher():
    samples = [s for s in build(real_conversations(), seed=0, template="claude") if not s.meta["gold_calls"]]
    assert len(samples) == 28 and all(s.messages[2].content.endswith("</thinking>\n[]") for s in samples)
