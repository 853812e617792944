"""vLLM's own tool-call parsers on what each format really generates (skipped where vLLM is not installed).

For every conversation of the parity corpus, each assistant turn's trained token ids (text, calls, end
token) are decoded as vLLM decodes a completion (without the stop token, special tokens skipped or kept as
the parser's ``adjust_request`` says) and given to the parser the format's ``serving`` attribute names. The
calls it returns must be the conversation's calls; the text it returns must be the turn's text, except
where ``serving`` says the parser is not exact (llama3_1_metatool: vLLM drops the reasoning text). Run with
vLLM 0.33.0 when this was written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from train.formats import FORMATS, get_format
from train.formats.mistral import with_mistral_call_ids
from train.formats.serving import serving
from train.formats.tokenize import IGNORE_INDEX, tokenize
from train.schema import Conversation
from train.tokenizers import load_tokenizer

vllm_parsers = pytest.importorskip("vllm.tool_parsers")
protocol = pytest.importorskip("vllm.entrypoints.openai.chat_completion.protocol")

CORPUS = [
    Conversation.from_dict(json.loads(line))
    for line in (Path(__file__).resolve().parents[1] / "fixtures" / "parity" / "corpus.jsonl").open(encoding="utf-8")
]
TOKENIZERS = {
    "llama3_1": "llama3",
    "llama3_1_metatool": "llama3",
    "qwen2_5": "qwen2_5",
    "mistral_v3": "mistral_v3",
    "mistral_nemo": "mistral_tekken",
    "chatml": "tiny_chatml",
}


def generated_turns(fmt, conv: Conversation, tokenizer) -> list[list[int]]:
    """The token ids of each assistant turn as the model generates them: runs of trained tokens."""
    tokenized = tokenize(fmt, conv, tokenizer)
    runs, current = [], []
    for token, label in zip(tokenized.input_ids, tokenized.labels):
        if label != IGNORE_INDEX:
            current.append(token)
        elif current:
            runs, current = [*runs, current], []
    return runs + ([current] if current else [])


@pytest.mark.parametrize("name", [name for name in FORMATS if serving(name).vllm_parser])  # deepseek_coder: none
def test_the_named_vllm_parser_reads_the_formats_calls(name):
    fmt = get_format(name)
    spec = serving(fmt)
    tokenizer = load_tokenizer(TOKENIZERS[name])
    parser_class = vllm_parsers.ToolParserManager.get_tool_parser(spec.vllm_parser)
    ends = set(fmt.end_of_turn_texts())
    calls, lost_text = 0, []
    for conv in CORPUS:
        conv = with_mistral_call_ids(conv) if name.startswith("mistral") else conv
        try:
            turns = generated_turns(fmt, conv, tokenizer)
        except ValueError:
            continue  # a conversation this format refuses
        messages = [message for message in conv.messages if message.role == "assistant"]
        assert len(turns) == len(messages), conv.id
        tools = [tool.to_dict() for tool in conv.tools] or None
        for ids, message in zip(turns, messages):
            question = [{"role": "user", "content": "q"}]
            request = protocol.ChatCompletionRequest(model="m", messages=question, tools=tools)
            parser = parser_class(tokenizer, request.tools)
            request = parser.adjust_request(request)
            skip = True if request.skip_special_tokens is None else request.skip_special_tokens  # vLLM's default
            ids = ids[:-1] if tokenizer.convert_ids_to_tokens(ids[-1]) in ends else ids  # a server stops there
            info = parser.extract_tool_calls(tokenizer.decode(ids, skip_special_tokens=skip), request)
            got = [(call.function.name, json.loads(call.function.arguments)) for call in info.tool_calls]
            assert got == [(call.name, call.arguments) for call in message.tool_calls], (conv.id, message)
            calls += len(got)
            if (info.content or "").strip() != (message.content or "").strip():
                lost_text.append(conv.id)
    assert calls == {"llama3_1": 13, "mistral_v3": 15, "mistral_nemo": 15}.get(name, 16)
    assert lost_text == ([] if spec.exact else ["text_and_call"])
