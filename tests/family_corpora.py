"""The conversations the llama4 / mistral_v7 / deepseek_v3 parity tests compare on.

The parity corpus (tests/fixtures/parity, 16 cases) and the Mistral edge cases are fixtures; the real
conversations come from the shared benchmark data (glaive demo: multi-turn, tool results; BFCL v2
parallel and parallel_multiple: parallel calls over many tools), the first ``REAL_PER_FILE`` of each file,
so a run compares the same ones every time.
"""

from __future__ import annotations

import json
from pathlib import Path

from train.schema import Conversation

FIXTURES = Path(__file__).resolve().parent / "fixtures"
REAL_PER_FILE = 15


def load(path: Path) -> list[Conversation]:
    return [Conversation.from_dict(json.loads(line)) for line in path.open(encoding="utf-8")]


CORPUS = load(FIXTURES / "parity" / "corpus.jsonl")
MISTRAL_EDGES = load(FIXTURES / "formats" / "mistral" / "edge_cases.jsonl")


def real_conversations(shared_data: Path) -> list[Conversation]:
    """glaive en + zh demo and BFCL v2 parallel / parallel_multiple (with answers): REAL_PER_FILE each."""
    from train.sources import get_reader

    inputs = [
        ("glaive", [shared_data / "glaive_toolcall_demo" / "glaive_toolcall_en_demo.json"]),
        ("glaive", [shared_data / "glaive_toolcall_demo" / "glaive_toolcall_zh_demo.json"]),
    ]
    bfcl = shared_data / "bfcl_v2"
    for category in ("parallel", "parallel_multiple"):
        name = f"BFCL_v2_{category}.json"
        inputs.append(("bfcl", [bfcl / name, bfcl / "possible_answer" / name]))
    out: list[Conversation] = []
    for reader, paths in inputs:
        records = [r for r in get_reader(reader)(paths) if isinstance(r, Conversation)]
        out += records[:REAL_PER_FILE]
    return out
