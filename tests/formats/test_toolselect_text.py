"""toolselect_text: ToolSelect's plain-completion layout (seed 003, Figure 2) and its mask (§2.1.2), on real rows."""

from __future__ import annotations

import csv

import pytest

from train.formats import get_format
from train.formats.tokenize import IGNORE_INDEX, tokenize
from train.schema import Conversation, Message, Tool, ToolCall
from train.sources.toolselect import read
from train.tokenizers import load_tokenizer

# Not a registered name (yet): the all-format tests assume a chat template and multi-turn rendering, which this
# single-sample completion layout has neither of; it plugs in by module:attr, as the house allows any format to.
FORMAT = "train.formats.toolselect_text:ToolSelectTextFormat"
LLAMA3 = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}  # Llama-2's own loads from the hub
FIRST_ROW = (
    'User: 10 reviews for "Harry Potter and the Philosopher\'s Stone".\n'
    "###\n"
    "Tool Choices: Bank Account Number generator = The Bank Account Number tool generates a random bank account "
    "number for a bank.\n"
    "Train Ticket Purchase = The Train Ticket Purchase tool gets train tickets for a train, provided stations, and "
    "date information.\n"
    "The Cricket Score tool = The Cricket Score tool gets the score for a match that is happening at a given location "
    "and date.\n"
    "Book Review = The Book Review tool gets the top-rated book reviews for a particular book.\n"
    "Grocery Shopping with discounts = The Grocery Shopping tool calculates the expense of grocery shopping based on "
    "the menu.\n"
    "Stock Price at location and date = The Stock Price tool gets the stock price for a company at a given location "
    "and date.\n"
    "Movie Recommendation = The Movie Recommendation tool recommends movies based on the user's preferences.\n"
    "News = The News tool gets the top news for a particular topic or query.\n"
    "###\n"
)
FIRST_ANSWER = (
    'Thought: I recommended the Book Review tool because the user asked for reviews of a specific book, "Harry Potter '
    "and the Philosopher's Stone\". The Book Review tool is designed to provide top-rated book reviews for a "
    "particular book, making it the most suitable tool for this request. It will retrieve the top 10 reviews for the "
    'book, as requested by the user.\nAct: CALLTOOL["Book Review"]'
)


@pytest.fixture
def rows(shared_data):
    folder = shared_data / "toolselect_toolverifier"
    texts = [row["text"] for row in csv.DictReader((folder / "train.csv").open(newline="", encoding="utf-8"))]
    convs = list(read([folder / "train.csv", folder / "tools.csv"]))
    assert len(convs) == len(texts) == 555 and all(isinstance(c, Conversation) for c in convs)
    return list(zip(texts, convs))


def test_the_first_real_row_renders_as_the_paper_lays_it_out(rows):
    text, conv = rows[0]
    assert get_format(FORMAT).render_text(conv) == "<s>" + FIRST_ROW + FIRST_ANSWER + "</s>"
    assert text == FIRST_ROW + FIRST_ANSWER


def test_every_real_row_renders_byte_for_byte_as_its_csv_text(rows):
    """Bar BOS and EOS, the rendering is the row's text; the 3 rows labelled CALLTOOL["Sun"] (cut at the hyphen)
    render the candidate the reader resolved it to."""
    fmt = get_format(FORMAT, {"bos_token": "", "eos_token": ""})
    differ = [conv.id for text, conv in rows if fmt.render_text(conv) != text]
    resolved = [conv.id for _, conv in rows if "gold_label" in conv.meta]
    assert len(resolved) == 3 and differ == resolved
    for text, conv in rows:
        if conv.id in resolved:
            assert fmt.render_text(conv) == text.replace('CALLTOOL["Sun"]', 'CALLTOOL["Sun-Rise Time tool"]')


def test_only_the_thought_the_act_and_the_eos_train_on_a_real_row(rows):
    """§2.1.2: the instruction and the tool list are masked; the trained ids decode to exactly the answer + EOS."""
    tok = load_tokenizer("llama3")
    _, conv = rows[0]
    out = tokenize(get_format(FORMAT, LLAMA3), conv, tok)
    trained = [i for i, label in enumerate(out.labels) if label != IGNORE_INDEX]
    assert trained == list(range(trained[0], len(out.input_ids)))  # one span, to the end
    assert [out.labels[i] for i in trained] == out.input_ids[trained[0] :]
    assert tok.decode(out.input_ids[trained[0] :]) == FIRST_ANSWER + "<|end_of_text|>"
    assert out.input_ids[-1] == tok.convert_tokens_to_ids("<|end_of_text|>")
    assert tok.decode(out.input_ids[: trained[0]]) == "<|begin_of_text|>" + FIRST_ROW
    assert out.input_ids[0] == tok.convert_tokens_to_ids("<|begin_of_text|>")
    assert len(trained) == len(tok.encode(FIRST_ANSWER, add_special_tokens=False)) + 1


def test_the_prompt_ends_where_the_thought_begins(rows):
    _, conv = rows[0]
    fmt = get_format(FORMAT)
    assert "".join(seg.text for seg in fmt.render_prompt(conv, 1)) == "<s>" + FIRST_ROW
    assert fmt.end_of_turn_texts() == ("</s>",)


@pytest.mark.parametrize(
    ("generated", "expected"),
    [
        ('Thought: it reviews books.\nAct: CALLTOOL["Book Review"]</s>', ("it reviews books.", "Book Review")),
        ('Thought: a\nb\nAct: CALLTOOL["News"]\nUser: more\n###\n', ("a\nb", "News")),  # ran on: first Act wins
        ('Thought: x\nAct: CALLTOOL["Sun-Rise Time tool"]', ("x", "Sun-Rise Time tool")),
        ("Thought: x\nAct: CALLTOOL[CarFinder()]", ("Thought: x\nAct: CALLTOOL[CarFinder()]", None)),  # not the layout
        ('Act: CALLTOOL["News"]', ('Act: CALLTOOL["News"]', None)),  # no Thought line before it
        ("I think News.</s>ignored", ("I think News.", None)),
    ],
)
def test_parse_reads_the_thought_and_the_first_act(generated, expected):
    content, calls = get_format(FORMAT).parse(generated)
    assert (content, calls[0].name if calls else None) == expected
    assert all(call.arguments == {} for call in calls)


def conv_with(*, tools=None, messages=None) -> Conversation:
    return Conversation(
        id="c",
        tools=tools if tools is not None else [Tool(name="A", description="does a")],
        messages=messages
        or [Message(role="user", content="q"), Message(role="assistant", content="t", tool_calls=[ToolCall("A", {})])],
    )


@pytest.mark.parametrize(
    ("conv", "reason"),
    [
        (conv_with(tools=[]), "no tool choices"),
        (conv_with(tools=[Tool(name="A", description="two\nlines")]), "cannot be one 'name = description' line"),
        (conv_with(messages=[Message(role="user", content="q")]), "one user then one assistant message, got user"),
        (
            conv_with(messages=[Message("user", "q"), Message("assistant", tool_calls=[ToolCall("A", {"x": 1})])]),
            "has arguments",
        ),
        (
            conv_with(
                messages=[Message("user", "q"), Message("assistant", tool_calls=[ToolCall("A", {}), ToolCall("A", {})])]
            ),
            "has 2 calls",
        ),
    ],
)
def test_what_the_layout_cannot_hold_is_refused_with_its_reason(conv, reason):
    with pytest.raises(ValueError, match=reason):
        get_format(FORMAT).render(conv)


def test_the_llama2_70b_model_config_uses_the_layout_with_llama2s_bos_and_eos():
    from train.config import compose

    cfg = compose(["recipe=tiny", "model=llama2_70b"])
    fmt = get_format(cfg.model.chat_format)
    assert (cfg.model.chat_format, fmt.bos_token, fmt.eos_token) == (FORMAT, "<s>", "</s>")
