"""The fallback format: any causal LM, rendered by its own tokenizer's chat template.

The thirteen exact formats write each family's text themselves and are checked token for token against the
official templates. A model of another family (Gemma, Phi, GLM, Granite, ...) has only its template, so this
format renders with it (``tokenizer.apply_chat_template(messages, tools=...)`` through ``train.formats.hf``) and
reads the masks off the rendering:

* **Markers.** A template with ``{% generation %}`` blocks (trl's ``*_training.jinja``) says itself which
  characters the assistant writes: those spans train (transformers' ``return_assistant_tokens_mask`` reads the
  same spans).
* **Prefixes.** Otherwise each assistant turn ``i`` trains the text the template adds between
  ``messages[:i]`` with the generation prompt and ``messages[:i+1]``: what a model writes after the prompt a
  server shows it. Where the shorter rendering closes the conversation with control tokens the longer one does
  not write at that place (Phi-3's final ``<|endoftext|>``), the turn ends where the two part.

A template whose prompt before a turn is not how the whole conversation begins, or that writes a turn one way
when it is last and another when the conversation goes on (Qwen3 dropping earlier ``<think>``), is not
prefix-stable: the conversation is refused naming the turn, never trained in a context inference never shows.
A template that silently drops a message's text, a call or a tool definition is refused too.

The rendered text is cut at the tokenizer's added tokens (control tokens), exactly where
``apply_chat_template(tokenize=True)`` cuts it. Parts: the trailing control tokens of a turn (and whitespace
between them) are its ``end``; its reasoning, content, call names and JSON arguments are labelled where they are
found verbatim; the rest of a call turn is ``call_syntax``. So the loud mask checks
(``train.formats.mask_checks``) and ``data.part_weights`` apply as to every format. ``parse`` is best effort
(JSON objects with a name and arguments): parity is certified only for the exact formats.

The format needs the tokenizer whose template it renders: option ``tokenizer`` (a name or path
``train.tokenizers.load_tokenizer`` loads; ``model.chat_format=auto`` sets it to ``model.tokenizer``), or
``TemplateFormat.bound(tokenizer)`` for a tokenizer object already loaded.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, ClassVar

from train.formats.base import NATIVE, ChatFormat, Segment
from train.formats.hf import to_hf_messages
from train.formats.serving import Serving
from train.schema import Conversation, Message, ToolCall

TEMPLATE_FORMAT = "template"
_GENERATION = re.compile(r"\{%-?\s*generation\s*-?%\}")
_TRAILING_TAG = re.compile(r"\s*<[^<>\s]+>\s*$")

SERVING = Serving(
    templates=(),
    variables=(),
    vllm_parser="",
    sglang_parser="",
    exact=False,
    notes=(
        "the export ships the model's own chat template (the one the run trained with); tooltrain does not know this "
        "family's call syntax, so no server parser is chosen: pick the one the model's card names."
    ),
)


@functools.lru_cache(maxsize=8)
def _load(name: str) -> Any:
    from train.tokenizers import load_tokenizer

    return load_tokenizer(name)


class TemplateFormat(ChatFormat):
    """Renders with the tokenizer's own chat template; masks from its ``{% generation %}`` markers or prefixes."""

    name: ClassVar[str] = TEMPLATE_FORMAT
    default_tokenizer: ClassVar[str] = ""
    supports_reasoning: ClassVar[bool] = True  # rendered if the template writes it, refused if it drops it
    serving: ClassVar[Serving | None] = SERVING

    def __init__(self, tokenizer: str = "", answer_style: str = NATIVE):
        self.tokenizer = tokenizer
        self.answer_style = answer_style
        self._bound: Any = None

    @classmethod
    def bound(cls, tokenizer: Any, answer_style: str = NATIVE) -> TemplateFormat:
        """The format on a tokenizer object already loaded (tests, tools holding one)."""
        fmt = cls(answer_style=answer_style)
        fmt._bound = tokenizer
        return fmt

    def hf_tokenizer(self) -> Any:
        if self._bound is None:
            if not self.tokenizer:
                raise ValueError(
                    "chat format 'template' renders with a tokenizer's own chat template: set "
                    "data.format_options.tokenizer (model.chat_format=auto sets it to model.tokenizer)"
                )
            self._bound = _load(self.tokenizer)
        if not getattr(self._bound, "chat_template", None):
            raise ValueError(f"tokenizer {self.tokenizer or type(self._bound).__name__} has no chat template to render")
        return self._bound

    # ---- rendering ---------------------------------------------------------------------------------------------

    def render(self, conv: Conversation) -> list[Segment]:
        tok = self.hf_tokenizer()
        messages, tools = to_hf_messages(conv)
        if _GENERATION.search(tok.chat_template):
            full, spans = _marker_spans(tok, conv, messages, tools)
        else:
            full, spans = _prefix_spans(tok, conv, messages, tools, _apply(tok, conv, messages, tools, False))
        _refuse_dropped(conv, full)
        return _segments(full, spans, conv, _control_pattern(tok))

    def end_of_turn_texts(self) -> tuple[str, ...]:
        """The base's probe (a call turn and a text turn), or a text turn alone for a template without tools."""
        try:
            return super().end_of_turn_texts()
        except ValueError:
            turns = [Message(role="user", content="q"), Message(role="assistant", content="a")]
            probe = Conversation("end-of-turn-probe", turns)
            return tuple(dict.fromkeys(seg.text for seg in self.render(probe) if seg.part == "end" and seg.special))

    def parse(self, text: str) -> tuple[str | None, list[ToolCall]]:
        """Best effort: the JSON objects with a ``name`` and ``arguments`` (or ``parameters``) are the calls, the
        text before the first of them (less a trailing tag such as ``<tool_call>``) the content."""
        body = text.rstrip()
        for end in self.end_of_turn_texts():
            body = body.removesuffix(end).rstrip()
        calls, first = _json_calls(body)
        content = body if first is None else _TRAILING_TAG.sub("", body[:first])
        return (content if content.strip() else None), calls


def _apply(tok: Any, conv: Conversation, messages: list, tools: Any, generation_prompt: bool) -> str:
    try:
        return tok.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=generation_prompt)
    except Exception as err:  # noqa: BLE001 - a template's raise_exception, or any error of its Jinja
        raise ValueError(f"conversation {conv.id!r}: the model's chat template refuses it: {err}") from None


def _assistant_turns(conv: Conversation) -> list[int]:
    return [i for i, m in enumerate(conv.messages) if m.role == "assistant"]


def _marker_spans(tok: Any, conv: Conversation, messages: list, tools: Any) -> tuple[str, dict[int, tuple[int, int]]]:
    """The rendering and each assistant turn's span, from the template's ``{% generation %}`` blocks (adjacent
    blocks are one span: Phi-3's closing ``eos_token`` block follows the last turn's)."""
    from transformers.utils.chat_template_utils import render_jinja_template

    try:
        rendered, indices = render_jinja_template(
            [messages],
            tools=tools,
            chat_template=tok.chat_template,
            return_assistant_tokens_mask=True,
            **tok.special_tokens_map,
        )
    except Exception as err:  # noqa: BLE001 - as _apply
        raise ValueError(f"conversation {conv.id!r}: the model's chat template refuses it: {err}") from None
    merged: list[list[int]] = []
    for start, end in sorted(indices[0]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        elif end > start:
            merged.append([start, end])
    turns = _assistant_turns(conv)
    if len(merged) != len(turns):
        raise ValueError(
            f"conversation {conv.id!r}: the chat template's generation blocks mark {len(merged)} span(s) for "
            f"{len(turns)} assistant turn(s) (messages {turns}); its masks cannot be read"
        )
    return rendered[0], {i: (start, end) for i, (start, end) in zip(turns, merged)}


def _prefix_spans(
    tok: Any, conv: Conversation, messages: list, tools: Any, full: str
) -> tuple[str, dict[int, tuple[int, int]]]:
    """Each assistant turn's span: what ``messages[:i+1]`` adds to ``messages[:i]`` with the generation prompt,
    and its stop token where the turn writes none itself (``_borrowed_stop``); the rendering, with the last turn's
    stop token appended where the template ends the conversation without one."""
    control = _control_pattern(tok)
    spans = {}
    for i in _assistant_turns(conv):
        prompt = _apply(tok, conv, messages[:i], tools, True)
        turn = _apply(tok, conv, messages[: i + 1], tools, False)
        where = f"conversation {conv.id!r}, messages[{i}] (assistant)"
        if not full.startswith(prompt) or not turn.startswith(prompt):
            raise ValueError(
                f"{where}: the model's chat template is not prefix-stable: the prompt it writes before this turn "
                "(add_generation_prompt=True) is not how the conversation goes on; its masks cannot be derived"
            )
        end = _shared_end(turn, full, len(prompt), control)
        if end is None:
            raise ValueError(
                f"{where}: the model's chat template is not prefix-stable: it writes this turn one way when it is "
                "last and another when the conversation goes on (history rewritten), so no mask trains it as shown"
            )
        if control is not None and _end_start(full[len(prompt) : end], control) == end - len(prompt):
            stop = _borrowed_stop(tok, messages[: i + 1], tools, full, end, control)
            if stop and end == len(full):
                full += stop
            end += len(stop)
        spans[i] = (len(prompt), end)
    return full, spans


def _borrowed_stop(tok: Any, turns: list, tools: Any, full: str, end: int, control: re.Pattern) -> str:
    """The control token a model emits to end a turn whose template writes no end of its own (GLM: the next role's
    ``<|user|>`` or ``<|observation|>``, its generation config's stop ids, as trl's glm4moe_training trains them):
    the one the conversation goes on with, or, after the last turn, the one a following user message opens with.
    "" when there is none."""
    if end < len(full):
        match = control.match(full, end)
        return match.group() if match else ""
    try:
        after = tok.apply_chat_template([*turns, {"role": "user", "content": "x"}], tools=tools, tokenize=False)
    except Exception:  # noqa: BLE001 - a template that refuses the probe: no stop token to borrow
        return ""
    match = control.match(after, len(full)) if after.startswith(full) else None
    return match.group() if match else ""


def _shared_end(turn: str, full: str, start: int, control: re.Pattern | None) -> int | None:
    """Where ``turn`` (a rendering of a prefix) stops being ``full`` at a piece boundary, when only control tokens
    and whitespace are left of it after that point (a closing written only at the end); None otherwise."""
    position = start
    for piece, _ in _pieces(turn[start:], control):
        if not full.startswith(piece, position):
            break
        position += len(piece)
    rest = turn[position:]
    leftover = control.sub("", rest) if control is not None else rest
    return position if not leftover.strip() else None


# ---- segments ----------------------------------------------------------------------------------------------------


def _control_pattern(tok: Any) -> re.Pattern | None:
    tokens = sorted({t.content for t in tok.added_tokens_decoder.values() if t.content}, key=len, reverse=True)
    return re.compile("|".join(re.escape(t) for t in tokens)) if tokens else None


def _pieces(text: str, control: re.Pattern | None) -> list[tuple[str, bool]]:
    """``text`` cut at control tokens: (piece, is a control token), in order."""
    if control is None:
        return [(text, False)] if text else []
    out, position = [], 0
    for match in control.finditer(text):
        if match.start() > position:
            out.append((text[position : match.start()], False))
        out.append((match.group(), True))
        position = match.end()
    if position < len(text):
        out.append((text[position:], False))
    return out


def _segments(full: str, spans: dict[int, tuple[int, int]], conv: Conversation, control: re.Pattern | None) -> list:
    """The rendering as segments: masked text as ``header``, each span labelled by ``_turn_parts``."""
    regions: list[tuple[int, int, str, int]] = []  # (start, end, part, message)
    position = 0
    for index, (start, end) in sorted(spans.items(), key=lambda item: item[1]):
        if start > position:
            regions.append((position, start, "header", -1))
        parts = _turn_parts(full[start:end], conv, index, control)
        regions += [(s + start, e + start, part, index) for s, e, part in parts]
        position = end
    if position < len(full):
        regions.append((position, len(full), "header", -1))
    segments = []
    for start, end, part, message in regions:
        for piece, special in _pieces(full[start:end], control):
            segments.append(Segment(piece, part, message, special=special))  # type: ignore[arg-type]
    return segments


def _turn_parts(text: str, conv: Conversation, index: int, control: re.Pattern | None) -> list[tuple[int, int, str]]:
    """(start, end, part) over one trained span: trailing control tokens are its end, its reasoning, content, call
    names and arguments where found verbatim, the rest text (a text turn) or call syntax (a call turn)."""
    message = conv.messages[index]
    body_end = _end_start(text, control)
    found: list[tuple[int, int, str]] = []
    cursor = 0
    for value, part in ((message.reasoning_content, "reasoning"), (message.content, "text")):
        cursor = _mark(text, body_end, cursor, (value or "").strip(), part, found)
    located = True
    for call in message.tool_calls:
        after_name = _mark(text, body_end, cursor, call.name, "call_name", found)
        after_args = next(
            (
                end
                for form in _argument_forms(call.arguments)
                if (end := _mark(text, body_end, after_name, form, "call_args", found)) != after_name
            ),
            after_name,
        )
        located = located and after_name != cursor and after_args != after_name
        cursor = after_args
    default = "call_syntax" if message.tool_calls and located else "text"
    if not located:  # a call not found verbatim: its parts cannot be labelled, the mask checks say so
        found = [(s, e, p) for s, e, p in found if p in ("reasoning", "text")]
    parts, position = [], 0
    for start, end, part in sorted(found):
        if start > position:
            parts.append((position, start, default))
        parts.append((start, end, part))
        position = end
    if body_end > position:
        parts.append((position, body_end, default))
    if body_end < len(text):
        parts.append((body_end, len(text), "end"))
    return parts


def _end_start(text: str, control: re.Pattern | None) -> int:
    """Where the turn's closing starts: its trailing control tokens and the whitespace among them, less the closing
    tags in front of them (``</tool_call>`` closes the call, it does not end the turn); ``len(text)`` for a turn
    that ends otherwise."""
    pieces = _pieces(text, control)
    run = len(pieces)
    while run and (pieces[run - 1][1] or not pieces[run - 1][0].strip()):
        run -= 1
    start = sum(len(piece) for piece, _ in pieces[:run])
    for piece, special in pieces[run:]:
        if special and not piece.startswith("</"):
            return start
        start += len(piece)
    return len(text)


def _mark(text: str, limit: int, cursor: int, value: str, part: str, found: list) -> int:
    """Label the first ``value`` at or after ``cursor`` (before ``limit``) as ``part``; the new cursor."""
    if not value:
        return cursor
    start = text.find(value, cursor, limit)
    if start < 0:
        return cursor
    found.append((start, start + len(value), part))
    return start + len(value)


def _argument_forms(arguments: dict[str, Any]) -> list[str]:
    """How templates write a call's arguments: ``tojson`` (HF's), compact, ASCII-escaped."""
    forms = [
        json.dumps(arguments, ensure_ascii=False),
        json.dumps(arguments, ensure_ascii=False, separators=(",", ":")),
        json.dumps(arguments),
    ]
    return list(dict.fromkeys(forms))


def _refuse_dropped(conv: Conversation, full: str) -> None:
    """ValueError naming what of the conversation the template did not write (a silently dropped turn or call)."""
    for tool in conv.tools:
        if tool.name not in full:
            raise ValueError(
                f"conversation {conv.id!r}: the model's chat template does not write tool {tool.name!r} (it takes no "
                "tools=, or drops them); use answer_style=toolgt_text (tools in the system prompt) or another format"
            )
    for index, message in enumerate(conv.messages):
        pieces = [("content", message.content), ("reasoning_content", message.reasoning_content)]
        pieces += [("tool call", call.name) for call in message.tool_calls]
        for what, value in pieces:
            if value and value.strip() and value.strip() not in full:
                raise ValueError(
                    f"conversation {conv.id!r}: the model's chat template drops the {what} of messages[{index}] "
                    f"({message.role}); a conversation it cannot show is not trained"
                )


def _json_calls(text: str) -> tuple[list[ToolCall], int | None]:
    """The calls written as JSON objects (or lists of them) in ``text``, and where the first starts."""
    decoder, calls, first, position = json.JSONDecoder(), [], None, 0
    while (match := re.compile(r"[\[{]").search(text, position)) is not None:
        try:
            value, end = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            position = match.start() + 1
            continue
        found = [_as_call(item) for item in (value if isinstance(value, list) else [value])]
        if found and all(call is not None for call in found):
            calls += found
            first = match.start() if first is None else first
        position = end
    return calls, first


def _as_call(value: Any) -> ToolCall | None:
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"]:
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    return ToolCall(name=value["name"], arguments=arguments) if isinstance(arguments, dict) else None


__all__ = ["SERVING", "TEMPLATE_FORMAT", "TemplateFormat"]
