"""What every chat format shares: segments, the one masking rule, and segments -> token ids.

A format renders a canonical conversation into ``Segment``s: pieces of text that know which
message they came from and what part of it they are. *Whether* a segment is trained is not the
format's decision: ``mask_segments`` decides it in one place for every family:

    trained = every assistant turn's text, its tool calls, and its end-of-turn token;
    masked  = system, tools, user, tool results, and every header.

Tokenization keeps the format's control tokens (``special=True`` segments) apart from text:
control tokens map straight to their ids, and all other text is encoded with special-token
parsing off, so a user who writes ``<|eot_id|>`` gets the characters, never the control id.
Runs of consecutive text segments are encoded as one string (exactly what a chat template
does: added tokens are the only places a template's string is split), and each token takes its
label from the characters it covers.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from train.schema import Conversation, Message, Tool, ToolCall

Part = Literal[
    "header",  # role headers, BOS, separators a model never has to produce
    "system",  # system prompt text
    "tools",  # tool definitions wherever the format puts them
    "user",
    "tool_result",
    "text",  # assistant text: answers and reasoning
    "call_name",  # the tool name inside an assistant tool call
    "call_args",  # the serialized arguments of an assistant tool call
    "call_syntax",  # the format's scaffolding around calls: braces, keys, <tool_call> tags
    "end",  # the assistant's end-of-turn token(s)
]
ASSISTANT_PARTS: frozenset[str] = frozenset({"text", "call_name", "call_args", "call_syntax", "end"})
# The parts a loss weight can name: the trained parts, plus "reasoning", the assistant text of a
# turn that also makes tool calls (the formats render it as "text"; ``weight_part`` tells it apart).
WEIGHT_PARTS: frozenset[str] = ASSISTANT_PARTS | {"reasoning"}
IGNORE_INDEX = -100
# Stands in for the answer a prompt is cut before: any non-empty text every format can write.
_PROMPT_STAND_IN = "x"


@dataclass(frozen=True)
class Segment:
    text: str
    part: Part
    message: int = -1  # index into conversation.messages; -1 for text outside any message
    special: bool = False  # text is exactly one control token of the tokenizer

    @property
    def assistant(self) -> bool:
        return self.part in ASSISTANT_PARTS


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


@dataclass
class Tokenized:
    input_ids: list[int]
    labels: list[int]  # unshifted: input_ids where trained, IGNORE_INDEX elsewhere
    weights: list[float]  # per-token loss weight (0.0 where masked)

    def to_dict(self) -> dict[str, Any]:
        return {"input_ids": self.input_ids, "labels": self.labels}


class SpanError(ValueError):
    """A token covers both trained and masked characters: the mask cannot be derived exactly."""


class ChatFormat:
    """Base class of the family formats: subclasses implement ``render`` and ``parse``."""

    name: ClassVar[str]
    default_tokenizer: ClassVar[str]
    #: Text runs between control tokens are encoded as one string, exactly as a chat template's
    #: string is split only at added tokens. Mistral's reference encoder encodes each message piece
    #: on its own, but every such piece sits between two control tokens, so merged runs match it
    #: too. A format whose reference splits text elsewhere would set this False.
    merge_text_runs: ClassVar[bool] = True

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

    def tokenize_prompt(self, conv: Conversation, message_index: int, tokenizer: Any) -> list[int]:
        """``render_prompt`` as token ids (control tokens as their ids, text encoded as in training)."""
        segments = self.render_prompt(conv, message_index)
        untrained = [False] * len(segments)
        return tokenize_segments(self, segments, untrained, [0.0] * len(segments), tokenizer).input_ids

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
        ends = [seg.text for seg in self.render(probe) if seg.part == "end" and seg.special]
        return tuple(dict.fromkeys(ends))

    def encode_texts(self, tokenizer: Any, texts: list[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
        """Plain text runs -> ids and character offsets, with no added token matched.

        The tokenizer's own pipeline (normalizer, pre-tokenizer, model) minus its added-token list:
        a user who writes ``<|eot_id|>`` or Qwen's ``<tool_call>`` gets those characters, never the
        control id. One batched backend call per conversation.
        """
        encodings = _plain_backend(tokenizer).encode_batch(texts, add_special_tokens=False)
        return [(list(e.ids), [tuple(o) for o in e.offsets]) for e in encodings]

    def encode_text(self, tokenizer: Any, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        return self.encode_texts(tokenizer, [text])[0]

    def tokenize(self, conv: Conversation, tokenizer: Any, policy: MaskPolicy = MaskPolicy()) -> Tokenized:
        result = self.tokenize_many([conv], tokenizer, policy)[0]
        if isinstance(result, Exception):
            raise result
        return result

    def tokenize_many(
        self, convs: Sequence[Conversation], tokenizer: Any, policy: MaskPolicy = MaskPolicy()
    ) -> list[Tokenized | ValueError]:
        """Tokenize many conversations with one batched encode of all their text runs.

        A conversation the format cannot express yields its ``ValueError`` in its place.
        """
        prepared: list[tuple[list[Segment], list[tuple[str, Any]]] | ValueError] = []
        texts: list[str] = []
        for conv in convs:
            try:
                segments = self.render(conv)
            except ValueError as err:
                prepared.append(err)
                continue
            plan, run_texts = _plan_runs(segments, self.merge_text_runs)
            prepared.append((segments, plan))
            texts.extend(run_texts)
        encoded = iter(self.encode_texts(tokenizer, texts) if texts else [])
        results: list[Tokenized | ValueError] = []
        for conv, item in zip(convs, prepared):
            if isinstance(item, ValueError):
                results.append(item)
                continue
            segments, plan = item
            trained = trained_segments(segments, policy)
            weights = mask_segments(segments, policy, call_turns(conv))
            try:
                results.append(_assemble(plan, segments, trained, weights, encoded, tokenizer))
            except ValueError as err:
                # keep the iterator aligned: skip the encodings of this conversation's remaining runs
                remaining = sum(1 for kind, _ in plan if kind == "run") - getattr(err, "runs_done", 0)
                for _ in range(remaining):
                    next(encoded)
                results.append(err)
        return results


_PLAIN_BACKENDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _plain_backend(tokenizer: Any) -> Any:
    """A backend tokenizer sharing ``tokenizer``'s model but knowing none of its added tokens."""
    plain = _PLAIN_BACKENDS.get(tokenizer)
    if plain is None:
        from tokenizers import Tokenizer

        backend = tokenizer.backend_tokenizer
        plain = Tokenizer(backend.model)
        plain.normalizer = backend.normalizer
        plain.pre_tokenizer = backend.pre_tokenizer
        _PLAIN_BACKENDS[tokenizer] = plain
    return plain


_SPECIAL_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _special_id(tokenizer: Any, text: str) -> int:
    known = _SPECIAL_IDS.setdefault(tokenizer, {})
    if text not in known:
        token_id = tokenizer.convert_tokens_to_ids(text)
        if token_id is None or token_id == getattr(tokenizer, "unk_token_id", None) and text != tokenizer.unk_token:
            raise ValueError(f"tokenizer has no control token {text!r}")
        known[text] = token_id
    return known[text]


def _plan_runs(segments: Sequence[Segment], merge: bool) -> tuple[list[tuple[str, Any]], list[str]]:
    """("special", index) or ("run", [indices]) in order, and the text of each run."""
    plan: list[tuple[str, Any]] = []
    for index, seg in enumerate(segments):
        if seg.special:
            plan.append(("special", index))
        elif seg.text:
            if merge and plan and plan[-1][0] == "run":
                plan[-1][1].append(index)
            else:
                plan.append(("run", [index]))
    texts = ["".join(segments[i].text for i in members) for kind, members in plan if kind == "run"]
    return plan, texts


def _assemble(plan, segments, trained, weights, encoded, tokenizer) -> Tokenized:
    """Control-token ids and encoded runs, in order, with each token's label and weight.

    A text token takes the flags of the segments its characters cover. A token covering trained
    and masked text is an error unless it is whitespace merged across a header/content edge
    (trained, as the model must produce it).
    """
    ids: list[int] = []
    token_trained: list[bool] = []
    token_weights: list[float] = []
    runs_done = 0
    for kind, item in plan:
        if kind == "special":
            try:
                ids.append(_special_id(tokenizer, segments[item].text))
            except ValueError as err:
                err.runs_done = runs_done  # type: ignore[attr-defined]
                raise
            token_trained.append(trained[item])
            token_weights.append(weights[item])
            continue
        run_ids, offsets = next(encoded)
        runs_done += 1
        try:
            flags, token_w = _token_flags(segments, item, trained, weights, offsets)
        except SpanError as err:
            err.runs_done = runs_done  # type: ignore[attr-defined]
            raise
        ids.extend(run_ids)
        token_trained.extend(flags)
        token_weights.extend(token_w)
    labels = [tok if t and w > 0 else IGNORE_INDEX for tok, t, w in zip(ids, token_trained, token_weights)]
    return Tokenized(input_ids=ids, labels=labels, weights=[w if t else 0.0 for t, w in zip(token_trained, token_weights)])


def tokenize_segments(
    fmt: ChatFormat, segments: Sequence[Segment], trained: Sequence[bool], weights: Sequence[float], tokenizer: Any
) -> Tokenized:
    """Segments -> ids, labels and per-token weights (one conversation)."""
    plan, texts = _plan_runs(segments, fmt.merge_text_runs)
    return _assemble(plan, segments, trained, weights, iter(fmt.encode_texts(tokenizer, texts) if texts else []), tokenizer)


def _token_flags(
    segments: Sequence[Segment], members: list[int], trained: Sequence[bool], weights: Sequence[float], offsets: list
) -> tuple[list[bool], list[float]]:
    """(trained, weight) of each token of one text run, from the segments its characters cover."""
    if not offsets:
        return [], []
    ends = np.fromiter(itertools.accumulate(len(segments[i].text) for i in members), dtype=np.int64, count=len(members))
    spans = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    last_index = len(members) - 1
    first = np.minimum(np.searchsorted(ends, spans[:, 0], side="right"), last_index)
    last = np.minimum(np.searchsorted(ends, np.maximum(spans[:, 1] - 1, spans[:, 0]), side="right"), last_index)
    seg_trained = np.array([trained[i] for i in members], dtype=bool)
    seg_weight = np.array([weights[i] for i in members], dtype=np.float64)
    flags = seg_trained[first]
    token_w = seg_weight[first]
    for t in np.nonzero(first != last)[0]:  # tokens crossing a segment edge: rare, checked one by one
        covered = range(first[t], last[t] + 1)
        mixed = {bool(seg_trained[k]) for k in covered}
        if len(mixed) > 1:
            text = "".join(segments[i].text for i in members)
            piece = text[spans[t, 0] : spans[t, 1]]
            # whitespace merged across a header/content edge is trained: the model must produce it
            if not piece.isspace():
                raise SpanError(f"token {piece!r} spans trained and masked text")
        flags[t] = True in mixed
        token_w[t] = max(seg_weight[k] for k in covered)
    return flags.tolist(), token_w.tolist()
