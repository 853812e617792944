"""Counting canonical JSON Lines files: conversations, turns, calls, tools, tool queries.

Pure and streaming: ``count_lines`` takes an iterable of raw lines (bytes) and keeps only
counters, sets of tool names and the first few unreadable line numbers, so a 20k-record file
never sits in memory. Printing lives in ``train.commands.data.stats``.

Definitions (one message = one turn):

* a *parallel* assistant turn is one assistant message with two or more tool calls;
* *tools per conversation* counts the tool definitions a conversation carries;
  *conversations without tools* carry none; *without tool calls* never call one;
* *distinct tools* are definition names; *distinct called tools* are the names actually called;
* a line is *unreadable* when it is not UTF-8, not standard JSON, not Unicode (a lone
  surrogate), over the record size limit, or not a canonical record; blank lines are not records.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from train.base.records import BLANK, RecordError, decode_line
from train.schema import ROLES, Conversation, Record, SchemaError, ToolLibrary, ToolQuery, record_from_dict

MAX_LISTED = 10  # unreadable lines listed by number (all are counted)


@dataclass
class Spread:
    """min / mean / max of a stream of counts."""

    count: int = 0
    total: int = 0
    low: int | None = None
    high: int | None = None

    def add(self, value: int) -> None:
        self.count += 1
        self.total += value
        self.low = value if self.low is None else min(self.low, value)
        self.high = value if self.high is None else max(self.high, value)

    def to_dict(self) -> dict[str, Any]:
        mean = round(self.total / self.count, 4) if self.count else None
        return {"min": self.low, "mean": mean, "max": self.high}


@dataclass
class ConversationStats:
    conversations: int = 0
    messages: int = 0
    messages_by_role: Counter[str] = field(default_factory=Counter)
    tool_calls: int = 0
    parallel_turns: int = 0  # assistant messages with >= 2 calls
    parallel_turn_calls: int = 0  # the calls made in those messages
    tool_results: int = 0
    tools_per_conversation: Spread = field(default_factory=Spread)
    tool_names: set[str] = field(default_factory=set)
    called_names: set[str] = field(default_factory=set)
    without_tools: int = 0
    without_calls: int = 0
    languages: Counter[str] = field(default_factory=Counter)

    def add(self, conv: Conversation, language_of: Callable[[str], str] | None = None) -> None:
        self.conversations += 1
        self.messages += len(conv.messages)
        self.tools_per_conversation.add(len(conv.tools))
        self.tool_names.update(tool.name for tool in conv.tools)
        self.without_tools += not conv.tools
        calls = 0
        for message in conv.messages:
            self.messages_by_role[message.role] += 1
            self.tool_results += message.role == "tool"
            calls += len(message.tool_calls)
            self.called_names.update(call.name for call in message.tool_calls)
            if len(message.tool_calls) >= 2:
                self.parallel_turns += 1
                self.parallel_turn_calls += len(message.tool_calls)
        self.tool_calls += calls
        self.without_calls += calls == 0
        if language_of is not None:
            text = first_user_text(conv)
            if text:
                self.languages[language_of(text)] += 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversations": self.conversations,
            "messages": self.messages,
            "messages_by_role": {role: self.messages_by_role[role] for role in ROLES},
            "assistant_turns": self.messages_by_role["assistant"],
            "tool_calls": self.tool_calls,
            "parallel_turns": self.parallel_turns,
            "parallel_turn_calls": self.parallel_turn_calls,
            "tool_results": self.tool_results,
            "tools_per_conversation": self.tools_per_conversation.to_dict(),
            "distinct_tools": len(self.tool_names),
            "distinct_called_tools": len(self.called_names),
            "conversations_without_tools": self.without_tools,
            "conversations_without_tool_calls": self.without_calls,
            "languages": dict(self.languages.most_common()),
        }


@dataclass
class QueryStats:
    queries: int = 0
    gold_per_query: Spread = field(default_factory=Spread)
    gold_sizes: Counter[int] = field(default_factory=Counter)
    gold_names: set[str] = field(default_factory=set)
    splits: Counter[str] = field(default_factory=Counter)
    with_unknown_gold: int = 0  # readers list gold names missing from the library in meta["unknown_gold"]

    def add(self, query: ToolQuery) -> None:
        self.queries += 1
        self.gold_per_query.add(len(query.gold_tools))
        self.gold_sizes[len(query.gold_tools)] += 1
        self.gold_names.update(query.gold_tools)
        split = query.meta.get("split")
        if isinstance(split, str):
            self.splits[split] += 1
        self.with_unknown_gold += bool(query.meta.get("unknown_gold"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "queries": self.queries,
            "gold_per_query": self.gold_per_query.to_dict(),
            "gold_size_histogram": {str(size): self.gold_sizes[size] for size in sorted(self.gold_sizes)},
            "distinct_gold_tools": len(self.gold_names),
            "splits": dict(sorted(self.splits.items())),
            "queries_with_unknown_gold": self.with_unknown_gold,
        }


@dataclass
class LibraryStats:
    libraries: int = 0
    tools: int = 0
    tool_names: set[str] = field(default_factory=set)

    def add(self, library: ToolLibrary) -> None:
        self.libraries += 1
        self.tools += len(library.tools)
        self.tool_names.update(tool.name for tool in library.tools)

    def to_dict(self) -> dict[str, Any]:
        return {"libraries": self.libraries, "tools": self.tools, "distinct_tools": len(self.tool_names)}


@dataclass
class FileStats:
    records: int = 0  # non-blank lines, readable or not
    unreadable: int = 0
    unreadable_lines: list[dict[str, Any]] = field(default_factory=list)  # first MAX_LISTED: {"line", "reason"}
    conversations: ConversationStats = field(default_factory=ConversationStats)
    queries: QueryStats = field(default_factory=QueryStats)
    libraries: LibraryStats = field(default_factory=LibraryStats)

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "unreadable": self.unreadable,
            "unreadable_lines": self.unreadable_lines,
            "conversations": self.conversations.to_dict(),
            "tool_queries": self.queries.to_dict(),
            "tool_libraries": self.libraries.to_dict(),
        }


def parse_line(raw: bytes | RecordError, lineno: int) -> Record | str | None:
    """A canonical record, a reason it is unreadable, or None for a blank line. ``raw`` comes from
    ``iter_lines`` and is decoded as every reader decodes a line (``decode_line``)."""
    try:
        obj = decode_line(raw, lineno)
    except RecordError as err:
        return str(err)
    if obj is BLANK:
        return None
    try:
        return record_from_dict(obj)
    except SchemaError as err:
        return f"not a canonical record: {err}"
    except RecursionError:
        return "not a canonical record: nested too deeply"


def count_lines(lines: Iterable[bytes | RecordError], language_of: Callable[[str], str] | None = None) -> FileStats:
    """Count a canonical JSON Lines stream, line by line (line numbers from 1)."""
    stats = FileStats()
    for lineno, raw in enumerate(lines, start=1):
        record = parse_line(raw, lineno)
        if record is None:
            continue
        stats.records += 1
        if isinstance(record, str):
            stats.unreadable += 1
            if len(stats.unreadable_lines) < MAX_LISTED:
                stats.unreadable_lines.append({"line": lineno, "reason": record})
        elif isinstance(record, Conversation):
            stats.conversations.add(record, language_of)
        elif isinstance(record, ToolQuery):
            stats.queries.add(record)
        else:
            stats.libraries.add(record)
    return stats


def first_user_text(conv: Conversation) -> str | None:
    return next((m.content for m in conv.messages if m.role == "user" and m.content), None)
