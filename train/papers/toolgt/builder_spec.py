"""The toolgt builder as ``train.builders.BUILDERS`` registers it: its one arguments dataclass (``ToolGTOptions``:
``data.builder_args`` and ``data build toolgt key=value``), and what ``tooltrain data build toolgt`` writes:
``train.jsonl`` and a ``report.json`` counting samples read, kept and dropped per stage and reason. The teacher's
call and cache-hit counts are printed, not written: the report of a rebuild is byte-identical to the first one's.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from train.builders import BuilderSpec
from train.papers.toolgt.builder import (
    BUILDER_VERSION,
    DECONTAMINATION_ORIGIN,
    ToolGTBuilder,
    ToolGTOptions,
    build,
)
from train.schema import Conversation


def files(
    conversations: list[Conversation], options: ToolGTOptions, seed: int
) -> tuple[dict[str, list], dict[str, Any], list[str]]:
    """(train.jsonl records; the report's counts; the summary lines)."""
    builder = ToolGTBuilder(options, seed)
    train = list(builder.build(conversations))
    counts = builder.report()
    dropped = builder.dropped
    report = {**counts, "train": {"rows": len(train)}, "options": asdict(options)}
    decontamination = counts["decontamination"]
    matched = (
        "not checked"
        if isinstance(decontamination, str)
        else (
            f"{sum(decontamination['matched'].values())} matched {decontamination['eval_items']} eval items "
            f"(query {decontamination['matched']['query']}, calls {decontamination['matched']['calls']})"
        )
    )
    teacher = builder.teacher.report()
    relevance = counts["relevance"]
    lines = [
        (
            f"samples {counts['samples']} from {counts['conversations']} conversations ({relevance['samples']} "
            f"relevance: no call), kept {counts['kept']} ({relevance['kept']} relevance; {options.template} "
            f"template, arm {options.arm}, arm_data {options.arm_data}: kept when "
            f"{' and '.join(counts['verified'])} passed), dropped {sum(dropped.values())}"
        ),
        f"decontamination ({DECONTAMINATION_ORIGIN}): {matched}",
        (
            f"teacher {teacher['backend']} {teacher['model']}: asked {teacher['asked']}, backend calls "
            f"{teacher['backend_calls']}, cache hits {teacher['cache_hits']}, failures {teacher['failures']}"
        ),
    ]
    return {"train.jsonl": train}, report, lines


SPEC = BuilderSpec(build=build, args=ToolGTOptions, version=BUILDER_VERSION, outputs=("train.jsonl",), files=files)

__all__ = ["SPEC", "files"]
