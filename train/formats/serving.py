"""How a model trained in a tooltrain chat format is served: its chat template and its tool-call parser.

Each format says it in its class's ``serving`` attribute (a ``Serving``; None for a format that has no serving
recipe), so a format of one's own (``module:attr``) is exported with its own. ``serving(fmt)`` reads it.

``chat_template(fmt)`` is a Jinja chat template (Hugging Face's ``apply_chat_template`` convention, which
vLLM and SGLang use) that renders system prompts, tools, assistant text, tool calls and tool results
exactly as ``fmt.render_text`` does, and a generation prompt exactly as ``fmt.render_prompt``; where the
format refuses a conversation, the template raises (``raise_exception``) with the format's reason. It is
assembled from the template files its ``Serving`` names (``template_text``): a header that pins the options the
format was built with (a caller may still override them, e.g. ``apply_chat_template(..., date_string=...)``),
the shared ``common.jinja`` macros, then the family's own files.

The parsers a ``Serving`` names: vLLM's were run on the tokens each format trains
(tests/formats/test_serving_parsers.py, vLLM 0.33.0); SGLang's were read from its sources
(``python/sglang/srt/function_call/``). ``docs/formats.md`` ("Serving an exported model") has the same table for
people.
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
    """How a format is served (its class's ``serving`` attribute).

    A template name is a file of ``train/formats/templates`` (``common.jinja``), or ``PACKAGE:FILE`` for a file in
    a package's folder (``mypkg:my.jinja``), so a format kept outside ``train.formats`` ships its own files.
    """

    templates: tuple[str, ...]  # template files, joined in this order
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


# What the formats that share a server parser say about it (their own modules hold their Serving).
HERMES_NOTES = (
    "vLLM's hermes and SGLang's qwen25 parsers read each <tool_call> block as JSON with name and arguments, as "
    "the format writes it; parallel calls are several blocks. vLLM's hermes returns the text before the first call "
    "with the newline the format puts before a call (tooltrain's parse drops it); sent back as history, it renders "
    "as trained: the format and its template write a call turn's text less one trailing newline, so a call turn "
    "whose own text ends with a newline trains with one fewer."
)
MISTRAL_NOTES = (
    "vLLM's mistral parser (with this Hugging Face tokenizer, not --tokenizer-mode mistral) keeps special tokens "
    "when tools are given and reads the JSON list after [TOOL_CALLS]; it ignores the model's call ids and issues "
    "its own 9-character ones, which the template accepts back. SGLang's mistral parser looks for '[TOOL_CALLS] [' "
    "with a space, which the SentencePiece vocabulary (mistral_v3) decodes to and tekken (mistral_nemo) does not; "
    "SGLang also drops special tokens unless a request sets skip_special_tokens=false."
)


def serving(fmt: ChatFormat | type[ChatFormat] | str) -> Serving:
    """How ``fmt`` (a format, its class, or a name ``FORMATS`` resolves) is served: its class's ``serving``
    attribute; ValueError for a format without one."""
    from train.formats import format_class

    cls = format_class(fmt) if isinstance(fmt, str) else fmt if isinstance(fmt, type) else type(fmt)
    spec = cls.serving
    if spec is None:
        raise ValueError(
            f"no serving recipe for chat format {cls.name!r}: its class sets no serving attribute "
            "(train.formats.serving.Serving: the chat template files and the server parsers)"
        )
    return spec


def template_text(name: str) -> str:
    """The text of the template file ``name`` (``Serving``'s docstring says where it is)."""
    package, sep, file = name.rpartition(":")
    folder = resources.files(package) if sep else resources.files("train.formats") / "templates"
    return folder.joinpath(file).read_text(encoding="utf-8")


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
    spec = serving(fmt)
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
    pieces = [template_text(name) for name in spec.templates]
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
    spec = serving(fmt)
    folder = shlex.quote(model_dir)
    command = f"vllm serve {folder} --chat-template {shlex.quote(model_dir + '/chat_template.jinja')}"
    # a format no parser reads is served without one (its calls are read by tooltrain's parse)
    if spec.reasoning_parser:
        command += f" --reasoning-parser {spec.reasoning_parser}"
    return f"{command} --enable-auto-tool-choice --tool-call-parser {spec.vllm_parser}" if spec.vllm_parser else command


def sglang_command(model_dir: str, fmt: ChatFormat) -> str:
    spec = serving(fmt)
    command = (
        f"python -m sglang.launch_server --model-path {shlex.quote(model_dir)} "
        f"--chat-template {shlex.quote(model_dir + '/chat_template.jinja')}"
    )
    if spec.reasoning_parser:
        command += f" --reasoning-parser {spec.reasoning_parser}"
    return f"{command} --tool-call-parser {spec.sglang_parser}" if spec.sglang_parser else command


__all__ = [
    "CONTROL_TEXT_WARNING",
    "HERMES_NOTES",
    "MISTRAL_NOTES",
    "Serving",
    "chat_template",
    "control_text",
    "end_of_turn_ids",
    "serving",
    "sglang_command",
    "template_text",
    "vllm_command",
]
