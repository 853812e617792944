"""``tooltrain eval retrieval --method {metatool,history,keyword} --queries Q.jsonl --library L.jsonl``.

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
from pathlib import Path
from typing import Any

EPILOG = """\
meta_tool hypotheses (--method metatool):
  teacher  the --teacher answers the request text with a meta_tool call (offline, the default: a rule-based
           reading, description + prepositional objects as parameters; http/hf: an LLM asked with
           train/builders/teacher.py's HYPOTHESIS_PROMPT); an answer that is no valid meta_tool call is a miss
  gold     the gold tool's own description and required parameters: an upper bound
  rewrite  the gold hypothesis paraphrased by the --teacher (the data builder's Figure 7 rewrite)
keyword retrieval uses the rule-based keywords of the request; history retrieval the request text itself.

An α sweep is a comma list (--alpha 0.5,0.65,0.8,1.0). The same sweep from a shell loop or a job array:
  for a in 0.5 0.65 0.8 1.0; do tooltrain eval retrieval --method metatool --alpha $a ... -o hr-$a.json; done
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from train.builders.teacher import add_teacher_arguments
    from train.retrieval.embed import DEFAULT_EMBEDDER
    from train.retrieval.evaluate import HYPOTHESES, METHODS

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("--method", choices=METHODS, required=True, help="retrieval method")
    parser.add_argument("--queries", type=Path, required=True, metavar="Q.jsonl", help="ToolQuery rows")
    parser.add_argument("--library", type=Path, metavar="L.jsonl", help="ToolLibrary rows (default: Q.library.jsonl beside the queries)")
    parser.add_argument("--alpha", default="0.5", metavar="A[,A...]", help="Algorithm 1's α, or a comma list to sweep (metatool; default 0.5)")
    parser.add_argument("--k", default="1,3,5", metavar="K[,K...]", help="cut-offs for HR@k (default 1,3,5)")
    parser.add_argument("--embedder", default=DEFAULT_EMBEDDER, metavar="NAME", help=f"embedder (default {DEFAULT_EMBEDDER}; hash-bow: no model)")
    parser.add_argument("--hypothesis", choices=HYPOTHESES, default="teacher", help="where meta_tool queries come from (default teacher)")
    parser.add_argument("--keyword-scoring", choices=("bm25", "dense"), default="bm25", help="keyword retrieval: BM25 or embeddings (default bm25)")
    parser.add_argument("--split", metavar="NAME", help="only queries whose meta.split is NAME (ToolLens: train, test)")
    parser.add_argument("--sample", type=int, metavar="N", help="a deterministic sample of N queries (lowest id hashes)")
    parser.add_argument("--device", metavar="DEV", help="embedder device (cpu, cuda; default: the library's choice)")
    parser.add_argument("--no-cache", action="store_true", help="embed everything anew and write no cache file")
    parser.add_argument("--per-item", type=Path, metavar="OUT.jsonl", help="one JSON line per (query, gold tool) pair and α")
    add_teacher_arguments(parser)
    parser.add_argument("-o", "--output", type=Path, metavar="METRICS.json", help="write the rows and counts as JSON")


class UsageError(ValueError):
    pass


def parse_numbers(text: str, kind: type, name: str) -> list:
    try:
        values = [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{name}: expected a comma list of numbers, got {text!r}") from None
    if not values:
        raise UsageError(f"{name}: no value given")
    return list(dict.fromkeys(values))


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
    from train.commands.convert import sibling

    return sibling(queries, "library")


def format_table(result: dict[str, Any], ks: list[int]) -> str:
    header = ["alpha", *(f"HR@{k}" for k in ks)]
    rows = [[("-" if row["alpha"] is None else f"{row['alpha']:g}"), *(f"{row[f'HR@{k}']:.4f}" if row[f"HR@{k}"] is not None else "-" for k in ks)] for row in result["rows"]]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(r, widths)) for r in [header, *rows])


def run(args: argparse.Namespace) -> int:
    from train.builders.teacher import make_teacher, teacher_config
    from train.retrieval.embed import load_embedder
    from train.retrieval.evaluate import evaluate, sample_queries
    from train.retrieval.index import ToolIndex, read_library

    try:
        alphas = parse_numbers(args.alpha, float, "--alpha")
        ks = sorted(parse_numbers(args.k, int, "--k"))
        if any(not 0 <= a <= 1 for a in alphas):
            raise UsageError(f"--alpha: every α must lie in [0, 1], got {args.alpha}")
        if ks[0] < 1:
            raise UsageError(f"--k: every k must be at least 1, got {args.k}")
        if args.sample is not None and args.sample < 1:
            raise UsageError(f"--sample: expected a positive number, got {args.sample}")
        library_path = args.library or default_library(args.queries)
        for path, what in ((args.queries, "--queries"), (library_path, "--library")):
            if not path.is_file():
                raise UsageError(f"{what}: {path}: no such file")
        queries = sample_queries(read_queries(args.queries, args.split), args.sample)
        try:
            tools = read_library(library_path)
        except (ValueError, json.JSONDecodeError) as err:
            raise UsageError(f"--library: {err}") from None
        if not tools:
            raise UsageError(f"--library: {library_path} holds no tool")
        needs_model = not (args.method == "keyword" and args.keyword_scoring == "bm25")
        embedder = load_embedder(args.embedder, device=args.device) if needs_model else None
        index = ToolIndex(tools, embedder, use_cache=not args.no_cache)
        teacher = make_teacher(teacher_config(args), seed=0)
    except (UsageError, ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.method != "metatool" and len(alphas) > 1:
        print("note: --alpha only applies to --method metatool; one row", file=sys.stderr)
    result = evaluate(queries, index, args.method, alphas=alphas, ks=ks, hypothesis=args.hypothesis,
                      keyword_scoring=args.keyword_scoring, teacher=teacher)
    print(describe(result, args, len(tools), needs_model))
    print(format_table(result, ks))
    for failure in result["hypothesis_failures"][:10]:
        print(f"  no hypothesis for {failure['id']}: {failure['reason']}", file=sys.stderr)
    try:
        write_outputs(result, args)
    except OSError as err:
        print(f"error: cannot write the outputs: {err}", file=sys.stderr)
        return 2
    return 0


def describe(result: dict[str, Any], args: argparse.Namespace, n_tools: int, needs_model: bool) -> str:
    hypothesis = result["hypothesis"]
    if hypothesis in ("teacher", "rewrite"):
        hypothesis += f" hypothesis, {args.teacher} teacher"
    elif hypothesis:
        hypothesis += " hypothesis"
    method = result["method"] + (f" ({hypothesis})" if hypothesis else "")
    if result["method"] == "keyword":
        method += f" ({args.keyword_scoring})"
    parts = [
        f"method {method}",
        f"embedder {args.embedder if needs_model else '-'}",
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


def write_outputs(result: dict[str, Any], args: argparse.Namespace) -> None:
    if args.per_item:
        with args.per_item.open("w", encoding="utf-8") as fh:
            for item in result["per_pair"]:
                fh.write(json.dumps(item, ensure_ascii=False) + "\n")
    if args.output:
        summary = {key: value for key, value in result.items() if key != "per_pair"}
        summary["embedder"] = args.embedder
        args.output.write_text(json.dumps(summary, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
