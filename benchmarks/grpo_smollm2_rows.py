"""Writes train/assets/demo/glaive_en_calls.jsonl, the prompts of recipe grpo_smollm2: each of the shipped 300 glaive
conversations that has a tool call, cut after its first call turn (canonical JSON Lines, ids kept, so the held-out
split is the demo recipe's). With ``grpo.turns=last`` every GRPO prompt is then a turn whose gold answer is a call:
ToolRL's reward grades those on [-3, 4], where a text turn only gets its 0/1 format part.

    python benchmarks/grpo_smollm2_rows.py
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from train.data.dataset import BuildReport, read_conversations

SOURCE = "pkg://train/assets/demo/glaive_en_300.json"
OUT = Path(__file__).resolve().parents[1] / "train/assets/demo/glaive_en_calls.jsonl"


def first_call_cut(conv):
    """``conv`` up to and with its first assistant turn that calls a tool; None when it has none."""
    for index, message in enumerate(conv.messages):
        if message.role == "assistant" and message.tool_calls:
            return dataclasses.replace(conv, messages=list(conv.messages[: index + 1]))
    return None


def main() -> None:
    conversations = read_conversations([{"name": "glaive", "inputs": [SOURCE]}], BuildReport())
    cut = [c for c in map(first_call_cut, conversations) if c is not None]
    OUT.write_text("".join(json.dumps(c.to_dict(), ensure_ascii=False) + "\n" for c in cut), encoding="utf-8")
    print(f"{len(cut)} conversations -> {OUT}")


if __name__ == "__main__":
    main()
