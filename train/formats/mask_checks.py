"""Masks that fail loudly: a built sample whose mask cannot be right stops the build, naming the sample and why.

A format bug in masking does not crash anything: it trains the wrong tokens (axolotl #3088's Qwen3 think
masks, ms-swift #9427's repeated ``</think>``), or silently drops every sample as "nothing to train". So each
rendered sample is checked against what the masking rule promises and against the format's own norm:

* **all masked**: the conversation has an assistant turn to train (text or calls) but no segment of the
  rendering is trained (the format labelled it as another part). A sample with no assistant turn at all, or
  one whose trained parts all weigh 0 (``data.part_weights``), is not a mask error: the build counts it
  ``dropped_untrained`` as before.
* **all trained**: every token is trained; every format masks at least its prompt.
* **far from the norm**: the norm is read from the format itself, rendering a probe conversation (a call turn
  with one argument, a tool result, a text turn): the characters of trained ``end`` per turn, of
  ``call_syntax`` per call, and whether calls are labelled ``call_name``/``call_args``. Each trained turn
  (a maximal run of trained segments) of a sample must then end with its end-of-turn part where the norm has
  one (a model that never trains its stop token never stops), hold at most ``FAR`` times the norm's end
  characters (a repeated end token) and ``FAR`` times its syntax characters per call, plus ``SLACK``
  (scaffolding that grew without content: a message labelled as syntax), and label the name and arguments
  of each turn with calls. These bounds depend only on the format's scaffolding, never on how long the
  content is, so real corpora do not trip them (glaive and BFCL are checked in tests/test_mask_checks.py).

Shares are counted in characters of the rendered segments (what the format decides), not tokens.
``data.check_masks=false`` skips the checks (a format of your own whose turns do not follow the norm).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from train.formats.base import ChatFormat, Segment
from train.schema import Conversation, Message, Tool, ToolCall

FAR = 2  # a sample's per-turn scaffolding may be up to FAR times the format's norm ...
SLACK = 8  # ... plus this many characters (separators between parallel calls, a newline merged into the end)


@dataclass(frozen=True)
class Norm:
    """What one trained turn of a format looks like, read from its rendering of a probe conversation."""

    end_chars: int  # characters of the trained "end" part of a turn (the longest probe turn's); 0: none written
    syntax_per_call: int  # characters of "call_syntax" in the probe's call turn (one call)
    calls_labelled: bool  # the probe's call turn has "call_name" and "call_args" parts (not text answers)


_PROBE = Conversation(
    id="mask-norm-probe",
    tools=[Tool(name="probe")],
    messages=[
        Message(role="user", content="q"),
        Message(role="assistant", tool_calls=[ToolCall(name="probe", arguments={"x": 1}, id="call0000a")]),
        Message(role="tool", tool_call_id="call0000a", name="probe", content="r"),
        Message(role="assistant", content="a"),
    ],
)


# formats that cannot express a tool result (deepseek_coder: no tools; toolselect_text: one user and one answer)
_TEXT_PROBES = [
    Conversation(id="mask-norm-probe", tools=tools, messages=[_PROBE.messages[0], _PROBE.messages[-1]])
    for tools in ([Tool(name="probe")], [])
]


def format_norm(fmt: ChatFormat) -> Norm | None:
    """The format's norm; from a one-turn chat when it cannot express the probe (calls then not checked); None
    when it can express neither (only the all-masked and all-trained checks apply)."""
    for probe in [_PROBE, *_TEXT_PROBES]:
        try:
            segments = fmt.render(probe)
            break
        except ValueError:
            continue
    else:
        return None
    turns = _trained_turns(segments, [seg.assistant for seg in segments])
    call_turn = [seg for turn in turns for seg in turn if seg.message == 1]
    end_chars = max((_chars(turn, "end") for turn in turns), default=0)
    calls_labelled = {"call_name", "call_args"} <= {seg.part for seg in call_turn}
    return Norm(end_chars, _chars(call_turn, "call_syntax") if calls_labelled else 0, calls_labelled)


def check_sample(
    conv: Conversation, segments: Sequence[Segment], trained: Sequence[bool], labels: Sequence[int], norm: Norm | None
) -> str | None:
    """Why the sample's mask is wrong, or None. ``trained``: the masking rule's flag per segment; ``labels``:
    the sample's token labels (-100 where masked)."""
    if not any(t and seg.text for seg, t in zip(segments, trained)):
        wanted = [i for i, m in enumerate(conv.messages) if m.role == "assistant" and (m.content or m.tool_calls)]
        if wanted:
            return f"every token is masked, though messages {wanted} are assistant turns with text or calls to train"
        return None
    if labels and all(label != -100 for label in labels):
        return f"every one of its {len(labels)} tokens is trained: the format masks no prompt"
    if norm is None:
        return None
    for turn in _trained_turns(segments, trained):
        where = f"the trained turn of messages {sorted({seg.message for seg in turn})}"
        if norm.end_chars and not any(seg.part == "end" for seg in turn):
            return f"{where} has no trained end-of-turn part (the model would never learn to stop)"
        if _chars(turn, "end") > FAR * norm.end_chars + SLACK:
            return f"{where} has {_chars(turn, 'end')} end-of-turn characters, the format's norm is {norm.end_chars}"
        calls = sum(len(conv.messages[i].tool_calls) for i in {seg.message for seg in turn} if i >= 0)
        if not calls or not norm.calls_labelled:
            continue
        if not {"call_name", "call_args"} <= {seg.part for seg in turn}:
            return f"{where} makes {calls} call(s) but labels no call name or no arguments"
        syntax = _chars(turn, "call_syntax")
        if syntax > calls * (FAR * norm.syntax_per_call + SLACK):
            return f"{where} has {syntax} call-syntax characters for {calls} call(s), the norm {norm.syntax_per_call}"
    return None


def _chars(segments: Sequence[Segment], part: str) -> int:
    return sum(len(seg.text) for seg in segments if seg.part == part)


def _trained_turns(segments: Sequence[Segment], trained: Sequence[bool]) -> list[list[Segment]]:
    """Maximal runs of trained segments (empty segments neither start nor break a run)."""
    turns: list[list[Segment]] = []
    inside = False
    for seg, t in zip(segments, trained):
        if not seg.text:
            continue
        if t:
            if not inside:
                turns.append([])
            turns[-1].append(seg)
        inside = t
    return turns


__all__ = ["FAR", "SLACK", "Norm", "check_sample", "format_norm"]
