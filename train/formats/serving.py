"""How a model trained in a tooltrain chat format is served: its chat template and its tool-call parser.

``chat_template(fmt)`` is a Jinja chat template (Hugging Face's ``apply_chat_template`` convention, which
vLLM and SGLang use) that renders system prompts, tools, assistant text, tool calls and tool results
exactly as ``fmt.render_text`` does, and a generation prompt exactly as ``fmt.render_prompt``; where the
format refuses a conversation, the template raises (``raise_exception``) with the format's reason. It is
assembled from the files in ``train/formats/templates``: a header that pins the options the format was
built with (a caller may still override them, e.g. ``apply_chat_template(..., date_string=...)``), the
shared ``common.jinja`` macros, then the family's own files.

``SERVING[name]`` says which vLLM / SGLang tool-call parser reads the format's output and how well. vLLM's
parsers were run on the tokens each format trains (tests/formats/test_serving_parsers.py, vLLM 0.33.0);
SGLang's were read from its sources (``python/sglang/srt/function_call/``). ``docs/formats.md`` ("Serving
an exported model") has the same table for people.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from importlib import resources
from typing import Any

from train.formats.base import ChatFormat


@dataclass(frozen=True)
class Serving:
    templates: tuple[str, ...]  # files of train/formats/templates, joined in this order
    variables: tuple[str, ...]  # format attributes the template reads; the header pins their values
    vllm_parser: str
    sglang_parser: str
    exact: bool  # the parsers read back every call this format writes (name and arguments), as its own parse does
    notes: str  # what differs, or what to watch
    # format attributes the template reads as tt_<name>, pinned with no override: transformers passes the
    # tokenizer's own bos_token / eos_token into every template, which need not be what the run trained with
    pinned: tuple[str, ...] = ()
    # vLLM's --reasoning-parser for a format whose turns open with a reasoning block; "" when none does
    reasoning_parser: str = ""


_HERMES_NOTES = (
    "vLLM's hermes and SGLang's qwen25 parsers read each <tool_call> block as JSON with name and arguments, as "
    "the format writes it; parallel calls are several blocks. The text before the first call comes back with "
    "the newline the format puts before a call (tooltrain's parse drops it)."
)
_MISTRAL_NOTES = (
    "vLLM's mistral parser (with this Hugging Face tokenizer, not --tokenizer-mode mistral) keeps special tokens "
    "when tools are given and reads the JSON list after [TOOL_CALLS]; it ignores the model's call ids and issues "
    "its own 9-character ones, which the template accepts back. SGLang's mistral parser looks for '[TOOL_CALLS] [' "
    "with a space, which the SentencePiece vocabulary (mistral_v3) decodes to and tekken (mistral_nemo) does not; "
    "SGLang also drops special tokens unless a request sets skip_special_tokens=false."
)

_MISTRAL = Serving(
    templates=("common.jinja", "mistral.jinja"),
    variables=(),
    vllm_parser="mistral",
    sglang_parser="mistral",
    exact=True,
    notes=_MISTRAL_NOTES,
)
SERVING: dict[str, Serving] = {
    "llama3_1": Serving(
        templates=("common.jinja", "llama3_prelude.jinja", "llama3_1.jinja"),
        variables=("tools_in_user_message", "date_string"),
        vllm_parser="llama3_json",
        sglang_parser="llama3",
        exact=True,
        notes=(
            'A call turn is one {"name": ..., "parameters": ...} object; vLLM\'s llama3_json and SGLang\'s llama3 '
            "parsers read name and parameters from it. One call per turn, as the format trained."
        ),
    ),
    "llama3_1_metatool": Serving(
        templates=("common.jinja", "llama3_prelude.jinja", "llama3_1_metatool.jinja"),
        variables=("tools_in_user_message", "date_string"),
        vllm_parser="llama3_json",
        sglang_parser="llama3",
        exact=False,
        notes=(
            "No parser reads this format exactly: a call turn is reasoning text, <|python_tag|>, then a JSON list "
            "of calls. vLLM's llama3_json (special tokens skipped, so the tag is gone) finds every call object but "
            "drops the reasoning text (content is null), fails the whole turn when the reasoning holds a '{' that "
            "is not a call, and when streaming finds calls only in a completion that starts with <|python_tag|> "
            "or '{'. SGLang's llama3 reads the list only "
            "when the turn has no reasoning text (or when special tokens are kept). Exact: tooltrain's own parse "
            "(train.formats.get_format('llama3_1_metatool').parse) on the raw completion."
        ),
    ),
    "llama4": Serving(
        templates=("common.jinja", "llama4.jinja"),
        variables=(),
        vllm_parser="llama4_json",
        sglang_parser="llama3",
        exact=False,
        notes=(
            'A call is {"type": "function", "name": ..., "parameters": ...}; vLLM\'s llama4_json (its llama3_json '
            "parser under Llama 4's name) reads name and parameters from a turn that is one call. Parallel calls are "
            "objects side by side with no separator, as llama-models writes them, which it is not known to split "
            "(not run here: no vLLM offline), and text before a call is not a call. SGLang's llama3 detector reads the "
            "same JSON objects (read from its sources, not run). Exact: tooltrain's own parse "
            "(train.formats.get_format('llama4').parse) on the raw completion."
        ),
    ),
    "qwen2_5": Serving(
        templates=("common.jinja", "qwen2_5.jinja"),
        variables=(),
        vllm_parser="hermes",
        sglang_parser="qwen25",
        exact=True,
        notes=_HERMES_NOTES,
    ),
    "qwen3": Serving(
        templates=("common.jinja", "qwen3.jinja"),
        variables=("mode",),
        vllm_parser="hermes",
        sglang_parser="qwen25",
        exact=True,
        notes=_HERMES_NOTES
        + " The <think> block is read off by vLLM's qwen3 reasoning parser (--reasoning-parser qwen3; SGLang's is "
        "qwen3 too) into reasoning_content; a client that sends it back in history gets it rendered as trained.",
        reasoning_parser="qwen3",
    ),
    # the two Mistral formats differ only in their tokenizer: one template and parser serve both
    "mistral_v3": _MISTRAL,
    "mistral_nemo": _MISTRAL,
    "mistral_v7": Serving(
        templates=("common.jinja", "mistral_v7.jinja"),
        variables=(),
        vllm_parser="mistral",
        sglang_parser="mistral",
        exact=True,
        notes=_MISTRAL_NOTES
        + " v7 turns may hold text before [TOOL_CALLS]; vLLM's mistral parser returns it as the content.",
    ),
    "chatml": Serving(
        templates=("common.jinja", "chatml.jinja"),
        variables=("default_system",),
        vllm_parser="hermes",
        sglang_parser="qwen25",
        exact=True,
        notes=_HERMES_NOTES + " <tool_call> is plain text in SmolLM2's vocabulary; the parsers match the text.",
    ),
    "deepseek_coder": Serving(
        templates=("common.jinja", "deepseek_coder.jinja"),
        variables=(),
        vllm_parser="",  # no tool syntax, so no tool-call parser: served as plain chat
        sglang_parser="",
        exact=True,
        notes=(
            "No tool syntax: the template refuses tools, tool calls and tool results as the format does, and the "
            "servers run without a tool-call parser. A model tuned on text answers (ITC, answer_style=toolgt_text) "
            "answers in its message content; read it with the recipe's own parser."
        ),
    ),
    "deepseek_v3": Serving(
        templates=("common.jinja", "deepseek_v3.jinja"),
        variables=(),
        vllm_parser="deepseek_v3",
        sglang_parser="deepseekv3",
        exact=True,
        notes=(
            "vLLM's deepseek_v3 and SGLang's deepseekv3 parsers read each tool-call block (function, the tool "
            "separator, NAME, then the arguments in a json code block) between the tool-calls begin and end tokens, "
            "as the format writes them (read from their sources, not run here); the text before the block is the "
            "content. The control tokens must reach the parser (they are not special in DeepSeek's tokenizer)."
        ),
    ),
    "harmony": Serving(
        templates=("common.jinja", "harmony.jinja"),
        variables=("model_identity", "reasoning_effort", "knowledge_cutoff", "current_date"),
        vllm_parser="openai",
        sglang_parser="gpt-oss",
        exact=True,
        notes=(
            "vLLM's openai tool parser and openai_gptoss reasoning parser read Harmony's channels: analysis is the "
            "reasoning, each to=functions.NAME message on commentary a call, final the content (names taken from "
            "vLLM's sources; vLLM was not run here). vLLM serves gpt-oss through openai-harmony's own renderer, "
            "whose history rule differs from this template's (docs/formats.md, harmony); SGLang's parser is "
            "gpt-oss. Exact: tooltrain's own parse (train.formats.get_format('harmony').parse) on the raw completion."
        ),
        reasoning_parser="openai_gptoss",
    ),
    # No vLLM / SGLang parser reads CALLTOOL["<name>"]: the selector is served without one (an empty parser name)
    # and its completion read by tooltrain's own parse (train.formats.toolselect_text).
    "toolselect_text": Serving(
        templates=("common.jinja", "toolselect_text.jinja"),
        variables=(),
        vllm_parser="",
        sglang_parser="",
        exact=False,
        notes=(
            "No server parser reads this format: the answer is plain text, 'Thought: ...' then "
            "'Act: CALLTOOL[\"<name>\"]', never an OpenAI tool call, so the server runs without a tool-call "
            "parser and the client reads the Act with tooltrain's parse "
            "(train.formats.get_format('toolselect_text').parse) on the completion text. The template renders "
            "only what the layout holds (one user message, the candidates as tools, one answer with at most one "
            "call without arguments) and raises on anything else with the format's reason."
        ),
        pinned=("bos_token", "eos_token"),
    ),
}


def serving(name: str) -> Serving:
    if name not in SERVING:
        raise ValueError(f"no serving recipe for chat format {name!r}; known: {', '.join(SERVING)}")
    return SERVING[name]


def jinja_literal(value: Any) -> str:
    """A Jinja expression for a plain option value (Jinja string literals take JSON's escapes)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"cannot write {type(value).__name__} {value!r} into a chat template")


def chat_template(fmt: ChatFormat) -> str:
    """The Jinja chat template that renders conversations exactly as ``fmt`` does (module docstring)."""
    if fmt.answer_style != "native":  # the templates write the family's own tool syntax: they would not match
        raise ValueError(
            f"no chat template for {fmt.name} with answer_style={fmt.answer_style}: the templates write "
            "native tool calls; serve the model as plain chat and read its answers with "
            "train.formats.text_answers.parse_text_answer"
        )
    spec = serving(fmt.name)
    header = [
        (
            f"{{#- tooltrain chat template for the {fmt.name} format (train/formats/templates). It renders what "
            "tooltrain trained on: the same text as the format's render_text, a generation prompt as its "
            "render_prompt. -#}"
        ),
        f"{{%- set format_name = {jinja_literal(fmt.name)} %}}",
    ]
    for variable in spec.variables:
        value = jinja_literal(getattr(fmt, variable))
        header.append(f"{{%- if {variable} is not defined %}}{{%- set {variable} = {value} %}}{{%- endif %}}")
    for variable in spec.pinned:
        header.append(f"{{%- set tt_{variable} = {jinja_literal(getattr(fmt, variable))} %}}")
    folder = resources.files("train.formats") / "templates"
    pieces = [folder.joinpath(name).read_text(encoding="utf-8") for name in spec.templates]
    return "\n".join(header) + "\n" + "".join(pieces)


def end_of_turn_ids(fmt: ChatFormat, tokenizer: Any) -> list[int]:
    """The ids of the tokens that end an assistant turn in ``fmt`` (a server stops generating at them)."""
    ids = []
    for text in fmt.end_of_turn_texts():
        token_id = tokenizer.convert_tokens_to_ids(text)
        if token_id is not None and (token_id != tokenizer.unk_token_id or text == tokenizer.unk_token):
            ids.append(token_id)
    return ids


# ---------------------------------------------------------------- control tokens typed as text

# Training encodes every message's text as text (train.formats.tokenize: only the format's own segments become
# control ids). A chat template renders the prompt to one string, and the servers encode that string with the
# tokenizer's special tokens recognised, so text that spells one becomes it. What was checked, and where:
# vLLM's ChatCompletionRequest (vllm/entrypoints/openai/protocol.py) has no field that turns this off
# (add_special_tokens only adds BOS-like tokens on top of the template; skip_special_tokens only shapes the
# decoded output), while its CompletionRequest takes ``prompt`` as a list of token ids; SGLang's /generate takes
# ``input_ids`` instead of ``text`` (docs.sglang.io, "Sampling Parameters"). Neither server was run here.
CONTROL_TEXT_WARNING = (
    "Training encoded every message's text as text: a message that spells one of this format's control tokens "
    "({tokens}) trained as those characters. The exported chat template renders a prompt to one string, and vLLM "
    "and SGLang encode that string with the tokenizer's special tokens recognised, so the same text in a user "
    "message, a tool result or an argument becomes the control tokens: it can close the turn and open a system "
    "turn the model never saw come from a user. Their chat endpoints have no setting that keeps it as text (vLLM's "
    "chat request: add_special_tokens only adds BOS-like tokens, skip_special_tokens only shapes the output). "
    "Where message text is not trusted, send token ids instead, encoded as training encoded them, to the endpoints "
    "below, or refuse text that contains a control token. Checked in vLLM's and SGLang's request definitions; "
    "neither server was run here."
)


def control_text(fmt: ChatFormat) -> dict[str, Any]:
    """What ``tooltrain_export.json`` says about text that spells the format's control tokens (comment above)."""
    from train.formats.control_tokens import format_control_tokens

    tokens = format_control_tokens(fmt)
    listed = ", ".join(f"`{token}`" for token in tokens) if tokens else "none found"
    return {
        "control_tokens": tokens,
        "chat_endpoints_keep_text": False,
        "warning": CONTROL_TEXT_WARNING.format(tokens=listed),
        "token_id_requests": {
            "vllm": {"endpoint": "/v1/completions", "field": "prompt", "value": "a list of token ids"},
            "sglang": {"endpoint": "/generate", "field": "input_ids", "value": "a list of token ids"},
        },
        "encode_as_trained": "train.formats.tokenize.tokenize_prompt(fmt, conversation, index, tokenizer)",
    }


def vllm_command(model_dir: str, fmt: ChatFormat) -> str:
    """``vllm serve`` with the template named explicitly (older transformers do not read chat_template.jinja)."""
    spec = serving(fmt.name)
    folder = shlex.quote(model_dir)
    command = f"vllm serve {folder} --chat-template {shlex.quote(model_dir + '/chat_template.jinja')}"
    # a format no parser reads is served without one (its calls are read by tooltrain's parse)
    if spec.reasoning_parser:
        command += f" --reasoning-parser {spec.reasoning_parser}"
    return f"{command} --enable-auto-tool-choice --tool-call-parser {spec.vllm_parser}" if spec.vllm_parser else command


def sglang_command(model_dir: str, fmt: ChatFormat) -> str:
    spec = serving(fmt.name)
    command = (
        f"python -m sglang.launch_server --model-path {shlex.quote(model_dir)} "
        f"--chat-template {shlex.quote(model_dir + '/chat_template.jinja')}"
    )
    if spec.reasoning_parser:
        command += f" --reasoning-parser {spec.reasoning_parser}"
    return f"{command} --tool-call-parser {spec.sglang_parser}" if spec.sglang_parser else command


__all__ = [
    "CONTROL_TEXT_WARNING",
    "SERVING",
    "Serving",
    "chat_template",
    "control_text",
    "end_of_turn_ids",
    "serving",
    "sglang_command",
    "vllm_command",
]
