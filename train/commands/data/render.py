"""``tooltrain data render FILE.jsonl --format FORMAT [--tokenizer NAME] -o OUT.jsonl ...``.

Renders canonical conversations with a chat format and writes one JSON line per conversation:
``{"id", "input_ids", "labels"}`` with unshifted labels (the token id where trained, -100
elsewhere), plus ``"text"`` (the rendered string) with ``--text`` and ``"weights"`` (the per-token
loss weight) when ``--weights`` changes any. ``--format-option KEY=VALUE`` sets a format option
(``tools_in_user_message=false`` for the Llama 3.1 formats); an unknown key lists the valid ones.
A line that is not a canonical conversation, or a
conversation the format cannot express (parallel calls in ``llama3_1``), goes to
OUT.rejects.jsonl with its location and reason. Prints ``read N, rendered A, rejected R`` with
N = A + R, and the first rejects with their file:line and reason. ``--show N`` prints the first N
rendered conversations with trained and masked tokens told apart: on a terminal each trained part in its
colour (reasoning, text, call name, arguments, call syntax, end) and masked tokens dim; ⟦trained⟧
brackets when the output is piped or ``NO_COLOR`` is set.
Outputs are replaced only when the render succeeds (``train.commands.outputs``); an output that
is the input is refused. ``-o -`` writes the rows to stdout and the report to stderr; beside stdout
or a device (``-o /dev/null``) rejects are written only to the path ``--rejects`` names.
Exit code 0; 1 when every record of a non-empty input was rejected (nothing is written); 2 when
the input, the format or the tokenizer cannot be loaded, or an output cannot be written.
What a rendered line holds, and how trained tokens are told apart for ``--show``, is ``train.data.rendered``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from train.base.progress import progress
from train.commands.arg_types import count
from train.commands.chat_setup import load_format_and_tokenizer
from train.commands.data.rejects import RejectReport, nothing_written, where_rejects_are
from train.commands.outputs import Outputs, is_stdout, output_path, side_file
from train.data.rendered import part_runs, part_segments, rendered_record, trained_runs
from train.formats import FORMATS, MaskPolicy, Tokenized
from train.formats.base import WEIGHT_PARTS, ChatFormat, Segment
from train.schema import Conversation, SchemaError

OPEN, CLOSE = "⟦", "⟧"  # marks trained spans where colour is not available
Shown = tuple[str, Tokenized, list[Segment]]  # a conversation's id, tokens and part-marked segments, for --show


def part_weight(spec: str) -> tuple[str, float]:
    """``call_args=2`` -> ("call_args", 2.0); only trained parts can be weighted."""
    part, sep, value = spec.partition("=")
    if not sep or part not in WEIGHT_PARTS:
        raise argparse.ArgumentTypeError(
            f"expected PART=WEIGHT with PART one of {', '.join(sorted(WEIGHT_PARTS))}, got {spec!r}"
        )
    try:
        weight = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"weight of {part} must be a number, got {value!r}") from None
    if not 0 <= weight < float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"weight of {part} must be >= 0, got {value!r}")
    return part, weight


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, metavar="FILE.jsonl", help="canonical conversations (JSON Lines)")
    parser.add_argument(
        "--format",
        required=True,
        metavar="FORMAT",
        help=f"one of: {', '.join(FORMATS)}; or module:attr (your own ChatFormat)",
    )
    parser.add_argument(
        "--tokenizer", help="a tooltrain tokenizer name or a local tokenizer folder (default: the format's)"
    )
    parser.add_argument(
        "-o",
        "--output",
        type=output_path,
        required=True,
        help="rendered JSON Lines output; '-' for stdout (the report then goes to stderr)",
    )
    parser.add_argument(
        "--rejects",
        type=output_path,
        metavar="PATH",
        help="rejected lines with their reasons (default OUT.rejects.jsonl; "
        "with -o - or a device, only written when given)",
    )
    parser.add_argument("--text", action="store_true", help="also write the rendered string of each conversation")
    parser.add_argument(
        "--show", type=count(0), default=0, metavar="N", help="print the first N conversations, trained tokens marked"
    )
    parser.add_argument(
        "--last-turn-only", action="store_true", help="train only each conversation's last assistant turn"
    )
    parser.add_argument(
        "--weights",
        type=part_weight,
        nargs="+",
        default=[],
        metavar="PART=W",
        help="loss weight per trained part, e.g. call_args=2",
    )
    parser.add_argument(
        "--format-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="format_options",
        help="a chat format option, repeatable; llama3_1: tools_in_user_message=false, date_string='01 Jan 2025'",
    )


def run(args: argparse.Namespace) -> int:
    from train.base.records import SourceError, input_problem

    problem = input_problem(args.file)  # before loading a tokenizer; reading checks it again
    if problem:
        print(f"error: {args.file}: {problem}", file=sys.stderr)
        return 2
    try:
        fmt, tokenizer = load_format_and_tokenizer(args.format, args.tokenizer, args.format_options)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    rejects_path = side_file(args.output, "rejects", args.rejects)
    report_to = sys.stderr if is_stdout(args.output) else sys.stdout
    try:
        rendered, rejects, shown = render_file(args, fmt, tokenizer, rejects_path)
    except SourceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if shown:
        show(shown, tokenizer, report_to)
    print(f"read {rendered + rejects.count}, rendered {rendered}, rejected {rejects.count}", file=report_to)
    for line in rejects.lines():
        print(line, file=report_to)
    if not rendered:
        hint = f"is {args.file} canonical conversations (tooltrain data convert writes them)?"
        return nothing_written(rejects.count, args.output, hint)
    if rejects.count:
        print(where_rejects_are(rejects_path), file=report_to)
    return 0


def render_file(
    args: argparse.Namespace, fmt: ChatFormat, tokenizer: Any, rejects_path: Path | None
) -> tuple[int, RejectReport, list[Shown]]:
    """Every line of ``args.file`` rendered to ``args.output`` or rejected to ``rejects_path``; the outputs replaced
    together, and only when something was rendered. How many were, the rejects, and the first ``--show`` ones."""
    from train.base.records import Rejected, iter_json_records

    policy = MaskPolicy(last_turn_only=args.last_turn_only, weights=dict(args.weights))
    rendered = 0
    rejects = RejectReport()
    shown: list[Shown] = []
    with Outputs([args.output, rejects_path], inputs=[args.file]) as outputs:
        out = outputs.open(args.output)
        rejects_file = outputs.open(rejects_path) if rejects_path else None
        for item in progress(iter_json_records(args.file), desc=f"render {args.format}", unit="conv"):
            if not isinstance(item, Rejected):
                location, obj = item
                try:
                    conv = Conversation.from_dict(obj)
                    record, tokens = rendered_record(conv, fmt, tokenizer, policy, args.text)
                except SchemaError as err:
                    item = Rejected(location, f"not a canonical conversation: {err}", obj)
                except ValueError as err:  # the format cannot express it
                    item = Rejected(location, f"unrenderable: {err}", obj)
            if isinstance(item, Rejected):
                rejects.add(item)
                if rejects_file:
                    rejects_file.write(json.dumps(item.to_dict(), ensure_ascii=False) + "\n")
                continue
            rendered += 1
            out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
            if len(shown) < args.show:
                shown.append((conv.id, tokens, part_segments(fmt, conv)))
        if not rendered:
            outputs.discard()  # nothing renderable: keep whatever was there before
    return rendered, rejects, shown


# ---- --show ---------------------------------------------------------------------------------


def plain_view(runs: Iterable[tuple[str, bool]]) -> str:
    return "".join(f"{OPEN}{text}{CLOSE}" if trained else text for text, trained in runs)


# the style of each trained part on a terminal; masked tokens are dim whatever their part
PART_STYLES = {
    "reasoning": "magenta",
    "text": "green",
    "call_name": "bold cyan",
    "call_args": "yellow",
    "call_syntax": "blue",
    "end": "bold red",
}
TRAINED_STYLE, MASKED_STYLE = "bold green", "dim"  # a trained token whose part is unknown; a masked one


def show(conversations: list[Shown], tokenizer: Any, stream: TextIO | None = None) -> None:
    """Print to ``stream`` (stdout by default; stderr when the rows themselves go to stdout)."""
    from rich.console import Console
    from rich.text import Text  # Text, not markup: conversations are full of "[...]"

    stream = stream or sys.stdout
    console = Console(highlight=False, file=stream)
    coloured = console.is_terminal and console.color_system is not None and not os.environ.get("NO_COLOR")
    if coloured:
        legend = [(part.replace("_", " "), style) for part, style in PART_STYLES.items()]
        console.print(Text.assemble("legend: trained ", *_joined(legend), " / ", ("masked", MASKED_STYLE)))
    else:
        print(f"legend: {OPEN}trained{CLOSE} / masked", file=stream)
    for conv_id, tokens, segments in conversations:
        trained = sum(1 for label in tokens.labels if label != -100)
        title = f"--- {conv_id}: {len(tokens.input_ids)} tokens, {trained} trained ---"
        runs = trained_runs(tokens, tokenizer)
        if coloured:
            console.print(Text(title, style="bold"))
            pieces = [(text, _style(is_trained, part)) for text, is_trained, part in part_runs(runs, segments)]
            console.print(Text.assemble(*pieces))
        else:
            print(title, file=stream)
            print(plain_view(runs), file=stream)


def _style(trained: bool, part: str | None) -> str:
    return PART_STYLES.get(part or "", TRAINED_STYLE) if trained else MASKED_STYLE


def _joined(items: list[tuple[str, str]]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        out += [", ", item] if out else [item]
    return out
