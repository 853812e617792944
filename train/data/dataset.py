"""Sources -> canonical conversations -> tokenized, masked rows, cached on disk.

Each stage is a plain function; ``build_dataset`` strings them together and caches the result
under a key that hashes everything the rows depend on (``train.data.inputs.cache_key``). A second
run with the same key loads the rows instead of rebuilding them. A conversation is refused for the
problem ``data validate`` reports first (``train.validate.refusal``); the eval split goes by id
(``train.data.ids``). The build holds a file lock, so ranks or nodes that
share a filesystem build once and then all load; this module never asks which rank it is.
Every conversation read is accounted for in the ``BuildReport``.

The cache is memory-mapped columns (``train.data.token_store``: why numpy arrays with an offsets index), built by
``data.num_workers`` processes (``train.data.ordered_pool``): the main process reads the sources and runs the recipe's
builder as one stream, cuts it into chunks of ``BUILD_CHUNK`` conversations, workers validate and tokenize each
chunk (``tokenize_conversations``, as the single-process build did), and the main process writes the rows in input
order. Chunks, their order and each chunk's report do not depend on the number of workers, so neither do the bytes
of the cache or its report. A worker that dies (the out-of-memory killer) ends the build with one ``CacheError``
naming it; nothing is cached.

A cache is trusted only once it verifies (``train.data.token_store.verify_layout``: every file of its recorded size and
checksum); a damaged one is named on stderr and rebuilt. A cache folder that cannot be used, and a wait for another
process's build that runs out, are one ``CacheError`` each (``tooltrain train`` prints it as one ``error:`` line).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import shutil
import sys
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from train.base.progress import progress
from train.base.records import DEFAULT_MAX_RECORD_BYTES, record_size_limit
from train.data.ids import is_copy, is_eval
from train.data.inputs import cache_key, resolve_input
from train.data.mixing import source_weights, weighted
from train.data.ordered_pool import WorkerDied, ordered_map
from train.data.token_store import (
    IDLE_WAIT_S,
    SPLITS,
    TOTAL_WAIT_S,
    CacheError,
    StoreWriter,
    TokenizedRows,
    exists,
    holding,
    remove_cache,
    trained_mask,
    usable_cache_root,
    verify_layout,
    wait_for_cache,
    write_layout,
)
from train.formats import MaskPolicy, get_format
from train.formats.base import ChatFormat, trained_segments
from train.formats.expansion import expand_many, resolve_turns
from train.formats.mask_checks import check_sample, format_norm
from train.formats.tokenize import tokenize_many
from train.schema import Conversation, dumps
from train.sources import Rejected, SourceError, get_reader
from train.sources.tables import read_renamed
from train.validate import refusal

BUILD_CHUNK = 256  # conversations per worker task (and per batched encode): fixed, so the bytes never depend on it
EXAMPLES = 3  # ids kept per reason, for the console
SOURCE_COUNTS = ("read", "accepted", "rejected", "weighted")  # BuildReport.per_source's counts


@dataclass
class BuildReport:
    read: int = 0
    rejected_by_reader: int = 0
    dropped_by_builder: int = 0  # read, but not yielded by the recipe's data builder (held out, unbuildable)
    invalid: int = 0  # failed tool-aware validation with an error
    unrenderable: int = 0  # the chat format cannot express it (e.g. parallel calls in llama3_1)
    dropped_overlong: int = 0
    truncated: int = 0
    dropped_untrained: int = 0  # nothing left to train on (after truncation, or no assistant turn)
    conversations_rendered: int = 0  # conversations the chat format rendered ...
    samples: int = 0  # ... and the samples they became (more than one each with data.turns=per_turn)
    train_rows: int = 0
    eval_rows: int = 0
    trained_tokens: int = 0
    masked_tokens: int = 0
    renamed_ids: int = 0  # kept under s<i>/<id>: an earlier source used the id (read_conversations)
    # per data.sources entry, in order: read, accepted (kept after the source's checks), rejected, weighted (the
    # conversations after data.sources.*.weight: copies counted, a downsampled one left out)
    per_source: list[dict[str, Any]] = field(default_factory=list)
    reasons: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)  # reason -> its first EXAMPLES ids

    def reject(self, counter: str, reason: str, example: str | None = None) -> None:
        setattr(self, counter, getattr(self, counter) + 1)
        # group by the reason's shape: "1956 > 512 tokens" and "969 > 512 tokens" are one reason
        key = f"{counter}: {re.sub(r'[0-9]+', 'N', reason)[:160]}"
        self.reasons[key] = self.reasons.get(key, 0) + 1
        if example is not None:
            self.example(key, example)

    def example(self, key: str, conv_id: str) -> None:
        kept = self.examples.setdefault(key, [])
        if len(kept) < EXAMPLES:
            kept.append(conv_id)

    @property
    def accepted(self) -> int:
        return self.train_rows + self.eval_rows

    def merge(self, other: BuildReport) -> None:
        """Adds ``other``'s counts (its reasons after this one's, in their order)."""
        for item in fields(self):
            if item.name not in ("reasons", "examples", "per_source"):
                setattr(self, item.name, getattr(self, item.name) + getattr(other, item.name))
        mine = {entry["source"]: entry for entry in self.per_source}
        for entry in other.per_source:  # one entry per data.sources position, its counts summed
            if entry["source"] not in mine:
                mine[entry["source"]] = {**entry}
                self.per_source.append(mine[entry["source"]])
            else:
                for key in SOURCE_COUNTS:
                    mine[entry["source"]][key] += entry[key]
        for key, count in other.reasons.items():
            self.reasons[key] = self.reasons.get(key, 0) + count
        for key, ids in other.examples.items():
            for conv_id in ids:
                self.example(key, conv_id)

    def take(self) -> BuildReport:
        """What was counted so far, as a new report; this one starts again from zero."""
        taken = BuildReport(**{**self.to_dict(), "reasons": dict(self.reasons), "examples": dict(self.examples)})
        for item in fields(self):
            if item.name != "per_source":
                setattr(self, item.name, {} if item.name in ("reasons", "examples") else 0)
        for entry in self.per_source:  # in place: read_conversations goes on counting into these entries
            entry.update(dict.fromkeys(SOURCE_COUNTS, 0))
        return taken

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_conversations(sources: Iterable[Any], report: BuildReport) -> Iterator[Conversation]:
    """Each source spec (``name``, ``inputs``, ``limit``) through its reader; rejects are counted.

    Ids are unique across the sources by construction: the eval split, the held-out conversations and the recipes'
    builders go by id. A conversation whose id an earlier source already used is kept under ``s<i>/<id>``, ``i``
    its own source's position in data.sources (two Hugging Face exports numbered 0, 1, 2 ..., or one file listed
    twice, both train); ids no earlier source used stay as their source wrote them, so a build whose sources never
    collided keeps its ids, its rows and its recipes' goldens. Renamings are counted (``renamed_ids``, with
    examples). An id repeated inside one source names two records: the later one is left out (``invalid``,
    ``duplicate-id``, the id among the reason's examples); the first is kept, as ``data validate`` reports it."""
    used: set[str] = set()  # every id given out so far, renamed or not
    sources = list(sources)
    for index, (spec, weight) in enumerate(zip(sources, source_weights(sources), strict=True)):
        counts = {"source": index, "name": str(spec["name"]), "weight": weight, **dict.fromkeys(SOURCE_COUNTS, 0)}
        if spec.get("fraction") is not None:
            counts["fraction"] = float(spec["fraction"])
        report.per_source.append(counts)
        inputs = [resolve_input(p) for p in spec["inputs"]]
        # "canonical": train.sources.canonical; columns: the source's column mapping (train.sources.tables)
        records = read_renamed(get_reader(spec["name"]), inputs, spec.get("columns") or None)
        taken, own = 0, set()  # own: this source's ids as it wrote them
        for item in records:
            if spec.get("limit") is not None and taken >= spec["limit"]:
                break
            if isinstance(item, Rejected):
                report.read += 1
                counts["read"] += 1
                counts["rejected"] += 1
                report.reject("rejected_by_reader", item.reason)
            elif isinstance(item, Conversation):
                report.read += 1
                counts["read"] += 1
                taken += 1
                if item.id in own:
                    counts["rejected"] += 1
                    report.reject("invalid", f"duplicate-id: repeated within data.sources.{index}", example=item.id)
                    continue
                own.add(item.id)
                conv_id = item.id if item.id not in used else f"s{index}/{item.id}"
                if conv_id in used:  # an earlier source holds both ID and s<i>/ID: no name is left for this one
                    taken_too = f"used by an earlier source, renamed s<i>/<id> is taken too (data.sources.{index})"
                    reason = f"duplicate-id: {taken_too}"
                    counts["rejected"] += 1
                    report.reject("invalid", reason, example=conv_id)
                    continue
                used.add(conv_id)
                counts["accepted"] += 1
                if conv_id != item.id:
                    report.renamed_ids += 1
                    report.example("renamed", conv_id)
                    item = dataclasses.replace(item, id=conv_id)
                for copy in weighted(item, index, weight):
                    if copy.id != item.id:
                        if copy.id in used:  # a source's own id already ends in #k: the copy has no name left
                            counts["rejected"] += 1
                            report.reject("invalid", "duplicate-id: a weighted copy's <id>#k is taken", example=copy.id)
                            continue
                        used.add(copy.id)
                    counts["weighted"] += 1
                    yield copy


def length_policy(
    conv_id: str,
    ids: list[int],
    labels: list[int],
    max_seq_len: int,
    overlong: str,
    report: BuildReport,
    weights: list[float] | None = None,
) -> dict[str, Any] | None:
    """Truncate or drop an over-long sample; drop one with nothing left to train. Counted.
    ``weights`` (per-token loss weights) are kept as the row's ``loss_weights`` when given."""
    if len(ids) > max_seq_len:
        if overlong == "drop":
            report.reject("dropped_overlong", f"{len(ids)} > {max_seq_len} tokens")
            return None
        ids, labels = ids[:max_seq_len], labels[:max_seq_len]
        weights = weights[:max_seq_len] if weights is not None else None
        report.truncated += 1
    trained = sum(1 for label in labels[1:] if label != -100)
    if trained == 0:
        report.reject("dropped_untrained", "no trained token")
        return None
    report.trained_tokens += trained
    report.masked_tokens += len(ids) - trained
    row = {"id": conv_id, "input_ids": ids, "labels": labels}
    return row if weights is None else {**row, "loss_weights": weights}


def tokenize_conversations(
    conversations: Iterable[Conversation],
    fmt: ChatFormat,
    tokenizer: Any,
    policy: MaskPolicy,
    max_seq_len: int,
    overlong: str,
    report: BuildReport,
    chunk: int = 256,
    turns: str = "auto",
    check_masks: bool = True,
) -> Iterator[tuple[Conversation, dict[str, Any]]]:
    """Validate, render + mask + tokenize (a chunk at a time: one batched encode), check the masks, apply the
    length policy. Yields each kept conversation with its row."""
    norm = format_norm(fmt) if check_masks else False
    for batch in (
        itertools.batched(conversations, chunk) if hasattr(itertools, "batched") else _batched(conversations, chunk)
    ):
        valid = []
        for conv in batch:
            problem = refusal(conv)  # the first error data validate reports (open-world rule included)
            if problem is not None:
                report.reject("invalid", str(problem))
            else:
                valid.append(conv)
        for conv, samples in zip(valid, _render_samples(fmt, valid, tokenizer, policy, turns)):
            if isinstance(samples, ValueError):
                report.reject("unrenderable", str(samples))
                continue
            report.conversations_rendered += 1
            report.samples += len(samples)
            if norm is not False:  # data.check_masks: a sample whose mask cannot be right stops the build
                _check_masks(conv, fmt, policy, samples, norm)
            for n, (_, _, tokens) in enumerate(samples):
                # weights ride along only when they change the loss: unweighted rows stay as they were
                weights = tokens.weights if policy.scales_loss else None
                sample_id = conv.id if len(samples) == 1 else f"{conv.id}#{n}"  # data.turns=per_turn: one per turn
                row = length_policy(sample_id, tokens.input_ids, tokens.labels, max_seq_len, overlong, report, weights)
                if row is not None:
                    yield conv, row


class MaskError(SourceError):
    """A built sample's mask cannot be right (``train.formats.mask_checks``): the build stops, naming it."""


def _check_masks(conv: Conversation, fmt: ChatFormat, policy: MaskPolicy, samples: list, norm: Any) -> None:
    for n, (segments, trained, tokens) in enumerate(samples):
        if segments is None:  # the whole conversation: its parts, as the masking rule sees them
            segments = fmt.render(conv)
            trained = trained_segments(segments, policy)
        problem = check_sample(conv, segments, trained, tokens.labels, norm)
        if problem:
            sample = conv.id if len(samples) == 1 else f"{conv.id}#{n}"
            raise MaskError(
                f"conversation {sample!r}: {problem} (chat format {fmt.name}); the build stops rather than train "
                "a wrong mask (data.check_masks=false skips this check, docs/formats.md)"
            )


def _render_samples(fmt: ChatFormat, convs: list[Conversation], tokenizer: Any, policy: MaskPolicy, turns: str) -> list:
    """Each conversation's samples (one, or one per trained turn with ``data.turns`` per_turn), or its ValueError.
    A sample is (segments, trained flags, tokens); the whole conversation's segments are None (rendered again only
    if the mask checks ask)."""
    if resolve_turns(turns, fmt) == "per_turn":
        return [
            r if isinstance(r, ValueError) else [(s.segments, t, tok) for s, t, tok in r]
            for r in expand_many(fmt, convs, tokenizer, policy)
        ]
    return [t if isinstance(t, ValueError) else [(None, None, t)] for t in tokenize_many(fmt, convs, tokenizer, policy)]


def _batched(items: Iterable[Any], size: int) -> Iterator[tuple]:
    iterator = iter(items)
    while batch := tuple(itertools.islice(iterator, size)):
        yield batch


@dataclass
class Split:
    train: list[dict[str, Any]]
    eval: list[dict[str, Any]]
    eval_conversations: list[Conversation]  # the conversations of the eval rows, in order, each once


def split_eval(rows: Iterable[tuple[Conversation, dict[str, Any]]], fraction: float) -> Split:
    """The one place the eval split is decided: each conversation, with its row, goes to one side.

    Generation-based evaluation needs the held-out conversations themselves, not only their rows,
    so they stay paired with their rows here rather than being looked up again by id.
    """
    split = Split([], [], [])
    for conv, row in rows:
        if is_eval(conv.id, fraction):
            if is_copy(conv.id):  # a weighted copy of a held-out conversation: evaluated once, never trained
                continue
            split.eval.append(row)
            # data.turns=per_turn: the rows of one conversation are consecutive; it is held out once
            if not split.eval_conversations or split.eval_conversations[-1] is not conv:
                split.eval_conversations.append(conv)
        else:
            split.train.append(row)
    return split


class BuiltDataset:
    """A built (or cached) dataset: the train and eval rows memory-mapped from ``cache_dir``, the build report, and
    the eval split's conversations (read from the cache when first asked for: training without evaluation never
    holds them)."""

    def __init__(self, cache_dir: Path, report: BuildReport, from_cache: bool):
        self.cache_dir, self.report, self.from_cache = cache_dir, report, from_cache
        self.train = TokenizedRows(cache_dir, "train")
        self.eval = TokenizedRows(cache_dir, "eval")
        self._eval_conversations: list[Conversation] | None = None

    @property
    def eval_conversations(self) -> list[Conversation]:
        """The conversation of each eval row, same order."""
        if self._eval_conversations is None:
            self._eval_conversations = _load_conversations(self.cache_dir / "eval_conversations.jsonl")
        return self._eval_conversations


def mask_policy(data_cfg: dict[str, Any]) -> MaskPolicy:
    return MaskPolicy(
        last_turn_only=data_cfg.get("last_turn_only", False), weights=dict(data_cfg.get("part_weights") or {})
    )


def build_rows(
    conversations: Iterable[Conversation],
    fmt: ChatFormat,
    tokenizer: Any,
    data_cfg: dict[str, Any],
    report: BuildReport,
) -> Split:
    """The rows in memory, as Python lists, in one process: what the cache holds, for tests and small tools."""
    conversations = progress(conversations, desc=f"build dataset ({fmt.name})", unit="conv")
    rows = tokenize_conversations(
        conversations,
        fmt,
        tokenizer,
        mask_policy(data_cfg),
        data_cfg["max_seq_len"],
        str(data_cfg["overlong"]),
        report,
        turns=str(data_cfg.get("turns", "auto")),
        check_masks=bool(data_cfg.get("check_masks", True)),
    )
    split = split_eval(rows, data_cfg.get("eval_fraction", 0.0))
    report.train_rows, report.eval_rows = len(split.train), len(split.eval)
    return split


def build_workers(data_cfg: dict[str, Any]) -> int:
    """``data.num_workers``, or every core this process may run on when it is unset."""
    configured = data_cfg.get("num_workers")
    if configured is not None:
        return max(1, int(configured))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclass
class ChunkRows:
    """What a worker returns for one chunk: its report, and each kept row as (index in the chunk, columns)."""

    report: BuildReport
    rows: list[tuple[int, str, Any, Any, Any]]  # (index, row id, input ids int32, trained u8, weights f32 or None)


class ChunkTokenizer:
    """Validates and tokenizes one chunk of conversations (``tokenize_conversations``); made once per worker."""

    def __init__(self, format_name: str, data_cfg: dict[str, Any], tokenizer: Any):
        self.fmt = get_format(format_name, data_cfg.get("format_options"))  # options are in data_cfg, so in the key
        self.tokenizer, self.policy = tokenizer, mask_policy(data_cfg)
        self.max_seq_len, self.overlong = data_cfg["max_seq_len"], str(data_cfg["overlong"])
        self.turns, self.check_masks = str(data_cfg.get("turns", "auto")), bool(data_cfg.get("check_masks", True))

    def __call__(self, chunk: tuple[Conversation, ...]) -> ChunkRows:
        import numpy as np

        report, rows = BuildReport(), []
        position = {id(conv): index for index, conv in enumerate(chunk)}
        tokenized = tokenize_conversations(
            chunk,
            self.fmt,
            self.tokenizer,
            self.policy,
            self.max_seq_len,
            self.overlong,
            report,
            chunk=len(chunk),
            turns=self.turns,
            check_masks=self.check_masks,
        )
        for conv, row in tokenized:
            weights = row.get("loss_weights")
            rows.append(
                (
                    position[id(conv)],
                    row["id"],  # the conversation's, or ID#N for each of its samples (data.turns=per_turn)
                    np.asarray(row["input_ids"], dtype=np.int32),
                    trained_mask(conv.id, row["input_ids"], row["labels"]),
                    None if weights is None else np.asarray(weights, dtype=np.float32),
                )
            )
        return ChunkRows(report, rows)


def write_cache(
    folder: Path, data_cfg: dict[str, Any], format_name: str, tokenizer: Any, transform: Any = None
) -> BuildReport:
    """Builds the dataset into ``folder`` (column files, eval conversations, layout, report). Returns the report."""
    reading = BuildReport()  # what reading and the recipe's builder count, taken chunk by chunk
    conversations = read_conversations(data_cfg["sources"], reading)
    if transform is not None:
        conversations = transform(conversations, on_drop=lambda reason: reading.reject("dropped_by_builder", reason))
    report = BuildReport()
    conversations = progress(
        conversations,
        desc=f"build dataset ({get_format(format_name, data_cfg.get('format_options')).name})",
        unit="conv",
        postfix=lambda: f"accepted {report.accepted / max(report.read, 1):.0%}",
    )
    # each chunk carries what reading it counted: merged just before its rows, the report's counts and the order of
    # its reasons are those of a single process reading and tokenizing chunk after chunk
    chunks = ((chunk, reading.take()) for chunk in _batched(conversations, BUILD_CHUNK))
    weighted = mask_policy(data_cfg).scales_loss
    writers = {split: StoreWriter(folder, split, weighted) for split in SPLITS}
    fraction = data_cfg.get("eval_fraction", 0.0)
    with (folder / "eval_conversations.jsonl").open("w", encoding="utf-8") as eval_file:
        with record_size_limit(data_cfg.get("max_record_bytes", DEFAULT_MAX_RECORD_BYTES)):
            results = ordered_map(
                lambda: ChunkTokenizer(format_name, data_cfg, tokenizer),
                chunks,
                build_workers(data_cfg),
                payload=lambda item: item[0],
            )
            for (chunk, read_part), done in results:
                report.merge(read_part)
                report.merge(done.report)
                last_held_out = None
                for index, row_id, ids, trained, weights in done.rows:
                    conv = chunk[index]
                    held_out = is_eval(conv.id, fraction)  # the one split rule (split_eval), decided per row
                    if held_out and is_copy(conv.id):  # a weighted copy of a held-out conversation: evaluated once
                        continue
                    writers["eval" if held_out else "train"].append(row_id, ids, trained, weights)
                    if held_out:
                        if index != last_held_out:  # a conversation's rows are consecutive: listed once
                            eval_file.write(dumps(conv) + "\n")
                        last_held_out = index
                        report.eval_rows += 1
                    else:
                        report.train_rows += 1
        report.merge(reading.take())  # rejects after the last conversation
    splits = {split: writer.close() for split, writer in writers.items()}
    (folder / "report.json").write_text(json.dumps(report.to_dict(), indent=1))
    write_layout(folder, splits)  # last: it records the size and checksum of every other file
    return report


def build_dataset(
    data_cfg: dict[str, Any],
    format_name: str,
    tokenizer: Any,
    cache_root: Path,
    transform: Any = None,
    key_extra: dict[str, Any] | None = None,
    may_build: bool = True,
    idle_wait_s: float = IDLE_WAIT_S,
    total_wait_s: float = TOTAL_WAIT_S,
) -> BuiltDataset:
    """Build (or load) the tokenized rows. ``transform(conversations, on_drop)`` maps the conversation
    stream (a recipe's data builder bound to its seed and arguments, ``train.builders.bind``); each
    conversation it drops is counted as ``dropped_by_builder``. Its name and arguments are part of the
    cache key through data_cfg; what data_cfg cannot see (the seed, the builder's version) goes in
    ``key_extra``. With ``may_build=False`` (the caller says so: a rank that is not its node's rank 0)
    nothing is built: it waits until a process that may build has written the cache, then maps it.

    A cache is opened only once its layout verifies (``train.data.token_store.verify_layout``: every file there, of its
    recorded size and checksum); a damaged one is rebuilt, saying on stderr which file was wrong and why. Every wait
    is bounded (``idle_wait_s`` while no process holds the cache's lock, ``total_wait_s`` in all)."""
    from filelock import FileLock

    key = cache_key(data_cfg, format_name, tokenizer, extra=key_extra)
    target = cache_root / f"{data_cfg.get('name', 'data')}-{key}"
    usable_cache_root(cache_root)
    lock = FileLock(str(target) + ".lock")
    if not may_build:
        wait_for_cache(target, lock, idle_wait_s, total_wait_s, _cache_problem)
        return BuiltDataset(target, _read_report(target), True)
    with holding(lock, target, total_wait_s):
        if exists(target):
            problem = _cache_problem(target)
            if problem is None:
                return BuiltDataset(target, _read_report(target), True)
            print(f"warning: dataset cache {target} is damaged ({problem}); rebuilding it", file=sys.stderr, flush=True)
            remove_cache(target)
        tmp = target.with_name(target.name + ".tmp")
        remove_cache(tmp)
        try:
            tmp.mkdir(parents=True)
            report = write_cache(tmp, data_cfg, format_name, tokenizer, transform)
            tmp.rename(target)  # the report appears only with complete rows
        except BaseException as err:
            shutil.rmtree(tmp, ignore_errors=True)  # a partial build is never left behind
            if not isinstance(err, (WorkerDied, PermissionError)):
                raise
            if isinstance(err, PermissionError):
                raise CacheError(
                    f"cannot write the dataset cache in {cache_root}: {err.strerror}: {err.filename}"
                ) from None
            workers = build_workers(data_cfg)
            raise CacheError(
                f"building the dataset cache {target}: {err}; nothing was cached (data.num_workers={workers}: "
                "fewer workers need less memory)"
            ) from None
    return BuiltDataset(target, report, False)


def _cache_problem(target: Path) -> str | None:
    """What is wrong with the cache at ``target``, or None when it is complete and verifies."""
    if not target.is_dir():
        return "it is not a folder"
    problem = verify_layout(target)
    if problem is None:
        try:
            BuildReport(**json.loads((target / "report.json").read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError) as err:  # its checksum matched: a report of another version
            problem = f"report.json is unreadable ({type(err).__name__}: {err})"
    return problem


def _read_report(target: Path) -> BuildReport:
    return BuildReport(**json.loads((target / "report.json").read_text(encoding="utf-8")))


def _load_conversations(path: Path) -> list[Conversation]:
    with path.open(encoding="utf-8") as fh:
        return [Conversation.from_dict(json.loads(line)) for line in fh]
