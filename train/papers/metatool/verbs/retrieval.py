"""``tooltrain eval retrieval --method {metatool,history,keyword} --queries Q.jsonl --library L.jsonl``,
or, composed by Hydra, ``tooltrain eval retrieval [-m] retrieval.KEY=VALUE ...`` (``retrieval_sweep``).

HR@1/3/5 of a retrieval method on a tool-query file (``ToolQuery`` rows from ``tooltrain data
convert toollens|metatool|rectools``) over its library (the ``.library.jsonl`` written beside it;
by default the one beside ``--queries``). ``--alpha 0.5,0.65,0.8,1.0`` sweeps Algorithm 1's α: one
table row per value, the queries embedded once. Metric definitions: ``train/papers/metatool/retrieval_eval.py``.
``--teacher offline|http|hf`` (with its ``--teacher-*`` settings, as ``tooltrain data build``) writes
the meta_tool hypotheses of ``--hypothesis teacher`` and the rewrites of ``--hypothesis rewrite``.

Exit 0 when the evaluation ran, 2 when an input cannot be read or an argument is wrong.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from train.commands.outputs import check_outputs, output_file
from train.papers.metatool.verbs.retrieval_core import (
    OPTION_NAMES,
    Settings,
    UsageError,
    default_library,
    evaluate_settings,
    parse_numbers,
    report,
    write_outputs,
)

EPILOG = """\
meta_tool hypotheses (--method metatool):
  teacher  the --teacher answers the request text with a meta_tool call (offline, the default: a rule-based
           reading, description + prepositional objects as parameters; http/hf: an LLM asked with
           train/papers/metatool/teacher.py's HYPOTHESIS_PROMPT); an answer that is no valid meta_tool call is a miss
  gold     the gold tool's own description and required parameters: an upper bound
  rewrite  the gold hypothesis paraphrased by the --teacher (the data builder's Figure 7 rewrite)
keyword retrieval uses the rule-based keywords of the request; history retrieval the request text itself.

An α sweep is a comma list (--alpha 0.5,0.65,0.8,1.0): one table row per α, the queries embedded once.
The same settings as Hydra overrides (conf/retrieval.yaml) run as a Hydra app instead, and -m
sweeps them, one job (and one metrics.json) per value, a sweep table at the end:
  tooltrain eval retrieval -m retrieval.queries=Q.jsonl retrieval.alpha=0.5,0.65,0.8 [output_dir=DIR]
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from train.papers.metatool.retrieval_eval import HYPOTHESES, KEYWORD_SCORING, METHODS
    from train.retrieval.embed import DEFAULT_EMBEDDER
    from train.teacher import add_teacher_arguments

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    arg = parser.add_argument
    # REMAINDER: Hydra's own flags may follow the overrides (-m, --cfg job); options come before them.
    arg(
        "overrides",
        nargs=argparse.REMAINDER,
        metavar="KEY=VALUE",
        help="Hydra overrides (retrieval.alpha=0.8 ...) instead of the options",
    )
    arg("-m", "--multirun", action="store_true", help="with overrides: a Hydra sweep, one job per value")
    arg("--method", choices=METHODS, help="retrieval method (required without overrides)")
    arg("--queries", type=Path, metavar="Q.jsonl", help="ToolQuery rows (required without overrides)")
    arg(
        "--library", type=Path, metavar="L.jsonl", help="ToolLibrary rows (default: Q.library.jsonl beside the queries)"
    )
    arg("--alpha", default="0.5", metavar="A[,A...]", help="Algorithm 1's α, or a comma list to sweep (metatool; 0.5)")
    arg("--k", default="1,3,5", metavar="K[,K...]", help="cut-offs for HR@k (default 1,3,5)")
    arg(
        "--embedder",
        default=DEFAULT_EMBEDDER,
        metavar="NAME",
        help=f"embedder (default {DEFAULT_EMBEDDER}; hash-bow: no model)",
    )
    arg("--hypothesis", choices=HYPOTHESES, default="teacher", help="where meta_tool queries come from (teacher)")
    arg("--keyword-scoring", choices=KEYWORD_SCORING, default="bm25", help="keyword retrieval: BM25 or embeddings")
    arg("--split", metavar="NAME", help="only queries whose meta.split is NAME (ToolLens: train, test)")
    arg("--sample", type=int, metavar="N", help="a deterministic sample of N queries (lowest id hashes)")
    arg("--device", metavar="DEV", help="embedder device (cpu, cuda; default: the library's choice)")
    arg("--no-cache", action="store_true", help="embed everything anew and write no cache file")
    arg("--per-item", type=output_file, metavar="OUT.jsonl", help="one JSON line per (query, gold tool) pair and α")
    add_teacher_arguments(parser)
    arg("-o", "--output", type=output_file, metavar="METRICS.json", help="write the rows and counts as JSON")


def settings_from_args(args: argparse.Namespace) -> Settings:
    from train.teacher import teacher_config

    if args.method is None or args.queries is None:
        raise UsageError("--method and --queries are required (or give Hydra overrides: retrieval.queries=...)")
    return Settings(
        method=args.method, queries=args.queries, library=args.library,
        alphas=parse_numbers(args.alpha, float, "--alpha"), ks=sorted(parse_numbers(args.k, int, "--k")),
        embedder=args.embedder, hypothesis=args.hypothesis, keyword_scoring=args.keyword_scoring, split=args.split,
        sample=args.sample, device=args.device, cache=not args.no_cache, teacher=teacher_config(args),
    )  # fmt: skip


def option_defaults() -> dict:
    """Every option's default: the Hydra form refuses options given beside overrides."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return vars(parser.parse_args([]))


def run(args: argparse.Namespace) -> int:
    if args.overrides or args.multirun:
        from train.papers.metatool.verbs import retrieval_sweep  # the Hydra form of this verb, not a verb of its own

        return retrieval_sweep.main(args, option_defaults())
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
