"""The itc builder as ``train.builders.BUILDERS`` registers it: its one arguments dataclass (``ITCOptions``:
``data.builder_args`` and ``data build itc key=value``), and what ``tooltrain data build itc`` writes: ``train.jsonl``
and ``test.jsonl`` (the split by API, both sides whatever ``split`` says) and a ``report.json`` counting
conversations read and dropped, tasks per side kept (by task type) and dropped (by reason), and the test APIs.
The teacher's call and cache-hit counts are printed, not written: the report of a rebuild is byte-identical.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from train.builders import BuilderSpec
from train.papers.itc.builder import BUILDER_VERSION, ITCBuilder, ITCOptions, build, release_rows
from train.schema import Conversation


def files(
    conversations: list[Conversation], options: ITCOptions, seed: int
) -> tuple[dict[str, list], dict[str, Any], list[str]]:
    """(train.jsonl and test.jsonl records; the report's counts; the summary lines)."""
    if options.source == "release":
        return release_files(conversations, options)
    builder = ITCBuilder(replace(options, split="all"), seed)
    sides = builder.build_sides(conversations)
    counts = builder.report()
    report = {**counts, "options": asdict(options)}
    kept = {side: sum(counter.values()) for side, counter in counts["kept"].items()}
    teacher = builder.teacher.report()
    lines = [
        (
            f"tasks {counts['tasks']} from {counts['conversations']} conversations "
            f"({sum(counts['dropped_conversations'].values())} gave none), train {kept['train']} / test {kept['test']} "
            f"kept ({len(builder.test_apis)} test APIs, unseen in training), dropped "
            f"{sum(counts['dropped_tasks'].values())} tasks"
        ),
        "task types: " + "; ".join(f"{side} {dict(counter)}" for side, counter in counts["kept"].items()),
        (
            f"teacher {teacher['backend']} {teacher['model']}: asked {teacher['asked']}, backend calls "
            f"{teacher['backend_calls']}, cache hits {teacher['cache_hits']}, failures {teacher['failures']}"
        ),
    ]
    return {"train.jsonl": sides["train"], "test.jsonl": sides["test"]}, report, lines


def release_files(
    conversations: list[Conversation], options: ITCOptions
) -> tuple[dict[str, list], dict[str, Any], list[str]]:
    """``source=release``: the release's rows as they are, each to the side its ``meta.split`` says (an
    unlabelled row to the side ``split`` names, train for ``all``)."""
    dropped: dict[str, int] = {}

    def note(reason: str) -> None:
        dropped[reason] = dropped.get(reason, 0) + 1

    rows = list(release_rows(conversations, replace(options, split="all"), note))
    default = "train" if options.split == "all" else options.split
    sides: dict[str, list] = {"train": [], "test": []}
    for row in rows:
        label = row.meta.get("split")
        sides[label if label in sides else default].append(row)
    report = {
        "conversations": len(conversations),
        "kept": {side: len(kept) for side, kept in sides.items()},
        "dropped": dropped,
        "options": asdict(options),
    }
    kept = f"train {len(sides['train'])} / test {len(sides['test'])}"
    total = sum(dropped.values())
    lines = [f"release rows {len(conversations)} passed through: {kept} (own Thoughts and split), dropped {total}"]
    return {"train.jsonl": sides["train"], "test.jsonl": sides["test"]}, report, lines


SPEC = BuilderSpec(
    build=build, args=ITCOptions, version=BUILDER_VERSION, outputs=("train.jsonl", "test.jsonl"), files=files
)

__all__ = ["SPEC", "files", "release_files"]
