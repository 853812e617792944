"""toolselect_text: ToolSelect's plain-completion layout (seed 003, Figure 2) and its mask (§2.1.2), on real rows."""

from __future__ import annotations

import csv

import pytest
from session_cache import shared_tokenizer

from train.formats import get_format
from train.formats.tokenize import IGNORE_INDEX, tokenize
from train.schema import Conversation, Message, Tool, ToolCall
from train.sources.toolselect import read

FORMAT = "toolselect_text"  # registered (train/formats/__init__.py); module:attr still names it too
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
    tok = shared_tokenizer("llama3")
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
    from train.engine.config import compose

    cfg = compose(["recipe=tiny", "model=llama2_70b"])
    fmt = get_format(cfg.model.chat_format)
    assert (cfg.model.chat_format, fmt.bos_token, fmt.eos_token) == (FORMAT, "<s>", "</s>")
    plugged = get_format("train.papers.toolverifier.format:ToolSelectTextFormat")
    assert type(plugged) is type(fmt)


# ---- the mask with a Llama-2-like tokenizer ---------------------------------------------------------------
# Llama-2's own tokenizer loads only from the hub. The closest one built offline is mistral_v3: a SentencePiece
# BPE with byte fallback, the dummy-prefix space, <s> and </s> as control pieces, 32,768 pieces (Llama-2: 32,000),
# so the layout splits at the same kind of boundaries (a "▁Thought" piece after "###\n", "</s>" one control id).


def test_the_trained_span_on_a_real_row_with_a_llama2_like_sentencepiece_tokenizer(rows):
    tok = shared_tokenizer("mistral_v3")
    _, conv = rows[0]
    out = tokenize(get_format(FORMAT), conv, tok)  # the defaults: Llama-2's <s> and </s>
    trained = [i for i, label in enumerate(out.labels) if label != IGNORE_INDEX]
    start = trained[0]
    assert trained == list(range(start, len(out.input_ids)))
    assert out.input_ids[0] == tok.convert_tokens_to_ids("<s>") and out.labels[0] == IGNORE_INDEX
    assert out.input_ids[-1] == tok.convert_tokens_to_ids("</s>") and out.labels[-1] == out.input_ids[-1]
    # 320 ids, 93 trained (ids 227..319): the span starts at "Th" right after the "###\n" separator, ends at </s>
    assert (len(out.input_ids), start, len(trained)) == (320, 227, 93)
    assert tok.convert_ids_to_tokens(out.input_ids[start - 4 : start + 4]) == [
        *[".", "<0x0A>", "###", "<0x0A>"],  # masked: the end of the tool list
        *["Th", "ought", ":", "▁I"],  # trained
    ]
    assert tok.convert_ids_to_tokens(out.input_ids[-6:]) == ["OL", '["', "Book", "▁Review", '"]', "</s>"]
    assert tok.decode(out.input_ids[start:-1]).strip() == FIRST_ANSWER
    assert tok.decode(out.input_ids[1:start]).strip() == FIRST_ROW.strip()


# ---- the exported chat template: every real row, its prompt, the trained BOS/EOS ---------------------------


def template_tokenizer(**special):
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    word = Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    return PreTrainedTokenizerFast(tokenizer_object=word, **special)


def apply(tok, template, conv, count=None, **options):
    from train.formats.hf import to_hf_messages

    messages, tools = to_hf_messages(conv)
    messages = messages if count is None else messages[:count]
    return tok.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False, **options)


def test_the_exported_template_renders_every_real_row_and_its_prompt_as_trained(rows):
    from train.formats.serving import chat_template

    fmt = get_format(FORMAT)
    template, tok = chat_template(fmt), template_tokenizer()
    for _, conv in rows:
        assert apply(tok, template, conv) == fmt.render_text(conv), conv.id
        prompt = apply(tok, template, conv, 1, add_generation_prompt=True)
        assert prompt == "".join(seg.text for seg in fmt.render_prompt(conv, 1)), conv.id


def test_the_template_writes_the_bos_and_eos_the_run_trained_with_not_the_tokenizers(rows):
    """transformers hands every template the tokenizer's bos_token/eos_token (SmolLM2's bos is <|im_start|>);
    the toolselect_text template writes the ones the format was built with, pinned by the exporter."""
    from train.formats.serving import chat_template

    _, conv = rows[0]
    fmt = get_format(FORMAT, {"bos_token": "", "eos_token": "<|endoftext|>"})
    tok = template_tokenizer(bos_token="<|im_start|>", eos_token="<|im_end|>")
    assert apply(tok, chat_template(fmt), conv) == FIRST_ROW + FIRST_ANSWER + "<|endoftext|>"


def test_export_serves_the_selector_without_a_tool_call_parser_and_checks_its_own_probe():
    """No vLLM/SGLang parser reads CALLTOOL["..."]: the commands carry none, the metadata says so, and the
    exporter's template check uses a conversation the layout can hold (its general probe has a system turn)."""
    from train.engine.export import check_chat_template
    from train.formats.serving import chat_template, serving, sglang_command, vllm_command

    fmt = get_format(FORMAT)
    assert vllm_command("/m", fmt) == "vllm serve /m --chat-template /m/chat_template.jinja"
    sglang = "python -m sglang.launch_server --model-path /m --chat-template /m/chat_template.jinja"
    assert sglang_command("/m", fmt) == sglang
    assert (serving(FORMAT).vllm_parser, serving(FORMAT).exact) == ("", False)
    tok = template_tokenizer()
    tok.chat_template = chat_template(fmt)
    check_chat_template(tok, fmt)  # raises ExportError (or the template's refusal) when they differ


def test_the_prompt_never_depends_on_the_answer_being_written(rows):
    _, conv = rows[0]
    other = Conversation(
        conv.id,
        [conv.messages[0], Message(role="assistant", content="Another note.", tool_calls=[ToolCall("News", {})])],
        tools=conv.tools,
    )
    fmt = get_format(FORMAT)
    assert fmt.render_prompt(other, 1) == fmt.render_prompt(conv, 1)
    assert fmt.render_text(other) != fmt.render_text(conv)


def test_the_export_readme_says_no_parser_reads_the_selector(tmp_path):
    from train.engine.export import serving_metadata, write_serving_readme

    fmt = get_format(FORMAT)
    tok = template_tokenizer(eos_token="</s>")
    metadata = {"run_dir": "runs/x", "weights": "final", **serving_metadata(fmt, tmp_path, [], tok)}
    assert metadata["tool_call_parser"]["vllm"] == "" and "--tool-call-parser" not in metadata["serve"]["vllm"]
    write_serving_readme(tmp_path, metadata)
    readme = (tmp_path / "README.md").read_text()
    assert (
        "Tool-call parser: none: no server parser reads this format's answers, so the servers run as plain chat."
        in (readme)
    )
