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
from train.papers.itc.builder import BUILDER_VERSION, ITCBuilder, ITCOptions, build
from train.schema import Conversation


def files(
    conversations: list[Conversation], options: ITCOptions, seed: int
) -> tuple[dict[str, list], dict[str, Any], list[str]]:
    """(train.jsonl and test.jsonl records; the report's counts; the summary lines)."""
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


SPEC = BuilderSpec(
    build=build, args=ITCOptions, version=BUILDER_VERSION, outputs=("train.jsonl", "test.jsonl"), files=files
)

__all__ = ["SPEC", "files"]
