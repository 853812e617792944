"""What ``bench render`` and ``bench data`` share (a verb never imports another): the conversations both paths
get, trl's ``apply_chat_template`` path, a measured rate and the table that prints rates."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from train.commands.chat_setup import Reference
from train.schema import Conversation, SchemaError

Row = tuple[list[int], list[int]]  # input_ids, labels


@dataclass
class Rate:
    path: str
    conversations: int
    tokens: int
    seconds: float  # best pass

    @property
    def per_second(self) -> float:
        return self.conversations / self.seconds if self.seconds > 0 else float("inf")


def file_problem(path: Path) -> str | None:
    """Why ``path`` is no conversations file to read, or None: the readers' own check (``input_problem``), so a
    FIFO or a device is refused before it is opened (reading one could wait, or run, for ever)."""
    from train.base.records import input_problem

    problem = input_problem(path)
    if problem is None:
        return None
    hint = "" if problem == "no such file" else "; expected a JSON Lines file of canonical conversations"
    return f"{path}: {problem}{hint}"


def positive_options(args: Any, names: tuple[str, ...]) -> str | None:
    """The first of ``names`` (argparse dests) given below 1, as an error message; None when all are fine."""
    for name in names:
        value = getattr(args, name)
        if value is not None and value < 1:
            return f"--{name.replace('_', '-')} must be at least 1"
    return None


def nothing_to_time(files: str, read: int, unreadable: int, left_out: int) -> str:
    """The error when no conversation is left to benchmark: a rate over nothing means nothing."""
    return (
        f"no conversation to benchmark in {files}: {read} read, {unreadable} unreadable lines, "
        f"{left_out} that a path cannot render; expected canonical conversations (JSON Lines)"
    )


def read_conversations(path: Path, limit: int | None) -> tuple[list[Conversation], int]:
    """The first ``limit`` canonical conversations, and how many lines were not one."""
    from train.base.records import Rejected, iter_json_records

    conversations, unreadable = [], 0
    for item in iter_json_records(path):
        if limit is not None and len(conversations) >= limit:
            break
        if isinstance(item, Rejected):
            unreadable += 1
            continue
        try:
            conversations.append(Conversation.from_dict(item[1]))
        except SchemaError:
            unreadable += 1
    return conversations, unreadable


Row = tuple[list[int], list[int]]  # input_ids, labels


def trl_path(reference: Reference, tokenizer: Any) -> Callable[[tuple[list, list | None]], Row]:
    def encode(hf: tuple[list, list | None]) -> Row:
        messages, tools = hf
        out = tokenizer.apply_chat_template(
            messages,
            tools=tools,
            chat_template=reference.template,
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=reference.masks,
        )
        ids = out["input_ids"]
        if not reference.masks:
            return ids, []
        # timed too: the labels a trainer builds from the mask
        return ids, [t if m else -100 for t, m in zip(ids, out["assistant_masks"])]

    return encode


def table(rates: list[Rate]) -> str:
    rows = [("path", "conversations", "tokens", "conv/s", "tokens/s")]
    for r in rates:
        tokens_per_second = f"{r.tokens / r.seconds:.0f}" if r.seconds else "inf"
        rows.append((r.path, str(r.conversations), str(r.tokens), f"{r.per_second:.1f}", tokens_per_second))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    # the path column is text (left-aligned), the numbers right-aligned
    return "\n".join(
        row[0].ljust(widths[0]) + "".join(f"  {cell.rjust(w)}" for cell, w in zip(row[1:], widths[1:])) for row in rows
    )
