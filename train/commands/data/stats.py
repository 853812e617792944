"""``tooltrain data stats FILE.jsonl [--json] [--languages]``.

Streams a canonical JSON Lines file (conversations, tool queries, tool libraries, or a mix)
and prints what it holds: rich tables on a terminal, plain aligned text otherwise, one JSON
object with ``--json``. Unreadable lines are counted and the first ten listed, never raised.
Exit code 0 unless the file cannot be opened or is not a regular file (a device, a FIFO): 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from train.base.progress import progress
from train.base.records import NotRegularFile, iter_lines, open_input
from train.data.stats import MAX_LISTED, FileStats, count_lines

Section = tuple[str, list[tuple[str, str]]]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", type=Path, metavar="FILE.jsonl", help="canonical JSON Lines (conversations, tool queries or libraries)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument(
        "--languages", action="store_true", help="detect the language of each first user message (langid; slower)"
    )


def run(args: argparse.Namespace) -> int:
    try:
        handle = open_input(args.file)  # a device or a FIFO is refused: reading one never ends
    except OSError as err:
        print(f"error: {args.file}: cannot open ({err.strerror or err})", file=sys.stderr)
        return 2
    except NotRegularFile as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    language_of = _langid_classifier() if args.languages else None
    with handle:
        stats = count_lines(progress(iter_lines(handle), desc="stats", unit="line"), language_of)
    if args.json:
        print(json.dumps({"file": str(args.file), **stats.to_dict()}, ensure_ascii=False))
    elif sys.stdout.isatty():
        print_rich(str(args.file), sections(stats))
    else:
        print(plain_text(str(args.file), sections(stats)))
    return 0


def _langid_classifier() -> Callable[[str], str]:
    from train.base.languages import language_classifier  # only on request: decoding langid's model takes ~2 s

    return language_classifier()


def sections(stats: FileStats) -> list[Section]:
    """The report as titled (label, value) rows; a section with nothing to count is left out."""
    out: list[Section] = []
    lines = [("records", str(stats.records)), ("unreadable", str(stats.unreadable))]
    shown = stats.unreadable_lines
    if shown:
        more = "" if stats.unreadable <= MAX_LISTED else f" (first {MAX_LISTED})"
        lines.append((f"unreadable lines{more}", ", ".join(str(item["line"]) for item in shown)))
        lines += [(f"  line {item['line']}", item["reason"]) for item in shown]
    out.append(("file", lines))
    conv = stats.conversations.to_dict()
    if conv["conversations"]:
        rows = [("conversations", str(conv["conversations"])), ("messages", str(conv["messages"]))]
        rows += [(f"  {role} turns", str(n)) for role, n in conv["messages_by_role"].items()]
        rows += [
            ("tool calls", str(conv["tool_calls"])),
            ("parallel assistant turns (>= 2 calls)", str(conv["parallel_turns"])),
            ("  calls in parallel turns", str(conv["parallel_turn_calls"])),
            ("tool results", str(conv["tool_results"])),
            ("tools per conversation", _spread(conv["tools_per_conversation"])),
            ("distinct tools (by name)", str(conv["distinct_tools"])),
            ("distinct called tools", str(conv["distinct_called_tools"])),
            ("conversations without tools", str(conv["conversations_without_tools"])),
            ("conversations without tool calls", str(conv["conversations_without_tool_calls"])),
        ]
        rows += [(f"  language {lang}", str(n)) for lang, n in conv["languages"].items()]
        out.append(("conversations", rows))
    queries = stats.queries.to_dict()
    if queries["queries"]:
        rows = [("queries", str(queries["queries"])), ("gold tools per query", _spread(queries["gold_per_query"]))]
        rows += [(f"  {size} gold tool(s)", str(n)) for size, n in queries["gold_size_histogram"].items()]
        rows.append(("distinct gold tools", str(queries["distinct_gold_tools"])))
        rows += [(f"split {split}", str(n)) for split, n in queries["splits"].items()]
        if queries["queries_with_unknown_gold"]:
            rows.append(("queries with gold outside the library", str(queries["queries_with_unknown_gold"])))
        out.append(("tool queries", rows))
    libraries = stats.libraries.to_dict()
    if libraries["libraries"]:
        rows = [(key.replace("_", " "), str(value)) for key, value in libraries.items()]
        out.append(("tool libraries", rows))
    return out


def _spread(spread: dict[str, Any]) -> str:
    if spread["mean"] is None:
        return "-"
    return f"min {spread['min']}, mean {spread['mean']:.2f}, max {spread['max']}"


def plain_text(path: str, report: list[Section]) -> str:
    width = max(len(label) for _, rows in report for label, _ in rows)
    blocks = [path]
    for title, rows in report:
        blocks.append("\n".join([f"[{title}]"] + [f"{label.ljust(width)}  {value}" for label, value in rows]))
    return "\n\n".join(blocks)


def print_rich(path: str, report: list[Section]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text  # plain Text: labels and reasons may hold "[...]", which is rich markup

    console = Console()
    console.print(Text(path, style="bold"))
    for title, rows in report:
        table = Table(title=title, show_header=False, title_justify="left")
        table.add_column(style="cyan")
        table.add_column(overflow="fold")
        for label, value in rows:
            table.add_row(Text(label), Text(value))
        console.print(table)
