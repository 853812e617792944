"""What every chat format shares: segments and the one masking rule.

A format renders a canonical conversation into ``Segment``s: pieces of text that know which
message they came from and what part of it they are. *Whether* a segment is trained is not the
format's decision: ``mask_segments`` decides it in one place for every family:

    trained = every assistant turn's text, its tool calls, and its end-of-turn token;
    masked  = system, tools, user, tool results, and every header.

Turning segments into token ids and labels is the next stage, ``train.formats.tokenize``.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal

# NATIVE (the default answer_style) is imported from here by the families, whose constructors take the option
from train.formats.text_answers import ANSWER_STYLES, NATIVE, TEXT_STYLE, parse_as_format, text_answer_view
from train.schema import Conversation, Message, Tool, ToolCall

if TYPE_CHECKING:
    from train.formats.serving import Serving

Part = Literal[
    "header",  # role headers, BOS, separators a model never has to produce
    "system",  # system prompt text
    "tools",  # tool definitions wherever the format puts them
    "user",
    "tool_result",
    "text",  # assistant text: answers and reasoning
    "reasoning",  # an assistant's reasoning block (Message.reasoning_content with its tags: Qwen3's <think>)
    "call_name",  # the tool name inside an assistant tool call
    "call_args",  # the serialized arguments of an assistant tool call
    "call_syntax",  # the format's scaffolding around calls: braces, keys, <tool_call> tags
    "end",  # the assistant's end-of-turn token(s)
]
ASSISTANT_PARTS: frozenset[str] = frozenset({"text", "reasoning", "call_name", "call_args", "call_syntax", "end"})
# The parts a loss weight can name: the trained parts. "reasoning" also weighs the assistant text of a
# turn that makes tool calls (the formats render it as "text"; ``weight_part`` tells it apart).
WEIGHT_PARTS: frozenset[str] = ASSISTANT_PARTS | {"reasoning"}
# Stands in for the answer a prompt is cut before: any non-empty text every format can write.
_PROMPT_STAND_IN = "x"


@dataclass(frozen=True)
class Segment:
    text: str
    part: Part
    message: int = -1  # index into conversation.messages; -1 for text outside any message
    special: bool = False  # text is exactly one control token of the tokenizer
    # encoded apart from the text before it, as a reference that encodes message pieces one by one does
    # (llama-models' Llama 4 ChatFormat: header "\n\n", content, each tool call)
    new_run: bool = False

    @property
    def assistant(self) -> bool:
        return self.part in ASSISTANT_PARTS


def to_json(value: Any) -> str:
    """JSON as HF chat templates' ``tojson`` writes it: non-ASCII kept, ``", "`` and ``": "`` separators,
    keys in their given order. Every family writes tool definitions, calls and results this way."""
    return json.dumps(value, ensure_ascii=False)


def message_groups(messages: Sequence[tuple[int, Message]]) -> list[list[tuple[int, Message]]]:
    """``(index, message)`` pairs in turns: each run of consecutive tool messages is one group (the
    families write a run of results as one turn, or at least side by side), every other message a
    group of its own."""
    groups: list[list[tuple[int, Message]]] = []
    for item in messages:
        if item[1].role == "tool" and groups and groups[-1][0][1].role == "tool":
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups


@dataclass(frozen=True)
class MaskPolicy:
    """Which assistant turns train, and how much each part of them weighs in the loss.

    ``weights`` maps a part of ``WEIGHT_PARTS`` to its weight, 1.0 when absent; "reasoning" falls
    back to the weight of "text", so ``{text: 0.5}`` weighs all assistant text. A weight of 0.0
    masks the part (its labels become -100).
    """

    last_turn_only: bool = False
    weights: dict[str, float] = field(default_factory=dict)

    def weight(self, part: str) -> float:
        if part == "reasoning" and part not in self.weights:
            part = "text"
        return float(self.weights.get(part, 1.0))

    @property
    def scales_loss(self) -> bool:
        """Whether a trained part weighs other than 1.0 (0.0 only masks, which the labels say already)."""
        return any(float(w) not in (0.0, 1.0) for w in self.weights.values())


def weight_part(segment: Segment, call_turns: frozenset[int]) -> str:
    """The part a segment's loss weight is looked up by: its own, or "reasoning" for the text of an
    assistant turn with tool calls (``call_turns``: the indices of those messages)."""
    return "reasoning" if segment.part == "text" and segment.message in call_turns else segment.part


def call_turns(conv: Conversation) -> frozenset[int]:
    return frozenset(i for i, m in enumerate(conv.messages) if m.role == "assistant" and m.tool_calls)


def trained_segments(segments: Sequence[Segment], policy: MaskPolicy = MaskPolicy()) -> list[bool]:
    """The masking rule: which segments are trained."""
    last = max((s.message for s in segments if s.assistant), default=None)
    return [seg.assistant and (not policy.last_turn_only or seg.message == last) for seg in segments]


def mask_segments(
    segments: Sequence[Segment], policy: MaskPolicy = MaskPolicy(), calls: frozenset[int] = frozenset()
) -> list[float]:
    """A loss weight per segment: the part's weight where trained, 0.0 where masked.

    ``calls`` names the assistant messages with tool calls (``call_turns``), whose text is "reasoning".
    """
    trained = trained_segments(segments, policy)
    return [policy.weight(weight_part(seg, calls)) if t else 0.0 for seg, t in zip(segments, trained)]


def refuse_reasoning(format_name: str, conv: Conversation) -> None:
    """ValueError naming the first message with (non-empty) reasoning: for a format that has no place for it."""
    for index, message in enumerate(conv.messages):
        if message.reasoning_content:
            raise ValueError(
                f"messages[{index}] carries reasoning_content, which chat format {format_name!r} has no place for "
                "(it would be dropped); use a format that renders reasoning (qwen3, harmony) or remove it"
            )


def _render_door(own: Callable[[Any, Conversation], list[Segment]]) -> Callable[[Any, Conversation], list[Segment]]:
    """A family's ``render`` behind the shared rules: reasoning it has no place for is refused, the format's own
    ``check`` runs, and text answers render through ``render_text_answers`` (which comes back here, natively)."""

    @functools.wraps(own)
    def render(self: ChatFormat, conv: Conversation) -> list[Segment]:
        if not self.supports_reasoning:
            refuse_reasoning(self.name, conv)
        self.check(conv)
        if self.text_answers:
            return self.render_text_answers(conv)
        return own(self, conv)

    render._dispatched = True  # type: ignore[attr-defined]
    return render


def _parse_door(own: Callable[[Any, str], tuple[str | None, list[ToolCall]]]) -> Callable[..., Any]:
    """A family's ``parse`` behind the answer style: text answers are read by ``parse_text``."""

    @functools.wraps(own)
    def parse(self: ChatFormat, text: str) -> tuple[str | None, list[ToolCall]]:
        if self.text_answers:
            return self.parse_text(text)
        return own(self, text)

    parse._dispatched = True  # type: ignore[attr-defined]
    return parse


class ChatFormat:
    """Base class of the family formats: subclasses implement ``render`` and ``parse`` in their own syntax; the
    base puts both behind the rules every format shares (``__init_subclass__``), text answers included."""

    name: ClassVar[str]
    default_tokenizer: ClassVar[str]
    #: How ``train.formats.tokenize`` encodes this format's text. Runs between control tokens are
    #: encoded as one string, exactly as a chat template's
    #: string is split only at added tokens. Mistral's reference encoder encodes each message piece
    #: on its own, but every such piece sits between two control tokens, so merged runs match it
    #: too. A format whose reference splits text elsewhere would set this False.
    merge_text_runs: ClassVar[bool] = True
    #: Whether rendering a longer conversation changes how an earlier assistant turn is shown (Qwen3 drops the
    #: ``<think>`` of turns before the last user query, Harmony earlier analysis). ``data.turns=auto`` then
    #: expands each trained turn into the context inference shows it (``train.formats.expansion``), and an
    #: explicit ``data.turns=whole`` is warned about at compose time.
    rewrites_history: ClassVar[bool] = False
    #: Options whose value must be one of a few names (``check_format_options`` checks them at compose time).
    OPTION_CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"answer_style": ANSWER_STYLES}
    #: Whether the format renders ``Message.reasoning_content``. One that does not refuses a conversation
    #: carrying reasoning (``refuse_reasoning``, run before every ``render``) rather than drop it silently.
    supports_reasoning: ClassVar[bool] = False
    #: How a model trained in this format is served: its chat template files and server parsers
    #: (``train.formats.serving``); None: the format has no serving recipe, and ``tooltrain export`` says so.
    serving: ClassVar[Serving | None] = None
    #: The family format this one is a layout of (a recipe's variant of ``llama3_1``): a run on a model folder of
    #: that family keeps it, one of another family is refused (``train.engine.model_folder``). None: a family.
    variant_of: ClassVar[str | None] = None
    #: Whether the format is plain text that any tokenizer writes (no control tokens of a family): a run on a
    #: model folder keeps it instead of switching to the folder's family format.
    any_tokenizer: ClassVar[bool] = False
    #: How the assistant writes calls: the family's own syntax, or text answers (``train.formats.text_answers``).
    #: The formats take it as a constructor option; the base dispatches on it, once for every family (below).
    answer_style: str = NATIVE

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Every rendering path (tokenize, prompts, stats, the render CLI) goes through ``render`` and every reading
        # of a completion through ``parse``: a family writes only its own syntax, and the base wraps both so that
        # the rules every family shares (refusing reasoning it has no place for, the format's own checks, text
        # answers) run in one place, and no format can skip one by forgetting it.
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("render")
        if own is not None and not getattr(own, "_dispatched", False):
            cls.render = _render_door(own)  # type: ignore[method-assign]
        own = cls.__dict__.get("parse")
        if own is not None and not getattr(own, "_dispatched", False):
            cls.parse = _parse_door(own)  # type: ignore[method-assign]

    @property
    def text_answers(self) -> bool:
        return self.answer_style == TEXT_STYLE

    def check(self, conv: Conversation) -> None:
        """Refuse (``ValueError``) a conversation the format cannot train, in any answer style; run before every
        ``render``. The base refuses nothing beyond ``refuse_reasoning``."""

    def render_text_answers(self, conv: Conversation) -> list[Segment]:
        """``render`` for text answers: the family's own rendering of ``text_answer_view(conv)`` (no tools, no
        calls: text turns only), its segments pointing at the conversation's own messages (a system prompt
        put in front belongs to none, -1)."""
        view, shifted = text_answer_view(conv)
        native = copy.copy(self)
        native.answer_style = NATIVE
        segments = native.render(view)
        if not shifted:
            return segments
        return [replace(seg, message=seg.message - shifted if seg.message >= shifted else -1) for seg in segments]

    def split_reasoning_block(self, text: str) -> tuple[str | None, str]:
        """(reasoning, answer) of a completion whose turns open with the format's own reasoning block, read off in
        every answer style; the base has no such block: (None, text)."""
        return None, text

    def reasoning_of(self, text: str) -> str | None:
        """The reasoning a completion wrote in the format's reasoning block, as ``Message.reasoning_content`` holds
        it (None without one): what history keeps of the turn where the template renders reasoning."""
        return self.split_reasoning_block(text)[0]

    def parse_text(self, text: str) -> tuple[str | None, list[ToolCall]]:
        """``parse`` for text answers: (reasoning, calls) of the answer after the format's own reasoning block,
        ValueError when the answer is not a call list."""
        return parse_as_format(self.split_reasoning_block(text)[1], self.end_of_turn_texts())

    def render(self, conv: Conversation) -> list[Segment]:
        raise NotImplementedError

    def parse(self, text: str) -> tuple[str | None, list[ToolCall]]:
        """Generated assistant text -> (content, tool calls). Never evaluates the text."""
        raise NotImplementedError

    def render_text(self, conv: Conversation) -> str:
        return "".join(seg.text for seg in self.render(conv))

    # ---- inference: what a model sees before it writes an assistant turn ----------------------

    def render_prompt(self, conv: Conversation, message_index: int) -> list[Segment]:
        """The segments a model sees before writing ``conv.messages[message_index]``: every earlier
        message, then that message's header (a chat template's ``add_generation_prompt=True``).

        ``message_index`` names an assistant message, or is ``len(conv.messages)`` for a new turn.
        Derived for every family from the rendering itself: the conversation up to that message,
        with a stand-in assistant turn in its place (so the prompt never depends on the gold
        answer, and a format that lays out its prefix by what comes last, as Mistral does with its
        tools, sees the same conversation a deployed model would), cut before the first trained
        segment of that turn. A conversation the format cannot express raises its ``ValueError``.
        """
        messages = conv.messages
        if not 0 <= message_index <= len(messages):
            raise ValueError(f"message index {message_index} is outside the conversation (0..{len(messages)})")
        if message_index < len(messages) and messages[message_index].role != "assistant":
            role = messages[message_index].role
            raise ValueError(f"messages[{message_index}] is a {role!r} message, not an assistant turn")
        stand_in = Message(role="assistant", content=_PROMPT_STAND_IN)
        prefix = Conversation(conv.id, [*messages[:message_index], stand_in], tools=conv.tools, meta=conv.meta)
        segments = self.render(prefix)
        trained = trained_segments(segments)
        cut = next((i for i, seg in enumerate(segments) if trained[i] and seg.message == message_index), None)
        if cut is None:
            raise ValueError(f"{self.name}: the rendering has no trained segment for message {message_index}")
        return segments[:cut]

    def end_of_turn_texts(self) -> tuple[str, ...]:
        """The control tokens that end an assistant turn (generation stops at any of them).

        Read from the rendering of a probe conversation with a text turn and a call turn, so a
        family whose call turns end differently (Llama 3.1's ``<|eom_id|>``) reports both.
        """
        probe = Conversation(
            id="end-of-turn-probe",
            tools=[Tool(name="probe")],
            messages=[
                Message(role="user", content="q"),
                Message(role="assistant", tool_calls=[ToolCall(name="probe", arguments={}, id="call0000a")]),
                Message(role="tool", tool_call_id="call0000a", name="probe", content="r"),
                Message(role="assistant", content="a"),
            ],
        )
        if self.text_answers:  # every turn is a text turn: a call turn cannot end differently
            probe = Conversation(id="end-of-turn-probe", messages=probe.messages[:1] + probe.messages[-1:])
        ends = [seg.text for seg in self.render(probe) if seg.part == "end" and seg.special]
        return tuple(dict.fromkeys(ends))
